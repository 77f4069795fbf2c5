"""The DuckDB engine: the counting steps as SQL over Parquet/CSV, spilling to disk.

Tables live in a database file inside a private temporary directory (``temp_directory``, default
the system's), which DuckDB also uses to spill sorts, joins and aggregations beyond
``memory_limit`` (e.g. ``"2GB"``; default DuckDB's, 80% of RAM). The directory is removed on
:meth:`DuckDBEngine.close`.

Reading files itself (:meth:`DuckDBEngine.prefix_counter_from_file`) it accepts long-format
sequences (``seq_id, pos, location[, time]``, Parquet or CSV) and Parquet taps (``card_id, time,
stop_id[, tap]``); other layouts (the SUBE aliases, date + hour columns) are loaded in memory by
:mod:`synth.records` and then counted here. Bounding is the same deterministic rule as in memory:
the first ``h`` positions of a sequence; taps ordered by time, then by their row in the file.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from synth.engines.base import Counts, Engine, IntArray, SBHEvents, table_spec
from synth.errors import ConfigError, InputError

__all__ = ["DuckDBEngine", "DuckDBPrefixCounter"]


def _quote(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'


class DuckDBPrefixCounter:
    """Prefix-tree cell counts over a wide table ``c0..c{h-1}`` [``b0..b{h-1}``] (NULL or -1 pad).

    Each :meth:`advance` writes the sequences still alive, with their node, and only the columns of
    the levels still to come (a hash join against the small cell -> node map).
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
            f"CREATE OR REPLACE TABLE {new} AS SELECT {cols} FROM {self._cur} s "
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
        self._tmp = tempfile.TemporaryDirectory(
            prefix="transit-synth-duckdb-", dir=None if temp_directory is None else temp_directory
        )
        root = Path(self._tmp.name)
        self.con = duckdb.connect(str(root / "engine.duckdb"))
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

    def sql(self, query: str) -> Any:
        """Run one statement; DuckDB's errors on the data become InputError."""
        import duckdb

        try:
            return self.con.execute(query)
        except duckdb.ConversionException as err:
            raise InputError(f"duckdb engine: {err}") from None

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
        from synth.records import UnknownLocationWarning

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
        locs = self._name("locs")
        self.con.register(
            "_locations",
            pa.table({"name": pa.array(list(locations)), "code": np.arange(len(locations))}),
        )
        self.sql(
            f"CREATE TABLE {locs} AS SELECT name, CAST(code AS INTEGER) AS code FROM _locations"
        )
        self.con.unregister("_locations")
        loc_expr = f"CAST({_ident(loc)} AS VARCHAR)"
        minute = "NULL"
        if with_time or kind == "taps":
            minute, stamp = self._minute_expr("time", types.get("time", "VARCHAR"))
        # rows with an id, a location (and a time when used)
        id_col = "seq_id" if kind == "sequences" else "card_id"
        bad = self.sql(
            f"SELECT count(*) FILTER (WHERE {_ident(id_col)} IS NULL OR "
            f"CAST({_ident(id_col)} AS VARCHAR) = ''), "
            f"count(*) FILTER (WHERE {loc_expr} IS NULL OR {loc_expr} = '') "
            f"{', count(*) FILTER (WHERE ' + minute + ' IS NULL)' if minute != 'NULL' else ''}"
            f", count(*) FROM {src}"
        ).fetchone()
        if bad[-1] == 0:
            raise InputError(f"{p}: no rows (empty input)")
        if bad[0]:
            raise InputError(f"{p}: column '{id_col}': {bad[0]} empty value(s)")
        if bad[1]:
            raise InputError(f"{p}: column '{loc}': {bad[1]} empty value(s)")
        if minute != "NULL" and bad[2]:
            raise InputError(f"{p}: column 'time': {bad[2]} value(s) that are not a time")
        unknown = self.sql(
            f"SELECT {loc_expr} AS v, count(*) FROM {src} WHERE {loc_expr} NOT IN "
            f"(SELECT name FROM {locs}) GROUP BY v ORDER BY v"
        ).fetchall()
        if unknown:
            n = sum(int(c) for _, c in unknown)
            if on_unknown == "error":
                raise InputError(
                    f"{p}: column '{loc}': location {unknown[0][0]!r} is not in the taxonomy "
                    f"({n} rows, {len(unknown)} distinct unknown locations; pass "
                    "on_unknown='drop' to drop them)"
                )
            warnings.warn(
                f"{p}: dropped {n} rows ({len(unknown)} distinct locations) of column '{loc}' not "
                "in the taxonomy",
                UnknownLocationWarning,
                stacklevel=3,
            )
        known = f"JOIN {locs} l ON {loc_expr} = l.name"
        if kind == "sequences":
            pos = f"TRY_CAST({_ident('pos')} AS BIGINT)"
            n_bad = self.sql(f"SELECT count(*) FROM {src} WHERE {pos} IS NULL OR {pos} < 0")
            n_bad_pos = int(n_bad.fetchone()[0])
            if n_bad_pos:
                raise InputError(
                    f"{p}: column 'pos': {n_bad_pos} value(s) that are not integers >= 0"
                )
            rows = (
                f"SELECT CAST(seq_id AS VARCHAR) AS sid, {pos} AS pos, l.code AS code, "
                f"{minute} AS minute FROM {src} {known}"
            )
        else:
            off = (
                "WHERE lower(trim(CAST(tap AS VARCHAR))) NOT IN "
                "('off', 'out', 'check out', 'check_out', 'checkout', 'alight', 'alighting')"
                if "tap" in columns
                else ""
            )
            rows = (
                f"SELECT CAST(card_id AS VARCHAR) AS sid, row_number() OVER (PARTITION BY "
                f"CAST(card_id AS VARCHAR) ORDER BY {stamp}, file_row_number) - 1 AS pos, "
                f"l.code AS code, {minute} AS minute FROM {src} {known} {off}"
            )
        table = self._name("seq")
        self._wide(table, rows, height, with_time, time_bin_minutes)
        if kind == "sequences":
            irregular = self.sql(
                f"SELECT count(*) FROM {table} WHERE lo <> 0 OR hi <> n - 1"
            ).fetchone()[0]
            if irregular:  # duplicates are an error; gaps (or dropped rows) are renumbered
                dup = self.sql(
                    f"SELECT CAST(seq_id AS VARCHAR), {pos} FROM {src} GROUP BY ALL "
                    "HAVING count(*) > 1 ORDER BY ALL LIMIT 1"
                ).fetchall()
                if dup:
                    raise InputError(
                        f"{p}: column 'pos': duplicate position {dup[0][1]} in sequence "
                        f"{dup[0][0]!r}"
                    )
                renumbered = (
                    "SELECT sid, row_number() OVER (PARTITION BY sid ORDER BY pos) - 1 AS pos, "
                    f"code, minute FROM ({rows})"
                )
                self.sql(f"DROP TABLE {table}")
                self._wide(table, renumbered, height, with_time, time_bin_minutes)
        return DuckDBPrefixCounter(
            self,
            table,
            height=height,
            has_bins=with_time,
            n_bins=1 if time_bin_minutes is None else -(-1440 // int(time_bin_minutes)),
            n_locations=len(locations),
        )

    def _minute_expr(self, column: str, sql_type: str) -> tuple[str, str]:
        """(minute-of-day expression, sortable time expression) of a time column."""
        col = _ident(column)
        if sql_type.upper().startswith(("TIMESTAMP", "DATE")):
            stamp = f"CAST({col} AS TIMESTAMP)"
            return f"(hour({stamp}) * 60 + minute({stamp}))", stamp
        if sql_type.upper().startswith("TIME"):
            return f"(hour({col}) * 60 + minute({col}))", col
        text = f"CAST({col} AS VARCHAR)"
        stamp = f"TRY_CAST({text} AS TIMESTAMP)"
        clock = f"TRY_CAST({text} AS TIME)"
        minute = (
            f"CASE WHEN {stamp} IS NOT NULL THEN hour({stamp}) * 60 + minute({stamp}) "
            f"ELSE hour({clock}) * 60 + minute({clock}) END"
        )
        return f"({minute})", stamp

    def _wide(self, table: str, rows: str, height: int, with_time: bool, width: int | None) -> None:
        """One row per sequence: its first ``height`` codes [and time bins, running maximum]."""
        cols = [f"max(code) FILTER (WHERE pos = {j}) AS c{j}" for j in range(height)]
        minutes = [f"max(minute) FILTER (WHERE pos = {j})" for j in range(height)]
        if with_time:
            for j in range(height):
                running = ", ".join(f"coalesce({m}, 0)" for m in minutes[: j + 1])
                cols.append(f"CAST(greatest({running}) // {int(width or 1)} AS INTEGER) AS b{j}")
        self.sql(
            f"CREATE TABLE {table} AS SELECT {', '.join(cols)}, count(*) AS n, min(pos) AS lo, "
            f"max(pos) AS hi FROM ({rows}) GROUP BY sid"
        )

    # ------------------------------------------------------------------ SBH
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
        cols: dict[str, Any] = {
            "side": np.asarray(events.side, dtype=np.int8),
            "part": np.asarray(events.part, dtype=np.int64),
            "minute": np.asarray(events.minute, dtype=np.int32),
            "loc": np.asarray(events.location, dtype=np.int64),
        }
        bound = events.unit is not None and max_contributions is not None
        if bound:
            assert events.unit is not None
            cols["unit"] = np.asarray(events.unit, dtype=np.int64)
            cols["idx"] = np.arange(len(events.side), dtype=np.int64)
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
