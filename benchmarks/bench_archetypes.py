"""Archetype synthesizer: utility (k-marginal score), fit+sample time and peak memory.

Issue 6 targets on the Chicago configuration (public = 2013, private = 2014-2015 of the TFX sample):
k-marginal score >= 900 at epsilon 1 and >= 935 at epsilon 10 against the private years, fit+sample
at least 10x faster than smartnoise-synth MST (48-57 s there), 1M synthetic trips in under 30 s. The
score is synth.evaluate's: both tables discretised on a common domain, 50 random column pairs (seed
0), (1 - mean TV) * 1000, id column excluded. Baseline: the public trips resampled to the private
size. Rows: the write-up's algorithm (two counts, budget 0.1 / 0.9, Table 1 completion) and the
shipped configuration (configs/taxi-archetypes.toml: plus one-way marginals), the same with the
marginals per archetype (``marginals_by_archetype``), and both WITHOUT public data: the SBH stand-in
(``public_stand_in``, default tables) on 70% of the budget, the rest split as before (original:
0.7 / 0.03 / 0.27; configured: 0.7 / 0.03 / 0.09 / 0.18). The stand-in rows still use the 2013
company list as the company domain (a public list, not trips). SUBE: Tuesday public, Wednesday
private, configs/transit-archetypes.toml. Timing and memory (tracemalloc peak) are separate runs.

    python benchmarks/bench_archetypes.py [--data ../shared/data] [--seeds 3] [--records 1000000]

``peers`` mode (issue 28): the shipped configurations with default flags (the joint model) and the
previous model (``joint = false``; without public data the SBH stand-in on 0.7 of the budget) on
Chicago (private 2014-15, public 2013) and SUBE (Wednesday private, Tuesday public), epsilon 1 and
10, with and without public data, ``--seeds`` noise runs each, scored by the one k-marginal
function above; median fit+sample seconds and the tracemalloc peak of one more run. Without
public data the domains are still public lists (Chicago: the published 2013 company list; SUBE:
the network metadata's lines and branches, Tuesday's zones and fare products). If smartnoise-synth
is importable, MST and AIM run on the same private tables (tap/trip level: each row is one unit)
and are scored the same way; if not, the figures recorded in issue 28 are printed.

    python benchmarks/bench_archetypes.py peers [--data ../shared/data] [--seeds 3]
"""

from __future__ import annotations

import argparse
import json
import time
import tomllib
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from archetypes import (
    ArchetypeSynthesizer,
    chicago_taxi_schema,
    chicago_taxi_trips,
    sube_schema,
    sube_trips,
)
from synth.errors import ConfigError
from synth.evaluate import discretise, k_marginal_score

ROOT = Path(__file__).resolve().parents[1]


def config(name: str) -> dict[str, Any]:
    params = tomllib.loads((ROOT / "configs" / name).read_text())["trips"]["parameters"]
    params = {k: v for k, v in params.items() if k not in ("epsilon", "delta")}
    params["completion"] = [(t, tuple(c)) for t, c in params["completion"]]
    params["budget_split"] = tuple(params["budget_split"])
    return params


def score(private: pd.DataFrame, synthetic: pd.DataFrame, drop: list[str]) -> float:
    a, b, cols = discretise(
        private.drop(columns=drop), synthetic.drop(columns=drop, errors="ignore")
    )
    return float(k_marginal_score(a, b, cols)["score"])


def run(
    private: pd.DataFrame,
    public: pd.DataFrame | None,
    params: dict[str, Any],
    epsilon: float,
    delta: float,
    seeds: int,
    drop: list[str],
) -> dict[str, Any]:
    scores, times = [], []
    for seed in range(seeds):
        start = time.perf_counter()
        out = ArchetypeSynthesizer(epsilon=epsilon, delta=delta, random_state=seed, **params)
        synthetic = out.fit(private, public).sample()
        times.append(time.perf_counter() - start)
        scores.append(score(private, synthetic, drop))
    tracemalloc.start()
    ArchetypeSynthesizer(epsilon=epsilon, delta=delta, random_state=0, **params).fit(
        private, public
    ).sample()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "epsilon": epsilon,
        "score_mean": round(float(np.mean(scores)), 1),
        "score_sd": round(float(np.std(scores)), 1),
        "fit_sample_s": round(float(np.median(times)), 2),
        "peak_mb": round(peak / 2**20, 1),
        "rows": len(synthetic),
    }


def baseline(private: pd.DataFrame, public: pd.DataFrame, seeds: int, drop: list[str]) -> float:
    draws = [public.sample(len(private), replace=True, random_state=s) for s in range(seeds)]
    return round(float(np.mean([score(private, d, drop) for d in draws])), 1)


#: issue 28's recorded peer figures (smartnoise-synth, same tables and scorer, means of 3 runs)
RECORDED_PEERS = {
    "chicago": {
        "MST (no public data)": {"1": 924, "10": 943},
        "AIM (no public data)": {"1": 912},
        "public 2013 bootstrap": {"1": 831},
        "non-private": {"1": 964},
    },
    "sube": {
        "MST, card level": {"1": 529, "10": 726},
        "MST, tap level (weaker guarantee)": {"1": 793, "10": 931},
        "Tuesday bootstrap": {"1": 905},
        "non-private": {"1": 954},
    },
    "cost": "MST: 30-110 s and 1.6-1.8 GB per run",
}


def measure_run(
    private: pd.DataFrame,
    scored: pd.DataFrame,
    public: pd.DataFrame | None,
    params: dict[str, Any],
    epsilon: float,
    delta: float,
    seeds: int,
    drop: list[str],
) -> dict[str, Any]:
    """Scores of ``seeds`` noise runs, median seconds, and the tracemalloc peak of one more."""
    scores, times = [], []
    for seed in range(seeds):
        start = time.perf_counter()
        syn = ArchetypeSynthesizer(epsilon=epsilon, delta=delta, random_state=seed, **params)
        synthetic = syn.fit(private, public).sample()
        times.append(time.perf_counter() - start)
        scores.append(score(scored, synthetic, drop))
    tracemalloc.start()
    ArchetypeSynthesizer(epsilon=epsilon, delta=delta, random_state=seeds, **params).fit(
        private, public
    ).sample()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "score_mean": round(float(np.mean(scores)), 1),
        "score_sd": round(float(np.std(scores)), 1),
        "seconds": round(float(np.median(times)), 2),
        "peak_mb": round(peak / 2**20, 1),
    }


def smartnoise_peers(
    private: pd.DataFrame, scored: pd.DataFrame, drop: list[str], delta: float, seeds: int
) -> dict[str, Any] | None:
    """MST and AIM of smartnoise-synth on the private table (None when it is not installed)."""
    try:
        from snsynth import Synthesizer  # type: ignore[import-not-found]
    except ImportError:
        return None
    table = private.drop(columns=drop, errors="ignore")
    out: dict[str, Any] = {}
    for name in ("mst", "aim"):
        for eps in (1.0, 10.0):
            scores, times = [], []
            for _ in range(seeds):
                start = time.perf_counter()
                synth = Synthesizer.create(name, epsilon=eps, delta=delta)
                synthetic = synth.fit_sample(table, preprocessor_eps=0.0)
                times.append(time.perf_counter() - start)
                scores.append(score(scored.drop(columns=drop, errors="ignore"), synthetic, []))
            out[f"{name} eps {eps:g}"] = {
                "score_mean": round(float(np.mean(scores)), 1),
                "seconds": round(float(np.median(times)), 2),
            }
    return out


def peers(data: Path, seeds: int) -> dict[str, Any]:
    """The ``peers`` mode (see the module docstring)."""
    raw = pd.read_csv(data / "chicago-taxi" / "chicago_taxi_simple.csv")
    public = chicago_taxi_trips(raw, years=[2013])
    private = chicago_taxi_trips(raw, years=[2014, 2015])
    with_public = chicago_taxi_schema(public)
    without = chicago_taxi_schema(private.iloc[:0])  # the published company list
    shipped = config("taxi-archetypes.toml")
    old = {**shipped, "joint": False}
    old_stand_in = {**old, "public_stand_in": True, "budget_split": (0.7, 0.03, 0.09, 0.18)}
    cases = {
        "chicago": (
            private,
            with_public.conform(private),
            public,
            ["taxi_id"],
            2.5e-5,
            {
                "joint, public": ({**shipped, "schema": with_public}, True),
                "joint, no public": ({**shipped, "schema": without}, False),
                "previous, public": ({**old, "schema": with_public}, True),
                "previous stand-in, no public": ({**old_stand_in, "schema": without}, False),
            },
        )
    }
    folder = data / "sube-buenos-aires"
    public = sube_trips(folder / "martes_trx.csv")
    private = sube_trips(folder / "miercoles_trx.csv")
    schema = sube_schema(public, folder / "metadata_amba_2019_m1.csv")
    shipped = {**config("transit-archetypes.toml"), "schema": schema}
    old = {**shipped, "joint": False}
    cases["sube"] = (
        private,
        schema.conform(private, columns=["line", "branch", "zone"]),
        public,
        ["card_id", "lat", "lon"],
        1e-5,
        {
            "joint, public": (shipped, True),
            "joint, no public": (shipped, False),
            "previous, public": (old, True),
            "previous stand-in, no public": (
                {**old, "public_stand_in": True, "budget_split": (0.7, 0.03, 0.27)},
                False,
            ),
        },
    )
    results: dict[str, Any] = {}
    for name, (priv, scored, pub, drop, delta, variants) in cases.items():
        rows: dict[str, Any] = {}
        for label, (params, given) in variants.items():
            for eps in (1.0, 10.0):
                try:
                    rows[f"{label}, eps {eps:g}"] = measure_run(
                        priv, scored, pub if given else None, params, eps, delta, seeds, drop
                    )
                except ConfigError as exc:  # e.g. the stand-in on columns without a domain
                    rows[f"{label}, eps {eps:g}"] = {"error": str(exc)}
        rows["peers"] = smartnoise_peers(priv, scored, drop, delta, seeds) or {
            "recorded (smartnoise-synth not installed)": RECORDED_PEERS[name]
        }
        results[name] = rows
    results["recorded_cost"] = RECORDED_PEERS["cost"]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=["archetypes", "peers"], default="archetypes")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    if args.mode == "peers":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # features without a public domain
            print(json.dumps(peers(args.data, args.seeds), indent=2))
        return
    results: dict[str, Any] = {}

    raw = pd.read_csv(args.data / "chicago-taxi" / "chicago_taxi_simple.csv")
    public = chicago_taxi_trips(raw, years=[2013])
    private = chicago_taxi_trips(raw, years=[2014, 2015])
    schema = chicago_taxi_schema(public)
    private_scored = schema.conform(private)
    shipped = {**config("taxi-archetypes.toml"), "schema": schema, "joint": False}
    original = {k: v for k, v in shipped.items() if k != "marginals"}
    original["budget_split"] = (0.1, 0.9)
    taxi: dict[str, Any] = {
        "public_only": baseline(private_scored, public, args.seeds, ["taxi_id"])
    }
    variants = {
        "original": (original, public),
        "configured": (shipped, public),
        "configured_by_archetype": ({**shipped, "marginals_by_archetype": True}, public),
        "stand_in_original": (
            {**original, "public_stand_in": True, "budget_split": (0.7, 0.03, 0.27)},
            None,
        ),
        "stand_in_configured": (
            {**shipped, "public_stand_in": True, "budget_split": (0.7, 0.03, 0.09, 0.18)},
            None,
        ),
    }
    for name, (params, given) in variants.items():
        taxi[name] = [
            run(private_scored, given, params, eps, 2.5e-5, args.seeds, ["taxi_id"])
            for eps in (1.0, 10.0)
        ]
    fitted = ArchetypeSynthesizer(epsilon=1.0, delta=2.5e-5, random_state=0, **shipped)
    fitted.fit(private, public)
    start = time.perf_counter()
    big = fitted.sample(n_records=args.records)
    taxi["sample_1M"] = {"rows": len(big), "seconds": round(time.perf_counter() - start, 2)}
    results["chicago"] = taxi

    folder = args.data / "sube-buenos-aires"
    public = sube_trips(folder / "martes_trx.csv")
    private = sube_trips(folder / "miercoles_trx.csv")
    schema = sube_schema(public, folder / "metadata_amba_2019_m1.csv")
    params = {**config("transit-archetypes.toml"), "schema": schema, "joint": False}
    drop = ["card_id", "lat", "lon"]
    private_scored = schema.conform(private, columns=["line", "branch", "zone"])
    sube: dict[str, Any] = {
        "public_only": baseline(private_scored, schema.conform(public), args.seeds, drop)
    }
    sube["configured"] = [
        run(private_scored, public, params, eps, 1e-5, args.seeds, drop) for eps in (1.0, 10.0)
    ]
    results["sube"] = sube
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
