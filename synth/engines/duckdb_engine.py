"""The DuckDB engine: the counting steps as SQL over Parquet/CSV, spilling to disk.

Tables live in a database file inside a private temporary directory (``temp_directory``, default
the system's), which DuckDB also uses to spill sorts, joins, aggregations and temporary tables
beyond ``memory_limit`` (e.g. ``"2GB"``; default DuckDB's, 80% of RAM). The directory is removed
on :meth:`DuckDBEngine.close`.

Reading files itself, for the prefix tree (:meth:`DuckDBEngine.prefix_counter_from_file`) it
accepts long-format sequences (``seq_id, pos, location[, time]``, Parquet or CSV) and Parquet taps
(``card_id, time, stop_id[, tap]``); for the SBH release (:meth:`DuckDBEngine.sbh_scan`) trips
(``on_time, on_stop[, off_time, off_stop][, mode][, date]``) and taps (``time, stop_id[, tap]
[, mode][, date]``), Parquet (or CSV without a privacy unit). Other layouts (the SUBE aliases, date
+ hour columns, zoned times) are loaded in memory by :mod:`synth.records` and counted here. Bounding
is the same deterministic rule as in memory: the first ``h`` positions of a sequence, taps ordered
by time and then by their row in the file; each card's first ``k`` events by (minute, partition,
location, row).

A Parquet file written by sequence (sequence ids increasing from run to run, ``pos`` increasing
inside a sequence; taps: card ids increasing, times non-decreasing inside a card) is turned into
the one-row-per-sequence table in a single streamed pass, checked batch by batch
(:class:`_GroupedScan`); any other file, or any check failing, is grouped by SQL hash aggregation,
with the same result (or the same error).
"""

from __future__ import annotations

import os
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from synth.engines.base import (
    Counts,
    Engine,
    IntArray,
    SBHEvents,
    event_columns,
    table_spec,
)
from synth.errors import ConfigError, InputError
from synth.io import CSV_NA_VALUES, DOT_ZERO, ID_SPACE
from synth.records import OFF_VALUES, UnknownLocationWarning
from synth.times import CLOCK, OFFSET, SECONDS

__all__ = ["DuckDBEngine", "DuckDBPrefixCounter"]


def _quote(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'


#: :data:`synth.io.ID_SPACE` as a DuckDB string (for ``trim(text, characters)``)
_CHARS = "(" + " || ".join(f"chr({ord(c)})" for c in ID_SPACE) + ")"


def _trimmed(expr: str) -> str:
    return f"trim(CAST({expr} AS VARCHAR), {_CHARS})"


def _id_sql(expr: str) -> str:
    """An identifier normalised per value, as :func:`synth.io.id_strings`: surrounding white
    space stripped, ``-?digits.0+`` -> ``-?digits`` (the column must be text or integers; the
    regular expression only runs on values ending in ``.0...``)."""
    t = _trimmed(expr)
    dot_zero = (
        f"suffix({t}, '0') AND contains({t}, '.') AND regexp_full_match({t}, {_quote(DOT_ZERO)})"
    )
    return f"CASE WHEN {dot_zero} THEN regexp_replace({t}, {_quote(DOT_ZERO)}, '\\1') ELSE {t} END"


def _stamp_sql(text: str) -> str:
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
        f"CASE WHEN {zoned} THEN TRY_CAST(regexp_replace({t}, {_quote(OFFSET)}, '\\1') AS "
        f"TIMESTAMP) ELSE TRY_CAST({t} AS TIMESTAMP) END"
    )
    micros = f"CAST(round(TRY_CAST({t} AS DOUBLE) * 1000000) AS BIGINT)"
    unix = f"NOT contains({t}, ':') AND regexp_full_match({t}, {_quote(SECONDS)})"
    return f"CASE WHEN {unix} THEN make_timestamp({micros}) ELSE {iso} END"


def _clock_sql(text: str) -> tuple[str, str]:
    """(is a clock time ``HH:MM[:SS]``, its minutes ``h * 60 + m`` or NULL when ``m > 59``)."""
    hours = f"TRY_CAST(regexp_extract({text}, {_quote(CLOCK)}, 1) AS INTEGER)"
    minutes = f"TRY_CAST(regexp_extract({text}, {_quote(CLOCK)}, 2) AS INTEGER)"
    value = f"CASE WHEN {minutes} <= 59 THEN {hours} * 60 + {minutes} END"
    return f"regexp_matches({text}, {_quote(CLOCK)})", value


def _pos_sql(column: str) -> str:
    """``pos`` as a number (NULL when it is not one): callers refuse NULL, negative and
    non-integral values (``1.5`` is an error in every engine, never rounded)."""
    return f"TRY_CAST({_ident(column)} AS DOUBLE)"


#: column types read as identifiers here (others, e.g. floats, are loaded by synth.records)
_ID_TYPES: tuple[str, ...] = ("VARCHAR", "BIGINT", "INTEGER", "SMALLINT", "TINYINT", "UBIGINT")
_ID_TYPES += ("UINTEGER", "USMALLINT", "UTINYINT", "HUGEINT")


class DuckDBPrefixCounter:
    """Prefix-tree cell counts over a wide table ``c0..c{h-1}`` [``b0..b{h-1}``] (NULL or -1 pad).

    Each :meth:`advance` writes the sequences still alive, with their node, and only the columns of
    the levels still to come (a hash join against the small cell -> node map): a temporary table
    (in memory) when it surely fits in ``memory_limit``, else a table of the database file.
    """

    def __init__(
        self,
        engine: DuckDBEngine,
        table: str,
        *,
        height: int,
        has_bins: bool,
        n_bins: int,
        n_locations: int,
    ) -> None:
        self.engine = engine
        self.height = height
        self.has_bins = has_bins
        self.n_bins = n_bins
        self.n_locations = n_locations
        self._base = table
        self._cur = table
        self._level = 0
        self.n_sequences = int(engine.sql(f"SELECT count(*) FROM {table}").fetchone()[0])
        row_bytes = 8 + 4 * height * (2 if has_bins else 1)  # at most: node, codes, bins
        fits = self.n_sequences * row_bytes <= engine._memory_limit_bytes()
        self._kind = "TEMP TABLE" if fits else "TABLE"

    def _key(self, level: int, alias: str = "") -> str:
        node = f"CAST({alias}node AS BIGINT)" if level else "CAST(0 AS BIGINT)"
        tb = f"CAST({alias}b{level} AS BIGINT)" if self.has_bins else "CAST(0 AS BIGINT)"
        return f"(({node} * {self.n_bins} + {tb}) * {self.n_locations} + {alias}c{level})"

    def level_counts(self, level: int, n_nodes: int) -> Counts:
        if level != self._level:
            raise RuntimeError("levels must be counted in order")
        res = self.engine.sql(
            f"SELECT {self._key(level)} AS k, count(*) AS n FROM {self._cur} "
            f"WHERE c{level} >= 0 GROUP BY k ORDER BY k"
        ).fetchnumpy()
        return (
            np.asarray(res["k"], dtype=np.int64),
            np.asarray(res["n"], dtype=np.int64),
        )

    def advance(self, level: int, keys: IntArray, node: IntArray) -> None:
        node = np.asarray(node, dtype=np.int64)
        live = node >= 0
        cells = pa.table({"k": np.asarray(keys, dtype=np.int64)[live], "node": node[live]})
        con = self.engine.con
        con.register("_cell_map", cells)
        rest = [f"s.c{j}" for j in range(level + 1, self.height)]
        if self.has_bins:
            rest += [f"s.b{j}" for j in range(level + 1, self.height)]
        new = f"_level_{level + 1}"
        cols = ", ".join(["m.node", *rest])
        con.execute(
            f"CREATE OR REPLACE {self._kind} {new} AS SELECT {cols} FROM {self._cur} s "
            f"JOIN _cell_map m ON {self._key(level, 's.')} = m.k"
        )
        con.unregister("_cell_map")
        if self._cur != self._base:
            con.execute(f"DROP TABLE {self._cur}")
        self._cur = new
        self._level = level + 1

    def close(self) -> None:
        for name in {self._cur, self._base}:
            try:
                self.engine.con.execute(f"DROP TABLE IF EXISTS {name}")
                self.engine.con.execute(f"DROP VIEW IF EXISTS {name}")
            except Exception:  # the connection may be closed already
                pass


class DuckDBEngine(Engine):
    """DuckDB over Parquet/CSV: out of core, bounded memory (``memory_limit``)."""

    name = "duckdb"
    #: input rows grouped per pass of the sequence table, per GB of memory limit (and at least)
    _rows_per_gb = 30_000_000
    _min_rows_per_pass = 1_000_000
    #: rows per Arrow batch of the grouped-file pass (:class:`_GroupedScan`)
    _grouped_batch_rows = 1 << 20

    def __init__(
        self,
        temp_directory: str | os.PathLike[str] | None = None,
        memory_limit: str | None = None,
        threads: int | None = None,
    ) -> None:
        try:
            import duckdb
        except ImportError:  # pragma: no cover - duckdb is a core dependency
            raise ConfigError(
                "engine='duckdb' needs the duckdb package: pip install duckdb"
            ) from None
        if temp_directory is not None and not Path(temp_directory).is_dir():
            raise ConfigError(f"engine temp_directory {temp_directory}: not a directory")
        self._tmp: tempfile.TemporaryDirectory[str] | None = tempfile.TemporaryDirectory(
            prefix="transit-synth-duckdb-", dir=None if temp_directory is None else temp_directory
        )
        root = Path(self._tmp.name)
        self.con: Any = duckdb.connect(str(root / "engine.duckdb"))
        self.sql(f"SET temp_directory = {_quote(str(root / 'spill'))}")
        self.sql("SET preserve_insertion_order = false")
        try:
            if memory_limit is not None:
                self.sql(f"SET memory_limit = {_quote(str(memory_limit))}")
            if threads is not None:
                if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
                    raise ConfigError(f"engine threads must be a positive integer, got {threads!r}")
                self.sql(f"SET threads = {int(threads)}")
        except duckdb.Error as err:
            self.close()
            raise ConfigError(f"engine options: {err}") from None
        self._n = 0
        #: how the last file was grouped into sequences: "grouped" (one streamed pass over a file
        #: grouped by sequence in order) or "hash" (SQL aggregation)
        self._read_path = ""

    def sql(self, query: str) -> Any:
        """Run one statement; DuckDB's errors on the data become InputError."""
        import duckdb

        try:
            return self.con.execute(query)
        except duckdb.ConversionException as err:
            raise InputError(f"duckdb engine: {err}") from None
        except duckdb.OutOfMemoryException as err:
            first = str(err).splitlines()[0]
            raise ConfigError(
                f"duckdb engine: {first} (raise engine_options memory_limit / "
                "--engine-memory-limit, or lower threads)"
            ) from None

    def _name(self, stem: str) -> str:
        self._n += 1
        return f"_{stem}_{self._n}"

    def close(self) -> None:
        con = getattr(self, "con", None)
        if con is not None:
            con.close()
            self.con = None
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            tmp.cleanup()
            self._tmp = None

    # ------------------------------------------------------------------ prefix tree
    def prefix_counter(
        self,
        codes: npt.NDArray[np.integer],
        time_bins: npt.NDArray[np.integer] | None,
        *,
        n_bins: int,
        n_locations: int,
    ) -> DuckDBPrefixCounter:
        codes = np.asarray(codes)
        height = int(codes.shape[1])
        cols: dict[str, Any] = {f"c{j}": codes[:, j].astype(np.int32) for j in range(height)}
        if time_bins is not None:
            bins = np.asarray(time_bins)
            cols.update({f"b{j}": bins[:, j].astype(np.int32) for j in range(height)})
        table = self._name("seq")
        self.con.register("_input_matrix", pa.table(cols))
        self.sql(f"CREATE TABLE {table} AS SELECT * FROM _input_matrix")
        self.con.unregister("_input_matrix")
        return DuckDBPrefixCounter(
            self,
            table,
            height=height,
            has_bins=time_bins is not None,
            n_bins=n_bins,
            n_locations=n_locations,
        )

    def _source(self, path: Path) -> tuple[str, str] | None:
        from synth.io import table_format

        fmt = table_format(path)
        if fmt == "parquet":
            return f"read_parquet({_quote(str(path))}, file_row_number = true)", fmt
        if fmt == "csv":
            return f"read_csv({_quote(str(path))}, header = true, all_varchar = true)", fmt
        return None

    def prefix_counter_from_file(
        self,
        path: str | os.PathLike[str],
        *,
        locations: Sequence[str],
        height: int,
        time_bin_minutes: int | None,
        on_unknown: str = "error",
        location_column: str | None = None,
    ) -> DuckDBPrefixCounter | None:
        p = Path(path)
        if not p.is_file():
            raise InputError(f"{p}: file not found")
        source = self._source(p)
        if source is None:
            return None
        src, fmt = source
        described = self.sql(f"DESCRIBE SELECT * FROM {src}").fetchall()
        columns = [str(r[0]) for r in described]
        types = {str(r[0]): str(r[1]) for r in described}
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
        if not all(types[c].upper().startswith(_ID_TYPES) for c in (id_col, loc)) or (
            (with_time or kind == "taps") and types["time"].upper().startswith("TIMESTAMP WITH")
        ):
            return None  # float ids, zoned times: synth.records reads them (same rules)
        self._read_path = "hash"
        if fmt == "parquet":
            grouped = self._wide_grouped(
                p,
                kind=kind,
                loc=loc,
                tap="tap" in columns,
                locations=locations,
                height=height,
                time_bin_minutes=time_bin_minutes,
                on_unknown=on_unknown,
            )
            if grouped is not None:
                table, unknown_rows = grouped
                if unknown_rows:
                    _warn_dropped(p, loc, sum(unknown_rows.values()), len(unknown_rows))
                return DuckDBPrefixCounter(
                    self,
                    table,
                    height=height,
                    has_bins=with_time,
                    n_bins=1 if time_bin_minutes is None else -(-1440 // int(time_bin_minutes)),
                    n_locations=len(locations),
                )
        locs = self._name("locs")
        self.con.register(
            "_locations",
            pa.table({"name": pa.array(list(locations)), "code": np.arange(len(locations))}),
        )
        self.sql(
            f"CREATE TABLE {locs} AS SELECT name, CAST(code AS INTEGER) AS code FROM _locations"
        )
        self.con.unregister("_locations")
        loc_expr = _id_sql(_ident(loc))
        minute, stamp = "NULL", "NULL"
        if with_time or kind == "taps":
            minute, stamp = self._minute_expr(
                "time", types.get("time", "VARCHAR"), clock=kind == "sequences"
            )
        # one pass for every check, by location value: rows with an id, with a time (when used),
        # with an integer pos >= 0 (sequences); locations empty or unknown
        # every value normalised once, in one projection over the file
        kept = (["tap"] if kind == "taps" and "tap" in columns else []) + (
            ["file_row_number"] if fmt == "parquet" else []
        )
        raw_sid, raw_loc = (f"CAST({_ident(c)} AS VARCHAR)" for c in (id_col, loc))
        minute_sql, stamp_sql = minute, stamp

        def projection(sid_expr: str, loc_sql: str, *extra: str) -> str:
            cols = [
                f"{_ident(id_col)} IS NULL AS _no_id",
                f"{sid_expr} AS _sid",
                f"{loc_sql} AS _loc",
                f"{_pos_sql('pos') if kind == 'sequences' else 'NULL'} AS _num",
                f"{minute_sql} AS _minute",
                f"{stamp_sql if kind == 'taps' else 'NULL'} AS _stamp",
                *(_ident(c) for c in kept),
                *extra,
            ]
            return f"(SELECT {', '.join(cols)} FROM {file})"

        file = src
        src = projection(
            _id_sql(_ident(id_col)),
            loc_expr,
            f"{raw_sid} IS DISTINCT FROM {_id_sql(_ident(id_col))} AS _sid_changed",
            f"{raw_loc} IS DISTINCT FROM {loc_expr} AS _loc_changed",
        )
        loc_expr, stamp = "_loc", "_stamp"
        minute = "_minute" if minute != "NULL" else minute
        sid, number = "_sid", "_num"
        pos = f"CAST({number} AS BIGINT)"
        no_id = f"_no_id OR {sid} = ''"
        no_time = f"{minute} IS NULL" if minute != "NULL" else "FALSE"
        bad_pos = (
            f"{number} IS NULL OR {number} < 0 OR {number} <> floor({number})"
            if kind == "sequences"
            else "FALSE"
        )
        per_location = self.sql(
            f"SELECT {loc_expr} AS v, count(*), count(*) FILTER (WHERE {no_id}), "
            f"count(*) FILTER (WHERE {no_time}), count(*) FILTER (WHERE {bad_pos}), "
            "bool_or(_sid_changed), bool_or(_loc_changed) "
            f"FROM {src} GROUP BY v"
        ).fetchall()
        # the later passes normalise only the columns where normalising changes a value (the
        # same values either way: the rule is per value, this only skips work)
        src = projection(
            _id_sql(_ident(id_col)) if any(r[5] for r in per_location) else raw_sid,
            _id_sql(_ident(loc)) if any(r[6] for r in per_location) else raw_loc,
        )
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
            raise InputError(f"{p}: column 'time': {n_no_time} value(s) that are not a time")
        known_names = set(locations)
        unknown = sorted((str(r[0]), int(r[1])) for r in per_location if r[0] not in known_names)
        if unknown:
            n = sum(c for _, c in unknown)
            if on_unknown == "error":
                raise InputError(
                    f"{p}: column '{loc}': location {unknown[0][0]!r} is not in the taxonomy "
                    f"({n} rows, {len(unknown)} distinct unknown locations; pass "
                    "on_unknown='drop' to drop them)"
                )
            _warn_dropped(p, loc, n, len(unknown))
        known = f"JOIN {locs} l ON {loc_expr} = l.name"
        if kind == "sequences":
            if n_bad_pos:
                raise InputError(
                    f"{p}: column 'pos': {n_bad_pos} value(s) that are not integers >= 0"
                )

            def rows(bucket: str) -> str:
                return (
                    f"SELECT {sid} AS sid, {pos} AS pos, l.code AS code, "
                    f"{minute} AS minute FROM {src} {known} WHERE {bucket}"
                )

        else:
            off = f"NOT ({_off_sql('tap')})" if "tap" in columns else "TRUE"

            def rows(bucket: str) -> str:  # the bucket filter must apply below the window
                return (
                    f"SELECT {sid} AS sid, row_number() OVER (PARTITION BY "
                    f"{sid} ORDER BY {stamp}, file_row_number) - 1 AS pos, "
                    f"l.code AS code, {minute} AS minute FROM {src} {known} "
                    f"WHERE {off} AND {bucket}"
                )

        table = self._name("seq")
        self._wide(table, rows, sid, height, with_time, time_bin_minutes, n_rows)
        if kind == "sequences":
            irregular = self.sql(
                f"SELECT count(*) FROM {table} WHERE lo <> 0 OR hi <> n - 1"
            ).fetchone()[0]
            if irregular:  # duplicates are an error; gaps (or dropped rows) are renumbered
                dup = self.sql(
                    f"SELECT {sid}, {pos} FROM {src} GROUP BY ALL "
                    "HAVING count(*) > 1 ORDER BY ALL LIMIT 1"
                ).fetchall()
                if dup:
                    raise InputError(
                        f"{p}: column 'pos': duplicate position {dup[0][1]} in sequence "
                        f"{dup[0][0]!r}"
                    )

                def renumbered(bucket: str) -> str:
                    return (
                        "SELECT sid, row_number() OVER (PARTITION BY sid ORDER BY pos) - 1 AS pos, "
                        f"code, minute FROM ({rows(bucket)})"
                    )

                self.sql(f"DROP TABLE {table}")
                self._wide(table, renumbered, sid, height, with_time, time_bin_minutes, n_rows)
        return DuckDBPrefixCounter(
            self,
            table,
            height=height,
            has_bins=with_time,
            n_bins=1 if time_bin_minutes is None else -(-1440 // int(time_bin_minutes)),
            n_locations=len(locations),
        )

    def _minute_expr(self, column: str, sql_type: str, *, clock: bool) -> tuple[str, str]:
        """(minute-of-day expression, sortable time expression) of a time column, each value on
        its own as :mod:`synth.times` reads it: a timestamp (wall clock as written) or, with
        ``clock`` (long-format sequences), a clock time ``HH:MM[:SS]`` (hours past 23 wrap)."""
        col = _ident(column)
        if sql_type.upper().startswith(("TIMESTAMP", "DATE")):
            stamp = f"CAST({col} AS TIMESTAMP)"
            return f"(hour({stamp}) * 60 + minute({stamp}))", stamp
        if sql_type.upper().startswith("TIME"):
            return f"(hour({col}) * 60 + minute({col}))", col
        text = f"CAST({col} AS VARCHAR)"
        stamp = _stamp_sql(text)
        minute = f"hour({stamp}) * 60 + minute({stamp})"
        if clock:  # a clock time is never a timestamp: its regular expression runs on the others
            is_clock, clock_minutes = _clock_sql(text)
            minute = (
                f"CASE WHEN {stamp} IS NOT NULL THEN {minute} WHEN {is_clock} THEN "
                f"({clock_minutes}) % 1440 END"
            )
        return f"({minute})", stamp

    def _memory_limit_bytes(self) -> float:
        value = str(
            self.sql("SELECT value FROM duckdb_settings() WHERE name = 'memory_limit'").fetchone()[
                0
            ]
        )
        units = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
        units |= {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
        number, _, unit = value.strip().partition(" ")
        try:
            return float(number) * units.get(unit.upper() or "B", 1)
        except ValueError:
            return 2**30

    def _wide(
        self,
        table: str,
        rows: Callable[[str], str],
        sid: str,
        height: int,
        with_time: bool,
        width: int | None,
        n_rows: int,
    ) -> None:
        """One row per sequence: its first ``height`` codes [and time bins, running maximum].

        ``rows(condition)`` is the query of the input rows (``sid, pos, code, minute``) restricted
        to a condition on the source's columns; ``sid`` the sequence id expression there. Large
        inputs are grouped in passes over disjoint hash buckets of the sequence id, each small
        enough for the memory limit (about 30M input rows per GB), appended to one table; the
        bucket is filtered at the scan, below any window (DuckDB does not push it through one).
        ``n_rows`` (the source's row count, an upper bound on ``rows``) sizes the passes.
        """
        cols = [f"max(code) FILTER (WHERE pos = {j}) AS c{j}" for j in range(height)]
        minutes = [f"max(minute) FILTER (WHERE pos = {j})" for j in range(height)]
        if with_time:
            for j in range(height):
                running = ", ".join(f"coalesce({m}, 0)" for m in minutes[: j + 1])
                cols.append(f"CAST(greatest({running}) // {int(width or 1)} AS INTEGER) AS b{j}")
        per_pass = max(
            self._min_rows_per_pass, int(self._rows_per_gb * self._memory_limit_bytes() / 1e9)
        )
        passes = max(1, -(-n_rows // per_pass))
        agg = f"{', '.join(cols)}, count(*) AS n, min(pos) AS lo, max(pos) AS hi"
        for b in range(passes):
            bucket = "TRUE" if passes == 1 else f"hash({sid}) % {passes} = {b}"
            select = f"SELECT {agg} FROM ({rows(bucket)}) r GROUP BY sid"
            self.sql(
                f"CREATE TABLE {table} AS {select}" if b == 0 else f"INSERT INTO {table} {select}"
            )

    def _wide_grouped(
        self,
        path: Path,
        *,
        kind: str,
        loc: str,
        tap: bool,
        locations: Sequence[str],
        height: int,
        time_bin_minutes: int | None,
        on_unknown: str,
    ) -> tuple[str, dict[str, int]] | None:
        """The wide table of a Parquet file whose rows are grouped by sequence, in one streamed
        pass (:class:`_GroupedScan`; in memory when it surely fits in ``memory_limit``), and the
        unknown locations dropped (name -> rows); ``None`` when the file is not grouped in order,
        or needs a check or message of the SQL path (which then reads it: same table, same
        errors)."""
        try:
            scan = _GroupedScan(
                path,
                kind=kind,
                loc=loc,
                tap=tap,
                locations=locations,
                height=height,
                time_bin_minutes=time_bin_minutes,
                on_unknown=on_unknown,
                batch_rows=self._grouped_batch_rows,
            )
        except (_NotGrouped, pa.ArrowException):  # e.g. an unreadable file: the SQL path's error
            return None
        table = self._name("seq")
        cols = [f"c{j} {scan.code_type}" for j in range(height)]
        if time_bin_minutes is not None:
            cols += [f"b{j} SMALLINT" for j in range(height)]
        # in memory when it surely fits (at most one sequence per input row), else on disk
        row_bytes = height * (scan.code_dtype().itemsize + (2 if time_bin_minutes else 0))
        temporary = scan.n_rows * row_bytes <= self._memory_limit_bytes()
        self.sql(f"CREATE {'TEMP ' if temporary else ''}TABLE {table} ({', '.join(cols)})")
        pending: list[pa.Table] = []

        def insert() -> None:  # one INSERT per million rows or so (each has a fixed cost)
            self.con.register("_wide_rows", pa.concat_tables(pending))
            self.sql(f"INSERT INTO {table} SELECT * FROM _wide_rows")
            self.con.unregister("_wide_rows")
            pending.clear()

        try:
            for wide in scan.tables():
                pending.append(wide)
                if sum(t.num_rows for t in pending) >= self._grouped_batch_rows:
                    insert()
            if pending:
                insert()
        except (_NotGrouped, pa.ArrowException):
            self.sql(f"DROP TABLE {table}")
            return None
        self._read_path = "grouped"
        return table, scan.unknown

    # ------------------------------------------------------------------ SBH
    def sbh_scan(
        self,
        path: str | os.PathLike[str],
        *,
        location_column: str = "stop_id",
        unit_column: str | None = None,
    ) -> DuckDBEventScan | None:
        """Events of a trips or taps file with the usual column names, read out of core (``None``:
        another layout, loaded by :mod:`synth.records`). Bounding by unit needs Parquet (its row
        numbers break ties); naive timestamps, ISO strings or ``HH:MM``."""
        p = Path(path)
        if not p.is_file():
            raise InputError(f"{p}: file not found")
        return _sbh_scan(self, p, location_column, unit_column)

    def sbh_counts(
        self,
        events: SBHEvents,
        tables: Sequence[str],
        *,
        n_locations: int,
        n_bins: int,
        bin_minutes: int,
        max_contributions: int | None,
    ) -> dict[str, Counts]:
        cols = event_columns(events, max_contributions)
        bound = "unit" in cols
        self.con.register("_events", pa.table(cols))
        kept = self._name("events")
        if bound:
            self.sql(
                f"CREATE TABLE {kept} AS SELECT side, part, minute, loc FROM _events QUALIFY "
                "row_number() OVER (PARTITION BY unit, side ORDER BY minute, part, loc, idx) "
                f"<= {int(max_contributions)}"  # type: ignore[arg-type]
            )
        else:
            self.sql(f"CREATE TABLE {kept} AS SELECT side, part, minute, loc FROM _events")
        self.con.unregister("_events")
        out = {
            name: self._table_counts(kept, name, n_locations, n_bins, bin_minutes)
            for name in tables
        }
        self.sql(f"DROP TABLE {kept}")
        return out

    def _table_counts(
        self, kept: str, name: str, n_locations: int, n_bins: int, bin_minutes: int
    ) -> Counts:
        side, has_time, has_loc = table_spec(name)
        key = "part"
        if has_time:
            key = f"({key} * {n_bins} + minute // {bin_minutes})"
        if has_loc:
            key = f"({key} * {n_locations} + loc)"
        res = self.sql(
            f"SELECT CAST({key} AS BIGINT) AS k, count(*) AS n FROM {kept} WHERE side = {side} "
            "GROUP BY k ORDER BY k"
        ).fetchnumpy()
        return np.asarray(res["k"], dtype=np.int64), np.asarray(res["n"], dtype=np.int64)


_OFF = "(" + ", ".join(_quote(word) for word in OFF_VALUES) + ")"
_TICKS_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _plain_id(value: str) -> str:
    """One identifier normalised as :func:`synth.io.id_strings` does it."""
    text = value.strip(ID_SPACE)
    return re.sub(DOT_ZERO, r"\1", text)


def _day_sql(stamp: str) -> str:
    return f"date_diff('day', DATE '1970-01-01', CAST({stamp} AS DATE))"


def _off_sql(column: str) -> str:
    """A tap-off, per value, as :mod:`synth.records` reads the ``tap`` column (missing: on)."""
    text = f"coalesce(CAST({_ident(column)} AS VARCHAR), '')"
    return f"lower({_trimmed(text)}) IN {_OFF}"


_NO_DAY = int(np.iinfo(np.int64).min)


def _warn_dropped(path: Path, column: str, n_rows: int, n_distinct: int) -> None:
    """The warning for input rows dropped because their location is not in the taxonomy (the
    grouped pass and the SQL path alike); its stack level points at the synthesizer's caller."""
    warnings.warn(
        f"{path}: dropped {n_rows} rows ({n_distinct} distinct locations) of column '{column}' not "
        "in the taxonomy",
        UnknownLocationWarning,
        stacklevel=4,
    )


class _NotGrouped(Exception):
    """The file is not grouped by sequence in order, or needs the SQL path's checks."""


class _GroupedScan:
    """One streamed pass over a Parquet file whose rows are grouped by sequence, in order.

    Long-format sequences written by sequence (``seq_id`` runs in increasing order, ``pos``
    strictly increasing inside a run) and taps written by card (``card_id`` runs in increasing
    order, ``time`` non-decreasing inside a run) need no grouping: the first ``height`` kept rows
    of a run are the sequence (renumbered past gaps and dropped rows, as the SQL path does; taps in
    time order, ties by row). Each Arrow batch is checked and turned into wide rows (``c0..``
    codes, -1 pad; ``b0..`` time bins, running maximum) in numpy, the last, maybe unfinished, run
    carried to the next batch. Run ids increasing from run to run (in byte order, or by length
    then byte order as unpadded numbers are) prove that no id comes back later in the file, so
    every run is a whole sequence. Anything else (ids out of order, ``pos`` not increasing, nulls,
    empty values, unknown locations under ``on_unknown='error'``, column types other than string
    or integer ids / integer ``pos`` / naive timestamps) raises :class:`_NotGrouped` and the
    caller falls back to the SQL grouping, which gives the same table or the same error.
    """

    def __init__(
        self,
        path: Path,
        *,
        kind: str,
        loc: str,
        tap: bool,
        locations: Sequence[str],
        height: int,
        time_bin_minutes: int | None,
        on_unknown: str,
        batch_rows: int,
    ) -> None:
        import pyarrow.parquet as pq

        self.path = path
        self.height = height
        self.width = time_bin_minutes
        self.on_unknown = on_unknown
        self.batch_rows = batch_rows
        self.id_col = "seq_id" if kind == "sequences" else "card_id"
        self.order_col = "pos" if kind == "sequences" else "time"  # the order inside a run
        self.time_col = "time" if kind == "taps" or time_bin_minutes is not None else None
        self.loc_col = loc
        self.tap_col = "tap" if kind == "taps" and tap else None
        wanted = (self.id_col, self.order_col, loc, self.time_col, self.tap_col)
        self.columns = list(dict.fromkeys(c for c in wanted if c))
        source = pq.ParquetFile(path)
        self.n_rows = int(source.metadata.num_rows)
        schema = source.schema_arrow
        if any(schema.get_field_index(name) < 0 for name in self.columns):
            raise _NotGrouped  # missing, or a name given to several columns
        types = {name: schema.field(name).type for name in self.columns}

        def text(t: pa.DataType) -> bool:
            if pa.types.is_dictionary(t):
                t = t.value_type
            return bool(pa.types.is_string(t) or pa.types.is_large_string(t))

        id_type = types[self.id_col]
        if not (text(id_type) or pa.types.is_integer(id_type)) or id_type == pa.uint64():
            raise _NotGrouped
        pos = types[self.order_col]
        if self.order_col == "pos" and not (pa.types.is_integer(pos) and pos != pa.uint64()):
            raise _NotGrouped
        if not text(types[loc]) or (self.tap_col and not text(types[self.tap_col])):
            raise _NotGrouped
        if self.time_col:
            t = types[self.time_col]
            if not pa.types.is_timestamp(t) or t.tz is not None:
                raise _NotGrouped
            self.per_minute = 60 * _TICKS_PER_SECOND[t.unit]
        self.codes = {str(name): code for code, name in enumerate(locations)}
        self.code_type = "SMALLINT" if len(locations) < 2**15 else "INTEGER"
        self.code_dtype = np.int16 if len(locations) < 2**15 else np.int32
        self.unknown: dict[str, int] = {}
        # the last run read, maybe continued by the next batch: id, last pos / time, its first
        # codes and minutes (-1 pad), its number of kept rows
        self._last_id: Any = None
        self._sorted = True  # run ids increasing so far (byte order, or numbers)
        self._by_length = not pa.types.is_integer(id_type)  # ... by length, then byte order
        self._last_order = 0
        self._open_codes = np.full(height, -1, dtype=self.code_dtype)
        self._open_minutes = np.full(height, -1, dtype=np.int16)
        self._open_kept = 0

    def tables(self) -> Iterator[pa.Table]:
        """Arrow tables of finished wide rows, batch by batch (raises :class:`_NotGrouped`).
        The next batch is decoded in a thread while this one is checked and pivoted."""
        from concurrent.futures import ThreadPoolExecutor

        import pyarrow.parquet as pq

        dictionary = [c for c in (self.loc_col, self.tap_col) if c]
        # without pre-buffering: pyarrow keeps pre-buffered column chunks until the iterator ends
        # (about the file's size in memory)
        source = pq.ParquetFile(self.path, read_dictionary=dictionary, pre_buffer=False)
        batches = source.iter_batches(batch_size=self.batch_rows, columns=self.columns)
        with ThreadPoolExecutor(1) as reader:
            ahead = reader.submit(next, batches, None)
            while (batch := ahead.result()) is not None:
                ahead = reader.submit(next, batches, None)
                wide = self._batch(batch) if batch.num_rows else None
                if wide is not None:
                    yield wide
        if self._last_id is None:
            raise _NotGrouped  # no rows: the SQL path's error
        if self._open_kept:
            yield self._table(self._open_codes[:, None], self._open_minutes[:, None])

    def _batch(self, batch: pa.RecordBatch) -> pa.Table | None:
        """Check a batch; the wide rows of the runs it finishes (``None``: no run finished)."""
        import pyarrow.compute as pc

        m = batch.num_rows
        ids = batch.column(self.id_col)
        if pa.types.is_dictionary(ids.type):
            ids = ids.dictionary_decode()
        if ids.null_count or (
            not pa.types.is_integer(ids.type)
            and (
                pc.min(pc.binary_length(ids)).as_py() == 0
                or pc.any(pc.match_substring_regex(ids, DOT_ZERO)).as_py()
                or not pc.all(pc.equal(pc.utf8_trim(ids, characters=ID_SPACE), ids)).as_py()
            )
        ):
            raise _NotGrouped  # ids to normalise (synth.io.id_strings): the SQL path does it
        same = np.zeros(m, dtype=bool)  # row i continues the run of row i - 1
        if m > 1:
            same[1:] = pc.equal(ids.slice(1), ids.slice(0, m - 1)).to_numpy(zero_copy_only=False)
        last_id = self._last_id
        cont = last_id is not None and ids[0].as_py() == last_id
        same[0] = cont
        starts = np.flatnonzero(~same)  # first row of each run starting in this batch
        heads = ids.take(pa.array(starts))
        if last_id is not None:
            heads = pa.concat_arrays([pa.array([last_id], type=ids.type), heads])
        self._check_increasing(heads)
        order = self._ticks(batch, self.order_col)
        step = order[1:] - order[:-1]
        if self.order_col == "pos":  # positions >= 0, strictly increasing (no duplicates)
            if order.min() < 0 or np.any(same[1:] & (step <= 0)):
                raise _NotGrouped
            if cont and order[0] <= self._last_order:
                raise _NotGrouped
        elif np.any(same[1:] & (step < 0)) or (cont and order[0] < self._last_order):
            raise _NotGrouped  # taps: time non-decreasing, ties in file order
        self._last_order = int(order[-1])
        code, minute, dropped = self._codes(batch)
        n_cont = int(starts[0]) if starts.size else m  # rows continuing the open run
        if n_cont:
            self._extend_open(code[:n_cont], None if minute is None else minute[:n_cont])
        if not starts.size:
            return None
        # the open run is finished; the runs starting here are whole but for the last one
        finished = (self._open_codes[:, None], self._open_minutes[:, None])
        had_open = self._open_kept > 0
        lengths = np.diff(starts, append=m)
        code, minute = code[n_cont:], None if minute is None else minute[n_cont:]
        if dropped:  # the first kept rows of each run: compact the kept rows
            kept = code >= 0
            count = np.add.reduceat(kept.astype(np.int64), starts - n_cont)
            code, minute = code[kept], None if minute is None else minute[kept]
            first = np.cumsum(count) - count
        else:
            count, first = lengths, starts - n_cont
        codes = np.full((self.height, starts.size), -1, dtype=self.code_dtype)
        minutes = np.full((self.height, starts.size), -1, dtype=np.int16)
        for j in range(self.height):
            has = np.flatnonzero(count > j)
            codes[j, has] = code[first[has] + j]
            if minute is not None:
                minutes[j, has] = minute[first[has] + j]
        self._last_id = ids[m - 1].as_py()
        self._open_codes, self._open_minutes = codes[:, -1].copy(), minutes[:, -1].copy()
        self._open_kept = int(count[-1])
        codes, minutes = codes[:, :-1], minutes[:, :-1]
        if dropped:  # runs without a kept row are no sequence
            live = count[:-1] > 0
            codes, minutes = codes[:, live], minutes[:, live]
        if had_open:
            codes = np.concatenate([finished[0], codes], axis=1)
            minutes = np.concatenate([finished[1], minutes], axis=1)
        return self._table(codes, minutes)

    def _check_increasing(self, heads: pa.Array) -> None:
        """Run ids, in file order, must increase (in byte order, or by length then byte order
        for unpadded numbers): then no id comes back later in the file."""
        import pyarrow.compute as pc

        if len(heads) < 2:
            return
        up = pc.greater(heads.slice(1), heads.slice(0, len(heads) - 1))
        up = up.to_numpy(zero_copy_only=False)
        self._sorted = self._sorted and bool(up.all())
        if self._by_length:
            size = pc.binary_length(heads).to_numpy(zero_copy_only=False)
            longer, equal = size[1:] > size[:-1], size[1:] == size[:-1]
            self._by_length = bool(np.all(longer | (equal & up)))
        if not (self._sorted or self._by_length):
            raise _NotGrouped  # a run id not above the one before: maybe seen earlier

    def _extend_open(self, code: npt.NDArray[Any], minute: npt.NDArray[Any] | None) -> None:
        """Rows continuing the open run (carried from the last batch)."""
        kept = np.flatnonzero(code >= 0)
        room = kept[: max(self.height - self._open_kept, 0)]
        at = self._open_kept + np.arange(room.size)
        self._open_codes[at] = code[room]
        if minute is not None:
            self._open_minutes[at] = minute[room]
        self._open_kept += int(kept.size)

    def _ticks(self, batch: pa.RecordBatch, name: str) -> npt.NDArray[np.int64]:
        """An integer column (``pos``) or a timestamp column in ticks, as int64."""
        col = batch.column(name)
        if col.null_count:
            raise _NotGrouped
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.int64())
        return np.asarray(col.to_numpy(), dtype=np.int64)

    def _codes(
        self, batch: pa.RecordBatch
    ) -> tuple[npt.NDArray[Any], npt.NDArray[np.int16] | None, bool]:
        """Location code of each row (-1: dropped: unknown, or a tap off), its minute of day,
        whether any row is dropped."""
        locs = batch.column(self.loc_col)
        if locs.null_count:
            raise _NotGrouped
        names = ["" if v is None else _plain_id(v) for v in locs.dictionary.to_pylist()]
        index = locs.indices.to_numpy(zero_copy_only=False)
        lut = np.array([self.codes.get(name, -1) for name in names], dtype=np.int64)
        used = np.bincount(index, minlength=len(names))
        if any(not name for name, n in zip(names, used, strict=True) if n):  # null or empty
            raise _NotGrouped
        unknown = np.flatnonzero((lut < 0) & (used > 0))
        if unknown.size and self.on_unknown == "error":
            raise _NotGrouped
        for j in unknown:
            self.unknown[names[j]] = self.unknown.get(names[j], 0) + int(used[j])
        code = lut.astype(self.code_dtype)[index]
        dropped = bool(unknown.size)
        if self.tap_col:
            taps = batch.column(self.tap_col)
            if taps.null_count:
                raise _NotGrouped
            off = np.array(
                [
                    v is not None and v.strip(ID_SPACE).lower() in OFF_VALUES
                    for v in taps.dictionary.to_pylist()
                ],
                dtype=bool,
            )[taps.indices.to_numpy(zero_copy_only=False)]
            code[off] = -1
            dropped = dropped or bool(off.any())
        minute = None
        if self.width is not None:
            ticks = self._ticks(batch, "time")
            minute = ((ticks % (1440 * self.per_minute)) // self.per_minute).astype(np.int16)
        return code, minute, dropped

    def _table(self, codes: npt.NDArray[Any], minutes: npt.NDArray[Any]) -> pa.Table:
        """Wide rows (codes, minutes: ``height x sequences``): ``c0..`` [``b0..``]."""
        cols = {f"c{j}": codes[j] for j in range(self.height)}
        if self.width is not None:
            bins = np.maximum.accumulate(np.maximum(minutes, 0), axis=0) // int(self.width)
            cols.update({f"b{j}": bins[j].astype(np.int16) for j in range(self.height)})
        return pa.table(cols)


class DuckDBEventScan:
    """Tap events of a trips or taps file, as a DuckDB table (``side, mode, day, minute, loc,
    unit, row``), with the distinct labels the release's grid is built from."""

    def __init__(self, engine: DuckDBEngine, table: str, kind: str, sides: tuple[int, ...]):
        self.engine = engine
        self.table = table
        self.kind = kind
        self.sides = sides
        distinct = engine.sql  # short alias
        self.modes = sorted(
            str(r[0]) for r in distinct(f"SELECT DISTINCT mode FROM {table}").fetchall()
        )
        self.days = sorted(
            int(r[0]) for r in distinct(f"SELECT DISTINCT day FROM {table}").fetchall()
        )
        self.locations = sorted(
            str(r[0]) for r in distinct(f"SELECT DISTINCT loc FROM {table}").fetchall()
        )

    def counts(
        self,
        mode_code: npt.NDArray[np.int64],
        day_code: npt.NDArray[np.int64],
        loc_code: npt.NDArray[np.int64],
        *,
        n_days: int,
        tables: Sequence[str],
        n_locations: int,
        n_bins: int,
        bin_minutes: int,
        max_contributions: int | None,
    ) -> dict[str, Counts]:
        """Cells of each table; codes index :attr:`modes`, :attr:`days`, :attr:`locations` (-1:
        outside the public partitions, dropped before bounding)."""
        eng, con = self.engine, self.engine.con
        maps: dict[str, tuple[list[Any], np.ndarray]] = {
            "_mode_map": (list(self.modes), mode_code),
            "_day_map": (list(self.days), day_code),
            "_loc_map": (list(self.locations), loc_code),
        }
        for name, (labels, codes) in maps.items():
            codes = np.asarray(codes, dtype=np.int64)
            keep = codes >= 0
            values = [v for v, k in zip(labels, keep, strict=True) if k]
            con.register(name, pa.table({"v": pa.array(values), "code": codes[keep]}))
        kept = eng._name("events")
        bound = (
            f"QUALIFY row_number() OVER (PARTITION BY unit, side ORDER BY minute, part, loc, row) "
            f"<= {int(max_contributions)}"
            if max_contributions is not None
            else ""
        )
        eng.sql(
            f"CREATE TABLE {kept} AS SELECT side, part, minute, loc FROM (SELECT e.side, "
            f"m.code * {int(n_days)} + d.code AS part, e.minute, l.code AS loc, e.unit, e.row "
            f"FROM {self.table} e JOIN _mode_map m ON e.mode = m.v JOIN _day_map d ON e.day = d.v "
            f"JOIN _loc_map l ON e.loc = l.v) {bound}"
        )
        for name in maps:
            con.unregister(name)
        out = {
            name: eng._table_counts(kept, name, n_locations, n_bins, bin_minutes) for name in tables
        }
        eng.sql(f"DROP TABLE {kept}")
        return out

    def close(self) -> None:
        self.engine.sql(f"DROP TABLE IF EXISTS {self.table}")


def _sbh_scan(
    engine: DuckDBEngine, path: Path, location_column: str, unit_column: str | None
) -> DuckDBEventScan | None:
    source = engine._source(path)
    if source is None:
        return None
    src, fmt = source
    described = engine.sql(f"DESCRIBE SELECT * FROM {src}").fetchall()
    types = {str(r[0]): str(r[1]).upper() for r in described}
    if unit_column is not None and (unit_column not in types or fmt != "parquet"):
        return None  # the row-order tie-break needs Parquet's row numbers
    if "on_stop" in types and "on_time" in types:
        kind = "trip"
        sides: list[tuple[int, str, str, str]] = [(0, "on_time", "on_stop", "TRUE")]
        if "off_stop" in types and "off_time" in types:
            # as pandas reads a CSV file: NA, null, ... are missing times (not ids)
            na = ", ".join(_quote(v) for v in CSV_NA_VALUES)
            sides.append(
                (
                    1,
                    "off_time",
                    "off_stop",
                    "off_stop IS NOT NULL AND off_time IS NOT NULL AND "
                    f"trim(CAST(off_time AS VARCHAR)) NOT IN ({na})",
                )
            )
    elif {location_column, "time"} <= set(types) and "seq_id" not in types:
        kind = "tap"
        if "tap" in types:
            is_off = _off_sql("tap")
            sides = [
                (0, "time", location_column, f"NOT ({is_off})"),
                (1, "time", location_column, is_off),
            ]
        else:
            sides = [(0, "time", location_column, "TRUE")]
    else:
        return None
    ids = [lcol for _, _, lcol, _ in sides] + [c for c in (unit_column, "mode") if c in types]
    if any(types[tcol].startswith(("TIMESTAMP WITH", "TIMESTAMPTZ")) for _, tcol, _, _ in sides):
        return None  # zoned times: synth.records reads them (the same rules)
    if not all(types[c].startswith(_ID_TYPES) for c in ids if c):
        return None  # float ids: synth.records refuses the non-integral ones
    mode = f"coalesce({_id_sql('mode')}, '')" if "mode" in types else "'all'"
    unit = _id_sql(_ident(unit_column)) if unit_column else "NULL"
    row = "file_row_number" if fmt == "parquet" else "0"
    selects = []
    for side, tcol, lcol, cond in sides:
        col = _ident(tcol)
        stamp, day = f"CAST({col} AS TIMESTAMP)", None
        minute = f"hour({stamp}) * 60 + minute({stamp})"
        if not types[tcol].startswith(("TIMESTAMP", "DATE")):
            # each value on its own (synth.times): a clock time HH:MM has no day (the times of
            # tap files and trips' on_time are timestamps, as synth.records reads them)
            text = f"CAST({col} AS VARCHAR)"
            stamp, day = _stamp_sql(text), None
            minute = f"hour({stamp}) * 60 + minute({stamp})"
            if tcol == "off_time":
                is_clock, clock = _clock_sql(text)
                of_clock = f"CASE WHEN {clock} < 1440 THEN {clock} END"
                minute = f"CASE WHEN {is_clock} THEN {of_clock} ELSE {minute} END"
                day = f"CASE WHEN {is_clock} THEN {_NO_DAY} ELSE {_day_sql(stamp)} END"
        if "date" in types:
            day = "date_diff('day', DATE '1970-01-01', TRY_CAST(CAST(date AS VARCHAR) AS DATE))"
        elif day is None:
            day = _day_sql(stamp)
        selects.append(
            f"SELECT CAST({side} AS TINYINT) AS side, {mode} AS mode, "
            f"CAST({day} AS BIGINT) AS day, "
            f"CAST({minute} AS INTEGER) AS minute, "
            f"{_id_sql(_ident(lcol))} AS loc, {unit} AS unit, {row} AS row, "
            f"CAST({col} AS VARCHAR) AS raw_time FROM {src} WHERE {cond}"
        )
    table = engine._name("sbh_events")
    engine.sql(f"CREATE TABLE {table} AS {' UNION ALL '.join(selects)}")
    empty_unit = "unit IS NULL OR unit = ''" if unit_column else "FALSE"
    bad = engine.sql(
        f"SELECT count(*) FILTER (WHERE minute IS NULL OR day IS NULL), "
        f"count(*) FILTER (WHERE loc IS NULL OR loc = ''), "
        f"count(*) FILTER (WHERE {empty_unit}), "
        f"count(*) FROM {table}"
    ).fetchone()
    if bad[3] == 0:
        raise InputError(f"{path}: no records")
    if bad[0]:
        raise InputError(f"{path}: {bad[0]} event(s) without a parsable time or date")
    if bad[1]:
        raise InputError(f"{path}: {bad[1]} event(s) without a location")
    if bad[2]:
        raise InputError(f"{path}: column '{unit_column}': {bad[2]} empty value(s)")
    engine.sql(f"ALTER TABLE {table} DROP COLUMN raw_time")
    return DuckDBEventScan(engine, table, kind, tuple(side for side, *_ in sides))
