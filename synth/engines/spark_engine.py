"""The Spark engine (PySpark): the counting steps on a cluster, or locally (``local[*]``).

Optional: ``pip install 'transit-synth[spark]'`` (PySpark) and a Java runtime. Options:
``master`` (a Spark master URL; default ``local[N]`` with ``threads`` cores, all by default),
``temp_directory`` (``spark.local.dir``, where shuffles spill), ``memory_limit``
(``spark.driver.memory``, e.g. ``"2g"``) and ``conf`` (any other Spark settings, e.g.
``{"spark.executor.memory": "4g"}``). An active session in this process is reused (its master
and JVM settings stay).

The engine only counts: per level, the (node, time bin, location) cells with ``groupBy().count()``
collected to the driver, and the node of each surviving cell sent back as a broadcast join; for SBH,
each card's first ``k`` events by (minute, partition, location, input row) through
``row_number()`` over a window (deterministic: a retried or speculative task recomputes the same
ranks), then one ``groupBy`` per table. Noise is drawn in the driver, on the collected counts.
Files: long-format sequences (``seq_id, pos, location``, Parquet or CSV) are read by Spark; other
layouts are loaded by :mod:`synth.records` and counted here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from synth.engines.base import (
    Counts,
    Engine,
    IntArray,
    SBHEvents,
    event_columns,
    table_spec,
)
from synth.errors import ConfigError, InputError
from synth.io import DOT_ZERO
from synth.logs import private_message
from synth.params import spell
from synth.records.positions import bad_position_error, duplicate_position_error, duplicate_row

__all__ = [
    "SparkEngine",
    "SparkPrefixCounter",
    "spark_available",
    "spark_conf_items",
    "spark_memory",
]


def spark_available() -> str | None:
    """``None`` when PySpark and Java are usable, else the reason they are not."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "engine='spark' needs PySpark: pip install 'transit-synth[spark]'"
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and (Path(java_home) / "bin" / "java").exists()) and not shutil.which("java"):
        return "engine='spark' needs a Java runtime (java on PATH or JAVA_HOME), e.g. OpenJDK 17"
    return None


def spark_conf_items(conf: Mapping[str, object] | None) -> list[tuple[str, str]]:
    """``conf`` as (key, value) strings; ConfigError unless a table of ``spark.*`` keys."""
    if conf is None:
        return []
    if not isinstance(conf, Mapping):
        raise ConfigError("engine conf must be a table of Spark settings (spark.* = value)")
    items = []
    for key, value in conf.items():
        if not isinstance(key, str) or not key.startswith("spark."):
            raise ConfigError(f"engine conf: {key!r} is not a Spark setting (spark.*)")
        if isinstance(value, bool):
            value = str(value).lower()
        if not isinstance(value, str | int | float):
            raise ConfigError(f"engine conf: {key} must be a string or a number, got {value!r}")
        items.append((key, str(value)))
    return items


#: column types read as identifiers by Spark (others, e.g. floats, are loaded by synth.records)
_ID_TYPES = ("string", "bigint", "int", "smallint", "tinyint")
#: :data:`synth.io.ID_SPACE` as a Java regular expression class
_SPACE = r"[ \t\n\r\f\x0B]"


def _normalised_id(column: Any) -> Any:
    """An identifier per value, as :func:`synth.io.id_strings`: surrounding white space stripped,
    ``-?digits.0+`` -> ``-?digits``."""
    from pyspark.sql import functions as F

    text = F.regexp_replace(column.cast("string"), f"^{_SPACE}+|{_SPACE}+$", "")
    return F.regexp_replace(text, DOT_ZERO, "$1")


def spark_memory(size: object) -> str:
    """A memory size as the engines take it (``2GB``, ``512MiB``, ``4g``, bytes) in Spark's
    notation, whole mebibytes (``"2048m"``; Spark reads k/m/g/t as powers of 1024 and knows no
    ``MiB``)."""
    text = str(size).lower().replace(" ", "")
    digits = text.rstrip("kmgtib")
    if isinstance(size, bool) or not digits.replace(".", "", 1).isdigit() or float(digits) <= 0:
        raise ConfigError(f"engine memory_limit must be a positive size such as 2GB, got {size!r}")
    unit = text[len(digits) :].rstrip("ib")[:1]
    scale = 1024 ** ("bkmgt".index(unit) if unit else 0)
    return f"{max(1, int(float(digits) * scale) // 2**20)}m"


def _collect_counts(df: Any) -> Counts:
    with _quiet():
        rows = df.groupBy("k").count().orderBy("k").toPandas()
    return (
        rows["k"].to_numpy(dtype=np.int64),
        rows["count"].to_numpy(dtype=np.int64),
    )


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """PySpark's own deprecation noise about pandas (``copy=``, pandas 3 support) silenced around
    its pandas conversions: not the user's concern, and the command line prints every warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The copy keyword is deprecated")
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        yield


class SparkPrefixCounter:
    """Prefix-tree cell counts over a Spark DataFrame ``c0..`` [``b0..``] (-1 or null pads)."""

    def __init__(
        self,
        engine: SparkEngine,
        frame: Any,
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
        self._frame = frame.persist()
        self.n_sequences = int(self._frame.count())
        self._level = 0

    def _key(self, level: int) -> Any:
        from pyspark.sql import functions as F

        node = F.col("node").cast("long") if level else F.lit(0).cast("long")
        tb = F.col(f"b{level}").cast("long") if self.has_bins else F.lit(0).cast("long")
        return (node * self.n_bins + tb) * self.n_locations + F.col(f"c{level}").cast("long")

    def length_counts(self) -> IntArray:
        """Sequences by number of locations (index = length 0..height), before any advance."""
        from pyspark.sql import functions as F

        n = sum(
            (
                F.when(F.coalesce(F.col(f"c{j}"), F.lit(-1)) >= 0, 1).otherwise(0)
                for j in range(self.height)
            ),
            F.lit(0),
        )
        rows = self._frame.select(n.alias("n")).groupBy("n").count().collect()
        out = np.zeros(self.height + 1, dtype=np.int64)
        for r in rows:
            out[int(r["n"])] += int(r["count"])
        return out

    def level_counts(self, level: int, n_nodes: int) -> Counts:
        from pyspark.sql import functions as F

        if level != self._level:
            raise RuntimeError("levels must be counted in order")
        cells = self._frame.where(F.col(f"c{level}") >= 0).select(self._key(level).alias("k"))
        return _collect_counts(cells)

    def advance(self, level: int, keys: IntArray, node: IntArray) -> None:
        from pyspark.sql import functions as F

        node = np.asarray(node, dtype=np.int64)
        live = node >= 0
        with _quiet():
            cell_map = self.engine.session.createDataFrame(
                pd.DataFrame({"k": np.asarray(keys, dtype=np.int64)[live], "node_new": node[live]}),
                schema="k long, node_new long",  # no live cell (only empty cells passed): no rows
            )
        rest = [f"c{j}" for j in range(level + 1, self.height)]
        if self.has_bins:
            rest += [f"b{j}" for j in range(level + 1, self.height)]
        nxt = (
            self._frame.where(F.col(f"c{level}") >= 0)
            .withColumn("k", self._key(level))
            .join(F.broadcast(cell_map), "k")
            .select(F.col("node_new").alias("node"), *rest)
            .persist()
        )
        nxt.count()  # materialise before the previous level is dropped
        self._frame.unpersist()
        self._frame = nxt
        self._level = level + 1

    def close(self) -> None:
        self._frame.unpersist()


class SparkEngine(Engine):
    """PySpark: local mode (tests) or any cluster through ``master``."""

    name = "spark"

    def __init__(
        self,
        master: str | None = None,
        temp_directory: str | os.PathLike[str] | None = None,
        memory_limit: str | None = None,
        threads: int | None = None,
        conf: Mapping[str, object] | None = None,
    ) -> None:
        reason = spark_available()
        if reason is not None:
            raise ConfigError(reason)
        from pyspark.sql import SparkSession

        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        ):
            raise ConfigError(f"engine threads must be a positive integer, got {threads!r}")
        url = master or (f"local[{threads}]" if threads else "local[*]")
        builder = (
            SparkSession.builder.master(url)
            .appName("transit-synth")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.shuffle.partitions", "8" if url.startswith("local") else "200")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")  # no stage bars on the CLI's stderr
        )
        if temp_directory is not None:
            if not Path(temp_directory).is_dir():
                raise ConfigError(f"engine temp_directory {temp_directory}: not a directory")
            builder = builder.config("spark.local.dir", str(temp_directory))
        if memory_limit is not None:
            builder = builder.config("spark.driver.memory", spark_memory(memory_limit))
        for key, value in spark_conf_items(conf):
            builder = builder.config(key, value)
        try:
            self.session = builder.getOrCreate()
        except Exception as err:  # JVM failed to start
            raise ConfigError(f"engine='spark': cannot start Spark ({err})") from None
        self.session.sparkContext.setLogLevel("ERROR")

    # ------------------------------------------------------------------ prefix tree
    def prefix_counter(
        self,
        codes: npt.NDArray[np.integer],
        time_bins: npt.NDArray[np.integer] | None,
        *,
        n_bins: int,
        n_locations: int,
    ) -> SparkPrefixCounter:
        codes = np.asarray(codes)
        height = int(codes.shape[1])
        cols: dict[str, Any] = {f"c{j}": codes[:, j].astype(np.int32) for j in range(height)}
        if time_bins is not None:
            bins = np.asarray(time_bins)
            cols.update({f"b{j}": bins[:, j].astype(np.int32) for j in range(height)})
        with _quiet():
            frame = self.session.createDataFrame(pd.DataFrame(cols))
        return SparkPrefixCounter(
            self,
            frame,
            height=height,
            has_bins=time_bins is not None,
            n_bins=n_bins,
            n_locations=n_locations,
        )

    def prefix_counter_from_file(
        self,
        path: str | os.PathLike[str],
        *,
        locations: Sequence[str],
        height: int,
        time_bin_minutes: int | None,
        on_unknown: str = "error",
        location_column: str | None = None,
    ) -> SparkPrefixCounter | None:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        from synth.records import UnknownLocationWarning

        p = Path(path)
        if not p.is_file():
            raise InputError(f"{p}: file not found")
        loc = location_column or "location"
        raw = self._long_format_frame(p, loc, time_bin_minutes)
        if raw is None:
            return None  # trajectories and other layouts: loaded by synth.records
        locs = self.session.createDataFrame(
            pd.DataFrame({"name": list(locations), "code": np.arange(len(locations))})
        )
        unknown = raw.join(F.broadcast(locs), "name", "left_anti")
        first = unknown.select("name").orderBy("name").limit(1).collect()
        if first:
            n = unknown.count()
            if on_unknown == "error":
                counts = private_message(f"{n} rows")
                raise InputError(
                    f"{p}: column '{loc}': location {first[0]['name']!r} is not in the taxonomy "
                    f"({f'{counts}; ' if counts else ''}pass {spell('on_unknown', 'drop')} to drop "
                    f"them)"
                )
            text = private_message(f"{p}: dropped {n} rows of column '{loc}' not in the taxonomy")
            if text is not None:
                warnings.warn(text, UnknownLocationWarning, stacklevel=3)
        dup = raw.groupBy("sid", "pos").count().where(F.col("count") > 1)
        dups = dup.orderBy("sid", "pos").limit(1).collect()
        if dups:  # its row in the file: read on this error path only
            sid_value, pos_value = str(dups[0]["sid"]), int(dups[0]["pos"])
            row = duplicate_row(p, sid_value, pos_value)
            raise duplicate_position_error(str(p), sid_value, pos_value, row)
        rows = raw.join(F.broadcast(locs), "name")
        rank = F.row_number().over(Window.partitionBy("sid").orderBy("pos")) - 1
        rows = rows.withColumn("p", rank).where(F.col("p") < height)
        wide = rows.groupBy("sid").agg(
            *[
                F.max(F.when(F.col("p") == j, F.col("code"))).cast("int").alias(f"c{j}")
                for j in range(height)
            ]
        )
        return SparkPrefixCounter(
            self,
            wide.drop("sid"),
            height=height,
            has_bins=False,
            n_bins=1,
            n_locations=len(locations),
        )

    def _long_format_frame(self, p: Path, loc: str, time_bin_minutes: int | None) -> Any:
        """The file's long-format rows ``sid, pos, name`` (ids normalised per value, positions and
        empty values checked), or ``None`` for another layout or a trajectory."""
        from pyspark.sql import functions as F

        from synth.io import table_format

        fmt = table_format(p)
        if time_bin_minutes is not None or fmt not in ("parquet", "csv"):
            return None  # trajectories and other layouts: loaded by synth.records
        reader = self.session.read
        raw = (
            reader.parquet(str(p))
            if fmt == "parquet"
            else reader.option("header", "true").csv(str(p))
        )
        if not {"seq_id", "pos", loc} <= set(raw.columns):
            return None
        kinds = dict(raw.dtypes)
        if any(kinds[c] not in _ID_TYPES for c in ("seq_id", loc)):
            return None  # float ids: synth.records refuses the non-integral ones
        number = F.expr("try_cast(`pos` AS DOUBLE)")  # text such as 'x': NULL (refused below)
        raw = raw.select(
            _normalised_id(F.col("seq_id")).alias("sid"),
            number.alias("number"),
            _normalised_id(F.col(loc)).alias("name"),
        )
        bad_pos = (
            F.col("number").isNull()
            | (F.col("number") < 0)
            | (F.col("number") != F.floor(F.col("number")))
        )
        if raw.where(bad_pos).limit(1).count():  # 1.5 is refused, never truncated
            raise bad_position_error(p)  # its row and value: read on this error path only
        raw = raw.withColumn("pos", F.col("number").cast("long")).drop("number")
        if raw.where(F.col("sid").isNull() | (F.col("sid") == "")).limit(1).count():
            raise InputError(f"{p}: column 'seq_id': empty values")
        if raw.where(F.col("name").isNull() | (F.col("name") == "")).limit(1).count():
            raise InputError(f"{p}: column '{loc}': empty values")
        return raw

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
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        cols = event_columns(events, max_contributions)
        bound = "unit" in cols
        with _quiet():
            frame = self.session.createDataFrame(pd.DataFrame(cols))
        if bound:
            order = Window.partitionBy("unit", "side").orderBy("minute", "part", "loc", "idx")
            frame = frame.withColumn("r", F.row_number().over(order)).where(
                F.col("r") <= int(max_contributions)  # type: ignore[arg-type]
            )
        frame = frame.persist()
        out: dict[str, Counts] = {}
        for name in tables:
            side, has_time, has_loc = table_spec(name)
            key = F.col("part").cast("long")
            if has_time:
                key = key * n_bins + F.floor(F.col("minute") / bin_minutes).cast("long")
            if has_loc:
                key = key * n_locations + F.col("loc")
            out[name] = _collect_counts(frame.where(F.col("side") == side).select(key.alias("k")))
        frame.unpersist()
        return out

    def close(self) -> None:
        """The session stays up for reuse in this process (Spark start-up is slow)."""
