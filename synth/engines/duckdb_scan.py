"""DuckDB engine: streamed grouping of files written by sequence; the SBH event scan.

See :mod:`synth.engines.duckdb_engine`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from synth.engines.base import (
    Counts,
)
from synth.engines.duckdb_sql import (
    ID_TYPES,
    NO_DAY,
    TICKS_PER_SECOND,
    SQLSession,
    clock_sql,
    day_sql,
    id_sql,
    ident,
    off_sql,
    plain_id,
    quote,
    ranged_sql,
    stamp_expr,
)
from synth.errors import InputError
from synth.io import CSV_NA_VALUES, DOT_ZERO, ID_SPACE
from synth.records import OFF_VALUES
from synth.times import END_SECONDS, FIRST_SECONDS


class NotGrouped(Exception):
    """The file is not grouped by sequence in order, or needs the SQL path's checks."""


class GroupedScan:
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
    or integer ids / integer ``pos`` / naive timestamps) raises :class:`NotGrouped` and the
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
            raise NotGrouped  # missing, or a name given to several columns
        types = {name: schema.field(name).type for name in self.columns}

        def text(t: pa.DataType) -> bool:
            if pa.types.is_dictionary(t):
                t = t.value_type
            return bool(pa.types.is_string(t) or pa.types.is_large_string(t))

        id_type = types[self.id_col]
        if not (text(id_type) or pa.types.is_integer(id_type)) or id_type == pa.uint64():
            raise NotGrouped
        pos = types[self.order_col]
        if self.order_col == "pos" and not (pa.types.is_integer(pos) and pos != pa.uint64()):
            raise NotGrouped
        if not text(types[loc]) or (self.tap_col and not text(types[self.tap_col])):
            raise NotGrouped
        if self.time_col:
            t = types[self.time_col]
            if not pa.types.is_timestamp(t) or t.tz is not None:
                raise NotGrouped
            self.per_minute = 60 * TICKS_PER_SECOND[t.unit]
            # the supported range (synth.times) in ticks: a time outside goes the SQL way (error)
            self.tick_range = (
                FIRST_SECONDS * TICKS_PER_SECOND[t.unit],
                END_SECONDS * TICKS_PER_SECOND[t.unit],
            )
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
        """Arrow tables of finished wide rows, batch by batch (raises :class:`NotGrouped`).
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
            raise NotGrouped  # no rows: the SQL path's error
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
            raise NotGrouped  # ids to normalise (synth.io.id_strings): the SQL path does it
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
                raise NotGrouped
            if cont and order[0] <= self._last_order:
                raise NotGrouped
        elif np.any(same[1:] & (step < 0)) or (cont and order[0] < self._last_order):
            raise NotGrouped  # taps: time non-decreasing, ties in file order
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
            raise NotGrouped  # a run id not above the one before: maybe seen earlier

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
            raise NotGrouped
        if pa.types.is_timestamp(col.type):
            ticks = np.asarray(col.cast(pa.int64()).to_numpy(), dtype=np.int64)
            first, end = self.tick_range
            if ticks.size and (ticks.min() < first or ticks.max() >= end):
                raise NotGrouped  # outside the supported range: the SQL path names the value
            return ticks
        return np.asarray(col.to_numpy(), dtype=np.int64)

    def _codes(
        self, batch: pa.RecordBatch
    ) -> tuple[npt.NDArray[Any], npt.NDArray[np.int16] | None, bool]:
        """Location code of each row (-1: dropped: unknown, or a tap off), its minute of day,
        whether any row is dropped."""
        locs = batch.column(self.loc_col)
        if locs.null_count:
            raise NotGrouped
        names = ["" if v is None else plain_id(v) for v in locs.dictionary.to_pylist()]
        index = locs.indices.to_numpy(zero_copy_only=False)
        lut = np.array([self.codes.get(name, -1) for name in names], dtype=np.int64)
        used = np.bincount(index, minlength=len(names))
        if any(not name for name, n in zip(names, used, strict=True) if n):  # null or empty
            raise NotGrouped
        unknown = np.flatnonzero((lut < 0) & (used > 0))
        if unknown.size and self.on_unknown == "error":
            raise NotGrouped
        for j in unknown:
            self.unknown[names[j]] = self.unknown.get(names[j], 0) + int(used[j])
        code = lut.astype(self.code_dtype)[index]
        dropped = bool(unknown.size)
        if self.tap_col:
            taps = batch.column(self.tap_col)
            if taps.null_count:
                raise NotGrouped
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

    def __init__(self, engine: SQLSession, table: str, kind: str, sides: tuple[int, ...]):
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
        kept = eng.temp_table("events")
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
            name: eng.table_counts(kept, name, n_locations, n_bins, bin_minutes) for name in tables
        }
        eng.sql(f"DROP TABLE {kept}")
        return out

    def close(self) -> None:
        self.engine.sql(f"DROP TABLE IF EXISTS {self.table}")


def scan_events(
    engine: SQLSession, path: Path, location_column: str, unit_column: str | None
) -> DuckDBEventScan | None:
    source = engine.read_source(path)
    if source is None:
        return None
    src, fmt = source
    described = engine.sql(f"DESCRIBE SELECT * FROM {src}").fetchall()
    types = {str(r[0]): str(r[1]).upper() for r in described}
    if unit_column is not None and (unit_column not in types or fmt != "parquet"):
        return None  # the row-order tie-break needs Parquet's row numbers
    found = _event_sides(types, location_column)
    if found is None:
        return None
    kind, sides = found
    ids = [lcol for _, _, lcol, _ in sides] + [c for c in (unit_column, "mode") if c in types]
    if any(types[tcol].startswith(("TIMESTAMP WITH", "TIMESTAMPTZ")) for _, tcol, _, _ in sides):
        return None  # zoned times: synth.records reads them (the same rules)
    if not all(types[c].startswith(ID_TYPES) for c in ids if c):
        return None  # float ids: synth.records refuses the non-integral ones
    mode = f"coalesce({id_sql('mode')}, '')" if "mode" in types else "'all'"
    unit = id_sql(ident(unit_column)) if unit_column else "NULL"
    row = "file_row_number" if fmt == "parquet" else "0"
    selects = []
    for side, tcol, lcol, cond in sides:
        col = ident(tcol)
        stamp, day = ranged_sql(f"CAST({col} AS TIMESTAMP)"), None
        minute = f"hour({stamp}) * 60 + minute({stamp})"
        if not types[tcol].startswith(("TIMESTAMP", "DATE")):
            # each value on its own (synth.times): a clock time HH:MM has no day (the times of
            # tap files and trips' on_time are timestamps, as synth.records reads them)
            text = f"CAST({col} AS VARCHAR)"
            stamp, day = stamp_expr(text), None
            minute = f"hour({stamp}) * 60 + minute({stamp})"
            if tcol == "off_time":
                is_clock, clock = clock_sql(text)
                of_clock = f"CASE WHEN {clock} < 1440 THEN {clock} END"
                minute = f"CASE WHEN {is_clock} THEN {of_clock} ELSE {minute} END"
                day = f"CASE WHEN {is_clock} THEN {NO_DAY} ELSE {day_sql(stamp)} END"
        if "date" in types:
            day = "date_diff('day', DATE '1970-01-01', TRY_CAST(CAST(date AS VARCHAR) AS DATE))"
        elif day is None:
            day = day_sql(stamp)
        selects.append(
            f"SELECT CAST({side} AS TINYINT) AS side, {mode} AS mode, "
            f"CAST({day} AS BIGINT) AS day, "
            f"CAST({minute} AS INTEGER) AS minute, "
            f"{id_sql(ident(lcol))} AS loc, {unit} AS unit, {row} AS row, "
            f"CAST({col} AS VARCHAR) AS raw_time FROM {src} WHERE {cond}"
        )
    table = engine.temp_table("sbh_events")
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
        raise _time_error(path, location_column, unit_column, int(bad[0]))
    if bad[1]:
        raise InputError(f"{path}: {bad[1]} event(s) without a location")
    if bad[2]:
        raise InputError(f"{path}: column '{unit_column}': {bad[2]} empty value(s)")
    engine.sql(f"ALTER TABLE {table} DROP COLUMN raw_time")
    return DuckDBEventScan(engine, table, kind, tuple(side for side, *_ in sides))


def _event_sides(
    types: dict[str, str], location_column: str
) -> tuple[str, list[tuple[int, str, str, str]]] | None:
    """(kind, sides) of a trips or taps file from its column types: each side (0 on, 1 off) with
    its time column, location column and SQL condition; ``None`` for another layout."""
    if "on_stop" in types and "on_time" in types:
        kind = "trip"
        sides: list[tuple[int, str, str, str]] = [(0, "on_time", "on_stop", "TRUE")]
        if "off_stop" in types and "off_time" in types:
            # as pandas reads a CSV file: NA, null, ... are missing times (not ids)
            na = ", ".join(quote(v) for v in CSV_NA_VALUES)
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
            is_off = off_sql("tap")
            sides = [
                (0, "time", location_column, f"NOT ({is_off})"),
                (1, "time", location_column, is_off),
            ]
        else:
            sides = [(0, "time", location_column, "TRUE")]
    else:
        return None
    return kind, sides


def _time_error(
    path: Path, location_column: str, unit_column: str | None, count: int
) -> InputError:
    """The error the memory engine raises for the file's first time that is not one (its row and
    value, as :mod:`synth.records` reads the file: on this error path only); ``count`` events
    without a time when that reading finds none (a rule the engines read differently)."""
    from synth.marginals.events import load_input, read_events

    try:
        read_events(load_input(path, location_column), unit_column=unit_column)
    except InputError as err:
        return err
    return InputError(f"{path}: {count} event(s) without a parsable time or date")
