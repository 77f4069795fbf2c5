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
"""

from __future__ import annotations

import argparse
import json
import time
import tomllib
import tracemalloc
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    results: dict[str, Any] = {}

    raw = pd.read_csv(args.data / "chicago-taxi" / "chicago_taxi_simple.csv")
    public = chicago_taxi_trips(raw, years=[2013])
    private = chicago_taxi_trips(raw, years=[2014, 2015])
    schema = chicago_taxi_schema(public)
    private_scored = schema.conform(private)
    shipped = {**config("taxi-archetypes.toml"), "schema": schema}
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
    params = {**config("transit-archetypes.toml"), "schema": schema}
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
