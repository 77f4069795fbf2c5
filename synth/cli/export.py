"""``transit-synth export``: OD matrices and MATSim populations from a release directory.

``transit-synth export RELEASE_DIR --to od|matsim [--out DIR] [--stops FILE|GTFS.zip|montreal]
[--bin MINUTES] [--periods SPEC] [--taxonomy TAX] [--format csv|parquet]
[--crs auto|wgs84|EPSG:N] [--skip-unlocated] [--activity-types ENDS,MIDDLE]
[--sample-share S] [--id-column COL]
[--origin-column COL --destination-column COL | --location-column COL] [--time-column COL]
[--quiet]``

Writes ``DIR/od.csv`` (or ``.parquet``) and ``DIR/export-od.json`` (and, for a timed release,
``DIR/od-periods.csv``: the matrices per period of ``--periods``), or ``DIR/population.xml`` and
``DIR/export-matsim.json`` (and with ``--sample-share``, ``DIR/scaling-config.xml``), atomically
(``DIR`` defaults to RELEASE_DIR). The rules are in :mod:`synth.export` and
:mod:`synth.export.plans`.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from synth.cli.options import add_quiet_option
from synth.errors import TransitSynthWarning

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``export`` subcommand."""
    p = subparsers.add_parser(
        "export",
        help="OD matrices per time bin or MATSim population plans from a release",
        description="Export a release (sequences or trips) for simulation models: an OD matrix "
        "(origin, destination, bin, count) or a MATSim population v6 XML with activities at stop "
        "coordinates. Post-processing only: the release's privacy guarantee is unchanged.",
    )
    p.add_argument("release", metavar="RELEASE_DIR", help="a release directory (manifest.json)")
    p.add_argument("--to", required=True, choices=("od", "matsim"), help="what to export")
    p.add_argument(
        "--out", default=None, metavar="DIR", help="output directory (default: RELEASE_DIR)"
    )
    p.add_argument(
        "--stops",
        default=None,
        metavar="FILE",
        help="stop coordinates for --to matsim: a GTFS zip, 'montreal' (embedded metro) or a "
        "CSV/Parquet table stop_id,x,y (or stop_id,lat,lon)",
    )
    p.add_argument(
        "--bin",
        type=int,
        default=None,
        metavar="MINUTES",
        help="OD time bins (a multiple of the release's own bins; default: those bins, or 60)",
    )
    p.add_argument(
        "--periods",
        default=None,
        metavar="SPEC",
        help="OD periods of a timed release, written to od-periods.csv beside the per-bin "
        "od.csv: name=HH:MM-HH:MM,... tiling the day (default: early=00:00-06:00,"
        "am_peak=06:00-09:00,midday=09:00-16:00,pm_peak=16:00-19:00,evening=19:00-24:00)",
    )
    p.add_argument(
        "--taxonomy",
        default=None,
        metavar="TAX",
        help="MATSim leg modes from this taxonomy's mode:NAME level (default: the release's "
        "taxonomy when its file exists; else every leg is 'pt')",
    )
    p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="OD file format")
    p.add_argument(
        "--no-csv-escape",
        dest="csv_escape",
        action="store_false",
        help="OD CSV: keep cells starting with = + - @ as they are (by default they get a "
        "leading ' so that a spreadsheet shows them instead of running them as formulas)",
    )
    p.add_argument(
        "--crs",
        default="auto",
        help="auto (lat/lon projected to UTM), wgs84 (keep degrees), or the CRS of x/y in --stops",
    )
    _add_plan_options(p)
    p.add_argument("--id-column", default=None, metavar="COL", help="trips: the person id column")
    p.add_argument("--origin-column", default=None, metavar="COL", help="trips: origin column")
    p.add_argument(
        "--destination-column", default=None, metavar="COL", help="trips: destination column"
    )
    p.add_argument(
        "--location-column",
        default=None,
        metavar="COL",
        help="trips without destination: chain each person's trips through this column",
    )
    p.add_argument(
        "--time-column", default=None, metavar="COL", help="trips: departure time column"
    )
    add_quiet_option(p)
    p.set_defaults(func=run)


def _add_plan_options(p: argparse.ArgumentParser) -> None:
    """The MATSim plan options (the rules of :mod:`synth.export.plans`)."""
    p.add_argument(
        "--skip-unlocated",
        action="store_true",
        help="MATSim: leave places without coordinates in --stops out of the plans (a warning "
        "counts them) instead of failing",
    )
    p.add_argument(
        "--activity-types",
        default=None,
        metavar="TYPES",
        help="MATSim activity types: ENDS,MIDDLE (first and last activity of each plan, the "
        "others), FIRST,MIDDLE,LAST or one type for all (default: home,other)",
    )
    p.add_argument(
        "--sample-share",
        type=float,
        default=None,
        metavar="S",
        help="MATSim: the share (0 < S <= 1, public) of all travellers the release stands for; "
        "writes scaling-config.xml (qsim flowCapacityFactor and storageCapacityFactor = S, "
        "counts countsScaleFactor = 1/S) and the population attribute sampleShare (default: "
        "none written)",
    )


def run(args: argparse.Namespace) -> int:
    """Export; returns the exit status."""
    from synth.export import export_release

    info = export_release(
        args.release,
        to=args.to,
        out=args.out,
        stops=args.stops,
        bin_minutes=args.bin,
        fmt=args.format,
        crs=args.crs,
        csv_escape=args.csv_escape,
        periods=args.periods,
        taxonomy=args.taxonomy,
        skip_unlocated=args.skip_unlocated,
        activity_types=args.activity_types,
        sample_share=args.sample_share,
        id_column=args.id_column,
        origin_column=args.origin_column,
        destination_column=args.destination_column,
        location_column=args.location_column,
        time_column=args.time_column,
    )
    if info.get("synthetic_times"):
        warnings.warn(
            f"{args.release} has no times: every person's first activity ends at "
            f"{info['times'].removeprefix('defaults: first end ')} (made up, an artificial "
            "peak; export a release with times, e.g. sequences --time-bin, for real ones)",
            TransitSynthWarning,
            stacklevel=1,
        )
    if not args.quiet:
        where = args.out if args.out is not None else args.release
        legs = info.get("plan_legs", info["legs"])  # MATSim: after the rules of synth.export.plans
        persons = info.get("plan_persons", info["persons"])
        print(
            f"export: {legs} legs of {persons} persons ({info['kind']}) -> {where}/{info['file']}",
            file=sys.stderr,
        )
    return 0
