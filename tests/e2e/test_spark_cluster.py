"""The README's cluster recipe: ``sequences`` and ``marginals`` with ``--engine spark`` against a
Spark cluster give the memory engine's release byte for byte.

The cluster is Spark's ``local-cluster[2,1,1024]`` master: two worker JVMs with one core and
1 GiB each, started by the driver on this machine, with executors in their own JVMs (tasks,
shuffles and broadcasts cross processes as on a real cluster). Each command runs in its own
process, as a user runs it (a process holds one Spark session). Slow: three JVMs per command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from synth import datasets
from synth.cli import main
from synth.simulate import simulate_sequences, simulate_taps

MASTER = "local-cluster[2,1,1024]"
CLUSTER = ["--engine", "spark", "--spark-master", MASTER, "--engine-memory-limit", "1g"]
CLUSTER += ["--spark-conf", "spark.executor.memory=512m", "--spark-conf", "spark.executor.cores=1"]

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.usefixtures("spark_available")]


@pytest.fixture(scope="module")
def spark_available() -> None:
    from synth.engines.spark_engine import spark_available as reason_missing

    reason = reason_missing()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the Spark engine cannot run: {reason}")
        pytest.skip(f"Spark engine not available: {reason}")


def _cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "synth", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


@pytest.mark.parametrize(
    ("command", "layout"),
    [("sequences", "sequences.parquet"), ("marginals", "taps.csv")],
)
def test_cluster_release_is_the_memory_release(tmp_path: Path, command: str, layout: str) -> None:
    if layout == "sequences.parquet":  # long format: read by the executors themselves
        simulate_sequences(2000, seed=21).to_parquet(tmp_path / layout, index=False)
        args = ["--taxonomy", str(datasets.path("montreal_taxonomy")), "--epsilon", "1"]
        args += ["--height", "4"]
    else:  # taps: read by the driver, bounded and counted on the executors
        simulate_taps(2000, seed=22).to_csv(tmp_path / layout, index=False)
        args = ["--epsilon", "1", "--delta", "1e-6", "--privacy-unit", "card_id"]
        args += ["--max-contributions", "3", "--bounding", "earliest"]  # the executors' rule
    common = [command, str(tmp_path / layout), *args, "--seed", "5", "--quiet"]
    assert main([*common, "--out", str(tmp_path / "memory"), "--engine", "memory"]) == 0
    run = _cli([*common, "--out", str(tmp_path / "cluster"), *CLUSTER])
    assert run.returncode == 0, run.stderr[-3000:]
    assert _files(tmp_path / "cluster") == _files(tmp_path / "memory")


def test_cluster_bad_setting_is_one_clean_line(tmp_path: Path) -> None:
    simulate_sequences(50, seed=1).to_parquet(tmp_path / "s.parquet", index=False)
    args = ["sequences", str(tmp_path / "s.parquet"), "--taxonomy"]
    args += [str(datasets.path("montreal_taxonomy")), "--epsilon", "1", "--height", "2"]
    args += ["--out", str(tmp_path / "out"), "--engine", "spark", "--spark-conf", "executor=4g"]
    run = _cli(args)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1].startswith("transit-synth sequences: error:")
    assert "spark.*" in run.stderr and not (tmp_path / "out").exists()
