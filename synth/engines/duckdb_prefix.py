"""DuckDB engine: prefix-tree counts over a table of sequences (:mod:`~.duckdb_engine`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from synth.engines.base import (
    Counts,
    IntArray,
)
from synth.engines.duckdb_sql import SQLSession


class DuckDBPrefixCounter:
    """Prefix-tree cell counts over a wide table ``c0..c{h-1}`` [``b0..b{h-1}``] (NULL or -1 pad).

    Each :meth:`advance` writes the sequences still alive, with their node, and only the columns of
    the levels still to come (a hash join against the small cell -> node map): a temporary table
    (in memory) when it surely fits in ``memory_limit``, else a table of the database file.
    """

    def __init__(
        self,
        engine: SQLSession,
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
        fits = self.n_sequences * row_bytes <= engine.memory_limit_bytes()
        self._kind = "TEMP TABLE" if fits else "TABLE"

    def _key(self, level: int, alias: str = "") -> str:
        node = f"CAST({alias}node AS BIGINT)" if level else "CAST(0 AS BIGINT)"
        tb = f"CAST({alias}b{level} AS BIGINT)" if self.has_bins else "CAST(0 AS BIGINT)"
        return f"(({node} * {self.n_bins} + {tb}) * {self.n_locations} + {alias}c{level})"

    def length_counts(self) -> IntArray:
        """Sequences by number of locations (index = length 0..height), before any advance."""
        n = " + ".join(
            f"CASE WHEN coalesce(c{j}, -1) >= 0 THEN 1 ELSE 0 END" for j in range(self.height)
        )
        res = self.engine.sql(
            f"SELECT len AS n, count(*) AS k FROM (SELECT {n} AS len FROM {self._base}) "
            "GROUP BY len"
        ).fetchnumpy()
        out = np.zeros(self.height + 1, dtype=np.int64)
        np.add.at(out, np.asarray(res["n"], dtype=np.int64), np.asarray(res["k"], dtype=np.int64))
        return out

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
