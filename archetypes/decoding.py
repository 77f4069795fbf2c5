"""Trips read back in the agency's own columns: the inverse of the public encodings of
:mod:`archetypes.datasets`.

The ``chicago-taxi`` and ``sube-taps`` input formats encode each record on its own by public
rules (the NIST DeID2 sprint-3 schema for Chicago; the SUBE tap columns for SUBE): trips,
releases and evaluations speak the encoded columns (``shift``, coded ``payment_type``, ``hour``,
``line`` ...). :func:`decoding` states the inverse mapping (column names and value codes, all
public), :func:`decode_trips` applies it to a trips table (released or original), row by row:

- Chicago: ``shift = 3 * day_of_week + hour // 8`` becomes ``trip_start_day`` (Monday ...) and
  ``trip_start_hours`` (``00:00-08:00``, ``08:00-16:00``, ``16:00-24:00``): the timestamp itself
  is not recoverable, only its shift. ``payment_type`` codes become the names of the challenge's
  ``parameters.json``; ``-1`` (missing) becomes empty in community areas and the measures, and
  ``Unknown`` in ``payment_type``.
- SUBE: the columns get their SUBE names (``card_id`` -> ``id_tarjeta``, ``hour`` -> ``hora``,
  ``mode`` -> ``modo``, ``line`` -> ``id_linea``, ``branch`` -> ``id_ramal``, ``fare_type`` ->
  ``id_tarifa``, ``stage`` -> ``etapa_red_sube``); ``zone`` (a 0.05-degree grid cell of the tap's
  coordinates, "lat,lon") has no SUBE column and keeps its name.
- ``trips``: the columns are the user's own already; nothing to invert.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from archetypes.datasets import NIST_PAYMENT_TYPES, NIST_RANGES
from synth.errors import ConfigError

__all__ = ["DECODED_FORMATS", "decode_trips", "decoding"]

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
HOURS = ("00:00-08:00", "08:00-16:00", "16:00-24:00")
_SUBE_COLUMNS = {
    "card_id": "id_tarjeta",
    "hour": "hora",
    "mode": "modo",
    "line": "id_linea",
    "branch": "id_ramal",
    "fare_type": "id_tarifa",
    "stage": "etapa_red_sube",
}
_MISSING = ("pickup_community_area", "dropoff_community_area", *NIST_RANGES)
#: the input formats whose encoding :func:`decode_trips` inverts
DECODED_FORMATS = ("chicago-taxi", "sube-taps")


def decoding(input_format: str) -> dict[str, Any]:
    """The public inverse mapping of ``input_format`` (JSON-ready): ``columns`` (encoded column
    -> the user's column(s)), ``values`` (encoded column -> code -> value) and ``notes``; an
    empty mapping for ``trips`` (already the user's columns)."""
    if input_format == "trips":
        return {"format": "trips", "columns": {}, "values": {}, "notes": []}
    if input_format == "chicago-taxi":
        shifts = {str(s): f"{DAYS[s // 3]} {HOURS[s % 3]}" for s in range(21)}
        payments = {str(code): name for name, code in NIST_PAYMENT_TYPES.items()}
        return {
            "format": input_format,
            "columns": {"shift": ["trip_start_day", "trip_start_hours"]},
            "values": {"shift": shifts, "payment_type": payments},
            "notes": [
                "shift = 3 * day_of_week + hour // 8 (Monday 0): the day and 8-hour window of "
                "trip_start_timestamp, not the timestamp",
                "-1 is a missing value in " + ", ".join(_MISSING),
                "taxi_id is a row number (the sample has no taxi id): no original column",
            ],
        }
    if input_format == "sube-taps":
        return {
            "format": input_format,
            "columns": dict(_SUBE_COLUMNS),
            "values": {},
            "notes": [
                "one trip per boarding tap (train CHECK OUT rows are alightings, not trips)",
                "zone: the 0.05-degree grid cell 'lat,lon' of the tap (no SUBE column)",
            ],
        }
    raise ConfigError(f"no decoding for input format {input_format!r}")


def decode_trips(trips: pd.DataFrame, input_format: str) -> pd.DataFrame:
    """``trips`` (encoded by ``input_format``) in the user's own columns and values, each row on
    its own (:func:`decoding`); columns the encoding does not name are kept as they are."""
    out = trips.copy()
    if input_format == "chicago-taxi":
        if "shift" in out.columns:
            shift = pd.to_numeric(out["shift"], errors="coerce")
            at = list(out.columns).index("shift")
            day = shift.floordiv(3).map(dict(enumerate(DAYS)))
            hours = shift.mod(3).map(dict(enumerate(HOURS)))
            out = out.drop(columns="shift")
            out.insert(at, "trip_start_hours", hours)
            out.insert(at, "trip_start_day", day)
        if "payment_type" in out.columns:
            names = {code: name for name, code in NIST_PAYMENT_TYPES.items()}
            code = pd.to_numeric(out["payment_type"], errors="coerce")
            out["payment_type"] = code.map(names).fillna("Unknown")
        for col in _MISSING:
            if col in out.columns:
                value = pd.to_numeric(out[col], errors="coerce")
                out[col] = value.where(value != -1).astype("Int64")
        return out
    if input_format == "sube-taps":
        return out.rename(columns=_SUBE_COLUMNS)
    decoding(input_format)  # trips: as they are; anything else: ConfigError
    return out
