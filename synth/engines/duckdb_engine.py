"""The DuckDB engine: the counting steps as SQL over Parquet/CSV, spilling to disk.

Tables live in a database file inside a private temporary directory (``temp_directory``, default
the system's), which DuckDB also uses to spill sorts, joins and aggregations beyond
``memory_limit`` (e.g. ``"2GB"``; default DuckDB's, 80% of RAM). The directory is removed on
:meth:`DuckDBEngine.close`.

Reading files itself, for the prefix tree (:meth:`DuckDBEngine.prefix_counter_from_file`) it
accepts long-format sequences (``seq_id, pos, location[, time]``, Parquet or CSV) and Parquet taps
(``card_id, time, stop_id[, tap]``); for the SBH release (:meth:`DuckDBEngine.sbh_scan`) trips
(``on_time, on_stop[, off_time, off_stop][, mode][, date]``) and taps (``time, stop_id[, tap]
[, mode][, date]``), Parquet (or CSV without a privacy unit). Other layouts (the SUBE aliases, date
+ hour columns, zoned times) are loaded in memory by :mod:`synth.records` and counted here. Bounding
is the same deterministic rule as in memory: the first ``h`` positions of a sequence, taps ordered
by time and then by their row in the file; each card's first ``k`` events by (minute, partition,
location, row).
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
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
    #: input rows grouped per pass of the sequence table, per GB of memory limit (and at least)
    _rows_per_gb = 30_000_000
    _min_rows_per_pass = 1_000_000

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

            def rows(bucket: str) -> str:
                return (
                    f"SELECT CAST(seq_id AS VARCHAR) AS sid, {pos} AS pos, l.code AS code, "
                    f"{minute} AS minute FROM {src} {known} WHERE {bucket}"
                )

        else:
            off = (
                "lower(trim(CAST(tap AS VARCHAR))) NOT IN "
                "('off', 'out', 'check out', 'check_out', 'checkout', 'alight', 'alighting')"
                if "tap" in columns
                else "TRUE"
            )

            def rows(bucket: str) -> str:  # the bucket filter must apply below the window
                return (
                    f"SELECT CAST(card_id AS VARCHAR) AS sid, row_number() OVER (PARTITION BY "
                    f"CAST(card_id AS VARCHAR) ORDER BY {stamp}, file_row_number) - 1 AS pos, "
                    f"l.code AS code, {minute} AS minute FROM {src} {known} "
                    f"WHERE {off} AND {bucket}"
                )

        sid = f"CAST({_ident(id_col)} AS VARCHAR)"
        table = self._name("seq")
        self._wide(table, rows, sid, height, with_time, time_bin_minutes, int(bad[-1]))
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

                def renumbered(bucket: str) -> str:
                    return (
                        "SELECT sid, row_number() OVER (PARTITION BY sid ORDER BY pos) - 1 AS pos, "
                        f"code, minute FROM ({rows(bucket)})"
                    )

                self.sql(f"DROP TABLE {table}")
                self._wide(
                    table, renumbered, sid, height, with_time, time_bin_minutes, int(bad[-1])
                )
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


_OFF = "('off', 'out', 'check out', 'check_out', 'checkout', 'alight', 'alighting')"
_CLOCK = r"'^\s*\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?\s*$'"  # HH:MM[:SS[.f]], as synth.sbh
_NO_DAY = int(np.iinfo(np.int64).min)


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
            sides.append(
                (1, "off_time", "off_stop", "off_stop IS NOT NULL AND off_time IS NOT NULL")
            )
    elif {location_column, "time"} <= set(types) and "seq_id" not in types:
        kind = "tap"
        if "tap" in types:
            is_off = f"lower(trim(CAST(tap AS VARCHAR))) IN {_OFF}"
            sides = [
                (0, "time", location_column, f"NOT ({is_off})"),
                (1, "time", location_column, is_off),
            ]
        else:
            sides = [(0, "time", location_column, "TRUE")]
    else:
        return None
    for _, tcol, lcol, _ in sides:
        if types[tcol].startswith(("TIMESTAMP WITH", "TIMESTAMPTZ")) or not types[lcol].startswith(
            ("VARCHAR", "INT", "BIGINT", "SMALLINT", "TINYINT", "UBIGINT", "UINTEGER")
        ):
            return None  # zoned times, float ids: synth.records normalises them
    mode = "coalesce(CAST(mode AS VARCHAR), '')" if "mode" in types else "'all'"
    unit = f"CAST({_ident(unit_column)} AS VARCHAR)" if unit_column else "NULL"
    row = "file_row_number" if fmt == "parquet" else "0"
    selects = []
    for side, tcol, lcol, cond in sides:
        col = _ident(tcol)
        if types[tcol].startswith(("TIMESTAMP", "DATE")):
            stamp, day = f"CAST({col} AS TIMESTAMP)", None
        else:
            text = f"CAST({col} AS VARCHAR)"
            time_only = engine.sql(
                f"SELECT bool_and(regexp_matches({text}, {_CLOCK})) FROM {src} WHERE {cond}"
            ).fetchone()[0]
            if time_only:
                stamp = f"CAST(TRY_CAST(trim({text}) AS TIME) AS TIMESTAMP)"
                day = str(_NO_DAY)
            else:
                stamp, day = f"TRY_CAST({text} AS TIMESTAMP)", None
        if "date" in types:
            day = "date_diff('day', DATE '1970-01-01', TRY_CAST(CAST(date AS VARCHAR) AS DATE))"
        elif day is None:
            day = f"date_diff('day', DATE '1970-01-01', CAST({stamp} AS DATE))"
        selects.append(
            f"SELECT CAST({side} AS TINYINT) AS side, {mode} AS mode, "
            f"CAST({day} AS BIGINT) AS day, "
            f"CAST(hour({stamp}) * 60 + minute({stamp}) AS INTEGER) AS minute, "
            f"CAST({_ident(lcol)} AS VARCHAR) AS loc, {unit} AS unit, {row} AS row, "
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
