"""``transit-synth marginals``: the Opal-style SBH marginal release (docs/design.md section 3).

``transit-synth marginals INPUT --epsilon E --delta D --out DIR [--consistent | --pure]
[--bin MINUTES]`` writes one file per table (:data:`synth.marginals.grid.TABLES`) and
``manifest.json`` into DIR, atomically.
"""

from __future__ import annotations

import argparse
import sys

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
from synth.marginals.params import PARAMS
from synth.marginals.release import release_marginals
from synth.progress import Progress
from synth.provenance import (
    provenance_key,
)
from synth.records.mapped_source import MappedSource


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``marginals`` subcommand."""
    p = subparsers.add_parser(
        "marginals",
        help="SBH marginal tables per mode x day (Opal, Asghar et al. 2018)",
        description=(
            "Stability-based histogram release (Asghar et al. 2018, the Opal release) of the six "
            "tables (tap-on/off time, location, "
            "time x location) per mode x day partition; --epsilon/--delta are per partition for a "
            "row unit (parallel composition) and for the whole release with --privacy-unit, split "
            "1,1,1,1,2,2 (epsilon) and equally (delta) over the tables."
        ),
    )
    p.add_argument("input", metavar="INPUT", help="trips or taps (CSV or Parquet)")
    p.add_argument("--out", required=True, metavar="DIR", help="release directory")
    p.add_argument("--taxonomy", metavar="TAX", help="location taxonomy: CSV edge list or GTFS zip")
    p.add_argument(
        "--gtfs-stations",
        action="store_true",
        help="with a GTFS zip --taxonomy: the parent stations are the locations, not the platforms",
    )
    add_gtfs_route_rule_option(p)
    # the constructor's parameters: one flag each, from the table (synth.marginals.params)
    add_param_flags(p, PARAMS, skip=("engine",), required=("epsilon", "delta"))
    p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="table file format")
    add_input_map_options(p)
    add_seed_option(p)
    add_quiet_option(p)
    add_engine_options(p, PARAMS)
    add_provenance_option(p)
    add_names_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Fit the release and write it."""
    warn_if_seeded(args.seed)
    params = params_from_args(args, PARAMS)
    imap = input_map_from_args(args)
    data, location_column, columns = mapped_input(
        args.input, imap, time_bin=params.get("bin", 15), bin_flag="--bin", read=False
    )
    unit = params.get("privacy_unit")
    if unit is not None and isinstance(data, MappedSource) and unit == imap.card_column:
        params["privacy_unit"] = "card_id"  # the mapped card column is read as card_id
    params.pop("location_column", None)  # read by the input mapping above
    summary = release_marginals(
        data,
        args.out,
        params={**params, "engine_options": engine_options(args)},
        taxonomy=args.taxonomy,
        gtfs_stations=args.gtfs_stations,
        gtfs_route_rule=args.gtfs_route_rule,
        location_column=location_column or "stop_id",
        format=args.format,
        source=args.input,
        seed=args.seed,
        progress=Progress(args.quiet),
        provenance_key=provenance_key(args.provenance_key_file),
        names=args.names,
        location_names=args.location_names,
    )
    if not args.quiet:
        if columns:
            print(columns, file=sys.stderr)
        print(summary, file=sys.stderr)
    return 0
