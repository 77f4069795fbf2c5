"""``transit-synth evaluate ORIGINAL SYNTHETIC [SYNTHETIC ...] [--out DIR]``.

Compares one or more synthetic releases (files, or release directories holding ``sequences.*`` /
``trips.*`` and ``manifest.json``) with the original. What a release is (sequences or trips), the
height of its prefix tree, its location, id and time columns are read from its manifest; flags
override them. Writes ``private-evaluation.json`` and ``private-report.html`` into DIR atomically
and prints a summary. Both hold exact statistics of the original (NOT private, for the data holder
only, and say so at their top), so DIR is never a release directory: by default
``<release>-evaluation-private/`` beside the first release
(:func:`synth.internal.default_evaluation_dir`); an ``--out`` inside a release is refused.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from synth import datasets, registry
from synth.cli.evaluate_trips import (
    add_trip_input_options,
    decoded_files,
    read_original_trips,
    trip_decoding,
)
from synth.cli.inputmap import add_input_map_options, input_map_from_args, mapped_input
from synth.cli.options import add_quiet_option
from synth.config import EMBEDDED
from synth.errors import ConfigError, InputError
from synth.evaluate.suite import PAPER_KS, evaluate_sequences, evaluate_trips
from synth.evaluate.trajectories import evaluate_trajectories
from synth.internal import INTERNAL_NOTICE, check_outside_releases, default_evaluation_dir
from synth.io import read_table, table_format
from synth.logs import private_message
from synth.outdir import release_dir
from synth.records import load_sequences, truncate_sequences
from synth.release import Release, data_kinds, read_manifest
from synth.report import REPORT_FILE, RESULTS_FILE, verdict, write_report
from synth.taxonomy import Taxonomy

DEFAULT_HEIGHT = 12
#: Name of the non-private baseline: the original truncated to the workload's height.
BASELINE = "eps=inf (truncated)"


def register(subparsers: Any) -> None:
    """Add the ``evaluate`` subcommand."""
    p = subparsers.add_parser(
        "evaluate",
        help="compare synthetic releases with the original data (internal utility report)",
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
        default=None,
        help="long-format sequences (count queries, patterns) or trip tables (marginals) "
        "(default: from the release's manifest, else the table's name, else sequences)",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="output directory for the internal (NOT private) evaluation; never a release "
        "directory (default: <release>-evaluation-private beside the first release)",
    )
    _sequence_options(p)
    _trip_options(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def _sequence_options(p: argparse.ArgumentParser) -> None:
    """Flags of sequence releases (count queries, top-k patterns)."""
    seq = p.add_argument_group("sequences")
    seq.add_argument(
        "--taxonomy",
        metavar="TAX",
        help="public taxonomy (CSV edge list or GTFS zip) whose leaves are the query universe "
        "(default: the release's taxonomy when its file exists, else the locations of ORIGINAL)",
    )
    seq.add_argument(
        "--height",
        type=int,
        default=None,
        help=f"h of the count-query workload (default: the release's height, else "
        f"{DEFAULT_HEIGHT})",
    )
    seq.add_argument(
        "--no-baseline",
        dest="baseline",
        action="store_false",
        help=f"leave out '{BASELINE}', the original cut to h locations without noise (the best "
        "any release of height h can score)",
    )
    seq.add_argument(
        "--queries", type=int, default=40_000, help="queries per workload (default 40000)"
    )
    seq.add_argument(
        "--top-k", type=int, default=max(PAPER_KS), help="largest k of top-k patterns (300)"
    )
    seq.add_argument(
        "--time-bin",
        type=int,
        default=None,
        metavar="MINUTES",
        help="timed releases: the bin of the time statistics (default: the release's "
        "time_bin_minutes); with it, the report adds the time section (hour of day, lengths, "
        "gaps, timed transitions)",
    )
    seq.add_argument(
        "--location-column",
        metavar="COL",
        help="location column when ORIGINAL is taps (default: the release's, if ORIGINAL has it)",
    )
    seq.add_argument(
        "--on-unknown",
        choices=("error", "drop"),
        default="error",
        help="with a taxonomy (--taxonomy or the release's): locations of ORIGINAL missing from "
        "it fail, or their taps are dropped (as the generator did with --on-unknown drop)",
    )
    add_input_map_options(p, skip=("time", "resolution"))


def _trip_options(p: argparse.ArgumentParser) -> None:
    """Flags of trip releases (columns of the original and the release)."""
    trips = p.add_argument_group("trips")
    trips.add_argument(
        "--id-column",
        metavar="COL",
        help="individual id column (default: the release's, else card_id)",
    )
    trips.add_argument(
        "--time-column",
        metavar="COL",
        help="time of a trip: timestamps (read as hour of day) or numbers used as given, e.g. a "
        "shift (default: the release's order column, else on_time)",
    )
    trips.add_argument(
        "--origin-column", metavar="COL", default="on_stop", help="origin column (on_stop)"
    )
    trips.add_argument(
        "--destination-column",
        metavar="COL",
        default="off_stop",
        help="destination column (off_stop); give 'none' when trips record no destination",
    )
    trips.add_argument(
        "--exclude",
        metavar="COLS",
        default="",
        help="comma-separated columns left out of the marginals (e.g. lat,lon)",
    )
    add_trip_input_options(trips)
    p.add_argument(
        "--workload-seed", type=int, default=0, help="seed of the query workload and marginal picks"
    )


def _manifest(directory: Path) -> dict[str, Any] | None:
    """The validated manifest of a release directory (None when it has none)."""
    return read_manifest(directory, required=False) or None


def _accepted(evaluation: str | None) -> list[str]:
    """The release kinds ``evaluate`` reads (:mod:`synth.registry`: those with a data table and
    an evaluation), with ``--kind`` only those evaluated as it."""
    return [
        k
        for k in data_kinds()
        if registry.get(k).evaluation is not None
        and evaluation in (None, registry.get(k).evaluation)
    ]


def _release(arg: str, kind: str | None) -> tuple[str, Path, dict[str, Any] | None, str | None]:
    """(name, table, manifest, evaluation kind from the manifest or the file's name) of a table
    file or release directory."""
    path = Path(arg)
    if path.is_dir():
        release = Release(path, read_manifest(path, required=False))
        stated = release.data_kind(_accepted(None), what="evaluate") if release.kind else None
        chosen = release.data_kind(_accepted(kind), what="evaluate")
        evaluation = registry.get(stated or chosen).evaluation
        return path.name, release.data_file(chosen), release.manifest or None, evaluation
    stem = path.name.split(".")[0]
    by_stem = {registry.get(k).data_table: k for k in _accepted(None)}
    if stem not in by_stem:  # a loose table: no manifest of its own
        return path.stem, path, None, None
    manifest = _manifest(path.parent)
    stated = (
        Release(path.parent, manifest).data_kind(_accepted(None), what="evaluate")
        if manifest
        else None
    )
    evaluation = registry.get(stated or by_stem[stem]).evaluation
    return path.parent.name or path.stem, path, manifest, evaluation


def _resolve_kind(args: argparse.Namespace, stated: Sequence[str | None]) -> str:
    if args.kind is not None:
        return str(args.kind)
    kinds = {k for k in stated if k is not None}
    if len(kinds) > 1:
        raise ConfigError(
            "the releases are of different kinds (sequences and trips): evaluate them separately"
        )
    return kinds.pop() if kinds else "sequences"


def _from_manifests(manifests: Sequence[dict[str, Any] | None], key: str) -> Any:
    """The parameter ``key`` of the releases' manifests (the first one stating it)."""
    for m in manifests:
        value = ((m or {}).get("parameters") or {}).get(key)
        if value is not None:
            return value
    return None


def _columns(path: str) -> set[str]:
    """Column names of a table file, or an empty set when it cannot be read cheaply."""
    p = Path(path)
    try:
        if table_format(p) == "parquet":
            import pyarrow.parquet as pq

            return set(pq.read_schema(p).names)
        return set(pd.read_csv(p, nrows=0).columns.str.strip())
    except (InputError, OSError, ValueError):
        return set()  # read_table / load_sequences name the problem


def _summary(results: dict[str, Any]) -> list[str]:
    """One verdict line per release (the baseline, when shown, is what privacy costs), and its
    time figures when it is timed."""
    timed = (results.get("trajectories") or {}).get("releases", {})
    lines = []
    for name in results["releases"]:
        if name == BASELINE:
            continue
        lines.append(f"{name}: {verdict(results, name)}")
        if name in timed:
            t = timed[name]
            lines.append(
                f"  time: TV length {t['tv_length']:.3f}, hour {t['tv_hour']:.3f}, gap "
                f"{t['tv_gap']:.3f}; top-50 transitions kept {t['transitions_kept']}, timed "
                f"{t['timed_transitions_kept']}"
            )
    return lines


def _evaluate_sequences(
    args: argparse.Namespace, tables: dict[str, Path], manifests: Sequence[dict[str, Any] | None]
) -> dict[str, Any]:
    height = args.height if args.height is not None else _from_manifests(manifests, "height")
    height = DEFAULT_HEIGHT if height is None else height
    if int(height) < 1:
        raise ConfigError(f"--height must be at least 1, got {height}")
    location = args.location_column
    if location is None:
        stated = _from_manifests(manifests, "location_column")
        location = stated if stated and stated in _columns(args.original) else None
    taxonomy = args.taxonomy
    if taxonomy is None:
        stated = _from_manifests(manifests, "taxonomy")
        if isinstance(stated, str) and stated.startswith(EMBEDDED):  # the shipped data's
            name = stated[len(EMBEDDED) :]
            stated = str(datasets.path(name)) if name in datasets.FILES else None
        taxonomy = stated if isinstance(stated, str) and Path(stated).exists() else None
    tax = Taxonomy.from_spec(taxonomy) if taxonomy else None
    universe = tax.leaves() if tax is not None else None
    args.location_column = location
    data, location, _ = mapped_input(args.original, input_map_from_args(args))
    original = load_sequences(
        data,
        location_column=location,
        taxonomy=tax if args.on_unknown == "drop" else None,
        on_unknown=args.on_unknown,
    )
    synthetic = {n: load_sequences(t) for n, t in tables.items()}
    if args.baseline:  # the truncated ceiling: what a release of this height could reach
        synthetic = {BASELINE: truncate_sequences(original, int(height)), **synthetic}
    ks = sorted({k for k in PAPER_KS if k <= args.top_k} | {args.top_k})
    results = evaluate_sequences(
        original,
        synthetic,
        universe=universe,
        height=int(height),
        n_queries=args.queries,
        ks=ks,
        seed=args.workload_seed,
    )
    timed = _trajectories(args, original, synthetic, int(height), manifests)
    return {**results, **({"trajectories": timed} if timed else {})}


def _trajectories(
    args: argparse.Namespace,
    original: pd.DataFrame,
    synthetic: dict[str, pd.DataFrame],
    height: int,
    manifests: Sequence[dict[str, Any] | None],
) -> dict[str, Any] | None:
    """The time statistics when the releases are timed (a bin from --time-bin or a manifest) and
    the original has times; else None."""
    width = (
        args.time_bin
        if args.time_bin is not None
        else _from_manifests(manifests, "time_bin_minutes")
    )
    if width is None:
        return None
    if not 1 <= int(width) <= 1440:
        raise ConfigError(f"--time-bin must be minutes in 1..1440, got {width}")
    if "time" not in original.columns:
        if args.time_bin is None:  # the counts and patterns are still measured
            return None
        raise InputError(f"{args.original}: --time-bin: the original has no times")
    if not any("time" in f.columns for f in synthetic.values()):
        return None
    return evaluate_trajectories(original, synthetic, height=height, bin_minutes=int(width))


def _evaluate_trips(
    args: argparse.Namespace, tables: dict[str, Path], manifests: Sequence[dict[str, Any] | None]
) -> dict[str, Any]:
    id_column = args.id_column or _from_manifests(manifests, "id_column") or "card_id"
    time_column = args.time_column or _from_manifests(manifests, "order_column") or "on_time"
    ids = {id_column: str}
    original = read_original_trips(args, id_column)  # as the trips command read it
    synthetic = {n: read_table(t, dtype=ids) for n, t in tables.items()}
    destination = args.destination_column
    return trip_decoding(args) | evaluate_trips(
        original,
        synthetic,
        id_column=id_column,
        time_column=time_column,
        origin=args.origin_column,
        destination=None if destination.lower() == "none" else destination,
        exclude=[c.strip() for c in args.exclude.split(",") if c.strip()],
        seed=args.workload_seed,
    )


def run(args: argparse.Namespace) -> int:
    """Evaluate, write the JSON and the HTML report, print the summary."""
    if args.out:
        check_outside_releases(args.out)
    releases = [_release(a, args.kind) for a in args.synthetic]
    kind = _resolve_kind(args, [r[3] for r in releases])
    names: list[str] = []
    for name, *_ in releases:
        names.append(name if name not in names else f"{name}#{len(names) + 1}")
    tables = {n: r[1] for n, r in zip(names, releases, strict=True)}
    manifest_list = [r[2] for r in releases]
    evaluate = _evaluate_sequences if kind == "sequences" else _evaluate_trips  # --kind's choices
    results = evaluate(args, tables, manifest_list)
    results = {
        "notice": INTERNAL_NOTICE,
        **results,
        "inputs": {"original": str(args.original), **{n: str(t) for n, t in tables.items()}},
    }
    manifests = {n: m for n, m in zip(names, manifest_list, strict=True) if m is not None}
    out = Path(args.out) if args.out else default_evaluation_dir(args.synthetic[0])
    check_outside_releases(out)
    with release_dir(out) as stage:
        text = json.dumps(results, indent=2)  # the notice is its first key
        (stage / RESULTS_FILE).write_text(text + "\n", encoding="utf-8")
        write_report(results, stage / REPORT_FILE, manifests=manifests, notice=INTERNAL_NOTICE)
        if kind == "trips":  # --decode: the synthetic trips in the user's own columns
            decoded_files(args, tables, stage, args.id_column)
    if not args.quiet:
        for line in _summary(results):  # measured against the original: the holder's
            shown = private_message(line)
            if shown is not None:
                print(shown)
        print(f"wrote {out / RESULTS_FILE} and {out / REPORT_FILE} (internal: do not publish)")
    return 0
