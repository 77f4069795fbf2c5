"""Differencing across the tables of one release (paper 001 section 4, Appendix E, Theorem 5)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.audit import difference_tables, load_release, table_pairs, theorem5_halfwidth
from synth.audit.differencing import noise_pmf, sum_quantile
from synth.marginals.opal import OpalMarginals
from synth.privacy import SecureNoise

# 08:00 on one day: two busy stops and one whose 14 tap-offs the time x location table suppresses
# (threshold 18 at scale 1); the time table (scale 2, threshold 35) releases the row's total.
SECRET = {"quay": 200, "manly": 150, "cremorne": 14}


def _taps() -> pd.DataFrame:
    stops = [s for s, n in SECRET.items() for _ in range(n)]
    minutes = np.arange(len(stops)) % 15
    time = pd.Timestamp("2016-08-12 08:00") + pd.to_timedelta(minutes, unit="m")
    return pd.DataFrame({"time": time, "stop_id": stops, "mode": "ferry", "tap": "off"})


def _release(tmp_path: Path, mode: str, seed: int) -> Path:
    out = tmp_path / f"{mode}{seed}"
    OpalMarginals(epsilon=8, mode=mode, random_state=seed).fit(_taps()).write(out)
    return out


def test_single_noise_quantile_is_the_closed_form() -> None:
    for scale in (0.5, 1.0, 2.0):
        p = math.exp(-1 / scale)
        for alpha in (0.1, 0.05, 0.01):
            m = next(m for m in range(1000) if 2 * p ** (m + 1) / (1 + p) <= alpha)
            assert sum_quantile((("discrete_laplace", scale, 1),), alpha) == m


def test_theorem5_is_too_narrow_and_the_exact_interval_is_not() -> None:
    assert theorem5_halfwidth(1.4, 3, 0.05) == pytest.approx(1.4 * math.log(5))
    noise = SecureNoise(seed=5)
    sums = sum(noise.discrete_laplace(1.4, 20_000) for _ in range(3))
    t5 = theorem5_halfwidth(1.4, 3, 0.05)
    exact = sum_quantile((("discrete_laplace", 1.4, 3),), 0.05)
    assert np.mean(np.abs(sums) <= t5) < 0.70  # nominal 95%: Theorem 5's proof bounds the wrong way
    assert np.mean(np.abs(sums) <= exact) >= 0.945


def test_rounded_laplace_and_gaussian_pmfs_are_normalised() -> None:
    for kind in ("laplace", "gaussian", "discrete_laplace"):
        pmf = noise_pmf(kind, 1.7)
        assert pmf.sum() == pytest.approx(1.0) and np.allclose(pmf, pmf[::-1])


def test_pairs_stay_within_one_measure(tmp_path: Path) -> None:
    pairs = table_pairs(load_release(_release(tmp_path, "sbh", 0)))
    assert {(p.fine, p.coarse) for p in pairs} == {
        (f"{side}_time_location", f"{side}_{dim}")
        for side in ("on", "off")
        for dim in ("time", "location")
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_suppressed_cell_is_flagged_and_consistent_release_is_not(
    tmp_path: Path, seed: int
) -> None:
    sbh = load_release(_release(tmp_path, "sbh", seed))
    fine = sbh.tables["off_time_location"]
    assert "cremorne" not in set(fine["location"])  # the cell was suppressed ...
    noise = sbh.noise("off_time_location")
    assert noise is not None and noise.threshold is not None
    assert noise.threshold > SECRET["cremorne"]
    rows = difference_tables(sbh)
    row = rows.loc[(rows["coarse"] == "off_time") & rows["cell"].str.contains("08:00")]
    assert len(row) == 1 and bool(row["flagged"].iloc[0])  # ... and recovered
    lo, hi = float(row["lower"].iloc[0]), float(row["upper"].iloc[0])
    assert lo > 0 and lo <= SECRET["cremorne"] + 2 and hi >= SECRET["cremorne"] - 2
    assert int(row["released_cells"].iloc[0]) == 2

    consistent = difference_tables(load_release(_release(tmp_path, "consistent", seed)))
    assert len(consistent) > 0 and consistent["derived"].all()
    assert not consistent["flagged"].any() and (consistent["estimate"] == 0).all()


def test_inconsistent_derived_table_is_detected(tmp_path: Path) -> None:
    path = _release(tmp_path, "consistent", 0)
    coarse = pd.read_csv(path / "off_time.csv")
    coarse["count"] += 3
    coarse.to_csv(path / "off_time.csv", index=False)
    rows = difference_tables(load_release(path))
    bad = rows.loc[rows["coarse"] == "off_time"]
    assert bad["derived"].all() and (bad["estimate"] == 3).all()
