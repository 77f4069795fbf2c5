"""Times of records, each value parsed on its own (never a mode chosen from the column).

Rules (the same in every engine; README "Data formats"):

* ISO 8601 text, with or without a UTC offset (``2019-11-27T08:15:00``, ``...+01:00``, ``...Z``).
  Without a time zone (the default) a time is the **wall clock as written**: an offset is dropped,
  nothing is converted. With ``timezone`` (an IANA name such as ``America/Montreal``) a value with
  an offset is converted to that zone's wall clock and a value without one is taken as already in
  it (kept as written).
* Numbers (and text of the form ``-?digits[.digits]``) are unix seconds: the UTC wall clock, or
  ``timezone``'s when given.
* Datetime columns (Parquet, pandas): naive ones as stored; zoned ones at their own zone's wall
  clock, or converted to ``timezone``.
* :func:`times_of_day` also takes a clock time ``HH:MM[:SS[.f]]`` (no date) per value.
* A time must lie in [:data:`FIRST_TIME`, :data:`END_TIME`) = 1677-09-22 .. 2262-04-10, the
  range of nanosecond timestamps with a day to spare for any time zone: its wall clock as written
  (its own offset's, or UTC for unix seconds; before any conversion to ``timezone``). A value
  outside is an error naming it, as an unparsable one is.

Times come back naive (``datetime64[ns]``), as wall-clock times.
"""

from __future__ import annotations

import zoneinfo

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.params import STRING, Param

__all__ = [
    "CLOCK",
    "END_TIME",
    "FIRST_TIME",
    "NO_DAY",
    "OFFSET",
    "SECONDS",
    "TIMEZONE_PARAM",
    "check_timezone",
    "clock_parts",
    "parse_times",
    "times_of_day",
    "wall_clock_times",
]

#: the ``timezone`` parameter row of every generator that reads clock times (:mod:`synth.params`)
TIMEZONE_PARAM = Param(
    "timezone",
    (None, STRING),
    "read times in this IANA time zone (e.g. Europe/Paris): values with a UTC offset are "
    "converted to it, values without one are taken as in it, unix seconds converted from "
    "UTC (default: each time is the wall clock as written, offsets dropped, unix seconds "
    "as UTC)",
    default=None,
    metavar="TZ",
    in_table=True,
)

#: ``HH:MM[:SS[.f]]``: a clock time without a date (groups: hours, minutes, seconds)
CLOCK = r"^\s*(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?\s*$"
#: a UTC offset (or ``Z``) after the time part of an ISO 8601 timestamp; group 1 is the rest
OFFSET = r"^(.*[T ]\d[^+-]*?)\s*(?:[Zz]|[+-]\d{2}(?::?\d{2})?)\s*$"
#: unix seconds written as text (as a CSV file holds them)
SECONDS = r"^\s*-?[0-9]+(?:\.[0-9]+)?\s*$"
#: the first supported time and the first after the supported range (wall clock as written)
FIRST_TIME = pd.Timestamp("1677-09-22")
END_TIME = pd.Timestamp("2262-04-11")
#: the same range in unix seconds
FIRST_SECONDS = int((FIRST_TIME - pd.Timestamp(0)) // pd.Timedelta(seconds=1))
END_SECONDS = int((END_TIME - pd.Timestamp(0)) // pd.Timedelta(seconds=1))
#: "no date in the input" (a clock time alone)
NO_DAY = np.int64(np.iinfo(np.int64).min)


def check_timezone(timezone: str | None) -> str | None:
    """``timezone`` if it is an IANA time zone name (or ``None``), else ConfigError."""
    if timezone is None:
        return None
    try:
        zoneinfo.ZoneInfo(str(timezone))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"timezone: {timezone!r} is not a time zone name (e.g. 'UTC', 'Europe/Paris')"
        ) from None
    return str(timezone)


def _row(mask: np.ndarray | pd.Series) -> int:
    return int(np.flatnonzero(np.asarray(mask))[0])


def _error(source: str | None, column: str, rows: pd.Index | None, i: int, what: str) -> InputError:
    """One line naming the column and the row: ``rows[i]`` when given, else ``i + 1``."""
    row = i + 1 if rows is None else rows[i]
    prefix = "" if source is None else f"{source}: "
    return InputError(f"{prefix}column '{column}', row {row}: {what}")


def parse_times(
    raw: pd.Series,
    *,
    timezone: str | None = None,
    column: str = "time",
    source: str = "input",
) -> pd.Series:
    """Timestamps as naive wall-clock ``datetime64[ns]`` (module rules), each value on its own.

    A missing or unparsable value raises InputError naming ``source``, ``column`` and the row.
    """
    raw = raw.reset_index(drop=True)
    if raw.isna().any():
        raise InputError(f"{source}: column '{column}', row {_row(raw.isna()) + 1}: empty time")
    out = _stamps(raw, check_timezone(timezone))
    if out.isna().any():
        row = _row(out.isna())
        raise InputError(
            f"{source}: column '{column}', row {row + 1}: "
            + _unparsable(raw.iloc[row], "ISO 8601 expected, e.g. 2019-11-27T08:15:00")
        )
    return out


def _unparsable(value: object, expected: str) -> str:
    """Why ``value`` is no time: outside the supported range, or not parsable (``expected``)."""
    if isinstance(value, pd.Timestamp | np.datetime64):
        value = str(pd.Timestamp(value))
    elif isinstance(value, np.generic):
        value = value.item()
    if _out_of_range(value):
        return (
            f"{value!r} is outside the supported time range {FIRST_TIME:%Y-%m-%d} .. "
            f"{END_TIME - pd.Timedelta(days=1):%Y-%m-%d}"
        )
    return f"cannot parse {value!r} as a time ({expected})"


def _out_of_range(value: object) -> bool:
    """Whether ``value`` reads as a time (or unix seconds) outside the supported range."""
    if isinstance(value, pd.Timestamp | np.datetime64):
        stamp = pd.Timestamp(value)
        stamp = stamp.tz_localize(None) if stamp.tz is not None else stamp
        return not FIRST_TIME <= stamp < END_TIME
    text = str(value).strip()
    if isinstance(value, int | float | np.number) or pd.Series([text]).str.match(SECONDS)[0]:
        seconds = float(text)
        return bool(np.isfinite(seconds)) and not FIRST_SECONDS <= seconds < END_SECONDS
    wall = pd.Series([text]).str.replace(OFFSET, r"\1", regex=True)[0]
    try:
        stamp = pd.to_datetime(wall, format="ISO8601")
    except (ValueError, TypeError, OverflowError):
        return False
    return not pd.isna(stamp) and not FIRST_TIME <= stamp < END_TIME


def clock_parts(values: pd.Series) -> pd.DataFrame:
    """``hour``, ``minute``, ``second`` (floats; seconds NaN when not written) of each value that
    is a clock time ``HH:MM[:SS[.f]]`` (:data:`CLOCK`); all NaN in the other rows. The one parser
    of clock times: callers decide what hours past 23 or minutes past 59 mean."""
    parts = values.astype(str).str.extract(CLOCK)
    return pd.DataFrame(
        {
            "hour": parts[0].astype(float),
            "minute": parts[1].astype(float),
            "second": parts[2].astype(float),
        },
        index=values.index,
    )


def wall_clock_times(raw: pd.Series, timezone: str | None = None) -> pd.Series:
    """Timestamps as naive wall-clock ``datetime64[ns]`` by the module rules, each value on its
    own; unparsable values are NaT (the caller words the error; :func:`parse_times` raises)."""
    return _stamps(raw, check_timezone(timezone))


def _stamps(raw: pd.Series, timezone: str | None) -> pd.Series:
    """:func:`parse_times` without the checks: unparsable values are NaT."""
    if pd.api.types.is_datetime64_any_dtype(raw):
        zone = getattr(raw.dt, "tz", None)
        wall = raw.dt.tz_localize(None) if zone is not None else raw
        ok = _in_range(wall)
        if zone is not None and timezone is not None:
            wall = raw.where(ok).dt.tz_convert(timezone).dt.tz_localize(None)
        return wall.where(ok).astype("datetime64[ns]")
    if pd.api.types.is_numeric_dtype(raw) and not pd.api.types.is_bool_dtype(raw):
        return _unix(raw, timezone)
    text = raw.astype(str).str.strip()
    codes, uniques = pd.factorize(text)
    if len(uniques) < len(text):  # each distinct value once
        once = _stamps(pd.Series(uniques, dtype=object), timezone)
        return pd.Series(once.to_numpy()[codes], index=raw.index, dtype="datetime64[ns]")
    zoned = text.str.match(OFFSET).to_numpy(dtype=bool)
    seconds = text.str.match(SECONDS).to_numpy(dtype=bool)
    out = pd.Series(pd.NaT, index=text.index, dtype="datetime64[ns]")
    if seconds.any():
        out[seconds] = _unix(pd.to_numeric(text[seconds]), timezone)
    naive = ~zoned & ~seconds
    if naive.any():
        out[naive] = _ranged(_iso(text[naive], utc=False))
    if zoned.any():
        given = text[zoned]
        # the wall clock as written (the offset dropped): the release's time without a time zone,
        # and the one the range rule reads in every case
        wall = _iso(given.str.replace(OFFSET, r"\1", regex=True), utc=False)
        if timezone is not None:
            fits = _in_range(wall).to_numpy(dtype=bool)
            instant = _iso(given, utc=True)[fits]
            wall = wall.where(fits)
            wall[fits] = instant.dt.tz_convert(timezone).dt.tz_localize(None).astype(wall.dtype)
        out[zoned] = _ranged(wall)
    return out


def _in_range(stamps: pd.Series) -> pd.Series:
    """Which naive timestamps (any resolution) lie in [FIRST_TIME, END_TIME) (NaT: False)."""
    return (stamps >= FIRST_TIME) & (stamps < END_TIME)


def _ranged(stamps: pd.Series) -> pd.Series:
    """Naive timestamps of any resolution as ``datetime64[ns]``, NaT outside the range."""
    return stamps.where(_in_range(stamps)).astype("datetime64[ns]")


def _unix(seconds: pd.Series, timezone: str | None) -> pd.Series:
    """Unix seconds as the UTC wall clock, or ``timezone``'s; NaT outside the range."""
    ok = (seconds >= FIRST_SECONDS) & (seconds < END_SECONDS)
    stamps = pd.to_datetime(seconds if ok.all() else seconds.where(ok), unit="s")
    if timezone is not None:
        stamps = stamps.dt.tz_localize("UTC").dt.tz_convert(timezone).dt.tz_localize(None)
    return stamps.astype("datetime64[ns]")


def _is_text(values: pd.Series) -> bool:
    return not (
        pd.api.types.is_datetime64_any_dtype(values) or pd.api.types.is_numeric_dtype(values)
    )


def _iso(text: pd.Series, *, utc: bool) -> pd.Series:
    """ISO 8601 text parsed element by element (unparsable: NaT)."""
    try:
        return pd.to_datetime(text, format="ISO8601", errors="coerce", utc=utc)
    except (ValueError, TypeError, OverflowError):  # one value at a time: the bad ones are NaT
        return pd.Series(
            [pd.to_datetime(v, format="ISO8601", errors="coerce", utc=utc) for v in text],
            index=text.index,
            dtype="datetime64[us, UTC]" if utc else "datetime64[us]",
        )


def times_of_day(
    raw: pd.Series,
    *,
    timezone: str | None = None,
    column: str = "time",
    source: str | None = "input",
    rows: pd.Index | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(minutes since midnight, day number since 1970-01-01) of each value.

    Each value alone: a clock time ``HH:MM[:SS]`` gives ``hours * 60 + minutes`` (hours may
    pass 23, as GTFS service times do; callers decide) and day :data:`NO_DAY`; anything else is
    a timestamp (:func:`parse_times`) giving its minute of the day and its day. Messages name
    ``rows[i]`` (default: the 1-based position) and, unless ``None``, ``source``.
    """
    raw = raw.reset_index(drop=True)
    n = len(raw)
    minute = np.zeros(n, dtype=np.int64)
    day = np.full(n, NO_DAY, dtype=np.int64)
    if raw.isna().any():
        raise _error(source, column, rows, _row(raw.isna()), "missing time")
    if _is_text(raw):  # each distinct value once
        codes, uniques = pd.factorize(raw)
        if len(uniques) < n:
            try:
                m, d = times_of_day(
                    pd.Series(uniques, dtype=object), timezone=timezone, column=column
                )
            except InputError:
                pass  # read the whole column below: the message names the row
            else:
                return m[codes], d[codes]
    clock = np.zeros(n, dtype=bool)
    if _is_text(raw):
        hm = clock_parts(raw)
        clock = hm["hour"].notna().to_numpy(dtype=bool)
        if clock.any():
            h = hm.loc[clock, "hour"].astype(np.int64).to_numpy()
            m = hm.loc[clock, "minute"].astype(np.int64).to_numpy()
            if (m > 59).any():
                row = int(np.flatnonzero(clock)[int(np.flatnonzero(m > 59)[0])])
                raise _error(source, column, rows, row, f"{raw.iloc[row]!r} is not a time of day")
            minute[clock] = h * 60 + m
    if (~clock).any():
        stamps = _stamps(raw[~clock], check_timezone(timezone))
        if stamps.isna().any():
            row = int(np.flatnonzero(~clock)[_row(stamps.isna())])
            raise _error(
                source,
                column,
                rows,
                row,
                _unparsable(raw.iloc[row], "ISO 8601 timestamp or HH:MM expected"),
            )
        values = stamps.to_numpy(dtype="datetime64[ns]")
        days = values.astype("datetime64[D]")
        minute[~clock] = (values - days) // np.timedelta64(1, "m")
        day[~clock] = days.astype(np.int64)
    return minute, day
