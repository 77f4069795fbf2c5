"""Fit the Opal-style SBH marginal release on private data and write its release directory (the
library side of ``transit-synth marginals``, ``run`` and ``demo``)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any, Literal

import pandas as pd

from synth.datasheet import check_public_names
from synth.errors import ConfigError, TransitSynthWarning
from synth.logs import private_message
from synth.marginals.grid import TABLES
from synth.marginals.opal import OpalMarginals
from synth.progress import Progress
from synth.provenance import input_provenance, write_provenance
from synth.records.mapped_source import MappedSource
from synth.release import check_format, warn_if_underspent
from synth.taxonomy import Taxonomy

__all__ = ["release_marginals", "warn_if_few_locations"]


def warn_if_few_locations(release: OpalMarginals, where: str) -> None:
    """Warn when the released location tables keep fewer than half of the locations (the others'
    cells all fell under the SBH threshold: e.g. 6 of 382 SUBE lines at epsilon 1). The domain
    is the taxonomy's (public) or, without one, the input's: the warning goes to the operator's
    terminal only, never into the release."""
    domain = len(release.grid_.locations)
    kept = set()
    for name in ("on_location", "off_location"):
        table = release.tables_[name]
        kept |= set(table.loc[table["count"] > 0, "location"].astype(str))
    text = private_message(
        f"{where}: the release keeps {len(kept)} of {domain} locations; the others' counts "
        "fell under the stability threshold and were suppressed (raise --epsilon, use "
        "coarser --bin, or collapse the locations with --taxonomy and --level)"
    )
    if domain >= 4 and len(kept) < domain / 2 and text is not None:
        warnings.warn(text, TransitSynthWarning, stacklevel=2)


def release_marginals(
    input: str | os.PathLike[str] | pd.DataFrame | MappedSource,
    out: str | os.PathLike[str],
    *,
    params: Mapping[str, Any],
    taxonomy: str | None = None,
    gtfs_stations: bool = False,
    gtfs_route_rule: str | None = None,
    location_column: str = "stop_id",
    format: Literal["csv", "parquet"] = "csv",
    seed: int | None = None,
    progress: Progress | None = None,
    source: str | os.PathLike[str] | None = None,
    provenance_key: bytes | None = None,
    names: str | os.PathLike[str] | None = None,
    location_names: bool = False,
) -> str:
    """Fit an :class:`~synth.marginals.opal.OpalMarginals` on ``input`` and write it into ``out``
    atomically; returns a summary line. ``input`` is a file or a frame of trips or taps, or a
    :class:`~synth.records.mapped_source.MappedSource` (read by ``fit``; ``source``:
    the file it came from, for the operator-only provenance record written beside ``out`` with
    ``provenance_key``, :mod:`synth.provenance`); ``params`` are the release's keyword parameters
    other than ``taxonomy`` (a spec here; ``gtfs_stations``: a GTFS zip's parent stations as its
    leaves; ``gtfs_route_rule``: the route of a GTFS stop on several routes,
    :data:`synth.gtfs.ROUTE_RULES`) and ``random_state`` (``seed``). What ``transit-synth
    marginals`` and ``transit-synth run`` both call.
    """
    progress = Progress(quiet=True) if progress is None else progress
    check_format(format)
    check_public_names(names, location_names, taxonomy)  # before the data is read
    provenance = input_provenance(provenance_key, source if source is not None else input)
    with progress.steps("marginals", 3) as step:
        step("taxonomy")
        if (gtfs_stations or gtfs_route_rule is not None) and taxonomy is None:
            flag = "--gtfs-stations" if gtfs_stations else "--gtfs-route-rule"
            raise ConfigError(f"{flag} needs a GTFS zip --taxonomy")
        tax = (
            None
            if taxonomy is None
            else Taxonomy.from_spec(
                taxonomy, use_stations=gtfs_stations, route_rule=gtfs_route_rule
            )
        )
        release = OpalMarginals(
            **params, taxonomy=tax, random_state=seed, location_column=location_column
        )
        # fit alone checks the parameters, then reads: a file (the engine out of core when it
        # can, else load_input) or a frame, loaded as a taps or trips table (a MappedSource)
        data = MappedSource(input) if isinstance(input, pd.DataFrame) else input
        step("fit")
        release.fit(data)
        step("write")
        inputs = None if names is None else {"names": names}  # the datasheet's location names
        written = release.write(
            out, format=format, public_inputs=inputs, location_names=location_names
        ).path
    if provenance is not None:
        write_provenance(out, provenance, command="marginals")
    warn_if_underspent(release.ledger_, str(out))
    warn_if_few_locations(release, str(out))
    cells = sum(len(release.tables_[t]) for t in TABLES)
    return (
        f"marginals ({release.mode}): {cells} cells in {len(TABLES)} tables, epsilon "
        f"{release.ledger_.spent_epsilon:g}, delta {release.ledger_.spent_delta:g} "
        f"{'per partition' if release.privacy_unit is None else 'in all'} -> {written}"
    )
