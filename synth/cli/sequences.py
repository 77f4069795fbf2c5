"""``transit-synth sequences``: a differentially private release of passenger sequences.

The hybrid-granularity noisy prefix tree of Chen et al. 2012 (KDD).

``transit-synth sequences INPUT --taxonomy TAX --epsilon E --height H --out DIR
[--preset auto|kdd12] [--max-nodes N] [--variant hybrid|simple] [--budget-split L=S,...]
[--location-column COL] [--time-bin MINUTES [--time-model auto|factorised|tree]] [--length-share S]
[--format csv|parquet] [--locations FILE]
[--on-unknown error|drop] [--seed N] [--quiet] [--engine memory|duckdb|spark [--engine-temp-dir DIR]
[--engine-memory-limit SIZE] [--spark-master URL]]``

INPUT holds taps or long-format sequences (one sequence per card); TAX is a CSV edge list
(child,parent), a GTFS zip, or ``fanout:N`` over the public location list given with ``--locations``
(never read off the private data). DIR receives ``sequences.csv`` (or ``.parquet``) and
``manifest.json``, atomically.
"""

from __future__ import annotations

import argparse
import sys

from prefixtree.params import PARAMS
from prefixtree.release import release_sequences
from synth.cli.inputmap import add_input_map_options, input_map_from_args, mapped_input
from synth.cli.options import (
    add_engine_options,
    add_gtfs_route_rule_option,
    add_names_option,
    add_provenance_option,
    add_quiet_option,
    add_seed_option,
    engine_options,
    warn_if_seeded,
)
from synth.cli.params import add_param_flags, params_from_args
from synth.progress import Progress
from synth.provenance import provenance_key

__all__ = ["register", "run"]


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
    p.add_argument("--out", required=True, metavar="DIR", help="release directory")
    # the constructor's parameters: one flag each, from the table (prefixtree.params)
    add_param_flags(p, PARAMS, skip=("engine",), required=("epsilon", "height"))
    _input_options(p)
    add_input_map_options(p)
    add_seed_option(p)
    add_quiet_option(p)
    add_engine_options(p, PARAMS)
    add_provenance_option(p)
    add_names_option(p)
    p.set_defaults(func=run)


def _input_options(p: argparse.ArgumentParser) -> None:
    """How the input is read and the release written."""
    p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="output format")
    p.add_argument(
        "--locations",
        default=None,
        metavar="FILE",
        help="public list of locations (required by fanout:N taxonomies)",
    )
    p.add_argument(
        "--gtfs-stations",
        action="store_true",
        help="with a GTFS zip taxonomy: the parent stations are the locations (the taps name "
        "stations), not the platforms",
    )
    add_gtfs_route_rule_option(p)


def run(args: argparse.Namespace) -> int:
    """Load, fit, release; returns the exit status."""
    warn_if_seeded(args.seed)
    params = params_from_args(args, PARAMS)
    # read by the release from its input (the config keys of a [sequences] table), not set here
    reading = {name: params.pop(name) for name in PARAMS.table_keys() if name in params}
    data, location_column, columns = mapped_input(
        args.input, input_map_from_args(args), time_bin=params.get("time_bin"), read=False
    )
    summary = release_sequences(
        data,
        args.out,
        taxonomy=str(args.taxonomy),
        params={**params, "engine_options": engine_options(args)},
        location_column=location_column,
        locations=args.locations,
        on_unknown=reading.get("on_unknown", "error"),
        gtfs_stations=args.gtfs_stations,
        gtfs_route_rule=args.gtfs_route_rule,
        format=args.format,
        seed=args.seed,
        progress=Progress(args.quiet),
        timezone=reading.get("timezone"),
        source=args.input,
        provenance_key=provenance_key(args.provenance_key_file),
        names=args.names,
        location_names=args.location_names,
    )
    if not args.quiet:
        if columns:
            print(columns, file=sys.stderr)
        print(summary, file=sys.stderr)
    return 0
