"""Timed trajectories (issue 24): each candidate time design on real and simulated data.

Each design of :data:`DESIGNS` (keyword arguments of :class:`prefixtree.PrefixTreeSynthesizer`
added to the defaults; extend the list to add a candidate) is released on each dataset at each
epsilon and noise seed, each release in its own child process through
:func:`prefixtree.release.release_sequences` (the library side of ``transit-synth sequences``,
Parquet in and out), so that the child's peak RSS (``wait4``, :func:`harness.child`) is
that release's memory (``--in-process``, as ``--smoke`` does, skips the child start-up and reports
no peak RSS). A design whose keywords this build's synthesizer does not take is reported
as skipped (e.g. ``time_model`` before the time model lands).

Datasets (``--datasets``):

* ``sube``: the embedded SUBE Buenos Aires Wednesday 28/11/2019 boardings (real; one sequence of
  lines per card, taxonomy line -> mode, h = 8, 60-minute bins);
* ``montreal``: SIMULATED Montreal metro trajectories with times (:func:`synth.simulate.
  simulate_sequences` ``with_time=True``: its documented public time rule), ``--montreal-n``
  (default 1M) sequences, h = 12, 60-minute bins;
* ``wide``: a SIMULATED wide, sparse network: 2,000 stops under 150 lines (stop -> line -> root),
  heavy-tailed popularity (``popularity_sigma`` 1.5) and short chains (mean length 1.6), times as
  above, ``--wide-n`` (default 100,000) sequences, h = 8, 60-minute bins.

Scored on the original (truncated to h, times floored to the bin) with
:mod:`synth.evaluate.trajectories` (the statistics of the shared ``trajmetrics.py``): TV of the
length, hour-of-day and gap distributions, top-50 transitions and timed transitions kept, and TP@100
of the released location sequences against the original's top-100 patterns (times dropped), as
``bench_prefixtree.py defaults`` measures it (``top_k_patterns`` / ``utility_curve`` of
:mod:`synth.evaluate.patterns`, as ``evaluate_sequences`` does). ``ceiling`` rows are the original
truncated to h (epsilon = infinity). Output: one JSON row per release (``--out``) and a markdown
table of the means over seeds (``--markdown``, else printed).

    python benchmarks/bench_trajectories.py --epsilons 0.5 1 2 --seeds 1 2 3 4 5 --out r.json
    python benchmarks/bench_trajectories.py --smoke        # seconds: small sizes, one seed
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import tempfile
from pathlib import Path
from statistics import mean
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_prefixtree import _grouped_taxonomy
from harness import add_options, child, emit, write_results

#: The candidate designs: a name and the synthesizer keywords it adds (the dataset's epsilon /
#: height / ``time_bin`` are set by the benchmark; a design's own ``time_bin`` wins, so
#: ``"time_bin": None`` is an untimed release, scored on length and TP@100 only). Extend freely.
DESIGNS: list[dict[str, Any]] = [
    # the default with time bins (time_model="auto" resolves to it): location tree + first-tap,
    # gap and length tables
    {"name": "factorised", "kwargs": {"time_model": "factorised"}},
    # the paper's tree over (location, time bin) tokens
    {"name": "tree", "kwargs": {"time_model": "tree"}},
    # the same tree, hybrid variant with 6-hour coarse bins above the fine ones
    {
        "name": "tree-hybrid-coarse-360",
        "kwargs": {"time_model": "tree", "variant": "hybrid", "coarse_time_bin": 360},
    },
    # no time bins at all (locations only)
    {"name": "untimed", "kwargs": {"time_bin": None}},
]

#: dataset -> (label, h, minutes per bin)
DATASETS = {
    "sube": ("SUBE Wednesday (real, lines)", 8, 60),
    "montreal": ("Montreal {n:,} (simulated)", 12, 60),
    "wide": ("wide network {n:,} (simulated, 2,000 stops / 150 lines)", 8, 60),
}

#: the wide network: 150 lines of 13 or 14 stops (2,000 stops)
WIDE_SIZES = [14] * 50 + [13] * 100

SMOKE = {
    "montreal_n": 2_000,
    "wide_n": 2_000,
    "epsilons": [1.0],
    "seeds": [1],
    "in_process": True,
}

CHILD = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
from prefixtree.release import release_sequences
a = json.loads(sys.argv[1])
start = time.perf_counter()
release_sequences(a["input"], a["out"], taxonomy=a["taxonomy"], params=a["params"],
                  location_column=a["location_column"], on_unknown=a["on_unknown"],
                  seed=a["seed"], format="parquet")
figures = {"release_s": round(time.perf_counter() - start, 2)}
try:  # this process's own high-water RSS (Linux): wait4's ru_maxrss also counts the parent's
    # RSS at fork (exec keeps the old memory's high water), the benchmark's original data
    with open("/proc/self/status") as status:
        kb = [int(l.split()[1]) for l in status if l.startswith("VmHWM:")]
    figures["peak_rss_mb"] = round(kb[0] / 1024, 1)
except (OSError, IndexError, ValueError):
    pass
print(json.dumps(figures), file=sys.stderr)
"""


def _accepted(kwargs: dict[str, Any]) -> list[str]:
    """The keywords of ``kwargs`` this build's synthesizer does not take."""
    from prefixtree import PrefixTreeSynthesizer

    known = set(inspect.signature(PrefixTreeSynthesizer.__init__).parameters)
    return sorted(set(kwargs) - known)


def _dataset(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Input file, taxonomy file and reading options of a dataset, and its original sequences."""
    from synth import datasets
    from synth.records import load_sequences
    from synth.simulate import simulate_sequences

    label, height, width = DATASETS[name]
    if name == "sube":
        taps = datasets.sube_taps("wednesday")
        taps = taps[taps["id_tarjeta"].notna()].reset_index(drop=True)  # 10 taps without a card
        path = work / "sube.parquet"
        taps.to_parquet(path)
        taxonomy = str(datasets.path("sube_line_taxonomy"))
        original = load_sequences(
            taps,
            taxonomy=datasets.sube_taxonomy("line"),
            location_column="id_linea",
            on_unknown="drop",
        )
        reading = {"location_column": "id_linea", "on_unknown": "drop"}
    else:
        n = args.montreal_n if name == "montreal" else args.wide_n
        label = label.format(n=n)
        if name == "montreal":
            tax = datasets.montreal_taxonomy()
            original = simulate_sequences(n, with_time=True, seed=args.data_seed)
        else:
            tax = _grouped_taxonomy(WIDE_SIZES, "line")
            original = simulate_sequences(
                n,
                taxonomy=tax,
                with_time=True,
                seed=args.data_seed,
                mean_length=1.6,
                popularity_sigma=1.5,
            )
        path = work / f"{name}.parquet"
        original.to_parquet(path)
        taxonomy = str(tax.to_csv(work / f"{name}-taxonomy.csv"))
        reading = {"location_column": None, "on_unknown": "error"}
    original["location"] = original["location"].astype(str)
    return {
        "label": label,
        "height": height,
        "bin": width,
        "input": str(path),
        "taxonomy": taxonomy,
        "original": original,
        **reading,
    }


def _scores(data: dict[str, Any], release: pd.DataFrame, top: list[Any]) -> dict[str, Any]:
    """The time statistics and TP@100 of one release (an untimed release: length and TP@100)."""
    from synth.evaluate.patterns import top_k_patterns, utility_curve
    from synth.evaluate.trajectories import evaluate_trajectories

    release = release.assign(location=release["location"].astype(str))
    [tp] = utility_curve(top, top_k_patterns(release[["seq_id", "pos", "location"]], 100), [100])
    if "time" not in release.columns:
        return {**_length_scores(data, release), "tp100": tp["tp"]}
    timed = evaluate_trajectories(
        data["original"], {"r": release}, height=data["height"], bin_minutes=data["bin"]
    )
    r = timed["releases"]["r"]
    return {
        "mean_length_original": round(timed["original"]["mean_length"], 3),
        "mean_length": round(r["mean_length"], 3),
        **{k: round(r[k], 4) for k in ("tv_length", "tv_hour", "tv_first_hour", "tv_gap")},
        "transitions_kept": r["transitions_kept"],
        "timed_transitions_kept": r["timed_transitions_kept"],
        "tp100": tp["tp"],
    }


def _length_scores(data: dict[str, Any], release: pd.DataFrame) -> dict[str, Any]:
    """Mean length and TV of the length distribution (both truncated to h) without times."""
    from synth.evaluate.trajectories import tv_distance

    def shares(frame: pd.DataFrame) -> tuple[float, dict[int, float]]:
        lengths = frame.groupby("seq_id", sort=False).size().clip(upper=data["height"])
        return float(lengths.mean()), lengths.value_counts(normalize=True).to_dict()

    mean_o, orig = shares(data["original"])
    mean_r, rel = shares(release)
    return {
        "mean_length_original": round(mean_o, 3),
        "mean_length": round(mean_r, 3),
        "tv_length": round(tv_distance(orig, rel), 4),
    }


def _run_one(
    data: dict[str, Any],
    design: dict[str, Any],
    epsilon: float,
    seed: int,
    out: Path,
    in_process: bool = False,
) -> dict[str, Any]:
    """One release in a child process (or in this one); its figures."""
    params = {
        "time_bin": data["bin"],
        **design["kwargs"],
        "epsilon": epsilon,
        "height": data["height"],
    }
    spec = {
        "input": data["input"],
        "out": str(out),
        "taxonomy": data["taxonomy"],
        "params": params,
        "location_column": data["location_column"],
        "on_unknown": data["on_unknown"],
        "seed": seed,
    }
    if in_process:  # --smoke: no child start-up, so no peak RSS of the release alone
        import time
        import warnings

        from prefixtree.release import release_sequences

        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            release_sequences(
                spec["input"],
                out,
                taxonomy=spec["taxonomy"],
                params=params,
                location_column=spec["location_column"],
                on_unknown=spec["on_unknown"],
                seed=seed,
                format="parquet",
            )
        figures = {"release_s": round(time.perf_counter() - start, 2), "peak_rss_mb": None}
    else:
        got = child([sys.executable, "-c", CHILD, json.dumps(spec)])
        last = json.loads(got["stderr"].strip().splitlines()[-1])
        figures = {
            "release_s": last["release_s"],
            "wall_s": got["wall_s"],
            # the child's own VmHWM where it reports it, else the harness's wait4 figure (the
            # harness forks the child from a small launcher, so that is the child's own too)
            "peak_rss_mb": last.get("peak_rss_mb", got["peak_rss_mb"]),
        }
    return {**figures, "release": pd.read_parquet(out / "sequences.parquet")}


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every design x dataset x epsilon x seed; one JSON row each (printed as it comes)."""
    from synth.evaluate.patterns import top_k_patterns
    from synth.records import truncate_sequences

    designs = [d for d in DESIGNS if not args.designs or d["name"] in args.designs]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-traj-") as tmp:
        work = Path(tmp)
        for name in args.datasets:
            data = _dataset(name, args, work)
            top = top_k_patterns(data["original"][["seq_id", "pos", "location"]], 100)
            base = {"dataset": data["label"], "h": data["height"], "bin": data["bin"]}
            ceiling = truncate_sequences(data["original"], data["height"])
            rows.append(emit({**base, "design": "ceiling", **_scores(data, ceiling, top)}))
            for design in designs:
                missing = _accepted(design["kwargs"])
                if missing:
                    why = f"this build's synthesizer takes no {', '.join(missing)}"
                    rows.append(emit({**base, "design": design["name"], "skipped": why}))
                    continue
                for epsilon in args.epsilons:
                    for seed in args.seeds:
                        out = work / f"{name}-{design['name']}-{epsilon:g}-{seed}"
                        got = _run_one(data, design, epsilon, seed, out, args.in_process)
                        row = {**base, "design": design["name"], "epsilon": epsilon, "seed": seed}
                        row.update(_scores(data, got.pop("release"), top), **got)
                        rows.append(emit(row))
    return rows


#: the markdown table's columns: (row key, heading)
COLUMNS = (
    ("mean_length", "mean length"),
    ("tv_length", "TV length"),
    ("tv_hour", "TV hour"),
    ("tv_gap", "TV gap"),
    ("transitions_kept", "top-50 trans."),
    ("timed_transitions_kept", "top-50 timed"),
    ("tp100", "TP@100"),
    ("release_s", "time (s)"),
    ("peak_rss_mb", "peak RSS (MB)"),
)


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def markdown(rows: list[dict[str, Any]]) -> str:
    """Means over seeds per dataset, design and epsilon (skipped designs listed below)."""
    groups: dict[tuple[str, str, Any], list[dict[str, Any]]] = {}
    skipped = []
    for r in rows:
        if "skipped" in r:
            skipped.append(f"- {r['design']} on {r['dataset']}: skipped ({r['skipped']})")
            continue
        groups.setdefault((r["dataset"], r["design"], r.get("epsilon", "inf")), []).append(r)
    head = ["dataset", "design", "epsilon", "seeds", *(h for _, h in COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (dataset, design, epsilon), group in groups.items():
        cells = [dataset, design, f"{epsilon:g}" if epsilon != "inf" else "inf", str(len(group))]
        for key, _ in COLUMNS:
            values = [g[key] for g in group if g.get(key) is not None]
            cells.append(_number(mean(values)) if values else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, *(["", *skipped] if skipped else [])]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", choices=tuple(DATASETS), default=list(DATASETS))
    parser.add_argument("--designs", nargs="+", default=None, help="names in DESIGNS (default all)")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5], help="noise seeds")
    parser.add_argument("--montreal-n", type=int, default=1_000_000)
    parser.add_argument("--wide-n", type=int, default=100_000)
    parser.add_argument("--data-seed", type=int, default=1, help="seed of the simulated data")
    add_options(
        parser,
        f"{SMOKE['montreal_n']:,} / {SMOKE['wide_n']:,} simulated sequences, epsilon 1, one seed, "
        "in process (overrides those flags)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="release in this process (no child start-up; no per-release peak RSS)",
    )
    parser.add_argument("--out", type=Path, default=None, help="the rows as JSON (bare list)")
    parser.add_argument("--markdown", type=Path, default=None, help="the table (else printed)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.designs or ()) - {d["name"] for d in DESIGNS})
    if unknown:
        parser.error(f"--designs: no design named {', '.join(unknown)} in DESIGNS")
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)
    rows = run(args)
    table = markdown(rows)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=2))
    write_results(args.json, "trajectories", rows, args)
    if args.markdown is not None:
        args.markdown.write_text(table)
    else:
        print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
