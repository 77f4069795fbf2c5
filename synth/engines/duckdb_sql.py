"""DuckDB engine: SQL expressions of the per-value record rules (:mod:`~.duckdb_engine`)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from synth.engines.base import Counts
from synth.io import DOT_ZERO, ID_SPACE
from synth.records import OFF_VALUES, UnknownLocationWarning
from synth.times import CLOCK, OFFSET, SECONDS


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


def stamp_expr(text: str) -> str:
    """A timestamp per value, as :func:`synth.times.parse_times` without a time zone: unix
    seconds (UTC), else ISO 8601 at the wall clock as written (a UTC offset is dropped); NULL
    when it does not parse. Regular expressions only run on the values that may need them."""
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
    micros = f"CAST(round(TRY_CAST({t} AS DOUBLE) * 1000000) AS BIGINT)"
    unix = f"NOT contains({t}, ':') AND regexp_full_match({t}, {quote(SECONDS)})"
    return f"CASE WHEN {unix} THEN make_timestamp({micros}) ELSE {iso} END"


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
    warnings.warn(
        f"{path}: dropped {n_rows} rows ({n_distinct} distinct locations) of column '{column}' not "
        "in the taxonomy",
        UnknownLocationWarning,
        stacklevel=4,
    )


class SQLSession(Protocol):
    """What the counters and scans use of :class:`~synth.engines.duckdb_engine.DuckDBEngine`."""

    con: Any

    def sql(self, query: str) -> Any: ...

    def _name(self, stem: str) -> str: ...

    def _source(self, path: Path) -> tuple[str, str] | None: ...

    def _memory_limit_bytes(self) -> float: ...

    def _table_counts(
        self, kept: str, name: str, n_locations: int, n_bins: int, bin_minutes: int
    ) -> Counts: ...
