"""``transit-synth marginals``: the Opal-style SBH marginal release (design.md section 3).

``transit-synth marginals INPUT --epsilon E --delta D --out DIR [--consistent | --pure]
[--bin MINUTES]`` writes one file per table (:data:`synth.sbh.TABLES`) and ``manifest.json``
into DIR, atomically.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from synth.cli import add_quiet_option, add_seed_option, warn_if_seeded
from synth.errors import ConfigError
from synth.io import read_table, table_format
from synth.records import load_taps, load_trips
from synth.sbh import TABLES, Mode, OpalRelease
from synth.taxonomy import Taxonomy

_ID_COLUMNS = ("card_id", "on_stop", "off_stop", "mode")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``marginals`` subcommand."""
    p = subparsers.add_parser(
        "marginals",
        help="SBH marginal release (Opal style): six noisy tables per mode x day",
        description=(
            "Stability-based histogram release of the six Opal tables (tap-on/off time, location, "
            "time x location) per mode x day partition; --epsilon/--delta are per partition, split "
            "1,1,1,1,2,2 (epsilon) and equally (delta) over the tables."
        ),
    )
    p.add_argument("input", metavar="INPUT", help="trips or taps (CSV or Parquet)")
    p.add_argument("--epsilon", type=float, required=True, help="epsilon per partition")
    p.add_argument("--delta", type=float, required=True, help="delta per partition")
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
        default="stop_id",
        metavar="COL",
        help="location column of taps (default stop_id; e.g. id_linea for SUBE lines)",
    )
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
        help="with --privacy-unit: events kept per card, partition and side (default 1)",
    )
    p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="table file format")
    add_seed_option(p)
    add_quiet_option(p)
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


def _load(path: Path, location_column: str) -> pd.DataFrame:
    """Trips (an ``on_stop`` column) or taps, through :mod:`synth.records` (SUBE loads as is)."""
    if path.is_file() and table_format(path) == "parquet":
        import pyarrow.parquet as pq

        columns = set(pq.read_schema(path).names)
    elif path.is_file() and table_format(path) == "csv":
        columns = set(pd.read_csv(path, nrows=0).columns.str.strip())
    else:
        columns = set()  # load_taps names the problem (missing file, unsupported type)
    if "on_stop" in columns:
        trips = read_table(path, dtype={c: str for c in _ID_COLUMNS})
        return load_trips(trips, card_column="card_id" if "card_id" in columns else None)
    taps = load_taps(path, location_column=location_column)
    if location_column != "stop_id":
        taps = taps.drop(columns=["stop_id"], errors="ignore")
        taps = taps.rename(columns={location_column: "stop_id"})
    if "mode" not in taps and "modo" in taps:  # SUBE
        taps = taps.rename(columns={"modo": "mode"})
    return taps


def run(args: argparse.Namespace) -> int:
    """Fit the release and write it."""
    warn_if_seeded(args.seed)
    data = _load(Path(args.input), args.location_column)
    taxonomy = None if args.taxonomy is None else Taxonomy.from_spec(args.taxonomy)
    mode: Mode = "consistent" if args.consistent else "pure" if args.pure else "sbh"
    release = OpalRelease(
        epsilon=args.epsilon,
        delta=args.delta,
        mode=mode,
        bin_minutes=args.bin,
        taxonomy=taxonomy,
        level=args.level,
        modes=None if args.modes is None else [m.strip() for m in args.modes.split(",")],
        days=None if args.days is None else _days(args.days),
        privacy_unit=args.privacy_unit,
        max_contributions=args.max_contributions,
        random_state=args.seed,
    ).fit(data)
    out = release.save(args.out, format=args.format, inputs=[Path(args.input)])
    if not args.quiet:
        cells = sum(len(release.tables_[t]) for t in TABLES)
        print(
            f"marginals ({mode}): {cells} cells in {len(TABLES)} tables, epsilon "
            f"{release.ledger_.spent_epsilon:g}, delta {release.ledger_.spent_delta:g} "
            f"per partition -> {out}",
            file=sys.stderr,
        )
    return 0
