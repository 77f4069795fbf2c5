"""Noise-scale recovery from paired counts (paper 001 section 2, Appendix D)."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.integrate import quad

from synth.audit import fit_scale, load_release, named_pairs, route_pairs
from synth.audit.differencing import noise_pmf
from synth.audit.scale import difference_logpmf, paired_counts
from synth.errors import ConfigError, InputError
from synth.marginals.opal import OpalMarginals

MANLY, QUAY = "Manly Wharf", "Circular Quay No. 3 Wharf"


def ferry_trips(days: int, seed: int = 0) -> pd.DataFrame:
    """A Manly-ferry-like service: every 15 minutes each way, 30-minute trips, 30-150 riders."""
    rng = np.random.default_rng(seed)
    departures = np.arange(5 * 60, 24 * 60 - 30, 15)
    frames = []
    for day in pd.date_range("2016-07-25", periods=days, freq="D"):
        for a, b in ((MANLY, QUAY), (QUAY, MANLY)):
            n = rng.integers(30, 150, departures.size)
            on = day + pd.to_timedelta(
                np.repeat(departures, n) + rng.integers(0, 15, n.sum()), unit="m"
            )
            frames.append(
                pd.DataFrame(
                    {
                        "mode": "ferry",
                        "on_time": on,
                        "on_stop": a,
                        "off_time": on + pd.Timedelta(minutes=30),
                        "off_stop": b,
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def opal_like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SBH release whose time x location tables carry discrete Laplace noise of scale 1.4."""
    out = tmp_path_factory.mktemp("opal") / "release"
    # epsilon 40/7 per partition: the two-way tables get 2/8 of it, 10/7, so scale 2/(10/7) = 1.4
    OpalMarginals(epsilon=Fraction(40, 7), random_state=3).fit(ferry_trips(14)).write(out)
    return out


def test_discrete_difference_pmf_is_the_convolution_of_two_noises() -> None:
    for scale in (0.5, 1.4, 3.0):
        one = noise_pmf("discrete_laplace", scale)
        conv = np.convolve(one, one)
        m = (conv.size - 1) // 2
        d = np.arange(-m, m + 1)
        pmf = np.exp(difference_logpmf(d, scale, "discrete"))
        np.testing.assert_allclose(pmf, conv, atol=1e-12)


def test_appendix_d_density_integrates_to_one() -> None:
    for b in (0.7, 1.4, 5.0):
        total, _ = quad(
            lambda u, b=b: math.exp(difference_logpmf(np.array([u]), b, "laplace")[0]),
            -np.inf,
            np.inf,
        )
        assert total == pytest.approx(1.0, abs=1e-7)


def test_opal_like_release_scale_within_10_percent_at_2000_pairs(opal_like: Path) -> None:
    release = load_release(opal_like)
    pairs = paired_counts(
        [route_pairs(release, MANLY, QUAY, 30), route_pairs(release, QUAY, MANLY, 30)]
    )
    assert len(pairs) >= 2000
    est = fit_scale(pairs["a"] - pairs["b"], model="discrete")
    stated = release.noise("on_time_location")
    assert stated is not None and stated.scale == pytest.approx(1.4)
    assert abs(est.scale - 1.4) / 1.4 < 0.10
    assert est.covers(stated.scale)
    assert est.upper - est.lower < 0.25


def test_continuous_laplace_and_gaussian_models_recover_their_scale() -> None:
    rng = np.random.default_rng(7)
    lap = rng.laplace(0, 1.4, 2000) - rng.laplace(0, 1.4, 2000)
    assert abs(fit_scale(lap, model="laplace").scale - 1.4) / 1.4 < 0.10
    gauss = rng.normal(0, 3.0, 2000) - rng.normal(0, 3.0, 2000)
    est = fit_scale(gauss, model="gaussian")
    assert est.covers(3.0) and abs(est.scale - 3.0) / 3.0 < 0.10


def test_interval_shrinks_with_more_pairs() -> None:
    rng = np.random.default_rng(1)
    d = rng.laplace(0, 2.0, 4000) - rng.laplace(0, 2.0, 4000)
    small, large = fit_scale(d[:200], model="laplace"), fit_scale(d, model="laplace")
    assert large.upper - large.lower < small.upper - small.lower
    assert small.lower < small.scale < small.upper


def test_named_pairs_look_up_cells(opal_like: Path) -> None:
    release = load_release(opal_like)
    on = release.tables["on_time_location"]
    first = on.loc[on["location"] == MANLY].iloc[0]
    arrive = int(first["time"][:2]) * 60 + int(first["time"][3:]) + 30
    off_time = f"{arrive // 60:02d}:{arrive % 60:02d}"
    spec = pd.DataFrame(
        {
            "table_a": ["on_time_location", "on_time_location"],
            "mode_a": ["ferry", "ferry"],
            "day_a": [first["day"], first["day"]],
            "time_a": [first["time"], "03:00"],
            "location_a": [MANLY, MANLY],
            "table_b": ["off_time_location"] * 2,
            "mode_b": ["ferry", "ferry"],
            "day_b": [first["day"], first["day"]],
            "time_b": [off_time, "03:30"],
            "location_b": [QUAY, QUAY],
        }
    )
    pairs = named_pairs(release, spec)
    assert len(pairs) == 1 and pairs.attrs["missing"] == 1  # no ferry at 03:00
    assert pairs["a"].iloc[0] == first["count"]
    assert abs(int(pairs["a"].iloc[0]) - int(pairs["b"].iloc[0])) < 30
    with pytest.raises(InputError, match="location_b"):
        named_pairs(release, spec.drop(columns=["location_b"]))


def test_bad_inputs(opal_like: Path) -> None:
    release = load_release(opal_like)
    with pytest.raises(ConfigError, match="whole number"):
        route_pairs(release, MANLY, QUAY, 20)
    with pytest.raises(InputError, match="at least 2"):
        fit_scale(np.array([1.0]))
    with pytest.raises(ConfigError):
        fit_scale(np.array([1.0, 2.0]), model="cauchy")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="no table"):
        route_pairs(release, MANLY, QUAY, 30, on_table="nope")


def test_min_count_drops_pairs_near_the_threshold() -> None:
    frame = pd.DataFrame({"pair": ["x"] * 3, "a": [20, 40, 60], "b": [19, 41, 30]})
    frame.attrs["missing"] = 2
    kept = paired_counts([frame], min_count=35)
    assert kept["a"].tolist() == [40] and kept.attrs["missing"] == 4
