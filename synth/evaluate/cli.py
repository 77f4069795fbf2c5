"""``transit-synth evaluate ORIGINAL SYNTHETIC [SYNTHETIC ...] [--kind sequences|trips] [--out
DIR]``.

Compares one or more synthetic releases (files, or release directories holding ``sequences.*`` /
``trips.*`` and ``manifest.json``) with the original; writes ``private-evaluation.json`` and
``private-report.html`` into DIR atomically and prints a summary. Both hold exact statistics of
the original (NOT private, for the data holder only, and say so at their top), so DIR is never a
release directory: by default ``<release>-evaluation-private/`` beside the first release
(:func:`synth.internal.default_evaluation_dir`); an ``--out`` inside a release is refused.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pandas as pd

from synth.cli import add_quiet_option
from synth.errors import InputError
from synth.evaluate.suite import PAPER_KS, evaluate_sequences, evaluate_trips
from synth.internal import (
    INTERNAL_NOTICE,
    PRIVATE_PREFIX,
    check_outside_releases,
    default_evaluation_dir,
)
from synth.io import CSV_SUFFIXES, PARQUET_SUFFIXES, read_table, release_dir
from synth.records import load_sequences
from synth.report import write_report
from synth.taxonomy import Taxonomy

RESULTS_FILE = f"{PRIVATE_PREFIX}evaluation.json"
REPORT_FILE = f"{PRIVATE_PREFIX}report.html"


def register(subparsers: Any) -> None:
    """Add the ``evaluate`` subcommand."""
    p = subparsers.add_parser(
        "evaluate",
        help="compare synthetic releases with the original data (utility report)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("original", metavar="ORIGINAL", help="the original table (CSV or Parquet)")
    p.add_argument(
        "synthetic",
        metavar="SYNTHETIC",
        nargs="+",
        help="synthetic table(s) or release directories",
    )
    p.add_argument(
        "--kind",
        choices=("sequences", "trips"),
        default="sequences",
        help="long-format sequences (count queries, patterns) or trip tables (marginals)",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="output directory for the internal (NOT private) evaluation; never a release "
        "directory (default: <release>-evaluation-private beside the first release)",
    )
    p.add_argument(
        "--taxonomy",
        metavar="TAX",
        help="public taxonomy (CSV edge list or GTFS zip) whose leaves are the query universe "
        "(default: the locations of ORIGINAL)",
    )
    p.add_argument(
        "--height", type=int, default=12, help="h of the count-query workload (default 12)"
    )
    p.add_argument(
        "--queries", type=int, default=40_000, help="queries per workload (default 40000)"
    )
    p.add_argument("--top-k", type=int, default=max(PAPER_KS), help="largest k of top-k patterns")
    p.add_argument("--location-column", metavar="COL", help="location column when ORIGINAL is taps")
    p.add_argument(
        "--workload-seed", type=int, default=0, help="seed of the query workload and marginal picks"
    )
    add_quiet_option(p)
    p.set_defaults(func=run)


def _release(arg: str, kind: str) -> tuple[str, Path, dict[str, Any] | None]:
    """(name, table path, manifest) of a synthetic argument: a table file or a release directory."""
    path = Path(arg)
    if path.is_dir():
        tables = [path / f"{kind}{ext}" for ext in (*CSV_SUFFIXES, *PARQUET_SUFFIXES)]
        found = [t for t in tables if t.is_file()]
        if not found:
            raise InputError(f"{path}: release directory has no {kind}.csv or {kind}.parquet")
        table, name = found[0], path.name
    else:
        table = path
        name = (
            path.parent.name if path.name.split(".")[0] == kind and path.parent.name else path.stem
        )
    manifest_path = table.parent / "manifest.json"
    manifest = None
    if manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise InputError(f"{manifest_path}: not valid JSON: {exc}") from None
    return name, table, manifest


def _summary(results: dict[str, Any]) -> list[str]:
    lines = []
    for name, rel in results["releases"].items():
        if results["kind"] == "sequences":
            cq = rel["count_queries"]
            errs = ", ".join(
                f"{w} " + "/".join(f"{s['mean_relative_error']:.3f}" for s in r["by_subset"])
                for w, r in cq.items()
            )
            tps = ", ".join(f"k={p['k']}: {p['tp']}" for p in rel["patterns"])
            lines.append(f"{name}: relative error by max|Q| subset: {errs}; TP {tps}")
        else:
            m = rel["marginals"]
            two_way = "-" if m["mean_two_way"] is None else f"{m['mean_two_way']:.4f}"
            lines.append(
                f"{name}: k-marginal score {rel['k_marginal']['score']:.1f}, mean TV 1-way "
                f"{m['mean_one_way']:.4f}, 2-way {two_way}"
            )
    return lines


def run(args: argparse.Namespace) -> int:
    """Evaluate, write the JSON and the HTML report, print the summary."""
    if args.out:
        check_outside_releases(args.out)
    releases = [_release(a, args.kind) for a in args.synthetic]
    names: list[str] = []
    for name, _, _ in releases:
        names.append(name if name not in names else f"{name}#{len(names) + 1}")
    if args.kind == "sequences":
        original = load_sequences(args.original, location_column=args.location_column)
        synthetic: dict[str, pd.DataFrame] = {
            n: load_sequences(t) for n, (_, t, _) in zip(names, releases, strict=True)
        }
        universe = Taxonomy.from_spec(args.taxonomy).leaves() if args.taxonomy else None
        top_k = args.top_k
        ks = sorted({k for k in PAPER_KS if k <= top_k} | {top_k})
        results = evaluate_sequences(
            original,
            synthetic,
            universe=universe,
            height=args.height,
            n_queries=args.queries,
            ks=ks,
            seed=args.workload_seed,
        )
    else:
        original = read_table(args.original, dtype={"card_id": str})
        synthetic = {
            n: read_table(t, dtype={"card_id": str})
            for n, (_, t, _) in zip(names, releases, strict=True)
        }
        results = evaluate_trips(original, synthetic, seed=args.workload_seed)
    results["inputs"] = {
        "original": str(args.original),
        **{n: str(t) for n, (_, t, _) in zip(names, releases, strict=True)},
    }
    manifests = {n: m for n, (_, _, m) in zip(names, releases, strict=True) if m is not None}
    out = Path(args.out) if args.out else default_evaluation_dir(args.synthetic[0])
    check_outside_releases(out)
    with release_dir(out) as stage:
        text = json.dumps({"notice": INTERNAL_NOTICE, **results}, indent=2)
        (stage / RESULTS_FILE).write_text(text + "\n", encoding="utf-8")
        write_report(results, stage / REPORT_FILE, manifests=manifests, notice=INTERNAL_NOTICE)
    if not args.quiet:
        print("\n".join(_summary(results)))
        print(f"wrote {out / RESULTS_FILE} and {out / REPORT_FILE}")
    return 0
