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
from synth.datasheet import read_names
from synth.errors import ConfigError, InputError
from synth.io import read_table, table_format
from synth.progress import Progress
from synth.provenance import private_inputs, write_provenance
from synth.records import load_sequences
from synth.release import check_format, warn_if_underspent
from synth.taxonomy import Taxonomy
from synth.times import check_timezone

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
    input: str | os.PathLike[str] | pd.DataFrame,
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
) -> str:
    """Write a prefix-tree release of ``input`` into ``out`` (atomically); returns a summary line.

    ``timezone``: how times are read (:mod:`synth.times`; default the wall clock as written).
    ``input`` is a file or a frame of taps or sequences (``source``: the file it came from, for
    the provenance record). With ``provenance_key``, the operator-only record of
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
    if names is not None:
        read_names(names)  # a bad names file fails before the data is read
    recorded = source if source is not None else input
    provenance = (
        None if provenance_key is None else private_inputs(provenance_key, {"input": recorded})
    )
    with progress.steps("sequences", 4) as step:
        step("taxonomy")
        tax = _taxonomy(spec, public, gtfs_stations, gtfs_route_rule)
        synth = PrefixTreeSynthesizer(**params, taxonomy=tax, random_state=seed)
        synth.check_params()  # fail on bad parameters before reading the data
        check_timezone(timezone)
        step("load")
        seqs = _input_for(synth, input, tax, on_unknown, location_column, timezone)
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
        extra = {} if locations is None else {"locations": locations}
        extra.update({} if names is None else {"names": names})  # the datasheet's names
        written = synth.write(out, format=format, public_inputs=extra)
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


def _input_for(
    synth: PrefixTreeSynthesizer,
    input: str | os.PathLike[str] | pd.DataFrame,
    tax: Taxonomy,
    on_unknown: str,
    location_column: str | None,
    timezone: str | None,
) -> pd.DataFrame | str | os.PathLike[str]:
    """What ``fit`` reads: the file itself when an out-of-core engine counts it, else the loaded
    sequences (the per-value rules of :mod:`synth.records`)."""
    if not isinstance(input, pd.DataFrame) and (
        (synth.engine != "memory" and timezone is None) or synth.input_format != "auto"
    ):
        return input  # fit reads it (an explicit input_format: as that layout)
    return load_sequences(
        input,
        taxonomy=tax,
        on_unknown=on_unknown,
        location_column=location_column,
        per_day=synth.per_day,
        timezone=timezone,
    )
