"""``transit-synth sequences``: a differentially private release of passenger sequences (KDD 2012).

``transit-synth sequences INPUT --taxonomy TAX --epsilon E --height H --out DIR
[--variant hybrid|simple] [--location-column COL] [--time-bin MINUTES] [--format csv|parquet]
[--locations FILE] [--on-unknown error|drop] [--seed N] [--quiet]``

INPUT holds taps or long-format sequences (one sequence per card); TAX is a CSV edge list
(child,parent), a GTFS zip, or ``fanout:N`` over the public location list given with ``--locations``
(never read off the private data). DIR receives ``sequences.csv`` (or ``.parquet``) and
``manifest.json``, atomically.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from prefixtree.synthesizer import VARIANTS, PrefixTreeSynthesizer
from synth.cli import add_quiet_option, add_seed_option, warn_if_seeded
from synth.errors import ConfigError, InputError
from synth.io import read_table, release_dir, table_format
from synth.records import load_sequences
from synth.taxonomy import Taxonomy

__all__ = ["read_locations", "register", "run", "write_release"]


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
        values = [line.strip() for line in p.read_text().splitlines()]
    out = [v for v in dict.fromkeys(values) if v]
    if not out:
        raise InputError(f"{p}: the location list is empty")
    return out


def write_release(frame: object, path: Path) -> None:
    """Write the released long-format frame as CSV or Parquet (chosen by ``path``'s suffix)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if path.suffix == ".parquet":  # categorical columns stay dictionary-encoded (read back as str)
        pq.write_table(table, path, compression="zstd")
        return
    columns = [
        col.dictionary_decode() if pa.types.is_dictionary(col.type) else col
        for col in (c.combine_chunks() for c in table.columns)
    ]
    pacsv.write_csv(pa.table(columns, names=table.column_names), path)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sequences`` subcommand."""
    p = subparsers.add_parser(
        "sequences",
        help="DP synthetic passenger sequences (hybrid-granularity noisy prefix tree, KDD 2012)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    p.add_argument("input", metavar="INPUT", help="taps or long-format sequences (CSV or Parquet)")
    p.add_argument(
        "--taxonomy",
        required=True,
        metavar="TAX",
        help="location taxonomy: CSV edge list (child,parent), GTFS zip, or fanout:N",
    )
    p.add_argument("--epsilon", required=True, type=float, metavar="E", help="privacy budget")
    p.add_argument("--height", required=True, type=int, metavar="H", help="prefix tree height")
    p.add_argument("--out", required=True, metavar="DIR", help="release directory")
    p.add_argument("--variant", choices=VARIANTS, default="hybrid", help="tree variant")
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
    p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="output format")
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
    add_seed_option(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load, fit, release; returns the exit status."""
    started = time.perf_counter()
    warn_if_seeded(args.seed)
    spec = str(args.taxonomy)
    is_fanout = spec.strip().lower().startswith("fanout:")
    if args.locations is not None and not is_fanout:
        raise ConfigError("--locations is only used with a fanout:N taxonomy")
    locations = read_locations(args.locations) if args.locations is not None else None
    taxonomy = Taxonomy.from_spec(spec, locations=locations)
    synth = PrefixTreeSynthesizer(
        epsilon=args.epsilon,
        height=args.height,
        taxonomy=taxonomy,
        variant=args.variant,
        time_bins=args.time_bin,
        random_state=args.seed,
    )
    synth.check_params()  # fail on bad parameters before reading the data
    seqs = load_sequences(
        args.input,
        taxonomy=taxonomy,
        on_unknown=args.on_unknown,
        location_column=args.location_column,
    )
    synth.fit(seqs)
    release = synth.sample()
    inputs = [args.input] + ([spec] if Path(spec).is_file() else [])
    if args.locations is not None:
        inputs.append(args.locations)
    parameters = {
        "generator": "prefixtree",
        "variant": args.variant,
        "epsilon": args.epsilon,
        "height": args.height,
        "taxonomy": spec,
        "location_column": args.location_column,
        "time_bin_minutes": args.time_bin,
        "on_unknown": args.on_unknown,
        "seeded": args.seed is not None,
        "sub_levels": synth.sub_levels_.to_dict(orient="records"),
    }
    name = f"sequences.{args.format}"
    with release_dir(args.out) as stage:
        write_release(release, stage / name)
        synth.ledger_.to_json(stage / "manifest.json", parameters=parameters, inputs=inputs)
    if not args.quiet:
        n_seq = int(release["seq_id"].nunique()) if len(release) else 0
        print(
            f"sequences: {n_seq} synthetic sequences ({len(release)} rows) from a tree of "
            f"{len(synth.tree_)} nodes, epsilon {synth.ledger_.spent_epsilon:g} "
            f"-> {Path(args.out) / name} ({time.perf_counter() - started:.1f} s)",
            file=sys.stderr,
        )
    return 0
