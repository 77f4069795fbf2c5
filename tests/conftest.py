"""Shared fixtures: the real public data in ../shared/data, skipped cleanly when absent."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ../shared/data; skips the test when the folder is not there."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real public data not available at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="module")
def spark_session() -> Iterator[Any]:
    """A local Spark session (2 cores) for the Spark engine's tests: skipped with the reason when
    PySpark or Java is missing, but a FAILURE in CI (``CI=true``, as ``.ci/run`` sets), where the
    image has Java. The session is not stopped: the next module reuses it (JVM start-up is slow).
    """
    from synth.engines.spark_engine import SparkEngine, spark_available

    reason = spark_available()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the Spark engine cannot run: {reason}")
        pytest.skip(f"Spark engine not available: {reason}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PySpark on pandas 3: deprecation noise
        engine = SparkEngine(threads=2)
    yield engine.session


class ZeroNoise:
    """A noise source with SecureNoise's methods that adds nothing: every noisy count is exact,
    no empty cell passes a threshold, and index draws are the first ones. With it a release is a
    deterministic function of the data, so neighbouring inputs can be compared byte for byte."""

    seeded = True

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        return np.zeros(int(size), dtype=np.int64)

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        return np.zeros(int(size), dtype=np.int64)

    def discrete_laplace_tail(self, scale: float, threshold: int, size: int) -> np.ndarray:
        return np.full(int(size), int(threshold), dtype=np.int64)

    def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray:
        return np.zeros(0, dtype=np.int64)

    def choice(self, n: int, k: int) -> np.ndarray:
        return np.arange(int(k), dtype=np.int64)

    def permutation(self, n: int) -> np.ndarray:
        return np.arange(int(n), dtype=np.int64)


class PassingZeroNoise(ZeroNoise):
    """:class:`ZeroNoise`, except that empty cells (value 0) pass when the threshold is <= 0."""

    def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray:
        return np.zeros(int(n_empty) if threshold <= 0 else 0, dtype=np.int64)


#: Table 1 of Chen et al. 2012: eight sequences over four locations.
TABLE_1 = [
    ["L1", "L2", "L3"],
    ["L1", "L2"],
    ["L3", "L2", "L1"],
    ["L1", "L2", "L4"],
    ["L1", "L2", "L3"],
    ["L3", "L2"],
    ["L1", "L2", "L4", "L1"],
    ["L3", "L1"],
]
