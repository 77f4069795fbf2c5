"""``transit-synth sequences``: a differentially private release of passenger sequences.

The hybrid-granularity noisy prefix tree of Chen et al. 2012 (KDD).

``transit-synth sequences INPUT --taxonomy TAX --epsilon E --height H --out DIR
[--preset auto|kdd12] [--max-nodes N] [--variant hybrid|simple] [--location-column COL]
[--time-bin MINUTES] [--format csv|parquet] [--locations FILE] [--on-unknown error|drop]
[--seed N] [--quiet] [--engine memory|duckdb|spark [--engine-temp-dir DIR]
[--engine-memory-limit SIZE] [--spark-master URL]]``

INPUT holds taps or long-format sequences (one sequence per card); TAX is a CSV edge list
(child,parent), a GTFS zip, or ``fanout:N`` over the public location list given with ``--locations``
(never read off the private data). DIR receives ``sequences.csv`` (or ``.parquet``) and
``manifest.json``, atomically.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from prefixtree.presets import PRESETS
from prefixtree.synthesizer import (
    COMPLETIONS,
    DEFAULT_MAX_NODES,
    MAX_HEIGHT,
    THRESHOLD_RULES,
    VARIANTS,
    PrefixTreeSynthesizer,
)
from synth.cli import (
    add_engine_options,
    add_quiet_option,
    add_seed_option,
    engine_params,
    warn_if_seeded,
    warn_if_underspent,
)
from synth.errors import ConfigError, InputError
from synth.io import read_table, release_dir, table_format
from synth.progress import Progress
from synth.provenance import (
    add_provenance_option,
    private_inputs,
    provenance_key,
    write_provenance,
)
from synth.records import load_sequences
from synth.taxonomy import Taxonomy, taxonomy_note
from synth.times import add_timezone_option, check_timezone

__all__ = ["read_locations", "register", "release_sequences", "run", "write_release"]


def read_locations(path: str) -> list[str]:
    """A public location list: a CSV/Parquet table (column ``location``, else the first column) or
    a text file with one location per line."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: file not found")
    if table_format(p) is not None:
        df = read_table(p, dtype={c: str for c in ("location",)})
        col = "location" if "location" in df.columns else df.columns[0]
        values = df[col].dropna().astype(str).str.strip().tolist()
    else:
        try:
            values = [line.strip() for line in p.read_text(encoding="utf-8").splitlines()]
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{p}: cannot read the location list (UTF-8 text): {exc}") from None
    out = [v for v in dict.fromkeys(values) if v]
    if not out:
        raise InputError(f"{p}: the location list is empty")
    return out


def write_release(frames: pd.DataFrame | Iterable[pd.DataFrame], path: Path) -> int:
    """Write the released long-format frame, or its chunks in order (e.g.
    :meth:`~prefixtree.PrefixTreeSynthesizer.iter_sample`), as CSV or Parquet (chosen by
    ``path``'s suffix), one chunk at a time; returns the number of rows written. The chunks must
    share their columns and dtypes; the file is the same as for their concatenation.
    """
    chunks = [frames] if isinstance(frames, pd.DataFrame) else frames
    parquet = path.suffix == ".parquet"
    writer: pq.ParquetWriter | pacsv.CSVWriter | None = None
    rows = 0
    try:
        for frame in chunks:
            table = pa.Table.from_pandas(frame, preserve_index=False)
            if not parquet:  # categorical columns stay dictionary-encoded in Parquet only
                columns = [
                    col.dictionary_decode() if pa.types.is_dictionary(col.type) else col
                    for col in (c.combine_chunks() for c in table.columns)
                ]
                table = pa.table(columns, names=table.column_names)
            if writer is None:
                writer = (
                    pq.ParquetWriter(path, table.schema, compression="zstd")
                    if parquet
                    else pacsv.CSVWriter(path, table.schema)
                )
            writer.write_table(table)
            rows += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        raise ValueError("write_release: no frame to write")
    return rows


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sequences`` subcommand."""
    p = subparsers.add_parser(
        "sequences",
        help="DP synthetic passenger sequences (noisy prefix tree, Chen et al. 2012)",
        description="\n\n".join(__doc__.split("\n\n")[:2]) if __doc__ else None,
    )
    p.add_argument("input", metavar="INPUT", help="taps or long-format sequences (CSV or Parquet)")
    p.add_argument(
        "--taxonomy",
        required=True,
        metavar="TAX",
        help="location taxonomy: CSV edge list (child,parent), GTFS zip, or fanout:N",
    )
    p.add_argument("--epsilon", required=True, type=float, metavar="E", help="privacy budget")
    p.add_argument(
        "--height",
        required=True,
        type=int,
        metavar="H",
        help=f"prefix tree height (1..{MAX_HEIGHT}): sequences are truncated to H locations",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="release directory")
    p.add_argument(
        "--preset",
        choices=PRESETS,
        default="auto",
        help="auto (default): every tuning value below computed from public facts (epsilon, H, "
        "the taxonomy); kdd12: Chen et al. 2012's settings. Explicit flags override either",
    )
    p.add_argument(
        "--variant",
        choices=VARIANTS,
        default=None,
        help="tree variant (default: the preset's; auto uses hybrid only when a generalized "
        "level pays for itself)",
    )
    p.add_argument(
        "--max-nodes",
        type=int,
        default=DEFAULT_MAX_NODES,
        metavar="N",
        help="refuse, before reading the data, a tree expected to exceed N nodes (about 400 "
        "bytes each), and stop one that grows past it (auto tightens its thresholds instead; "
        f"default {DEFAULT_MAX_NODES})",
    )
    p.add_argument(
        "--location-column",
        default=None,
        metavar="COL",
        help="input column holding the locations (default: location, or stop_id for taps)",
    )
    p.add_argument(
        "--time-bin",
        type=int,
        default=None,
        metavar="MINUTES",
        help="release trajectories: (location, time bin) nodes with bins of this many minutes",
    )
    p.add_argument(
        "--coarse-time-bin",
        type=int,
        default=None,
        metavar="MINUTES",
        help="with --time-bin and the hybrid variant: the generalized sub-levels count coarser "
        "bins of this many minutes (a multiple of --time-bin), refined at the locations",
    )
    p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="output format")
    p.add_argument(
        "--threshold-rule",
        choices=THRESHOLD_RULES,
        default=None,
        help="pass thresholds: the paper's 2*sqrt(2)/eps, or bounded expected empty children "
        "per node from the public number of candidates (see --false-children; auto's)",
    )
    p.add_argument(
        "--false-children",
        type=float,
        nargs="+",
        default=None,
        metavar="N",
        help="with --threshold-rule candidates: expected empty children passing per node, "
        "in (0, 1]: one number, or one per tree level (auto: 0.5 scaled by the level weights)",
    )
    p.add_argument(
        "--completion",
        choices=COMPLETIONS,
        default=None,
        help="sequences that went on below a node through pruned children: released as ending "
        "there (none, the paper) or continued by a Markov chain of the noisy tree (markov; adds "
        "an end-of-sequence cell per node, same budget; auto: markov)",
    )
    p.add_argument(
        "--root-share",
        type=float,
        default=None,
        metavar="S",
        help="with --completion markov: share of epsilon for a noisy count of sequences, so the "
        "released volume matches it (auto: 0.02; 0 = none)",
    )
    p.add_argument(
        "--level-weights",
        type=float,
        nargs="+",
        default=None,
        metavar="W",
        help="share of epsilon of each tree level, one weight per level (auto: 1, 1, then "
        "halving, floored at 0.02; kdd12: 1/H each)",
    )
    p.add_argument(
        "--locations",
        default=None,
        metavar="FILE",
        help="public list of locations (required by fanout:N taxonomies)",
    )
    p.add_argument(
        "--on-unknown",
        choices=("error", "drop"),
        default="error",
        help="input locations missing from the taxonomy: fail, or drop those rows",
    )
    p.add_argument(
        "--gtfs-stations",
        action="store_true",
        help="with a GTFS zip taxonomy: the parent stations are the locations (the taps name "
        "stations), not the platforms",
    )
    add_timezone_option(p)
    add_seed_option(p)
    add_quiet_option(p)
    add_engine_options(p)
    add_provenance_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load, fit, release; returns the exit status."""
    warn_if_seeded(args.seed)
    summary = release_sequences(
        args.input,
        args.out,
        taxonomy=str(args.taxonomy),
        params={
            "epsilon": args.epsilon,
            "height": args.height,
            "preset": args.preset,
            "variant": args.variant,
            "max_nodes": args.max_nodes,
            "root_share": args.root_share,
            "time_bins": args.time_bin,
            "coarse_time_bins": args.coarse_time_bin,
            "threshold_rule": args.threshold_rule,
            "false_children": (
                None
                if args.false_children is None
                else args.false_children[0]
                if len(args.false_children) == 1
                else args.false_children
            ),
            "completion": args.completion,
            "level_weights": args.level_weights,
            **engine_params(args),
        },
        location_column=args.location_column,
        locations=args.locations,
        on_unknown=args.on_unknown,
        gtfs_stations=args.gtfs_stations,
        format=args.format,
        seed=args.seed,
        progress=Progress(args.quiet),
        timezone=args.timezone,
        provenance_key=provenance_key(args.provenance_key_file),
    )
    if not args.quiet:
        print(summary, file=sys.stderr)
    return 0


def release_sequences(
    input: str | os.PathLike[str] | pd.DataFrame,
    out: str | os.PathLike[str],
    *,
    taxonomy: str,
    params: Mapping[str, Any],
    location_column: str | None = None,
    locations: str | os.PathLike[str] | None = None,
    on_unknown: str = "error",
    gtfs_stations: bool = False,
    format: str = "csv",
    seed: int | None = None,
    progress: Progress | None = None,
    source: str | os.PathLike[str] | None = None,
    timezone: str | None = None,
    provenance_key: bytes | None = None,
) -> str:
    """Write a prefix-tree release of ``input`` into ``out`` (atomically); returns a summary line.

    ``timezone``: how times are read (:mod:`synth.times`; default the wall clock as written).
    ``input`` is a file or a frame of taps or sequences (``source``: the file it came from, for
    the provenance record). With ``provenance_key``, the operator-only record of
    :mod:`synth.provenance` is written beside ``out`` (nothing about the private input goes into
    the manifest).
    ``taxonomy`` is a taxonomy spec (CSV edge list, GTFS zip or ``fanout:N`` with ``locations``);
    ``params`` are :class:`~prefixtree.PrefixTreeSynthesizer` keyword parameters other than
    ``taxonomy`` and ``random_state`` (``seed``); ``gtfs_stations``: a GTFS taxonomy's parent
    stations as the locations. What ``transit-synth sequences`` and
    ``transit-synth run`` both call.
    """
    started = time.perf_counter()
    progress = Progress(quiet=True) if progress is None else progress
    spec = str(taxonomy)
    is_fanout = spec.strip().lower().startswith("fanout:")
    if locations is not None and not is_fanout:
        raise ConfigError("--locations is only used with a fanout:N taxonomy")
    public = read_locations(str(locations)) if locations is not None else None
    if format not in ("csv", "parquet"):
        raise ConfigError(f"format must be 'csv' or 'parquet', got {format!r}")
    recorded = source if source is not None else input
    provenance = (
        None if provenance_key is None else private_inputs(provenance_key, {"input": recorded})
    )
    with progress.steps("sequences", 4) as step:
        step("taxonomy")
        tax = Taxonomy.from_spec(spec, locations=public, use_stations=gtfs_stations)
        synth = PrefixTreeSynthesizer(**params, taxonomy=tax, random_state=seed)
        synth.check_params()  # fail on bad parameters before reading the data
        check_timezone(timezone)
        step("load")
        if synth.engine != "memory" and not isinstance(input, pd.DataFrame) and timezone is None:
            seqs: pd.DataFrame | str | os.PathLike[str] = input  # the engine reads the file
        else:
            seqs = load_sequences(
                input,
                taxonomy=tax,
                on_unknown=on_unknown,
                location_column=location_column,
                timezone=timezone,
            )
        step("fit")
        with progress.counter("tree levels", unit="level") as levels:
            synth.set_params(
                progress=levels,
                on_unknown=on_unknown,
                location_column=location_column,
                timezone=timezone,
            )
            synth.fit(seqs)
        del seqs  # the input is not needed for the release
        step("release")
        public_inputs = {"taxonomy": spec} if Path(spec).exists() else {}
        if locations is not None:
            public_inputs["locations"] = str(locations)
        parameters = {
            **synth.parameters(),
            "taxonomy": spec,
            "location_column": location_column,
            "on_unknown": on_unknown,
            **({"gtfs_stations": True} if gtfs_stations else {}),
            **taxonomy_note(tax),
            "timezone": timezone or "wall clock as written",
        }
        name = f"sequences.{format}"
        written = {"sequences": 0}

        def counted(chunks: Iterable[pd.DataFrame]) -> Iterable[pd.DataFrame]:
            for chunk in chunks:  # whole sequences per chunk: the summary counts what is written
                written["sequences"] += int(chunk["seq_id"].nunique())
                yield chunk

        with release_dir(out) as stage:  # streamed chunk by chunk: never held whole
            n_rows = write_release(counted(synth.iter_sample()), stage / name)
            synth.ledger_.to_json(
                stage / "manifest.json", parameters=parameters, public_inputs=public_inputs
            )
    if provenance is not None:
        write_provenance(out, provenance, command="sequences")
    warn_if_underspent(synth.ledger_, str(out))
    return (
        f"sequences: {written['sequences']} synthetic sequences ({n_rows} rows) from a tree of "
        f"{len(synth.tree_)} nodes, epsilon {synth.ledger_.spent_epsilon:g} "
        f"-> {Path(out) / name} ({time.perf_counter() - started:.1f} s)"
    )
