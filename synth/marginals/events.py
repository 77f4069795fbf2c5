"""Opal pipeline inputs: trips, taps or long-format sequences read as encoded tap events.

Every value is read on its own (docs/design.md section 2, per-value rules): ids and locations by
:func:`synth.io.id_strings`, times by :func:`synth.times.times_of_day`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.io import id_strings, read_table, table_columns, table_format
from synth.records import load_taps, load_trips
from synth.times import NO_DAY, times_of_day

__all__ = [
    "Events",
    "bad_row",
    "day_label",
    "day_number",
    "factor",
    "load_input",
    "merge_codes",
    "parse_event_times",
    "read_events",
]

_ID_COLUMNS = ("card_id", "on_stop", "off_stop", "mode")
#: One part of the input read as events: (side, row mask, time column, location column).
_Part = tuple[int, np.ndarray, str | None, str]


@dataclass
class Events:
    """Tap events, encoded: side 0 = on / 1 = off, codes into the category lists, minute of day."""

    side: np.ndarray
    mode: np.ndarray
    day: np.ndarray  # days since 1970-01-01, or NO_DAY
    minute: np.ndarray  # minute of the day, -1 when the input has no times
    location: np.ndarray  # codes into `locations`
    unit: np.ndarray | None
    modes: np.ndarray
    locations: np.ndarray
    kind: str
    sides: tuple[int, ...] = (0, 1)  # the sides the input's schema has (taps without 'tap': on)
    units: np.ndarray | None = None  # the unit labels `unit` codes into


def bad_row(column: str, mask: np.ndarray, index: pd.Index, what: str) -> InputError:
    row = index[int(np.flatnonzero(mask)[0])]
    return InputError(f"column '{column}', row {row}: {what}")


def parse_event_times(
    frame: pd.DataFrame, column: str, date_column: str | None, timezone: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(minute of day, day number) of ``frame[column]``, each value on its own
    (:func:`synth.times.times_of_day`: a clock time ``HH:MM`` has no day, a timestamp is its wall
    clock as written or in ``timezone``); the day from ``date_column`` when given."""
    minute, day = times_of_day(
        frame[column], timezone=timezone, column=column, source=None, rows=frame.index
    )
    if (minute >= 1440).any():
        raise bad_row(column, minute >= 1440, frame.index, "not a time of day")
    if date_column is not None:
        dates = pd.to_datetime(
            frame[date_column].astype("string"), errors="coerce", format="ISO8601"
        )
        if dates.isna().any():
            raise bad_row(date_column, dates.isna().to_numpy(), frame.index, "not an ISO 8601 date")
        day = dates.to_numpy(dtype="datetime64[ns]").astype("datetime64[D]").astype(np.int64)
    return np.asarray(minute, dtype=np.int32), day


def factor(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Codes into the sorted distinct labels (identifier strings: ``32.0`` is ``"32"``).

    Only the distinct values are converted to strings, so a categorical or integer column of 50M
    rows costs one hash pass.
    """
    codes, uniq = pd.factorize(values)
    labels = id_strings(pd.Series(uniq)).astype(str).to_numpy()
    cats, inverse = np.unique(labels, return_inverse=True)
    return inverse.astype(np.int64)[codes], cats.astype(object)


def merge_codes(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate coded parts whose label lists differ, onto their sorted union of labels."""
    cats = np.unique(np.concatenate([labels for _, labels in parts]))
    codes = [np.searchsorted(cats, labels)[c] for c, labels in parts]
    return np.concatenate(codes).astype(np.int64), cats.astype(object)


def read_events(
    data: pd.DataFrame, *, unit_column: str | None, timezone: str | None = None
) -> Events:
    """Trips (``on_time, on_stop[, off_time, off_stop]``), taps (``time, stop_id[, tap]``) or
    long-format sequences (``seq_id, location[, time]``) as tap events.

    ``mode`` and ``date`` columns are optional (one mode ``all``; the day from the times).
    Every value is read on its own: ids and locations by :func:`synth.io.id_strings`, times by
    :func:`synth.times.times_of_day` (wall clock as written, or in ``timezone``).
    """
    if unit_column is not None and unit_column not in data:
        raise InputError(f"missing privacy-unit column '{unit_column}'")
    kind, parts = _event_parts(data)
    unit_codes = unit_labels = None
    if unit_column is not None:
        if data[unit_column].isna().any():
            raise bad_row(unit_column, data[unit_column].isna().to_numpy(), data.index, "empty")
        unit_codes, unit_labels = factor(data[unit_column])
    mode = factor(data["mode"].fillna("")) if "mode" in data else None
    factored: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    timed: dict[str | None, tuple[np.ndarray, np.ndarray]] = {}
    sides, modes, days, minutes, locs, units = [], [], [], [], [], []
    for side, mask, time_col, loc_col in parts:
        if loc_col not in factored:
            missing = data[loc_col].isna().to_numpy() & mask
            if missing.any():
                raise bad_row(loc_col, missing, data.index, "missing location")
            factored[loc_col] = factor(data[loc_col])
        minute, day = _part_times(data, mask, time_col, timed, timezone)
        codes, labels = factored[loc_col]
        sides.append(np.full(minute.size, side, dtype=np.int8))
        modes.append(np.zeros(minute.size, np.int64) if mode is None else mode[0][mask])
        days.append(day)
        minutes.append(minute)
        locs.append((codes[mask], labels))
        if unit_codes is not None:
            units.append(unit_codes[mask])
    if sum(s.size for s in sides) == 0:
        raise InputError("no records")
    loc_codes, loc_cats = merge_codes(locs)
    return Events(
        side=np.concatenate(sides),
        mode=np.concatenate(modes),
        day=np.concatenate(days),
        minute=np.concatenate(minutes),
        location=loc_codes,
        unit=None if unit_codes is None else np.concatenate(units).astype(np.int64),
        modes=np.array(["all"], dtype=object) if mode is None else mode[1],
        locations=loc_cats,
        kind=kind,
        sides=tuple(sorted({side for side, *_ in parts})),
        units=unit_labels,
    )


def _event_parts(data: pd.DataFrame) -> tuple[str, list[_Part]]:
    """The row kind and the parts of ``data`` that are tap-on (side 0) or tap-off (1) events."""
    every = np.ones(len(data), dtype=bool)
    parts: list[_Part] = []
    if "on_stop" in data:
        if "on_time" not in data:
            raise InputError("trips need an 'on_time' column")
        parts.append((0, every, "on_time", "on_stop"))
        if "off_stop" in data and "off_time" in data:
            has_off = data["off_stop"].notna().to_numpy() & data["off_time"].notna().to_numpy()
            parts.append((1, has_off, "off_time", "off_stop"))
        return "trip", parts
    if "stop_id" not in data and "location" not in data:
        raise InputError(
            "expected trips (on_time, on_stop, ...), taps (time, stop_id, ...) "
            "or sequences (seq_id, pos, location)"
        )
    loc_col = "stop_id" if "stop_id" in data else "location"
    kind = "tap" if loc_col == "stop_id" else "sequence element"
    time_col = "time" if "time" in data else None
    if kind == "tap" and time_col is None:
        raise InputError("taps need a 'time' column")
    if "tap" not in data:
        return kind, [(0, every, time_col, loc_col)]
    codes, labels = factor(data["tap"])
    norm = np.array([x.strip().lower() for x in labels], dtype=object)
    bad = ~np.isin(norm, ["on", "off"])
    if bad.any() or (codes < 0).any():
        rows = (codes < 0) | bad[np.maximum(codes, 0)]
        raise bad_row("tap", rows, data.index, "expected 'on' or 'off'")
    is_off = (norm == "off")[codes]
    return kind, [(0, ~is_off, time_col, loc_col), (1, is_off, time_col, loc_col)]


def _part_times(
    data: pd.DataFrame,
    mask: np.ndarray,
    time_col: str | None,
    timed: dict[str | None, tuple[np.ndarray, np.ndarray]],
    timezone: str | None,
) -> tuple[np.ndarray, np.ndarray]:
    """(minute of day, day number) of the rows ``mask``; a whole column is parsed once
    (``timed`` caches it)."""
    date_col = "date" if "date" in data else None
    if time_col is None:
        minute = np.full(int(mask.sum()), -1, dtype=np.int32)
        day = np.full(int(mask.sum()), NO_DAY, dtype=np.int64)
        if date_col is not None:
            frame = data.loc[mask, [date_col]].assign(_t="00:00")
            day = parse_event_times(frame, "_t", date_col, timezone)[1]
        return minute, day
    cols = [time_col] + ([date_col] if date_col else [])
    if mask.all() or time_col in timed:
        if time_col not in timed:
            timed[time_col] = parse_event_times(data[cols], time_col, date_col, timezone)
        minute, day = (a[mask] for a in timed[time_col])
        return minute, day
    return parse_event_times(data.loc[mask, cols], time_col, date_col, timezone)


def day_label(day: int) -> str:
    return "all" if day == NO_DAY else str(np.datetime64(int(day), "D"))


def day_number(label: str) -> np.int64:
    if label == "all":
        return NO_DAY
    try:
        return np.int64(np.datetime64(pd.Timestamp(label).date(), "D").astype(np.int64))
    except ValueError:
        raise ConfigError(f"days: {label!r} is not an ISO 8601 date") from None


def load_input(
    path: Path | pd.DataFrame, location_column: str, timezone: str | None = None
) -> pd.DataFrame:
    """Trips (an ``on_stop`` column) or taps, through :mod:`synth.records` (SUBE loads as is):
    what ``transit-synth marginals`` and :meth:`OpalMarginals.fit` read from a file."""
    if isinstance(path, pd.DataFrame):
        columns = set(path.columns)
    elif path.is_file() and table_format(path) is not None:
        columns = set(table_columns(path))  # a bad header is an InputError naming the file
    else:
        columns = set()  # load_taps names the problem (missing file, unsupported type)
    if "on_stop" in columns:
        trips = (
            path
            if isinstance(path, pd.DataFrame)
            else read_table(
                path, dtype={c: str for c in _ID_COLUMNS}, text=("on_time", "off_time", "date")
            )
        )
        return load_trips(
            trips, card_column="card_id" if "card_id" in columns else None, timezone=timezone
        )
    taps = load_taps(path, location_column=location_column, timezone=timezone)
    if location_column != "stop_id":
        taps = taps.drop(columns=["stop_id"], errors="ignore")
        taps = taps.rename(columns={location_column: "stop_id"})
    if "mode" not in taps and "modo" in taps:  # SUBE
        taps = taps.rename(columns={"modo": "mode"})
    return taps
