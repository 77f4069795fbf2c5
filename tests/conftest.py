"""Shared fixtures: the real public data in ../shared/data, skipped cleanly when absent."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
