"""Shared fixtures: the real public data in ../shared/data, skipped cleanly when absent."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ../shared/data; skips the test when the folder is not there."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real public data not available at {SHARED_DATA}")
    return SHARED_DATA
