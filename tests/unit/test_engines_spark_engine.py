"""The Spark engine in local mode: the same counts and releases as the memory engine.

Skipped, with the reason, when PySpark or Java is missing (PySpark is the optional extra
``transit-synth[spark]``, installed by ``.ci/run``), and a failure then in CI (``CI=true``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from prefixtree.synthesizer import PrefixTreeSynthesizer
from synth.errors import ConfigError, InputError
from synth.marginals.opal import OpalMarginals
from synth.records import load_sequences
from synth.simulate import _montreal, simulate_sequences, simulate_taps
from tests.conftest import ZeroNoise, flat_taxonomy, position_error_files


# PySpark 4.x warns about pandas 3 and passes its deprecated copy=; the results are checked here.
def QUIET(test: Any) -> Any:  # applied like a mark
    test = pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")(test)
    return pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")(test)


def test_missing_spark_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import synth.engines.spark_engine as spark

    monkeypatch.setattr(spark.shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    reason = spark.spark_available()
    assert reason is not None and ("Java runtime" in reason or "needs PySpark" in reason)
    with pytest.raises(ConfigError, match=r"Java runtime|needs PySpark"):
        spark.SparkEngine()


@pytest.fixture(scope="module")
def local_spark(spark_session: Any) -> Iterator[None]:
    yield


def _tree(source: object, engine: str, time_bin: int | None = None) -> pd.DataFrame:
    tax = _montreal()[0]
    synth = PrefixTreeSynthesizer(
        preset="kdd12",
        epsilon=2.0,
        height=4,
        taxonomy=tax,
        thresholds={1: 1, 2: 1},
        time_bin=time_bin,
        random_state=ZeroNoise(),
        engine=engine,
        engine_options={"threads": 2} if engine == "spark" else None,
    )
    return synth.fit(source).tree_  # type: ignore[arg-type]


@pytest.mark.spark
@pytest.mark.slow  # a JVM start-up and a local session: tens of seconds
@pytest.mark.usefixtures("local_spark")
@QUIET
@pytest.mark.parametrize("time_bin", [None, 60])
def test_spark_prefix_tree_identical(tmp_path: Path, time_bin: int | None) -> None:
    seqs = simulate_sequences(1500, with_time=time_bin is not None, seed=4)
    ref = _tree(seqs, "memory", time_bin)
    pd.testing.assert_frame_equal(_tree(seqs, "spark", time_bin), ref)
    if time_bin is None:  # long-format Parquet read by Spark itself
        seqs.to_parquet(tmp_path / "s.parquet", index=False)
        pd.testing.assert_frame_equal(_tree(tmp_path / "s.parquet", "spark"), ref)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.usefixtures("local_spark")
@QUIET
def test_spark_sbh_identical() -> None:
    taps = simulate_taps(800, seed=5)
    tables = [
        OpalMarginals(
            bin=30,
            privacy_unit="card_id",
            max_contributions=2,
            random_state=ZeroNoise(),
            engine=name,
            engine_options={"threads": 2} if name == "spark" else None,
        )
        .fit(taps)
        .tables_
        for name in ("memory", "spark")
    ]
    for name, table in tables[0].items():
        pd.testing.assert_frame_equal(tables[1][name], table)


class OnlyEmptyCellsPass(ZeroNoise):
    """Every data cell falls far below its threshold and one empty cell passes per histogram: a
    level whose survivors hold no data (the engine is advanced with no live cell)."""

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        return np.full(int(size), -(10**6), dtype=np.int64)

    def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray:
        return np.full(min(1, int(n_empty)), int(threshold), dtype=np.int64)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.usefixtures("local_spark")
@QUIET
def test_spark_level_with_only_empty_survivors() -> None:
    seqs = pd.DataFrame(
        [(f"c{i}", pos, f"s{(i + pos) % 5}") for i in range(40) for pos in range(3)],
        columns=["seq_id", "pos", "location"],
    )
    taxonomy = flat_taxonomy(10)  # s5-s9 unused
    trees = [
        PrefixTreeSynthesizer(
            preset="kdd12",
            variant="simple",
            epsilon=2.0,
            height=3,
            taxonomy=taxonomy,
            random_state=OnlyEmptyCellsPass(),
            engine=name,
            engine_options={"threads": 2} if name == "spark" else None,
        )
        .fit(seqs)
        .tree_
        for name in ("memory", "spark")
    ]
    assert len(trees[0]) == 3  # one empty node per level
    pd.testing.assert_frame_equal(trees[1], trees[0])


@pytest.mark.spark
@pytest.mark.slow
@QUIET
def test_spark_position_errors_name_the_row(spark_session: Any, tmp_path: Path) -> None:
    """A bad or duplicate position: the row and value named as load_sequences names them."""
    from synth.engines.spark_engine import SparkEngine

    engine = SparkEngine(threads=2)
    for path in position_error_files(tmp_path):
        with pytest.raises(InputError) as ref:
            load_sequences(path)
        with pytest.raises(InputError) as got:
            engine.prefix_counter_from_file(path, locations=["x"], height=3, time_bin_minutes=None)
        assert str(got.value) == str(ref.value), path
        assert ", row " in str(ref.value)


def test_memory_sizes_in_spark_notation() -> None:
    """--engine-memory-limit takes 2GB / 512MiB / 4g for every engine; Spark gets mebibytes."""
    from synth.engines.spark_engine import spark_memory

    assert spark_memory("2GB") == spark_memory("2g") == "2048m"
    assert spark_memory("512MiB") == spark_memory("512 MB") == "512m"
    assert spark_memory(str(3 << 30)) == "3072m"
    for bad in ("x", "-1g", "0", True):
        with pytest.raises(ConfigError, match="positive size"):
            spark_memory(bad)


def test_spark_conf_is_checked_before_spark_starts() -> None:
    from synth.engines.spark_engine import spark_conf_items

    assert spark_conf_items({"spark.executor.memory": "4g", "spark.x": True}) == [
        ("spark.executor.memory", "4g"),
        ("spark.x", "true"),
    ]
    for bad in ({"executor.memory": "4g"}, {"spark.a": [1]}, ["spark.a"]):
        with pytest.raises(ConfigError, match="conf"):
            spark_conf_items(bad)  # type: ignore[arg-type]
