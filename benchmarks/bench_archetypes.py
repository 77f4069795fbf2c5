"""Archetype synthesizer (``trips``): utility (k-marginal score), fit+sample time and peak memory.

Issue 6 targets on the Chicago configuration (public = 2013, private = 2014-2015 of the TFX sample):
k-marginal score >= 900 at epsilon 1 and >= 935 at epsilon 10 against the private years, fit+sample
at least 10x faster than smartnoise-synth MST, 1M synthetic trips in under 30 s. The score is
synth.evaluate's: both tables discretised on a common domain, 50 random column pairs (seed 0),
(1 - mean TV) * 1000, id column excluded. Baseline: the public trips resampled to the private size.
Rows: the write-up's algorithm (two counts, budget 0.1 / 0.9, Table 1 completion) and the shipped
configuration (configs/taxi-archetypes.toml: plus one-way marginals), the same with the marginals
per archetype (``marginals_by_archetype``), and both WITHOUT public data: the SBH stand-in
(``public_stand_in``, default tables) on 70% of the budget, the rest split as before (original:
0.7 / 0.03 / 0.27; configured: 0.7 / 0.03 / 0.09 / 0.18); all with ``joint = false`` (the
paper's model). SUBE: Tuesday public, Wednesday private, configs/transit-archetypes.toml.

    python benchmarks/bench_archetypes.py [--data ../shared/data] [--seeds 3] [--records 1000000]

``peers`` mode (issue 28): the shipped configurations with default flags (the joint model) and the
previous model (``joint = false``; without public data the SBH stand-in on 0.7 of the budget) on
Chicago (private 2014-15, public 2013) and SUBE (Wednesday private, Tuesday public), epsilon 1 and
10, with and without public data, ``--seeds`` noise runs each, scored by the one k-marginal
function above. Without public data the domains are still public lists (Chicago: the published
2013 company list; SUBE: the network metadata's lines and branches, Tuesday's zones and fare
products). With ``--peers-python`` naming an interpreter that imports smartnoise-synth (its own
venv: see ``smartnoise_peers.py``), MST (and AIM with ``--peer-methods mst aim``) run on the same
tables, the conformed private columns the scorer reads, at the same epsilon and delta: Chicago
(one trip per taxi, so a row is an individual) and SUBE at card level (each card's first
``--card-k`` taps by hour, default 3 as transit-synth without public data, with smartnoise's own
``max_contrib=k`` rho) and at tap level (every tap a unit: a weaker guarantee). Without it, the
figures recorded in issue 28 are printed and written (``source``: recorded). Each data set also
has a ``public as is`` row: its public trips scored as the release (no noise, no model).
Without public data SUBE runs on the command's layout (``sube_schema(None, metadata)``: the
metadata's lines and branches, the published zones and fare products, lat/lon from the zones).

Held-out splits (``--cases chicago-2015 sube-swap``, peers mode, the ``joint`` rows with and
without public data and ``public as is``): Chicago private 2015, public 2014; SUBE private
Tuesday, public Wednesday (its no-public layout still takes the published zones and fare
products of the Tuesday sample). They check rules chosen on the other splits, never choose them.

Every row: mean and sd of the scores, median fit+sample seconds, and the peak RSS of one more run
in a child process (``harness.child``: the process that reads the data, fits and samples once;
for the peers, of each smartnoise child, max over runs). ``--smoke`` (seconds): the embedded
Chicago sample cut to 600 trips, one variant at epsilon 1, one run. Data: the CSV files under
``--data`` (chicago-taxi/, sube-buenos-aires/), else the copies embedded in ``synth/data``.

    python benchmarks/bench_archetypes.py peers [--seeds 3] [--peers-python /venv-peers/bin/python]
        [--peer-methods mst] [--peer-runs 3] [--peer-jobs 2] [--json results/trips-peers.json]

A peer row keeps its runs (``per_run``: seed, score, seconds, wall, peak RSS). ``--peer-rows
FILE ...`` takes the peer rows of earlier results files (of the ``--cases`` run) instead of fitting
them again; rows of the same data, method and epsilon, from those files and from new runs
(``--peers-python`` with ``--peer-first-seed`` past the recorded seeds), become one row of all
their runs. So runs are added to a recorded row, and ``--peer-rows`` of the merged file alone
measures transit-synth again beside the recorded peers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tomllib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import add_options, child, emit, read_rows, stopwatch, write_results

from archetypes import (
    ArchetypeSynthesizer,
    chicago_taxi_schema,
    chicago_taxi_trips,
    sube_schema,
    sube_trips,
)
from synth.datasets import path as embedded
from synth.errors import ConfigError
from synth.evaluate import discretise, k_marginal_score

ROOT = Path(__file__).resolve().parents[1]
SMOKE_ROWS = 600

#: issue 28's recorded peer figures (smartnoise-synth, same tables and scorer, means of 3 runs)
RECORDED_PEERS = [
    ("chicago", "MST", 1.0, 924),
    ("chicago", "MST", 10.0, 943),
    ("chicago", "AIM", 1.0, 912),
    ("chicago", "public 2013 bootstrap", 1.0, 831),
    ("chicago", "non-private", 1.0, 964),
    ("sube", "MST, card level", 1.0, 529),
    ("sube", "MST, card level", 10.0, 726),
    ("sube", "MST, tap level (weaker guarantee)", 1.0, 793),
    ("sube", "MST, tap level (weaker guarantee)", 10.0, 931),
    ("sube", "Tuesday bootstrap", 1.0, 905),
    ("sube", "non-private", 1.0, 954),
]
RECORDED_COST = "MST: 30-110 s and 1.6-1.8 GB per run (issue 28)"


@dataclass
class Case:
    """One data set: private trips, the table scored (conformed to the public domains), public
    trips, the columns the scorer ignores, delta, the order column, and the variants run on it
    (label -> (constructor parameters, whether the public trips are given))."""

    name: str
    private: pd.DataFrame
    scored: pd.DataFrame
    public: pd.DataFrame
    drop: list[str]
    delta: float
    order: str
    variants: dict[str, tuple[dict[str, Any], bool]]
    as_is: pd.DataFrame | None = None  # the public trips conformed like ``scored`` (peers mode)


def config(name: str) -> dict[str, Any]:
    """The ``[trips.parameters]`` of a shipped config, without the budget."""
    params = tomllib.loads((ROOT / "configs" / name).read_text())["trips"]["parameters"]
    params = {k: v for k, v in params.items() if k not in ("epsilon", "delta")}
    params["completion"] = [(t, tuple(c)) for t, c in params["completion"]]
    params["budget_split"] = tuple(params["budget_split"])
    return params


def chicago_tables(
    data: Path | None, smoke: bool, years: tuple[list[int], list[int]] = ([2014, 2015], [2013])
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Private (2014-15) and public (2013) Chicago trips, or other ``years`` (private, public);
    ``smoke``: the first 600 of each."""
    source = data / "chicago-taxi" / "chicago_taxi_simple.csv" if data else embedded("chicago_taxi")
    private = chicago_taxi_trips(source, years=years[0])
    public = chicago_taxi_trips(source, years=years[1])
    if smoke:
        private, public = private.head(SMOKE_ROWS), public.head(SMOKE_ROWS)
    return private.reset_index(drop=True), public.reset_index(drop=True)


def sube_tables(
    data: Path | None, swap: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame, Any, Any]:
    """Private (Wednesday) and public (Tuesday) SUBE trips (``swap``: Tuesday private, Wednesday
    public), the schema of the public trips, and the layout without them (what the command
    builds: the metadata's lines and branches, the published zones and fare products)."""
    files = [embedded("sube_wednesday"), embedded("sube_tuesday"), embedded("sube_metadata")]
    if data:
        folder = data / "sube-buenos-aires"
        names = ("miercoles_trx.csv", "martes_trx.csv", "metadata_amba_2019_m1.csv")
        files = [folder / n for n in names]
    if swap:
        files[:2] = files[1::-1]
    private, public = sube_trips(files[0]), sube_trips(files[1])
    return private, public, sube_schema(public, files[2]), sube_schema(None, files[2])


def issue6_chicago(data: Path | None, smoke: bool) -> Case:
    private, public = chicago_tables(data, smoke)
    schema = chicago_taxi_schema(public)
    shipped = {**config("taxi-archetypes.toml"), "schema": schema, "joint": False}
    original = {k: v for k, v in shipped.items() if k != "marginals"}
    original["budget_split"] = (0.1, 0.9)
    variants = {
        "original": (original, True),
        "configured": (shipped, True),
        "configured_by_archetype": ({**shipped, "marginals_by_archetype": True}, True),
        "stand_in_original": (
            {**original, "public_stand_in": True, "budget_split": (0.7, 0.03, 0.27)},
            False,
        ),
        "stand_in_configured": (
            {**shipped, "public_stand_in": True, "budget_split": (0.7, 0.03, 0.09, 0.18)},
            False,
        ),
    }
    if smoke:
        variants = {"configured": variants["configured"]}
    scored = schema.conform(private)
    return Case("chicago", private, scored, public, ["taxi_id"], 2.5e-5, "shift", variants)


def issue6_sube(data: Path | None, smoke: bool) -> Case:
    private, public, schema, _ = sube_tables(data)
    params = {**config("transit-archetypes.toml"), "schema": schema, "joint": False}
    scored = schema.conform(private, columns=["line", "branch", "zone"])
    drop = ["card_id", "lat", "lon"]
    return Case("sube", private, scored, public, drop, 1e-5, "hour", {"configured": (params, True)})


def peers_chicago(data: Path | None, smoke: bool, held_out: bool = False) -> Case:
    """Chicago; ``held_out``: private 2015, public 2014, the joint rows only."""
    years = ([2015], [2014]) if held_out else ([2014, 2015], [2013])
    private, public = chicago_tables(data, smoke, years)
    with_public = chicago_taxi_schema(public)
    without = chicago_taxi_schema(private.iloc[:0])  # the published company list
    shipped = config("taxi-archetypes.toml")
    old = {**shipped, "joint": False}
    old_stand_in = {**old, "public_stand_in": True, "budget_split": (0.7, 0.03, 0.09, 0.18)}
    variants = {
        "joint, public": ({**shipped, "schema": with_public}, True),
        "joint, no public": ({**shipped, "schema": without}, False),
        "previous, public": ({**old, "schema": with_public}, True),
        "previous stand-in, no public": ({**old_stand_in, "schema": without}, False),
    }
    if smoke or held_out:
        variants = {k: variants[k] for k in list(variants)[: 1 if smoke else 2]}
    scored, name = with_public.conform(private), "chicago-2015" if held_out else "chicago"
    case = Case(name, private, scored, public, ["taxi_id"], 2.5e-5, "shift", variants)
    case.as_is = with_public.conform(public)
    return case


def peers_sube(data: Path | None, smoke: bool, held_out: bool = False) -> Case:
    """SUBE; ``held_out``: Tuesday private, Wednesday public, the joint rows only. Without public
    trips the layout is the command's (``sube_schema(None, metadata)``)."""
    private, public, schema, alone = sube_tables(data, swap=held_out)
    shipped = config("transit-archetypes.toml")
    old = {**shipped, "joint": False}
    variants = {
        "joint, public": ({**shipped, "schema": schema}, True),
        "joint, no public": ({**shipped, "schema": alone}, False),
        "previous, public": ({**old, "schema": schema}, True),
        "previous stand-in, no public": (
            {**old, "schema": alone, "public_stand_in": True, "budget_split": (0.7, 0.03, 0.27)},
            False,
        ),
    }
    if held_out:
        variants = {k: variants[k] for k in list(variants)[:2]}
    scored = schema.conform(private, columns=["line", "branch", "zone"])
    drop = ["card_id", "lat", "lon"]
    name = "sube-swap" if held_out else "sube"
    case = Case(name, private, scored, public, drop, 1e-5, "hour", variants)
    case.as_is = schema.conform(public, columns=["line", "branch", "zone"])
    return case


#: mode -> data set -> its builder (data folder or None, smoke)
CASES: dict[str, dict[str, Callable[[Path | None, bool], Case]]] = {
    "archetypes": {"chicago": issue6_chicago, "sube": issue6_sube},
    "peers": {
        "chicago": peers_chicago,
        "sube": peers_sube,
        "chicago-2015": lambda data, smoke: peers_chicago(data, smoke, held_out=True),
        "sube-swap": lambda data, smoke: peers_sube(data, smoke, held_out=True),
    },
}
MEASURED = {"source": "measured"}
#: the source of a public file scored as it is (no fit, no run to time)
AS_IS = {"source": "measured (the public file)"}
#: the held-out splits (``--cases``): for checking rules, never for choosing them
HELD_OUT = ("chicago-2015", "sube-swap")


def score(scored: pd.DataFrame, synthetic: pd.DataFrame, drop: list[str]) -> float:
    """The k-marginal score of ``synthetic`` against ``scored``, ``drop`` columns ignored."""
    a, b, cols = discretise(
        scored.drop(columns=drop, errors="ignore"), synthetic.drop(columns=drop, errors="ignore")
    )
    return float(k_marginal_score(a, b, cols)["score"])


def fit_sample(case: Case, label: str, epsilon: float, seed: int) -> pd.DataFrame:
    params, given = case.variants[label]
    synth = ArchetypeSynthesizer(epsilon=epsilon, delta=case.delta, random_state=seed, **params)
    return synth.fit(case.private, case.public if given else None).sample()


def measure(case: Case, label: str, epsilon: float, args: argparse.Namespace) -> dict[str, Any]:
    """``args.seeds`` noise runs of one variant: scores, median seconds, and the peak RSS of one
    more run in a child process (which reads the data itself)."""
    row: dict[str, Any] = {"data": case.name, "method": label, "epsilon": epsilon}
    scores, seconds = [], []
    try:
        for seed in range(args.seeds):
            with stopwatch() as t:
                synthetic = fit_sample(case, label, epsilon, seed)
            seconds.append(t["s"])
            scores.append(score(case.scored, synthetic, case.drop))
    except ConfigError as exc:  # e.g. the stand-in on columns without a domain
        return {**row, "error": str(exc)}
    spec = {"mode": args.mode, "case": case.name, "label": label, "epsilon": epsilon}
    spec.update(data=str(args.data) if args.data else None, smoke=args.smoke, seed=args.seeds)
    memory = child([sys.executable, str(Path(__file__).resolve()), "_child", json.dumps(spec)])
    return {
        **row,
        "score_mean": round(float(np.mean(scores)), 1),
        "score_sd": round(float(np.std(scores)), 1),
        "runs": len(scores),
        "seconds": round(float(np.median(seconds)), 2),
        "peak_rss_mb": memory["peak_rss_mb"],
        "rows": len(synthetic),
    } | MEASURED


def child_run(spec: dict[str, Any]) -> None:
    """The measured child: build the case from its files, fit and sample once."""
    data = Path(spec["data"]) if spec["data"] else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        case = CASES[spec["mode"]][spec["case"]](data, spec["smoke"])
        fit_sample(case, spec["label"], spec["epsilon"], spec["seed"])


def baseline(case: Case, public: pd.DataFrame, seeds: int) -> dict[str, Any]:
    """The public trips resampled to the private size, scored like a release."""
    draws = [public.sample(len(case.scored), replace=True, random_state=s) for s in range(seeds)]
    mean = float(np.mean([score(case.scored, d, case.drop) for d in draws]))
    return {"data": case.name, "method": "public bootstrap", "score_mean": round(mean, 1)}


def archetypes_mode(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Issue 6's rows (see the module docstring)."""
    names = ["chicago"] if args.smoke else args.cases
    if set(names) & set(HELD_OUT):
        raise SystemExit(f"--cases {' '.join(HELD_OUT)}: the peers mode only")
    rows = []
    for name in names:
        case = CASES["archetypes"][name](args.data, args.smoke)
        public = case.public
        if name == "sube":  # the Tuesday trips on the same public domains
            public = case.variants["configured"][0]["schema"].conform(public)
        rows.append(emit(baseline(case, public, args.seeds)))
        for label in case.variants:
            for eps in args.epsilons:
                rows.append(emit(measure(case, label, eps, args)))
        if name == "chicago":
            params, _ = case.variants["configured"]
            fitted = ArchetypeSynthesizer(epsilon=1.0, delta=case.delta, random_state=0, **params)
            fitted.fit(case.private, case.public)
            with stopwatch() as t:
                big = fitted.sample(n_records=args.records)
            row = {"data": name, "method": f"sample {len(big):,} trips", "seconds": t["s"]}
            rows.append(emit(row))
    return rows


def peer_jobs(cases: list[Case], args: argparse.Namespace) -> list[dict[str, Any]]:
    """One smartnoise job per (data, privacy unit, method, epsilon, run)."""
    from smartnoise_peers import bounded

    jobs, first = [], args.peer_first_seed
    for case in cases:
        ident = case.drop[0]
        full = case.scored.drop(columns=[c for c in case.drop if c != ident])
        per = int(full.groupby(ident).size().max())
        units = {"card level (k=1)": (bounded(full, ident, case.order, 1), 1)}
        if per > 1:  # several rows per individual: bound them, and the row-level run beside
            units = {
                f"card level (k={args.card_k})": (
                    bounded(full, ident, case.order, args.card_k),
                    args.card_k,
                ),
                "tap level (weaker guarantee)": (full.drop(columns=[ident]), 1),
            }
        for unit, (table, k) in units.items():
            for method in args.peer_methods:
                for eps in args.epsilons:
                    for seed in range(first, first + (args.peer_runs or args.seeds)):
                        name = f"{case.name}-{method}-{len(jobs)}"
                        jobs.append(
                            {"case": case.name, "unit": unit, "train": table, "k": k}
                            | {"method": method, "epsilon": eps, "delta": case.delta}
                            | {"seed": seed, "name": name}
                        )
    return jobs


def planned_peer_rows(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stand-ins of the rows ``jobs`` will give (their seeds only, no scores): merged with the
    rows of ``--peer-rows`` before any fit, so a seed clash is refused before minutes of fits."""
    from smartnoise_peers import SAMPLINGS

    blank = {"score": 0.0, "seconds": 0.0, "wall_s": 0.0, "peak_rss_mb": 0.0, "rows": 0}
    return [
        {"data": job["case"], "epsilon": job["epsilon"]}
        | {"method": f"{job['method'].upper()}, {job['unit']}, {label}"}
        | {"per_run": [{"seed": job["seed"], **blank}]}
        for job in jobs
        for label in SAMPLINGS.values()
    ]


def peer_rows(
    cases: list[Case], jobs: list[dict[str, Any]], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """MST/AIM rows of ``jobs`` measured through ``--peers-python``, scored here, with their
    runs."""
    from smartnoise_peers import SAMPLINGS, run_all

    done = run_all(args.peers_python, [dict(j) for j in jobs], args.peer_jobs)
    by_name = {c.name: c for c in cases}
    groups: dict[tuple[str, str, str, float], list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for job, got in zip(jobs, done, strict=True):
        key = (job["case"], job["unit"], job["method"], job["epsilon"])
        groups.setdefault(key, []).append((job, got))
    rows = []
    for (name, unit, method, eps), runs in groups.items():
        case = by_name[name]
        dtypes = case.scored.dtypes.to_dict()
        for way, label in SAMPLINGS.items():
            each = []
            for job, got in runs:
                table = got["tables"][way]
                synthetic = table.astype({c: dtypes[c] for c in table.columns})
                each.append(
                    {
                        "seed": job["seed"],
                        "score": round(score(case.scored, synthetic, case.drop), 2),
                    }
                    | {"seconds": round(got["fit_sample_s"], 2), "wall_s": got["wall_s"]}
                    | {"peak_rss_mb": got["peak_rss_mb"], "rows": len(table)}
                )
            rows.append(peer_summary(name, f"{method.upper()}, {unit}, {label}", eps, each))
    return rows


def peer_summary(
    data: str, method: str, epsilon: float, runs: list[dict[str, Any]]
) -> dict[str, Any]:
    """One peer row from its runs (each: seed, score, seconds, wall_s, peak_rss_mb, rows): mean
    and sd (over the runs, ddof 0) of the scores, median seconds, max peak RSS, and the runs."""
    seeds = sorted(r["seed"] for r in runs)
    if len(set(seeds)) < len(seeds):
        raise ValueError(
            f"{data}, {method}, epsilon {epsilon:g}: seeds {seeds} repeat; runs added to "
            "earlier ones need new seeds (--peer-first-seed)"
        )
    scores = [r["score"] for r in runs]
    return {"data": data, "method": method, "epsilon": epsilon} | {
        "score_mean": round(float(np.mean(scores)), 1),
        "score_sd": round(float(np.std(scores)), 1),
        "runs": len(runs),
        "seconds": round(float(np.median([r["seconds"] for r in runs])), 2),
        "wall_s": round(float(np.median([r["wall_s"] for r in runs])), 2),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "rows": runs[0]["rows"],
        "source": PEER_SOURCE,
        "per_run": sorted(runs, key=lambda r: r["seed"]),
    }


def runs_of(row: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The runs of a recorded peer row: its ``per_run``; a row of one run written before runs
    were kept is its own run with seed 0 (``range(--peer-runs)``); None for an older row of
    several runs (its mean and sd only)."""
    if "per_run" in row:
        return list(row["per_run"])
    if row.get("runs") != 1:
        return None
    keys = ("seconds", "wall_s", "peak_rss_mb", "rows")
    return [{"seed": 0, "score": row["score_mean"]} | {k: row[k] for k in keys}]


def merge_peer_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The peer rows of the same data, method and epsilon made into one row of all their runs
    (first-seen order). A seed twice is an error (the same seed is not a new run); so is merging
    an older row of several runs that does not keep them."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["data"], row["method"], row["epsilon"]), []).append(row)
    merged = []
    for (data, method, eps), members in groups.items():
        runs = [runs_of(r) for r in members]
        if len(members) == 1 and runs[0] is None:
            merged.append(members[0])  # kept as recorded: nothing to add to it
            continue
        if any(r is None for r in runs):
            raise ValueError(
                f"{data}, {method}, epsilon {eps:g}: a row of several runs without its "
                "per_run scores cannot take more runs"
            )
        merged.append(peer_summary(data, method, eps, [x for r in runs if r for x in r]))
    return merged


#: the ``source`` of a row measured by running smartnoise-synth
PEER_SOURCE = "measured (smartnoise-synth)"


def check_peer_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`merge_peer_rows`, a refusal as one line (exit status 1)."""
    try:
        return merge_peer_rows(rows)
    except ValueError as exc:
        raise SystemExit(f"--peer-rows: {exc}") from None


def recorded_peer_rows(paths: list[Path], names: list[str]) -> list[dict[str, Any]]:
    """The smartnoise-synth rows of the ``names`` data sets in earlier results files (the peers'
    fits do not depend on transit-synth's code, so they are kept, not run again)."""
    rows = []
    for path in paths:
        rows += [r for r in read_rows(path) if r.get("source") == PEER_SOURCE]
    return [r for r in rows if r["data"] in names]


def peers_mode(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Issue 28's rows (see the module docstring)."""
    from smartnoise_peers import available

    names = ["chicago"] if args.smoke else args.cases
    cases = [CASES["peers"][name](args.data, args.smoke) for name in names]
    peers = recorded_peer_rows(args.peer_rows or [], names)
    why = available(args.peers_python) if args.peers_python else "no --peers-python given"
    if why is None and args.peer_methods:  # first: the slow part
        jobs = peer_jobs(cases, args)
        check_peer_rows(peers + planned_peer_rows(jobs))
        peers += peer_rows(cases, jobs, args)
    else:
        kept = "the rows of --peer-rows" if args.peer_rows else "the figures recorded in issue 28"
        print(f"smartnoise-synth not run ({why}): {kept} follow")
    rows = [emit(r) for r in check_peer_rows(peers)]
    for case in cases:
        for label in case.variants:
            for eps in args.epsilons:
                rows.append(emit(measure(case, label, eps, args)))
        if case.as_is is not None:  # the public file itself as the release, at every epsilon
            value = round(score(case.scored, case.as_is, case.drop), 1)
            row = {"data": case.name, "method": "public as is", "score_mean": value, "runs": 1}
            for eps in args.epsilons:
                rows.append(emit({**row, "epsilon": eps, "rows": len(case.as_is)} | AS_IS))
    recorded = [r for r in RECORDED_PEERS if r[0] in names]
    for name, method, eps, value in recorded:
        row = {"data": name, "method": method, "epsilon": eps, "score_mean": value}
        rows.append(emit({**row, "source": "recorded in issue 28"}))
    if recorded:
        row = {"data": "all", "method": RECORDED_COST, "source": "recorded in issue 28"}
        rows.append(emit(row))
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_child"]:
        child_run(json.loads(argv[1]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=["archetypes", "peers"], default="archetypes")
    parser.add_argument("--data", type=Path, default=None, help="default: the embedded copies")
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=list(CASES["peers"]),
        default=["chicago", "sube"],
        help=f"peers only: the held-out splits {', '.join(HELD_OUT)}",
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--peers-python", default=None, help="an interpreter with snsynth")
    parser.add_argument("--peer-methods", nargs="*", default=["mst", "aim"])
    parser.add_argument("--peer-jobs", type=int, default=1, help="smartnoise children at once")
    parser.add_argument("--peer-runs", type=int, default=None, help="default: --seeds")
    parser.add_argument("--card-k", type=int, default=3, help="card-level peers: rows per card")
    parser.add_argument(
        "--peer-first-seed", type=int, default=0, help="the peers' runs: seeds from this one on"
    )
    parser.add_argument(
        "--peer-rows",
        type=Path,
        nargs="+",
        default=None,
        help="peers: the smartnoise-synth rows (of --cases) of earlier results files, kept "
        "without running them again (their fits do not depend on transit-synth's code); rows of "
        "the same data, method and epsilon, from these files and from new runs with "
        "--peers-python, become one row of all their runs (new runs need new seeds: "
        "--peer-first-seed)",
    )
    add_options(parser, f"the Chicago sample cut to {SMOKE_ROWS} trips, one variant, eps 1")
    args = parser.parse_args(argv)
    if args.smoke:
        args.seeds, args.epsilons, args.records = 1, [1.0], 10_000
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # features without a public domain
        rows = peers_mode(args) if args.mode == "peers" else archetypes_mode(args)
    print(f"{time.perf_counter() - started:.1f} s")
    write_results(args.json, f"trips-{args.mode}", rows, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
