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
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from archetypes.schema import Column, TripSchema
from synth.errors import InputError
from synth.io import read_table

__all__ = [
    "NIST_PAYMENT_TYPES",
    "chicago_taxi_schema",
    "chicago_taxi_trips",
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


def chicago_taxi_trips(
    raw: pd.DataFrame | str | Path, *, years: Iterable[int] | None = None
) -> pd.DataFrame:
    """The TFX Chicago sample (a frame or a CSV path) on the challenge schema, optionally keeping
    only the given years of ``trip_start_timestamp``."""
    if not isinstance(raw, pd.DataFrame):
        raw = read_table(raw)
    need = [
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
    missing = [c for c in need if c not in raw.columns]
    if missing:
        raise InputError(f"Chicago taxi data: missing column(s) {', '.join(map(repr, missing))}")
    start = pd.to_datetime(pd.to_numeric(raw["trip_start_timestamp"], errors="coerce"), unit="s")
    if start.isna().any():
        row = int(np.flatnonzero(start.isna().to_numpy())[0])
        raise InputError(
            f"Chicago taxi data: column 'trip_start_timestamp', row {row + 1}: bad time"
        )
    out = pd.DataFrame({"taxi_id": np.arange(len(raw), dtype=np.int64)})
    out["shift"] = (start.dt.day_of_week * 3 + start.dt.hour // 8).to_numpy(dtype=np.int64)
    out["company"] = raw["company"].fillna(UNKNOWN_COMPANY).astype(str).to_numpy()
    for col in ("pickup_community_area", "dropoff_community_area"):
        out[col] = pd.to_numeric(raw[col], errors="coerce").fillna(-1).to_numpy(dtype=np.int64)
    out["payment_type"] = (
        raw["payment_type"].map(NIST_PAYMENT_TYPES).fillna(-1).to_numpy(dtype=np.int64)
    )
    for col, (lo, hi) in NIST_RANGES.items():
        value = pd.to_numeric(raw[col], errors="coerce").to_numpy(dtype=float)
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


def sube_trips(taps: pd.DataFrame | str | Path) -> pd.DataFrame:
    """SUBE taps (a frame or a CSV path) as trips, one per boarding tap."""
    if not isinstance(taps, pd.DataFrame):
        taps = read_table(taps, dtype={"id_tarjeta": str})
    need = ["id_tarjeta", "modo", "lat", "lon", "id_linea", "id_ramal", "id_tarifa", "hora"]
    missing = [c for c in need if c not in taps.columns]
    if missing:
        raise InputError(f"SUBE taps: missing column(s) {', '.join(map(repr, missing))}")
    keep = taps["id_tarjeta"].notna().to_numpy().copy()
    if "tipo_trx_tren" in taps.columns:
        keep &= ~taps["tipo_trx_tren"].isin(["CHECK OUT", "CHECK OUT SIN CHECKIN"]).to_numpy()
    taps = taps[keep]
    lat = pd.to_numeric(taps["lat"], errors="coerce").to_numpy(dtype=float)
    lon = pd.to_numeric(taps["lon"], errors="coerce").to_numpy(dtype=float)
    zone = pd.Series(
        [f"{a:.2f},{b:.2f}" for a, b in zip(_grid(lat), _grid(lon), strict=True)], dtype=object
    ).where(~(np.isnan(lat) | np.isnan(lon)), "unknown")
    stage = taps["etapa_red_sube"] if "etapa_red_sube" in taps.columns else pd.Series(0, taps.index)
    return pd.DataFrame(
        {
            "card_id": taps["id_tarjeta"].map(_card_id).to_numpy(),
            "hour": pd.to_numeric(taps["hora"]).to_numpy(dtype=np.int64),
            "mode": taps["modo"].astype(str).to_numpy(),
            "line": taps["id_linea"].map(_card_id).to_numpy(),
            "branch": taps["id_ramal"].map(_card_id).to_numpy(),
            "zone": zone.to_numpy(),
            "fare_type": pd.to_numeric(taps["id_tarifa"]).to_numpy(dtype=np.int64),
            "stage": pd.to_numeric(stage).to_numpy(dtype=np.int64),
            "lat": lat,
            "lon": lon,
        }
    )


def sube_schema(
    public: pd.DataFrame, metadata: pd.DataFrame | str | Path | None = None
) -> TripSchema:
    """Public SUBE domains: hours 0..23, the three modes, lines and branches of the network metadata
    (``metadata_amba_2019_m1.csv``, when given) or else of the public trips, the public zones, fare
    products, and stages 0..9; "unknown" catches lines, branches and zones outside the domain."""
    lines, branches = _public_values(public, "line"), _public_values(public, "branch")
    if metadata is not None:
        meta = metadata if isinstance(metadata, pd.DataFrame) else read_table(metadata)
        lines = sorted(set(meta["id_linea"].map(_card_id)))
        branches = sorted(set(meta["id_ramal"].map(_card_id)))
    columns = [
        Column("card_id", "id"),
        Column("hour", "categorical", tuple(range(24))),
        Column("mode", "categorical", SUBE_MODES),
        Column("line", "categorical", (*lines, "unknown"), other="unknown"),
        Column("branch", "categorical", (*branches, "unknown"), other="unknown"),
        Column(
            "zone", "categorical", (*_public_values(public, "zone", "unknown"),), other="unknown"
        ),
        Column("fare_type", "categorical", tuple(_public_values(public, "fare_type"))),
        Column("stage", "categorical", tuple(range(STAGES))),
    ]
    return TripSchema({c.name: c for c in columns})


def _public_values(public: pd.DataFrame, column: str, extra: str | None = None) -> list:
    values = sorted(set(public[column].dropna().tolist()) - {extra})
    return [*values, extra] if extra is not None else values


def _grid(values: np.ndarray) -> np.ndarray:
    return np.round(np.nan_to_num(values) / ZONE_SIZE) * ZONE_SIZE + 0.0


def _card_id(value: object) -> str:
    """``37031563.0`` / ``37031563`` / ``"37031563"`` -> ``"37031563"``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = str(value)
    return text[:-2] if text.endswith(".0") else text
