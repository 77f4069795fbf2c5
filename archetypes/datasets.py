"""The two settings of the archetype synthesizer: Chicago taxi trips and SUBE transit cards.

**Chicago taxi** (TFX sample of the City of Chicago "Taxi Trips" data, mapped onto the NIST DeID2
sprint-3 schema): ``shift = 3 * day_of_week + hour // 8`` (21 eight-hour shifts of the week, Monday
0, our reading of the challenge's 0..20 shift), community areas with -1 for unknown, payment type
coded as in the challenge's ``parameters.json``, fare / tips / miles / seconds rounded to integers
with -1 for missing. The sample has NO taxi id, so each trip is its own individual (``taxi_id`` =
the row number in the source file): the privacy unit is then one trip, and the challenge's cap of
200 records per taxi is trivially met. No pseudo-id can be derived from public-only information.

**SUBE** (Buenos Aires smart-card taps): one trip per boarding tap (train CHECK OUT rows are
alightings and are dropped; taps without a card id cannot be attributed and are dropped), individual
= card (``card_id`` = ``id_tarjeta``), hour of day, mode, line and branch (as strings), fare product
(``id_tarifa``), stage in the SUBE network (``etapa_red_sube``) and a 0.05-degree grid zone of the
tap's rounded coordinates ("unknown" when missing); ``lat``/``lon`` are kept for clustering.

Both read a file (or a frame) value by value (README "Data formats", :mod:`archetypes.reading`):
CSV columns as text, identifiers (card, line, branch) by the identifier rule of
:mod:`synth.records`, times by :mod:`synth.times`, integers by :func:`synth.records.common.
int_column` and measures by :func:`archetypes.reading.measure` (a value that is not a number is
an error naming the file, column and row; a missing one is -1 for Chicago, "unknown" zone for SUBE).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from archetypes.measure import VIEW_VALUES
from archetypes.reading import measure
from archetypes.schema import Column, Group, TripSchema
from synth import datasets
from synth.errors import InputError
from synth.io import id_strings, read_table
from synth.records.common import int_column
from synth.times import parse_times

__all__ = [
    "NIST_PAYMENT_TYPES",
    "chicago_taxi_schema",
    "chicago_taxi_trips",
    "sube_published_lists",
    "sube_schema",
    "sube_trips",
]

#: Payment type names -> codes of the NIST DeID2 sprint-3 ``parameters.json`` (public).
NIST_PAYMENT_TYPES = {
    "Unknown": -1,
    "Cash": 0,
    "Credit Card": 1,
    "Mobile": 2,
    "Prcard": 3,
    "No Charge": 5,
    "Dispute": 6,
    "Prepaid": 7,
    "Pcard": 8,
}
#: Numeric ranges of the NIST DeID2 sprint-3 schema (``sprint3_public_parameters.json``).
NIST_RANGES = {
    "fare": (-1, 9900),
    "tips": (-1, 407),
    "trip_seconds": (-1, 86400),
    "trip_miles": (-1, 1428),
}
TAXI_COLUMNS = [
    "taxi_id",
    "shift",
    "company",
    "pickup_community_area",
    "dropoff_community_area",
    "payment_type",
    "fare",
    "tips",
    "trip_seconds",
    "trip_miles",
]
UNKNOWN_COMPANY = "Unknown"
SUBE_MODES = ("COL", "SUB", "TRE")
ZONE_SIZE = 0.05
#: stages of a journey in the RED SUBE network (etapa_red_sube), 0 = first boarding
STAGES = 10
#: the SUBE fare type of a product the public trips never show
UNKNOWN_FARE = -1
#: (latitude, longitude) ranges of the SUBE coordinates without public trips: a public bounding
#: box of the Buenos Aires metropolitan region (CABA and the partidos around it, Zarate-Campana
#: to Brandsen and La Plata, Lujan to the Rio de la Plata), rounded outwards. Not the extent of
#: the embedded Tuesday zones: that holds GPS errors (-3.15 S, 126.85 E) that would squash the
#: region in the mixture's scaling; 4 of Tuesday's 25,718 trips lie outside the box.
AMBA_BOX = ((-35.5, -33.9), (-59.6, -57.7))


CHICAGO_COLUMNS = [
    "trip_start_timestamp",
    "pickup_community_area",
    "dropoff_community_area",
    "company",
    "payment_type",
    "fare",
    "tips",
    "trip_seconds",
    "trip_miles",
]


def chicago_taxi_trips(
    raw: pd.DataFrame | str | os.PathLike[str],
    *,
    years: Iterable[int] | None = None,
    source: str = "Chicago taxi data",
    sep: str | None = None,
) -> pd.DataFrame:
    """The TFX Chicago sample (a frame or a CSV/Parquet path, its columns read as text) on the
    challenge schema, optionally keeping only the given years of ``trip_start_timestamp`` (unix
    seconds or ISO 8601, per value). Community areas and the measures: a missing value is -1,
    a value that is not a number an ``InputError`` naming ``source`` (the path when given)."""
    if not isinstance(raw, pd.DataFrame):
        source = str(raw)
        raw = read_table(raw, columns=CHICAGO_COLUMNS, text=CHICAGO_COLUMNS, sep=sep)
    missing = [c for c in CHICAGO_COLUMNS if c not in raw.columns]
    if missing:
        raise InputError(f"{source}: missing column(s) {', '.join(map(repr, missing))}")
    raw = raw.reset_index(drop=True)
    start = parse_times(raw["trip_start_timestamp"], column="trip_start_timestamp", source=source)
    out = pd.DataFrame({"taxi_id": np.arange(len(raw), dtype=np.int64)})
    out["shift"] = (start.dt.day_of_week * 3 + start.dt.hour // 8).to_numpy(dtype=np.int64)
    company = raw["company"].astype(object)
    out["company"] = company.where(company.notna(), UNKNOWN_COMPANY).astype(str).to_numpy()
    for col in ("pickup_community_area", "dropoff_community_area"):
        area = measure(raw[col], col, source)
        out[col] = np.where(np.isnan(area), -1, np.rint(area)).astype(np.int64)
    out["payment_type"] = (
        raw["payment_type"].map(NIST_PAYMENT_TYPES).fillna(-1).to_numpy(dtype=np.int64)
    )
    for col, (lo, hi) in NIST_RANGES.items():
        value = measure(raw[col], col, source)
        out[col] = np.clip(np.where(np.isnan(value), -1, np.rint(value)), lo, hi).astype(np.int64)
    if years is not None:
        out = out[start.dt.year.isin(list(years)).to_numpy()].reset_index(drop=True)
    return out[TAXI_COLUMNS]


#: the companies of the sample's public 2013 trips: the company domain when no public trips are
#: given (a published list, so that a release without public data is not all "Unknown")
CHICAGO_COMPANIES_2013 = (
    "3201 - CID Cab Co Inc",
    "3897 - Ilie Malec",
    "4615 - Tyrone Henderson",
    "Blue Ribbon Taxi Association Inc.",
    "Chicago Elite Cab Corp.",
    "Chicago Elite Cab Corp. (Chicago Carriag",
    "Chicago Medallion Management",
    "Choice Taxi Association",
    "Dispatch Taxi Affiliation",
    "KOAM Taxi Association",
    "Northwest Management LLC",
    "Taxi Affiliation Services",
    "Top Cab Affiliation",
)


def chicago_taxi_schema(public: pd.DataFrame) -> TripSchema:
    """The challenge's public domains; companies are those of the PUBLIC trips (without any:
    :data:`CHICAGO_COMPANIES_2013`) plus "Unknown", which also receives companies the public data
    never shows (the sample has names, not the challenge's company ids)."""
    if len(public) == 0:
        public = pd.DataFrame({"company": list(CHICAGO_COMPANIES_2013)})
    areas = (-1, *range(1, 78))
    columns = [
        Column("taxi_id", "id"),
        Column("shift", "categorical", tuple(range(21))),
        Column("pickup_community_area", "categorical", areas),
        Column("dropoff_community_area", "categorical", areas),
        Column("payment_type", "categorical", tuple(NIST_PAYMENT_TYPES.values())),
        *(Column(c, "numeric", minimum=lo, maximum=hi) for c, (lo, hi) in NIST_RANGES.items()),
    ]
    company = TripSchema.from_public(
        public, categorical=["company"], other={"company": UNKNOWN_COMPANY}
    )
    return TripSchema({c.name: c for c in columns}).replace(company["company"])


SUBE_IDS = ("id_tarjeta", "id_linea", "id_ramal")
SUBE_TEXT = ("modo", "lat", "lon", "id_tarifa", "hora", "etapa_red_sube", "tipo_trx_tren")


def sube_trips(
    taps: pd.DataFrame | str | os.PathLike[str],
    *,
    source: str = "SUBE taps",
    sep: str | None = None,
) -> pd.DataFrame:
    """SUBE taps (a frame or a CSV/Parquet path, read value by value) as trips, one per boarding
    tap; a tap whose card id is missing or empty is dropped (it cannot be attributed)."""
    if not isinstance(taps, pd.DataFrame):
        source = str(taps)
        taps = read_table(taps, dtype={c: str for c in SUBE_IDS}, text=SUBE_TEXT, sep=sep)
    need = ["id_tarjeta", "modo", "lat", "lon", "id_linea", "id_ramal", "id_tarifa", "hora"]
    missing = [c for c in need if c not in taps.columns]
    if missing:
        raise InputError(f"{source}: missing column(s) {', '.join(map(repr, missing))}")
    taps = taps.reset_index(drop=True)  # messages name the row of the file
    card = id_strings(taps["id_tarjeta"], column="id_tarjeta", source=source)
    keep = (card.notna() & (card != "")).to_numpy().copy()
    if "tipo_trx_tren" in taps.columns:
        keep &= ~taps["tipo_trx_tren"].isin(["CHECK OUT", "CHECK OUT SIN CHECKIN"]).to_numpy()
    lat = measure(taps["lat"], "lat", source)
    lon = measure(taps["lon"], "lon", source)
    zone = pd.Series(
        [f"{a:.2f},{b:.2f}" for a, b in zip(_grid(lat), _grid(lon), strict=True)], dtype=object
    ).where(~(np.isnan(lat) | np.isnan(lon)), "unknown")
    stage = taps["etapa_red_sube"] if "etapa_red_sube" in taps.columns else pd.Series(0, taps.index)
    trips = pd.DataFrame(
        {
            "card_id": card.to_numpy(dtype=object),
            "hour": int_column(taps["hora"], "hora", source, 0, 23),
            "mode": taps["modo"].to_numpy(dtype=object),
            "line": id_strings(taps["id_linea"], column="id_linea", source=source).to_numpy(),
            "branch": id_strings(taps["id_ramal"], column="id_ramal", source=source).to_numpy(),
            "zone": zone.to_numpy(),
            "fare_type": int_column(taps["id_tarifa"], "id_tarifa", source, 0, None),
            "stage": int_column(stage, "etapa_red_sube", source, 0, None),
            "lat": lat,
            "lon": lon,
        }
    )
    return trips[keep].reset_index(drop=True)


def sube_schema(
    public: pd.DataFrame | None, metadata: pd.DataFrame | str | Path | None = None
) -> TripSchema:
    """Public SUBE domains: hours 0..23, the three modes, lines and branches of the network metadata
    (``metadata_amba_2019_m1.csv``, when given) or else of the public trips, the public zones, fare
    products, and stages 0..9; "unknown" catches lines, branches and zones outside the domain, fare
    type -1 (:data:`UNKNOWN_FARE`) a fare product the public trips never show, stage 9 every later
    stage (a per-value rule: another day's private taps never fail on a value the public day lacks).
    With the metadata, its (mode, line, branch) rows are also a :class:`Group`: the joint model
    codes the three columns as one (issue 28).

    ``public=None`` (no public trips): the zones and fare products are the published lists of
    the embedded public Tuesday sample (:func:`sube_published_lists`), as the Chicago layout
    takes its 2013 company list; never values of the private taps. ``lat`` and ``lon`` are then
    coordinate columns (:class:`~archetypes.schema.Column`): the centre of a trip's zone cell,
    so that the mixture clusters on them though the
    joint model's trips carry only zones (with public trips, their own coordinates), clipped
    to the public bounding box of the Buenos Aires metropolitan region (:data:`AMBA_BOX`)."""
    coordinates = public is None
    if public is None:
        public = sube_published_lists()
    lines, branches = _public_values(public, "line"), _public_values(public, "branch")
    groups: tuple[Group, ...] = ()
    if metadata is not None:
        meta = (
            metadata
            if isinstance(metadata, pd.DataFrame)
            else read_table(metadata, dtype={"id_linea": str, "id_ramal": str})
        )
        missing = [c for c in ("id_linea", "id_ramal") if c not in meta.columns]
        if missing:
            where = "SUBE metadata" if isinstance(metadata, pd.DataFrame) else str(metadata)
            raise InputError(f"{where}: missing column(s) {', '.join(map(repr, missing))}")
        line_ids = id_strings(meta["id_linea"], column="id_linea")
        branch_ids = id_strings(meta["id_ramal"], column="id_ramal")
        lines = sorted(set(line_ids.dropna()))
        branches = sorted(set(branch_ids.dropna()))
        if "modo" in meta.columns:
            rows = pd.DataFrame({"m": meta["modo"], "l": line_ids, "b": branch_ids}).dropna()
            rows = rows[rows["m"].isin(SUBE_MODES)].drop_duplicates()
            combos = tuple(sorted(zip(rows["m"], rows["l"], rows["b"], strict=True)))
            groups = (Group(("mode", "line", "branch"), combos),) if combos else ()
    zones = (*_public_values(public, "zone", "unknown"),)
    fare_types = (*_public_values(public, "fare_type", UNKNOWN_FARE),)
    columns = [
        Column("card_id", "id"),
        Column("hour", "categorical", tuple(range(24))),
        Column("mode", "categorical", SUBE_MODES),
        Column("line", "categorical", (*lines, "unknown"), other="unknown"),
        Column("branch", "categorical", (*branches, "unknown"), other="unknown"),
        Column("zone", "categorical", zones, other="unknown", coarse=_coarse_zones(zones)),
        Column("fare_type", "categorical", fare_types, other=UNKNOWN_FARE),
        Column("stage", "categorical", tuple(range(STAGES)), other=STAGES - 1),
    ]
    if coordinates:
        columns += _zone_coordinates()
    return TripSchema({c.name: c for c in columns}, groups)


def _zone_coordinates() -> list[Column]:
    """``lat`` and ``lon`` read off the zone labels (the cell centres), clipped to
    :data:`AMBA_BOX`."""
    return [
        Column(name, "coordinate", minimum=lo, maximum=hi, source="zone", part=i)
        for i, (name, (lo, hi)) in enumerate(zip(("lat", "lon"), AMBA_BOX, strict=True))
    ]


#: the embedded public SUBE file whose lists stand in for absent public trips' domains
SUBE_PUBLISHED = "sube_tuesday"


def sube_published_lists() -> pd.DataFrame:
    """The zones, fare products, lines and branches of the embedded PUBLIC SUBE Tuesday taps
    (27/11/2019, ``synth.datasets`` ``sube_tuesday``): the lists :func:`sube_schema` uses when
    no public trips are given (one row per distinct combination; a fixed public file, so the
    lists never depend on the private taps). A copy: the file is read once per process."""
    return _published_lists().copy()


@functools.cache
def _published_lists() -> pd.DataFrame:
    trips = sube_trips(datasets.path(SUBE_PUBLISHED))
    return trips[["line", "branch", "zone", "fare_type"]].drop_duplicates(ignore_index=True)


def _coarse_zones(zones: tuple[str, ...]) -> tuple[str, ...]:
    """Each zone's cell on the finest coarser grid (a multiple of :data:`ZONE_SIZE`) with at
    most ``VIEW_VALUES`` cells over the public zone list ("unknown" stays itself): a public
    rule on public values, a view the joint model measures without public trips."""
    known = [z for z in zones if z != "unknown"]
    points = np.array([[float(x) for x in z.split(",")] for z in known]).reshape(-1, 2)
    for factor in range(2, 400):
        size = factor * ZONE_SIZE
        cells = np.round(points / size) * size + 0.0
        labels = [f"{a:.2f},{b:.2f}" for a, b in cells]
        if len(set(labels)) + ("unknown" in zones) <= VIEW_VALUES:
            coarse = dict(zip(known, labels, strict=True))
            return tuple(coarse.get(z, "unknown") for z in zones)
    return ()


def _public_values(public: pd.DataFrame, column: str, extra: str | int | None = None) -> list:
    values = sorted(set(public[column].dropna().tolist()) - {extra})
    return [*values, extra] if extra is not None else values


def _grid(values: np.ndarray) -> np.ndarray:
    return np.round(np.nan_to_num(values) / ZONE_SIZE) * ZONE_SIZE + 0.0
