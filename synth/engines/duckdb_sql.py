"""DuckDB engine: SQL expressions of the per-value record rules (:mod:`~.duckdb_engine`)."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from synth.engines.base import Counts
from synth.errors import InputError
from synth.io import DOT_ZERO, ID_SPACE
from synth.logs import private_message
from synth.params import spell
from synth.records import OFF_VALUES, UnknownLocationWarning, load_taps
from synth.times import CLOCK, END_SECONDS, END_TIME, FIRST_SECONDS, FIRST_TIME, OFFSET, SECONDS


def quote(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def ident(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'


#: :data:`synth.io.ID_SPACE` as a DuckDB string (for ``trim(text, characters)``)
_CHARS = "(" + " || ".join(f"chr({ord(c)})" for c in ID_SPACE) + ")"


def _trimmed(expr: str) -> str:
    return f"trim(CAST({expr} AS VARCHAR), {_CHARS})"


def id_sql(expr: str) -> str:
    """An identifier normalised per value, as :func:`synth.io.id_strings`: surrounding white
    space stripped, ``-?digits.0+`` -> ``-?digits`` (the column must be text or integers; the
    regular expression only runs on values ending in ``.0...``)."""
    t = _trimmed(expr)
    dot_zero = (
        f"suffix({t}, '0') AND contains({t}, '.') AND regexp_full_match({t}, {quote(DOT_ZERO)})"
    )
    return f"CASE WHEN {dot_zero} THEN regexp_replace({t}, {quote(DOT_ZERO)}, '\\1') ELSE {t} END"


def ranged_sql(stamp: str) -> str:
    """``stamp`` (a TIMESTAMP) when it lies in the supported range of :mod:`synth.times`
    (``FIRST_TIME`` <= t < ``END_TIME``), else NULL: the per-value rule of every engine."""
    first, end = (f"TIMESTAMP '{t:%Y-%m-%d %H:%M:%S}'" for t in (FIRST_TIME, END_TIME))
    return f"CASE WHEN {stamp} >= {first} AND {stamp} < {end} THEN {stamp} END"


def stamp_expr(text: str) -> str:
    """A timestamp per value, as :func:`synth.times.parse_times` without a time zone: unix
    seconds (UTC), else ISO 8601 at the wall clock as written (a UTC offset is dropped); NULL
    when it does not parse or lies outside the supported range (:func:`ranged_sql`). Regular
    expressions only run on the values that may need them."""
    t = _trimmed(text)
    after_date = f"substr({t}, 11)"
    zoned = (
        f"(suffix({t}, 'Z') OR suffix({t}, 'z') OR contains({after_date}, '+') "
        f"OR contains({after_date}, '-'))"
    )
    iso = (
        f"CASE WHEN {zoned} THEN TRY_CAST(regexp_replace({t}, {quote(OFFSET)}, '\\1') AS "
        f"TIMESTAMP) ELSE TRY_CAST({t} AS TIMESTAMP) END"
    )
    seconds = f"TRY_CAST({t} AS DOUBLE)"
    micros = f"CAST(round({seconds} * 1000000) AS BIGINT)"
    unix = f"NOT contains({t}, ':') AND regexp_full_match({t}, {quote(SECONDS)})"
    in_range = f"{seconds} >= {FIRST_SECONDS} AND {seconds} < {END_SECONDS}"
    return (
        f"CASE WHEN {unix} THEN (CASE WHEN {in_range} THEN make_timestamp({micros}) END) "
        f"ELSE {ranged_sql(iso)} END"
    )


def clock_sql(text: str) -> tuple[str, str]:
    """(is a clock time ``HH:MM[:SS]``, its minutes ``h * 60 + m`` or NULL when ``m > 59``)."""
    hours = f"TRY_CAST(regexp_extract({text}, {quote(CLOCK)}, 1) AS INTEGER)"
    minutes = f"TRY_CAST(regexp_extract({text}, {quote(CLOCK)}, 2) AS INTEGER)"
    value = f"CASE WHEN {minutes} <= 59 THEN {hours} * 60 + {minutes} END"
    return f"regexp_matches({text}, {quote(CLOCK)})", value


def pos_sql(column: str) -> str:
    """``pos`` as a number (NULL when it is not one): callers refuse NULL, negative and
    non-integral values (``1.5`` is an error in every engine, never rounded)."""
    return f"TRY_CAST({ident(column)} AS DOUBLE)"


#: column types read as identifiers here (others, e.g. floats, are loaded by synth.records)
ID_TYPES: tuple[str, ...] = ("VARCHAR", "BIGINT", "INTEGER", "SMALLINT", "TINYINT", "UBIGINT")


ID_TYPES += ("UINTEGER", "USMALLINT", "UTINYINT", "HUGEINT")


_OFF = "(" + ", ".join(quote(word) for word in OFF_VALUES) + ")"


TICKS_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def plain_id(value: str) -> str:
    """One identifier normalised as :func:`synth.io.id_strings` does it."""
    text = value.strip(ID_SPACE)
    return re.sub(DOT_ZERO, r"\1", text)


def day_sql(stamp: str) -> str:
    return f"date_diff('day', DATE '1970-01-01', CAST({stamp} AS DATE))"


def off_sql(column: str) -> str:
    """A tap-off, per value, as :mod:`synth.records` reads the ``tap`` column (missing: on)."""
    text = f"coalesce(CAST({ident(column)} AS VARCHAR), '')"
    return f"lower({_trimmed(text)}) IN {_OFF}"


NO_DAY = int(np.iinfo(np.int64).min)


def warn_dropped(path: Path, column: str, n_rows: int, n_distinct: int) -> None:
    """The warning for input rows dropped because their location is not in the taxonomy (the
    grouped pass and the SQL path alike); its stack level points at the synthesizer's caller."""
    text = private_message(
        f"{path}: dropped {n_rows} rows ({n_distinct} distinct locations) of column '{column}' not "
        "in the taxonomy"
    )
    if text is not None:
        warnings.warn(text, UnknownLocationWarning, stacklevel=4)


def file_layout(
    p: Path,
    columns: list[str],
    types: dict[str, str],
    fmt: str,
    location_column: str | None,
    time_bin_minutes: int | None,
) -> tuple[str, str, str] | None:
    """(kind, location column, id column) of a file the engine reads itself, or ``None``: another
    layout, float ids or zoned times (:mod:`synth.records` reads those, with the same rules)."""
    long_loc = location_column or "location"
    tap_loc = location_column or "stop_id"
    if {"seq_id", "pos", long_loc} <= set(columns):
        kind, loc = "sequences", long_loc
    elif {"card_id", "time", tap_loc} <= set(columns) and fmt == "parquet":
        kind, loc = "taps", tap_loc
    else:
        return None  # another layout: the caller loads it with synth.records
    with_time = time_bin_minutes is not None
    if with_time and "time" not in columns:
        raise InputError(f"{p}: time_bins needs a 'time' column")
    id_col = "seq_id" if kind == "sequences" else "card_id"
    if not all(types[c].upper().startswith(ID_TYPES) for c in (id_col, loc)) or (
        (with_time or kind == "taps") and types["time"].upper().startswith("TIMESTAMP WITH")
    ):
        return None  # float ids, zoned times: synth.records reads them (same rules)
    return kind, loc, id_col


def bad_time_error(p: Path, location_column: str, count: int, *, taps: bool) -> InputError:
    """For taps, the error :func:`~synth.records.load_taps` raises for the file's first time that
    is not one (row and value; read on this error path only); else ``count`` such values."""
    if taps:
        try:
            load_taps(p, location_column=location_column)
        except InputError as err:
            return err
    return InputError(f"{p}: column 'time': {count} value(s) that are not a time")


def check_file_values(
    p: Path,
    per_location: list[tuple[Any, ...]],
    id_col: str,
    loc: str,
    locations: Sequence[str],
    on_unknown: str,
) -> tuple[int, int, tuple[int, int] | None]:
    """The checks of a file's one pass (rows per location value: count, empty ids, bad times,
    bad positions), as :mod:`synth.records` makes them; unknown locations raise with
    ``on_unknown="error"``. Returns (rows, bad positions, (rows, distinct) of the unknown
    locations to drop or ``None``)."""
    n_rows, n_no_id, n_no_time, n_bad_pos = (
        sum(int(r[j]) for r in per_location) for j in range(1, 5)
    )
    n_no_location = sum(int(r[1]) for r in per_location if not r[0])
    if n_rows == 0:
        raise InputError(f"{p}: no rows (empty input)")
    if n_no_id:
        raise InputError(f"{p}: column '{id_col}': {n_no_id} empty value(s)")
    if n_no_location:
        raise InputError(f"{p}: column '{loc}': {n_no_location} empty value(s)")
    if n_no_time:
        raise bad_time_error(p, loc, n_no_time, taps=id_col == "card_id")
    known_names = set(locations)
    unknown = sorted((str(r[0]), int(r[1])) for r in per_location if r[0] not in known_names)
    if unknown:
        n = sum(c for _, c in unknown)
        if on_unknown == "error":
            counts = private_message(f"{n} rows, {len(unknown)} distinct unknown locations")
            raise InputError(
                f"{p}: column '{loc}': location {unknown[0][0]!r} is not in the taxonomy "
                f"({f'{counts}; ' if counts else ''}pass {spell('on_unknown', 'drop')} to drop "
                f"them)"
            )
        return n_rows, n_bad_pos, (n, len(unknown))
    return n_rows, n_bad_pos, None


def rows_sql(
    kind: str, has_tap: bool, sid: str, pos: str, minute: str, stamp: str, source: str
) -> Callable[[str], str]:
    """The query of the rows ``sid, pos, code, minute`` of one bucket (a filter) of ``source``
    (the file's projection joined with the locations): taps are tap-ons numbered by time, then
    row."""
    if kind == "sequences":

        def rows(bucket: str) -> str:
            return (
                f"SELECT {sid} AS sid, {pos} AS pos, l.code AS code, "
                f"{minute} AS minute FROM {source} WHERE {bucket}"
            )

        return rows
    off = f"NOT ({off_sql('tap')})" if has_tap else "TRUE"

    def tap_rows(bucket: str) -> str:  # the bucket filter must apply below the window
        return (
            f"SELECT {sid} AS sid, row_number() OVER (PARTITION BY "
            f"{sid} ORDER BY {stamp}, file_row_number) - 1 AS pos, "
            f"l.code AS code, {minute} AS minute FROM {source} "
            f"WHERE {off} AND {bucket}"
        )

    return tap_rows


def per_location_sql(kind: str, sid: str, number: str, minute: str, loc: str, src: str) -> str:
    """One pass for every check, by location value: rows, rows without an id, without a time
    (when used), without an integer pos >= 0 (sequences), and whether normalising changed an id
    or a location."""
    no_id = f"_no_id OR {sid} = ''"
    no_time = f"{minute} IS NULL" if minute != "NULL" else "FALSE"
    bad_pos = (
        f"{number} IS NULL OR {number} < 0 OR {number} <> floor({number})"
        if kind == "sequences"
        else "FALSE"
    )
    return (
        f"SELECT {loc} AS v, count(*), count(*) FILTER (WHERE {no_id}), "
        f"count(*) FILTER (WHERE {no_time}), count(*) FILTER (WHERE {bad_pos}), "
        "bool_or(_sid_changed), bool_or(_loc_changed) "
        f"FROM {src} GROUP BY v"
    )


class SQLSession(Protocol):
    """What the counters and scans use of :class:`~synth.engines.duckdb_engine.DuckDBEngine`."""

    con: Any

    def sql(self, query: str) -> Any: ...

    def temp_table(self, stem: str) -> str: ...

    def read_source(self, path: Path) -> tuple[str, str] | None: ...

    def memory_limit_bytes(self) -> float: ...

    def table_counts(
        self, kept: str, name: str, n_locations: int, n_bins: int, bin_minutes: int
    ) -> Counts: ...
