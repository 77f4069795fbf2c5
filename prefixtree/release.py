"""Fit a prefix tree on private data and write its release directory (the library side of
``transit-synth sequences``, ``run`` and ``demo``; Chen et al. 2012)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from prefixtree.synthesizer import PrefixTreeSynthesizer
from synth.datasheet import check_public_names
from synth.errors import ConfigError, InputError
from synth.io import read_table, table_format
from synth.progress import Progress
from synth.provenance import input_provenance, write_provenance
from synth.records.mapped_source import MappedSource
from synth.release import check_format, warn_if_underspent
from synth.taxonomy import Taxonomy

__all__ = ["read_locations", "release_sequences"]


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


def release_sequences(
    input: str | os.PathLike[str] | pd.DataFrame | MappedSource,
    out: str | os.PathLike[str],
    *,
    taxonomy: str,
    params: Mapping[str, Any],
    location_column: str | None = None,
    locations: str | os.PathLike[str] | None = None,
    on_unknown: str = "error",
    gtfs_stations: bool = False,
    gtfs_route_rule: str | None = None,
    format: str = "csv",
    seed: int | None = None,
    progress: Progress | None = None,
    source: str | os.PathLike[str] | None = None,
    timezone: str | None = None,
    provenance_key: bytes | None = None,
    names: str | os.PathLike[str] | None = None,
    location_names: bool = False,
) -> str:
    """Write a prefix-tree release of ``input`` into ``out`` (atomically); returns a summary line.

    ``timezone``: how times are read (:mod:`synth.times`; default the wall clock as written).
    ``input`` is a file or a frame of taps or sequences, or a
    :class:`~synth.records.mapped_source.MappedSource` (read by ``fit``; ``source``: the file
    it came from, for the provenance record). With ``provenance_key``, the operator-only record of
    :mod:`synth.provenance` is written beside ``out`` (nothing about the private input goes into
    the manifest).
    ``taxonomy`` is a taxonomy spec (CSV edge list, GTFS zip or ``fanout:N`` with ``locations``);
    ``params`` are :class:`~prefixtree.PrefixTreeSynthesizer` keyword parameters other than
    ``taxonomy`` and ``random_state`` (``seed``); ``gtfs_stations``, ``gtfs_route_rule``: see
    :meth:`~synth.taxonomy.Taxonomy.from_gtfs`. What ``sequences`` and ``run`` both call.
    """
    started = time.perf_counter()
    progress = Progress(quiet=True) if progress is None else progress
    spec = str(taxonomy)
    public = _public_locations(spec, locations)
    check_format(format)
    check_public_names(names, location_names, taxonomy)  # before the data is read
    provenance = input_provenance(provenance_key, source if source is not None else input)
    with progress.steps("sequences", 3) as step:
        step("taxonomy")
        tax = _taxonomy(spec, public, gtfs_stations, gtfs_route_rule)
        step("fit")  # fit alone validates, plans, reads the input (file or frame) and counts
        with progress.counter("tree levels", unit="level") as levels:
            synth = PrefixTreeSynthesizer(
                **params,
                taxonomy=tax,
                random_state=seed,
                on_unknown=on_unknown,
                location_column=location_column,
                timezone=timezone,
                progress=levels,
            )
            synth.fit(input)
        step("release")
        extra = {} if locations is None else {"locations": locations}
        extra.update({} if names is None else {"names": names})  # the datasheet's names
        written = synth.write(
            out, format=format, public_inputs=extra, location_names=location_names
        )
    if provenance is not None:
        write_provenance(out, provenance, command="sequences")
    warn_if_underspent(synth.ledger_, str(out))
    return (
        f"sequences: {written.counts['sequences']} synthetic sequences "
        f"({written.counts['rows']} rows) from a tree of {len(synth.tree_)} nodes, epsilon "
        f"{synth.ledger_.spent_epsilon:g} -> {Path(out) / f'sequences.{format}'} "
        f"({time.perf_counter() - started:.1f} s)"
    )


def _taxonomy(
    spec: str, public: list[str] | None, gtfs_stations: bool, gtfs_route_rule: str | None
) -> Taxonomy:
    """The taxonomy of ``spec`` (:meth:`~synth.taxonomy.Taxonomy.from_spec`)."""
    return Taxonomy.from_spec(
        spec, locations=public, use_stations=gtfs_stations, route_rule=gtfs_route_rule
    )


def _public_locations(spec: str, locations: str | os.PathLike[str] | None) -> list[str] | None:
    """The public location list of a ``fanout:N`` taxonomy (refused with any other taxonomy)."""
    if locations is not None and not spec.strip().lower().startswith("fanout:"):
        raise ConfigError("--locations is only used with a fanout:N taxonomy")
    return read_locations(str(locations)) if locations is not None else None
