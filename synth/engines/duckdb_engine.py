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
(:class:`~synth.engines.duckdb_scan.GroupedScan`); any other file, or any check failing, is
grouped by SQL hash aggregation, with the same result (or the same error).

The SQL of the per-value rules is in :mod:`~synth.engines.duckdb_sql`, the prefix-tree counter in
:mod:`~synth.engines.duckdb_prefix`, the streamed grouping and the SBH event scan in
:mod:`~synth.engines.duckdb_scan`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from synth.engines.base import (
    Counts,
    Engine,
    SBHEvents,
    event_columns,
    table_spec,
)
from synth.engines.duckdb_prefix import DuckDBPrefixCounter
from synth.engines.duckdb_scan import DuckDBEventScan, GroupedScan, NotGrouped, scan_events
from synth.engines.duckdb_sql import (
    check_file_values,
    clock_sql,
    file_layout,
    id_sql,
    ident,
    per_location_sql,
    pos_sql,
    quote,
    ranged_sql,
    rows_sql,
    stamp_expr,
    warn_dropped,
)
from synth.errors import ConfigError, InputError
from synth.records.positions import bad_position_error, duplicate_position_error, duplicate_row

__all__ = ["DuckDBEngine"]


class DuckDBEngine(Engine):
    """DuckDB over Parquet/CSV: out of core, bounded memory (``memory_limit``)."""

    name = "duckdb"
    #: input rows grouped per pass of the sequence table, per GB of memory limit (and at least)
    _rows_per_gb = 30_000_000
    _min_rows_per_pass = 1_000_000
    #: rows per Arrow batch of the grouped-file pass (:class:`GroupedScan`)
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
        self.sql(f"SET temp_directory = {quote(str(root / 'spill'))}")
        self.sql("SET preserve_insertion_order = false")
        try:
            if memory_limit is not None:
                self.sql(f"SET memory_limit = {quote(str(memory_limit))}")
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

    def temp_table(self, stem: str) -> str:
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
        table = self.temp_table("seq")
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

    def read_source(self, path: Path) -> tuple[str, str] | None:
        from synth.io import table_format

        fmt = table_format(path)
        if fmt == "parquet":
            return f"read_parquet({quote(str(path))}, file_row_number = true)", fmt
        if fmt == "csv":
            return f"read_csv({quote(str(path))}, header = true, all_varchar = true)", fmt
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
        source = self.read_source(p)
        if source is None:
            return None
        src, fmt = source
        described = self.sql(f"DESCRIBE SELECT * FROM {src}").fetchall()
        columns = [str(r[0]) for r in described]
        types = {str(r[0]): str(r[1]) for r in described}
        layout = file_layout(p, columns, types, fmt, location_column, time_bin_minutes)
        if layout is None:
            return None  # another layout, float ids, zoned times: synth.records reads them
        kind, loc, id_col = layout
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
                    warn_dropped(p, loc, sum(unknown_rows.values()), len(unknown_rows))
                return self._counter(table, height, time_bin_minutes, len(locations))
        return self._counter_by_sql(
            p,
            src,
            fmt,
            columns,
            types,
            (kind, loc, id_col),
            locations,
            height,
            time_bin_minutes,
            on_unknown,
        )

    def _counter_by_sql(
        self,
        p: Path,
        src: str,
        fmt: str,
        columns: list[str],
        types: dict[str, str],
        layout: tuple[str, str, str],
        locations: Sequence[str],
        height: int,
        time_bin_minutes: int | None,
        on_unknown: str,
    ) -> DuckDBPrefixCounter:
        """The file grouped by SQL hash aggregation, every check in one pass by location."""
        kind, loc, id_col = layout
        with_time = time_bin_minutes is not None
        locs = self._location_table(locations)
        loc_expr = id_sql(ident(loc))
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
        raw_sid, raw_loc = (f"CAST({ident(c)} AS VARCHAR)" for c in (id_col, loc))
        minute_sql, stamp_sql = minute, stamp

        def projection(sid_expr: str, loc_sql: str, *extra: str) -> str:
            cols = [
                f"{ident(id_col)} IS NULL AS _no_id",
                f"{sid_expr} AS _sid",
                f"{loc_sql} AS _loc",
                f"{pos_sql('pos') if kind == 'sequences' else 'NULL'} AS _num",
                f"{minute_sql} AS _minute",
                f"{stamp_sql if kind == 'taps' else 'NULL'} AS _stamp",
                *(ident(c) for c in kept),
                *extra,
            ]
            return f"(SELECT {', '.join(cols)} FROM {file})"

        file = src
        src = projection(
            id_sql(ident(id_col)),
            loc_expr,
            f"{raw_sid} IS DISTINCT FROM {id_sql(ident(id_col))} AS _sid_changed",
            f"{raw_loc} IS DISTINCT FROM {loc_expr} AS _loc_changed",
        )
        loc_expr, stamp = "_loc", "_stamp"
        minute = "_minute" if minute != "NULL" else minute
        sid, number = "_sid", "_num"
        pos = f"CAST({number} AS BIGINT)"
        per_location = self.sql(
            per_location_sql(kind, sid, number, minute, loc_expr, src)
        ).fetchall()
        # the later passes normalise only the columns where normalising changes a value (the
        # same values either way: the rule is per value, this only skips work)
        src = projection(
            id_sql(ident(id_col)) if any(r[5] for r in per_location) else raw_sid,
            id_sql(ident(loc)) if any(r[6] for r in per_location) else raw_loc,
        )
        n_rows, n_bad_pos, dropped = check_file_values(
            p, per_location, id_col, loc, locations, on_unknown
        )
        if dropped:
            warn_dropped(p, loc, *dropped)
        if kind == "sequences" and n_bad_pos:  # the row and value: read on this error path only
            raise bad_position_error(p, n_bad_pos)
        known = f"JOIN {locs} l ON {loc_expr} = l.name"
        rows = rows_sql(kind, "tap" in columns, sid, pos, minute, stamp, f"{src} {known}")
        table = self.temp_table("seq")
        self._wide(table, rows, sid, height, with_time, time_bin_minutes, n_rows)
        if kind == "sequences":  # duplicates are an error; gaps (or dropped rows) renumbered
            self._renumber(p, table, rows, sid, pos, src, height, time_bin_minutes, n_rows)
        return self._counter(table, height, time_bin_minutes, len(locations))

    def _counter(
        self, table: str, height: int, time_bin_minutes: int | None, n_locations: int
    ) -> DuckDBPrefixCounter:
        return DuckDBPrefixCounter(
            self,
            table,
            height=height,
            has_bins=time_bin_minutes is not None,
            n_bins=1 if time_bin_minutes is None else -(-1440 // int(time_bin_minutes)),
            n_locations=n_locations,
        )

    def _location_table(self, locations: Sequence[str]) -> str:
        """A table ``name, code`` of the taxonomy's leaves (code = index in ``locations``)."""
        locs = self.temp_table("locs")
        self.con.register(
            "_locations",
            pa.table({"name": pa.array(list(locations)), "code": np.arange(len(locations))}),
        )
        self.sql(
            f"CREATE TABLE {locs} AS SELECT name, CAST(code AS INTEGER) AS code FROM _locations"
        )
        self.con.unregister("_locations")
        return locs

    def _renumber(
        self,
        p: Path,
        table: str,
        rows: Callable[[str], str],
        sid: str,
        pos: str,
        src: str,
        height: int,
        time_bin_minutes: int | None,
        n_rows: int,
    ) -> None:
        """Sequences whose positions are not 0..n-1: a duplicate is an error; gaps (or dropped
        rows) are closed by renumbering in ``pos`` order (``table`` rebuilt)."""
        with_time = time_bin_minutes is not None
        irregular = self.sql(
            f"SELECT count(*) FROM {table} WHERE lo <> 0 OR hi <> n - 1"
        ).fetchone()[0]
        if irregular:  # duplicates are an error; gaps (or dropped rows) are renumbered
            dup = self.sql(
                f"SELECT {sid}, {pos} FROM {src} GROUP BY ALL "
                "HAVING count(*) > 1 ORDER BY ALL LIMIT 1"
            ).fetchall()
            if dup:  # its row in the file: read on this error path only
                sid_value, pos_value = str(dup[0][0]), int(dup[0][1])
                row = duplicate_row(p, sid_value, pos_value)
                raise duplicate_position_error(str(p), sid_value, pos_value, row)

            def renumbered(bucket: str) -> str:
                return (
                    "SELECT sid, row_number() OVER (PARTITION BY sid ORDER BY pos) - 1 AS pos, "
                    f"code, minute FROM ({rows(bucket)})"
                )

            self.sql(f"DROP TABLE {table}")
            self._wide(table, renumbered, sid, height, with_time, time_bin_minutes, n_rows)

    def _minute_expr(self, column: str, sql_type: str, *, clock: bool) -> tuple[str, str]:
        """(minute-of-day expression, sortable time expression) of a time column, each value on
        its own as :mod:`synth.times` reads it: a timestamp (wall clock as written) or, with
        ``clock`` (long-format sequences), a clock time ``HH:MM[:SS]`` (hours past 23 wrap)."""
        col = ident(column)
        if sql_type.upper().startswith(("TIMESTAMP", "DATE")):
            stamp = ranged_sql(f"CAST({col} AS TIMESTAMP)")
            return f"(hour({stamp}) * 60 + minute({stamp}))", stamp
        if sql_type.upper().startswith("TIME"):
            return f"(hour({col}) * 60 + minute({col}))", col
        text = f"CAST({col} AS VARCHAR)"
        stamp = stamp_expr(text)
        minute = f"hour({stamp}) * 60 + minute({stamp})"
        if clock:  # a clock time is never a timestamp: its regular expression runs on the others
            is_clock, clock_minutes = clock_sql(text)
            minute = (
                f"CASE WHEN {stamp} IS NOT NULL THEN {minute} WHEN {is_clock} THEN "
                f"({clock_minutes}) % 1440 END"
            )
        return f"({minute})", stamp

    def memory_limit_bytes(self) -> float:
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
            self._min_rows_per_pass, int(self._rows_per_gb * self.memory_limit_bytes() / 1e9)
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
        pass (:class:`GroupedScan`; in memory when it surely fits in ``memory_limit``), and the
        unknown locations dropped (name -> rows); ``None`` when the file is not grouped in order,
        or needs a check or message of the SQL path (which then reads it: same table, same
        errors)."""
        try:
            scan = GroupedScan(
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
        except (NotGrouped, pa.ArrowException):  # e.g. an unreadable file: the SQL path's error
            return None
        table = self.temp_table("seq")
        cols = [f"c{j} {scan.code_type}" for j in range(height)]
        if time_bin_minutes is not None:
            cols += [f"b{j} SMALLINT" for j in range(height)]
        # in memory when it surely fits (at most one sequence per input row), else on disk
        row_bytes = height * (scan.code_dtype().itemsize + (2 if time_bin_minutes else 0))
        temporary = scan.n_rows * row_bytes <= self.memory_limit_bytes()
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
        except (NotGrouped, pa.ArrowException):
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
        return scan_events(self, p, location_column, unit_column)

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
        kept = self.temp_table("events")
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
            name: self.table_counts(kept, name, n_locations, n_bins, bin_minutes) for name in tables
        }
        self.sql(f"DROP TABLE {kept}")
        return out

    def table_counts(
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
