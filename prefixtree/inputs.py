"""What :meth:`PrefixTreeSynthesizer.fit <prefixtree.synthesizer.PrefixTreeSynthesizer.fit>` reads:
taps, long-format sequences or trips, as a DataFrame or a CSV/Parquet path, turned into one
sequence per card (or card-day).

The layout is declared (``input_format``) or detected from the column NAMES alone (a public
schema fact, never the values): ``seq_id`` + ``pos`` = long-format sequences, ``on_stop`` = trips,
anything else = taps. Every record is transformed on its own (:mod:`synth.records`); a card's taps
are ordered by time, and taps of one card at the same time keep their input order (the rule of
:func:`synth.records.sequences_from_taps` and of every engine: hour-resolution data such as SUBE
lists a card's taps in the order they happened).
"""

from __future__ import annotations

import os
from collections.abc import Collection

import pandas as pd

from synth.errors import ConfigError, InputError
from synth.io import table_columns
from synth.params import spell
from synth.records import load_sequences, load_taps, load_trips, sequences_from_taps
from synth.taxonomy import Taxonomy

__all__ = ["INPUT_FORMATS", "detect_input_format", "read_sequences"]

INPUT_FORMATS = ("auto", "taps", "sequences", "trips")


def detect_input_format(columns: Collection[str]) -> str:
    """``"sequences"`` (``seq_id`` and ``pos``), ``"trips"`` (``on_stop``) or ``"taps"``, from the
    column names only."""
    names = set(columns)
    if {"seq_id", "pos"} <= names:
        return "sequences"
    if "on_stop" in names and "stop_id" not in names:
        return "trips"
    return "taps"


def read_sequences(
    data: pd.DataFrame | str | os.PathLike[str],
    *,
    input_format: str = "auto",
    taxonomy: Taxonomy | None = None,
    on_unknown: str = "error",
    location_column: str | None = None,
    timezone: str | None = None,
    per_day: bool = False,
) -> pd.DataFrame:
    """Long-format sequences (``seq_id, pos, location[, time]``) from taps, sequences or trips.

    Taps become one sequence of boardings per card (per card and day with ``per_day``), ordered
    by time; trips become the sequence of their boarding stops (``on_stop``, or
    ``location_column``) ordered by ``on_time``. ``location_column`` names the location column of
    any layout; ``on_unknown`` says what to do with locations outside ``taxonomy``."""
    if input_format not in INPUT_FORMATS:
        raise ConfigError(
            f"{spell('input_format')} must be one of {', '.join(INPUT_FORMATS)}, got "
            f"{input_format!r}"
        )
    if isinstance(data, pd.DataFrame):
        columns: Collection[str] = [str(c) for c in data.columns]
    elif isinstance(data, str | os.PathLike):
        if str(data) == "":
            raise InputError("sequences: the input path is empty")
        columns = table_columns(data)
    else:
        raise InputError(
            "fit: data must be a DataFrame or a CSV/Parquet path (taps, sequences or trips), "
            f"got {type(data).__name__}"
        )
    kind = detect_input_format(columns) if input_format == "auto" else input_format
    if kind == "sequences":
        if not {"seq_id", "pos"} <= set(columns):
            raise InputError(
                f"{spell('input_format', 'sequences')} needs columns seq_id, pos and location"
            )
        return load_sequences(
            data,
            taxonomy=taxonomy,
            on_unknown=on_unknown,
            location_column=location_column,
            timezone=timezone,
        )
    if kind == "trips":
        trips = load_trips(data, timezone=timezone)
        stop = location_column or "on_stop"
        if stop not in trips.columns:
            raise InputError(f"trips: missing column {stop!r} (the boarding stop)")
        data = pd.DataFrame(
            {"card_id": trips["card_id"], "time": trips["on_time"], "stop_id": trips[stop]}
        )
        location_column = "stop_id"
    stop_column = location_column or "stop_id"
    taps = load_taps(
        data,
        location_column=stop_column,
        taxonomy=taxonomy,
        on_unknown=on_unknown,
        timezone=timezone,
    )
    return sequences_from_taps(taps, location_column=stop_column, per_day=per_day)
