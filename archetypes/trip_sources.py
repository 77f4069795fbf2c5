"""What :meth:`ArchetypeSynthesizer.fit <archetypes.synthesizer.ArchetypeSynthesizer.fit>` reads
(issue 27: ``fit`` is the only reader): trips as a DataFrame, a CSV/Parquet path, or a
:class:`TripSource` (a file and its public reading options: the layout, the years kept, the
delimiter and, for SUBE taps, the network metadata).

Every layout is read value by value (:mod:`archetypes.reading`, issue 25): plain trips by
:func:`~archetypes.reading.read_private_trips` / :func:`~archetypes.reading.read_public_trips`,
the Chicago taxi sample by :func:`~archetypes.datasets.chicago_taxi_trips` and SUBE taps by
:func:`~archetypes.datasets.sube_trips`. The Chicago and SUBE layouts also give public domains
(:func:`~archetypes.datasets.chicago_taxi_schema`, :func:`~archetypes.datasets.sube_schema`),
built from the PUBLIC trips (or published lists), never from the private ones; a schema given to
the estimator replaces their columns (:func:`read_trip_inputs`). SUBE's network metadata (a
source's ``metadata``) gives the line and branch domains and their group with public trips or
without; without either, the schema gives every SUBE domain.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from archetypes.datasets import chicago_taxi_schema, chicago_taxi_trips, sube_schema, sube_trips
from archetypes.reading import read_trips
from archetypes.schema import TripSchema
from synth.errors import ConfigError
from synth.io import check_sep

__all__ = [
    "ONE_ROW_PER_ID",
    "TRIP_FORMATS",
    "TripSource",
    "domain_hint",
    "fit_schema",
    "one_row_per_id",
    "read_trip_inputs",
    "sube_metadata",
]

#: the layouts a :class:`TripSource` may declare
TRIP_FORMATS = ("trips", "chicago-taxi", "sube-taps")

#: the layouts whose reader gives each row its own id (the Chicago sample has no taxi id: its
#: ``taxi_id`` is the row number), so that one individual is one row by construction
ONE_ROW_PER_ID = ("chicago-taxi",)

Trips = pd.DataFrame | str | os.PathLike[str]


@dataclass(frozen=True)
class TripSource:
    """A trips table (a path or a frame) and how to read it, all public configuration.

    ``format``: ``"trips"`` (one row per trip, the columns as named), ``"chicago-taxi"`` (the
    TFX Chicago taxi sample) or ``"sube-taps"`` (SUBE taps, one trip per boarding); ``years``:
    the Chicago trips' years kept (None: all; another layout: an error); ``sep``: the CSV
    delimiter (default comma);
    ``metadata``: for SUBE taps (private or public), the network metadata file whose lines
    and branches are the domains and whose mode -> line -> branch rows are a group, with public
    trips or without (:func:`sube_metadata`); another layout has no use for it (an error).
    Read only by ``fit``."""

    data: Trips
    format: str = "trips"
    years: Sequence[int] | None = None
    sep: str | None = None
    metadata: str | os.PathLike[str] | None = None


def one_row_per_id(data: Trips | TripSource) -> bool:
    """Whether ``data``'s layout (public configuration) gives every row its own id."""
    return isinstance(data, TripSource) and data.format in ONE_ROW_PER_ID


def domain_hint(data: Trips | TripSource, public: Trips | TripSource | None) -> str:
    """What else gives the domains :func:`fit_schema` misses (public configuration only): for
    SUBE taps without public trips nor network metadata, the metadata (with it the SUBE layout
    has every domain of its columns); else nothing."""
    sources = [s for s in (_source(data), _source(public)) if s is not None]
    if public is not None or sources[0].format != "sube-taps" or any(s.metadata for s in sources):
        return ""
    return (
        "; for SUBE taps, --metadata FILE (metadata in the [trips] table: the network metadata, "
        "metadata_amba_2019_m1.csv) gives the SUBE columns' domains"
    )


def _source(data: Trips | TripSource | None) -> TripSource | None:
    return data if data is None or isinstance(data, TripSource) else TripSource(data)


def _read(source: TripSource, what: str, id_column: str | None) -> pd.DataFrame:
    """One table of ``source`` (``what``: "private data" or "public data")."""
    sep = check_sep(source.sep)
    if source.format == "chicago-taxi":
        return chicago_taxi_trips(source.data, years=source.years, sep=sep)
    if source.format == "sube-taps":
        return sube_trips(source.data, sep=sep)
    return read_trips(source.data, what, id_column, sep=sep)


def read_trip_inputs(
    data: Trips | TripSource,
    public: Trips | TripSource | None,
    *,
    id_column: str | None,
    schema: TripSchema | str | Path | None,
) -> tuple[pd.DataFrame, pd.DataFrame | None, TripSchema]:
    """The private trips, the public trips (None without) and the public domains given: the
    layout's (plain trips: none), their columns replaced by those of ``schema`` (a
    :class:`TripSchema` or a JSON path, read here first). What ``fit`` reads, each input once;
    a private frame whose index repeats gets a fresh one (the rows as they are)."""
    private_source, public_source = _source(data), _source(public)
    assert private_source is not None
    formats = {s.format for s in (private_source, public_source) if s is not None}
    for fmt in sorted(formats):
        if fmt not in TRIP_FORMATS:
            raise ConfigError(f"input format must be one of {', '.join(TRIP_FORMATS)}, got {fmt!r}")
    if len(formats) > 1:
        raise ConfigError(f"the private and public trips have different formats: {formats}")
    given = _given_schema(schema)
    _check_years(private_source, public_source)  # both checked before any file is read
    meta = sube_metadata(private_source, public_source)
    private = _read(private_source, "private data", id_column)
    if not private.index.is_unique:  # rows are bounded by label downstream: one label, one row
        private = private.reset_index(drop=True)  # (a concatenated frame repeats its labels)
    trips = None if public_source is None else _read(public_source, "public data", id_column)
    fmt = private_source.format
    if fmt == "chicago-taxi":  # no public trips: the published company list (not the private)
        layout = chicago_taxi_schema(private.iloc[:0] if trips is None else trips)
        return private, trips, _with_given(layout, given)
    if fmt == "sube-taps" and (trips is not None or meta is not None):
        # the metadata's lines, branches and group, with public trips or without; with neither,
        # the schema gives every domain
        layout = sube_schema(trips, None if meta is None else Path(meta))
        return private, trips, _with_given(layout, given)
    return private, trips, given


def _check_years(private: TripSource, public: TripSource | None) -> None:
    """Years kept are a Chicago option: for another layout an error, not a silent no-op."""
    for source, key in ((private, "private_years"), (public, "public_years")):
        if source is not None and source.years is not None and source.format != "chicago-taxi":
            raise ConfigError(
                f"{key} (years of the Chicago taxi sample) is only for input format "
                f"'chicago-taxi', got {source.format!r}"
            )


def sube_metadata(private: TripSource, public: TripSource | None) -> str | os.PathLike[str] | None:
    """The SUBE network metadata the sources name (either may, the same file if both): public
    configuration, so a layout that has no use for it is an error, not a silent no-op."""
    given = {os.fspath(s.metadata) for s in (private, public) if s is not None and s.metadata}
    if not given:
        return None
    if private.format != "sube-taps":
        raise ConfigError(
            f"metadata (the SUBE network metadata) is only for input format 'sube-taps', "
            f"got {private.format!r}"
        )
    if len(given) > 1:
        raise ConfigError(f"the private and public trips name different metadata: {sorted(given)}")
    return given.pop()


def _with_given(layout: TripSchema, given: TripSchema) -> TripSchema:
    """The layout's domains with the given schema's columns winning, and its groups too when it
    has some (else the layout's: SUBE's public mode -> line -> branch list)."""
    return TripSchema({**layout.columns, **given.columns}, given.groups or layout.groups)


def _given_schema(given: TripSchema | str | Path | None) -> TripSchema:
    if isinstance(given, TripSchema):
        return given
    if isinstance(given, str | Path):
        return TripSchema.from_json(given)
    if given is None:
        return TripSchema()
    raise ConfigError(f"schema must be a TripSchema, a JSON path or None, got {given!r}")


def fit_schema(
    given: TripSchema,
    public: pd.DataFrame | None,
    used: list[str],
    *,
    id_column: str,
    category_column: str,
    hint: str = "",
) -> TripSchema:
    """The public domains of a fit: the ``given`` ones (:func:`read_trip_inputs`), and the used
    columns they lack get the values of the PUBLIC trips; without public trips a column without
    a domain is an error naming the schema entry to add (and ``hint``: :func:`domain_hint`)."""
    schema = given
    derived = [c for c in used if c in schema.coordinates()]
    if derived:
        raise ConfigError(
            f"column '{derived[0]}' is a coordinate read off '{schema[derived[0]].source}' (a "
            "clustering feature, never a modelled column): leave it out of key_columns, "
            "category_column and completion"
        )
    inferred = [c for c in used if c not in schema and c != id_column]
    if inferred and public is None:
        raise ConfigError(
            f"without public data every column needs a public domain in the schema: {inferred}; "
            f'add them to the --schema file (schema in the [trips] table): {{"schema": '
            f'{{"{inferred[0]}": {{"kind": "categorical", "values": [...]}}, ...}}}}{hint}'
        )
    if inferred and public is not None:
        schema = schema.replace(
            *TripSchema.from_public(public, categorical=inferred).columns.values()
        )
    if schema[category_column].kind != "categorical":
        raise ConfigError(f"category column '{category_column}' must be categorical")
    return schema
