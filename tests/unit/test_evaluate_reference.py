"""Reference check: synthetic microdata against an SBH release (synth.evaluate.reference)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.errors import InputError
from synth.evaluate.reference import against_reference
from synth.marginals.grid import TABLES
from synth.marginals.opal import OpalRelease


def _trips(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    on = pd.Timestamp("2016-07-25") + pd.to_timedelta(rng.integers(6 * 60, 20 * 60, n), unit="m")
    stops = np.array([f"s{i}" for i in range(5)])
    return pd.DataFrame(
        {
            "mode": rng.choice(["bus", "ferry"], n),
            "on_time": on,
            "on_stop": rng.choice(stops, n, p=[0.4, 0.3, 0.1, 0.1, 0.1]),
            "off_time": on + pd.Timedelta(minutes=30),
            "off_stop": rng.choice(stops, n),
        }
    )


@pytest.fixture(scope="module")
def private() -> pd.DataFrame:
    return _trips(30_000, 0)


@pytest.fixture(scope="module")
def release(private: pd.DataFrame) -> OpalRelease:
    return OpalRelease(bin_minutes=60, random_state=11).fit(private)


def test_the_private_data_agrees_with_its_release(
    private: pd.DataFrame, release: OpalRelease
) -> None:
    report = against_reference(private, release).set_index("table")
    assert list(report.index) == list(TABLES)
    assert report["compared"].all()
    assert (report["tvd"] < 0.02).all()
    assert (report["outside_fraction"] <= 0.05).all()


def test_distorted_microdata_is_flagged(private: pd.DataFrame, release: OpalRelease) -> None:
    bad = private.assign(
        on_stop="s0", on_time=private["on_time"].dt.floor("D") + pd.Timedelta("8h")
    )
    report = against_reference(bad, release).set_index("table")
    for name in ("on_time", "on_location", "on_time_location"):
        assert report.loc[name, "tvd"] > 0.5
        assert report.loc[name, "outside_bound"] > 0
    assert report.loc["off_location", "outside_bound"] == 0  # untouched side still agrees


def test_release_directory_and_sequences(
    private: pd.DataFrame, release: OpalRelease, tmp_path: Path
) -> None:
    out = release.write(tmp_path / "rel").path
    a = against_reference(private, release)
    b = against_reference(private, out)
    pd.testing.assert_frame_equal(a, b)
    seqs = pd.DataFrame(
        {
            "seq_id": np.arange(len(private)).astype(str),
            "pos": 0,
            "location": private["on_stop"],
        }
    )
    report = against_reference(seqs, release).set_index("table")
    assert report.loc["on_location", "compared"]
    assert not report.loc["on_time", "compared"]
    assert not report.loc["off_location", "compared"]
    # summed over the 2 modes x 1 day partitions: the bound doubles
    assert (
        report.loc["on_location", "error_bound"]
        == 2 * a.set_index("table").loc["on_location", "error_bound"]
    )
    assert report.loc["on_location", "tvd"] < 0.02
    with pytest.raises(InputError, match="manifest"):
        against_reference(private, tmp_path)


def test_consistent_release_bounds_derived_tables(private: pd.DataFrame) -> None:
    rel = OpalRelease(bin_minutes=60, mode="consistent", random_state=5).fit(private)
    report = against_reference(private, rel).set_index("table")
    two_way = report.loc["on_time_location", "error_bound"]
    assert report.loc["on_time", "error_bound"] == 5 * two_way  # 5 locations summed
    assert report.loc["on_location", "error_bound"] == 24 * two_way  # 24 bins summed
    assert (report["outside_bound"] == 0).all()
