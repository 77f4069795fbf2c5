"""``transit-synth marginals``: the Opal-style SBH marginal release (design.md section 3).

``transit-synth marginals INPUT --epsilon E --delta D --out DIR [--consistent | --pure]
[--bin MINUTES]`` writes one file per table (:data:`synth.sbh.TABLES`) and ``manifest.json``
into DIR, atomically.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from synth.cli import (
    add_engine_options,
    add_quiet_option,
    add_seed_option,
    engine_params,
    warn_if_seeded,
    warn_if_underspent,
)
from synth.errors import ConfigError
from synth.marginals import TABLES, Mode, OpalRelease
from synth.marginals import load_input as _load
from synth.progress import Progress
from synth.provenance import (
    add_provenance_option,
    private_inputs,
    provenance_key,
    write_provenance,
)
from synth.taxonomy import Taxonomy
from synth.times import add_timezone_option


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
        default="stop_id",
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
    p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="table file format")
    add_timezone_option(p)
    add_seed_option(p)
    add_quiet_option(p)
    add_engine_options(p)
    add_provenance_option(p)
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
    summary = release_marginals(
        args.input,
        args.out,
        params={
            "epsilon": args.epsilon,
            "delta": args.delta,
            "mode": mode,
            "bin_minutes": args.bin,
            "level": args.level,
            "modes": None if args.modes is None else [m.strip() for m in args.modes.split(",")],
            "days": None if args.days is None else _days(args.days),
            "privacy_unit": args.privacy_unit,
            "max_contributions": args.max_contributions,
            "on_unknown": args.on_unknown,
            "timezone": args.timezone,
            **engine_params(args),
        },
        taxonomy=args.taxonomy,
        gtfs_stations=args.gtfs_stations,
        location_column=args.location_column,
        format=args.format,
        seed=args.seed,
        progress=Progress(args.quiet),
        provenance_key=provenance_key(args.provenance_key_file),
    )
    if not args.quiet:
        print(summary, file=sys.stderr)
    return 0


def _warn_if_few_locations(release: OpalRelease, where: str) -> None:
    """Warn when the released location tables keep fewer than half of the locations (the others'
    cells all fell under the SBH threshold: e.g. 6 of 382 SUBE lines at epsilon 1). The domain
    is the taxonomy's (public) or, without one, the input's: the warning goes to the operator's
    terminal only, never into the release."""
    domain = len(release.grid_.locations)
    kept = set()
    for name in ("on_location", "off_location"):
        table = release.tables_[name]
        kept |= set(table.loc[table["count"] > 0, "location"].astype(str))
    if domain >= 4 and len(kept) < domain / 2:
        warnings.warn(
            f"{where}: the release keeps {len(kept)} of {domain} locations; the others' counts "
            "fell under the stability threshold and were suppressed (raise --epsilon, use "
            "coarser --bin, or collapse the locations with --taxonomy and --level)",
            UserWarning,
            stacklevel=2,
        )


def release_marginals(
    input: str | os.PathLike[str] | pd.DataFrame,
    out: str | os.PathLike[str],
    *,
    params: Mapping[str, Any],
    taxonomy: str | None = None,
    gtfs_stations: bool = False,
    location_column: str = "stop_id",
    format: Literal["csv", "parquet"] = "csv",
    seed: int | None = None,
    progress: Progress | None = None,
    source: str | os.PathLike[str] | None = None,
    provenance_key: bytes | None = None,
) -> str:
    """Fit an :class:`~synth.sbh.OpalRelease` on ``input`` and write it into ``out`` atomically;
    returns a summary line. ``input`` is a file or a frame of trips or taps (``source``: the file
    it came from, for the operator-only provenance record written beside ``out`` with
    ``provenance_key``, :mod:`synth.provenance`); ``params`` are the release's keyword parameters
    other than ``taxonomy`` (a spec here; ``gtfs_stations``: a GTFS zip's parent stations as its
    leaves) and ``random_state`` (``seed``). What ``transit-synth
    marginals`` and ``transit-synth run`` both call.
    """
    progress = Progress(quiet=True) if progress is None else progress
    recorded = source if source is not None else input
    provenance = (
        None if provenance_key is None else private_inputs(provenance_key, {"input": recorded})
    )
    with progress.steps("marginals", 3) as step:
        step("load")
        if gtfs_stations and taxonomy is None:
            raise ConfigError("--gtfs-stations needs a GTFS zip --taxonomy")
        tax = None if taxonomy is None else Taxonomy.from_spec(taxonomy, use_stations=gtfs_stations)
        release = OpalRelease(
            **params, taxonomy=tax, random_state=seed, location_column=location_column
        )
        release._check()  # fail on bad parameters before reading the data
        data: pd.DataFrame | str | os.PathLike[str]
        if release.engine != "memory" and not isinstance(input, pd.DataFrame):
            data = input  # the engine reads the file (out of core when it can)
        else:
            data = _load(
                input if isinstance(input, pd.DataFrame) else Path(input),
                location_column,
                release.timezone,
            )
        step("fit")
        release.fit(data)
        step("write")
        public = {} if taxonomy is None or not Path(taxonomy).exists() else {"taxonomy": taxonomy}
        written = release.save(out, format=format, public_inputs=public)
    if provenance is not None:
        write_provenance(out, provenance, command="marginals")
    warn_if_underspent(release.ledger_, str(out))
    _warn_if_few_locations(release, str(out))
    cells = sum(len(release.tables_[t]) for t in TABLES)
    return (
        f"marginals ({release.mode}): {cells} cells in {len(TABLES)} tables, epsilon "
        f"{release.ledger_.spent_epsilon:g}, delta {release.ledger_.spent_delta:g} "
        f"{'per partition' if release.privacy_unit is None else 'in all'} -> {written}"
    )
