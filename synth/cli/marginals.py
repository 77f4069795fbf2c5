"""``transit-synth marginals``: the Opal-style SBH marginal release (docs/design.md section 3).

``transit-synth marginals INPUT --epsilon E --delta D --out DIR [--consistent | --pure]
[--bin MINUTES]`` writes one file per table (:data:`synth.marginals.grid.TABLES`) and
``manifest.json`` into DIR, atomically.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from synth.cli.inputmap import add_input_map_options, input_map_from_args, mapped_input
from synth.cli.options import (
    add_bounding_option,
    add_engine_options,
    add_gtfs_route_rule_option,
    add_names_option,
    add_provenance_option,
    add_quiet_option,
    add_seed_option,
    add_timezone_option,
    engine_params,
    warn_if_seeded,
)
from synth.errors import ConfigError
from synth.marginals.opal import Mode
from synth.marginals.release import release_marginals
from synth.progress import Progress
from synth.provenance import (
    provenance_key,
)


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
    p.add_argument(
        "--epsilon", type=float, required=True, help="epsilon per partition (row unit) or in all"
    )
    p.add_argument(
        "--delta", type=float, required=True, help="delta per partition (row unit) or in all"
    )
    p.add_argument("--out", required=True, metavar="DIR", help="release directory")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument(
        "--consistent",
        action="store_true",
        help="noise only the time x location tables; derive the one-way tables by summing",
    )
    kind.add_argument(
        "--pure",
        action="store_true",
        help="perturb every public-domain cell, zeros included (pure epsilon-DP; needs "
        "--taxonomy, --modes and --days)",
    )
    p.add_argument("--bin", type=int, default=15, metavar="MINUTES", help="time bin (default 15)")
    p.add_argument("--taxonomy", metavar="TAX", help="location taxonomy: CSV edge list or GTFS zip")
    p.add_argument("--level", type=int, help="taxonomy level the locations are collapsed to")
    p.add_argument(
        "--location-column",
        default=None,
        metavar="COL",
        help="location column of taps (default stop_id; e.g. id_linea for SUBE lines)",
    )
    p.add_argument(
        "--on-unknown",
        choices=("error", "drop"),
        default="error",
        help="with --taxonomy: locations missing from it fail the release, or their events are "
        "dropped",
    )
    p.add_argument(
        "--gtfs-stations",
        action="store_true",
        help="with a GTFS zip --taxonomy: the parent stations are the locations, not the platforms",
    )
    add_gtfs_route_rule_option(p)
    p.add_argument("--modes", help="public comma-separated list of modes (the partition domain)")
    p.add_argument("--days", help="public comma-separated ISO dates, or FIRST:LAST (inclusive)")
    p.add_argument(
        "--privacy-unit",
        metavar="COLUMN",
        help="protect whole cards: the card column (default: one trip or tap, as in Opal)",
    )
    p.add_argument(
        "--max-contributions",
        type=int,
        default=1,
        metavar="K",
        help="with --privacy-unit: events kept per card and side over all partitions (default 1)",
    )
    add_bounding_option(p)
    p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="table file format")
    add_input_map_options(p)
    add_timezone_option(p)
    add_seed_option(p)
    add_quiet_option(p)
    add_engine_options(p)
    add_provenance_option(p)
    add_names_option(p)
    p.set_defaults(func=run)


def _days(spec: str) -> list[str]:
    """``a,b,c`` or ``FIRST:LAST`` (inclusive) as ISO dates."""
    try:
        if ":" in spec:
            first, last = spec.split(":", 1)
            return [str(d.date()) for d in pd.date_range(first.strip(), last.strip(), freq="D")]
        return [str(pd.Timestamp(d.strip()).date()) for d in spec.split(",") if d.strip()]
    except ValueError:
        raise ConfigError(f"--days {spec!r}: expected ISO dates 'a,b' or 'FIRST:LAST'") from None


def run(args: argparse.Namespace) -> int:
    """Fit the release and write it."""
    warn_if_seeded(args.seed)
    mode: Mode = "consistent" if args.consistent else "pure" if args.pure else "sbh"
    imap = input_map_from_args(args)
    data, location_column, columns = mapped_input(
        args.input, imap, time_bin=args.bin, bin_flag="--bin"
    )
    unit = args.privacy_unit
    if unit is not None and isinstance(data, pd.DataFrame) and unit == imap.card_column:
        unit = "card_id"  # the mapped card column is read as card_id
    summary = release_marginals(
        data,
        args.out,
        params={
            "epsilon": args.epsilon,
            "delta": args.delta,
            "mode": mode,
            "bin_minutes": args.bin,
            "level": args.level,
            "modes": None if args.modes is None else [m.strip() for m in args.modes.split(",")],
            "days": None if args.days is None else _days(args.days),
            "privacy_unit": unit,
            "max_contributions": args.max_contributions,
            "bounding": args.bounding,
            "on_unknown": args.on_unknown,
            "timezone": args.timezone,
            **engine_params(args),
        },
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
