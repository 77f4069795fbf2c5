"""Analytic Gaussian calibration, discrete Gaussian privacy, mechanisms, threshold histogram."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from synth.errors import ConfigError, InputError
from synth.privacy import (
    DiscreteGaussian,
    DiscreteLaplace,
    PrivacyLedger,
    SecureNoise,
    analytic_gaussian_sigma,
    discrete_gaussian_privacy,
    discrete_gaussian_vector_privacy,
    threshold_delta,
    threshold_histogram,
)


def continuous_delta(sigma: float, eps: float, sens: float) -> float:
    a, b = sens / (2 * sigma), eps * sigma / sens
    return float(stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b))


def hockey_stick(sigma: float, eps: float, shift: int) -> float:
    """δ(ε) of N_Z(0,σ²) vs shift + N_Z(0,σ²) by brute force: sum_z max(0, P(z) - e^ε Q(z))."""
    z = np.arange(-int(60 * sigma) - 60, int(60 * sigma) + 60 + shift)
    w = np.exp(-(z.astype(float) ** 2) / (2 * sigma * sigma))
    p = w / w.sum()
    q = np.exp(-((z - shift).astype(float) ** 2) / (2 * sigma * sigma)) / w.sum()
    return float(np.maximum(0.0, p - math.exp(eps) * q).sum())


@pytest.mark.parametrize(("eps", "expected"), [(1.0, 4.22), (0.1, 36.3)])
def test_analytic_gaussian_known_values(eps: float, expected: float) -> None:
    assert analytic_gaussian_sigma(eps, 1e-6, 1.0) == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize(
    ("eps", "delta", "sens"), [(1.0, 1e-6, 1.0), (0.1, 1e-5, 2.0), (20.0, 1e-9, 1.0)]
)
def test_analytic_gaussian_is_the_smallest_sigma(eps: float, delta: float, sens: float) -> None:
    sigma = analytic_gaussian_sigma(eps, delta, sens)
    assert continuous_delta(sigma, eps, sens) <= delta * (1 + 1e-9)
    assert continuous_delta(sigma * (1 - 1e-6), eps, sens) > delta


def test_analytic_gaussian_beats_the_classical_bound_and_scales() -> None:
    for eps in (0.1, 0.5, 0.9):
        classical = math.sqrt(2 * math.log(1.25 / 1e-6)) / eps
        assert analytic_gaussian_sigma(eps, 1e-6) < classical
    assert analytic_gaussian_sigma(5.0, 1e-6) > 0  # eps >= 1 works
    assert analytic_gaussian_sigma(1.0, 1e-6, 3.0) == pytest.approx(
        3 * analytic_gaussian_sigma(1.0, 1e-6, 1.0), rel=1e-9
    )


@pytest.mark.parametrize(("sigma", "eps", "shift"), [(4.22, 1.0, 1), (2.0, 0.5, 2), (0.8, 2.0, 1)])
def test_discrete_gaussian_privacy_matches_brute_force(
    sigma: float, eps: float, shift: int
) -> None:
    assert discrete_gaussian_privacy(sigma, eps, shift) == pytest.approx(
        hockey_stick(sigma, eps, shift), rel=1e-8, abs=1e-15
    )


def test_discrete_gaussian_privacy_near_continuous_for_large_sigma() -> None:
    sigma = analytic_gaussian_sigma(0.1, 1e-6)
    assert discrete_gaussian_privacy(sigma, 0.1) == pytest.approx(1e-6, rel=1e-3)


def test_vector_privacy_is_a_looser_valid_bound() -> None:
    sigma = 5.0
    exact = discrete_gaussian_privacy(sigma, 1.0, 1)
    assert discrete_gaussian_vector_privacy(sigma, 1.0, 1.0) >= exact
    assert discrete_gaussian_vector_privacy(2 * sigma, 1.0, 1.0) < discrete_gaussian_vector_privacy(
        sigma, 1.0, 1.0
    )


def test_calibration_rejects_bad_parameters() -> None:
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ConfigError):
            analytic_gaussian_sigma(bad, 1e-6)
        with pytest.raises(ConfigError):
            DiscreteLaplace(epsilon=bad)
        with pytest.raises(ConfigError):
            DiscreteLaplace(epsilon=1.0, sensitivity=bad)
    for delta in (0.0, 1.0, -1e-9, 2.0):
        with pytest.raises(ConfigError):
            analytic_gaussian_sigma(1.0, delta)
        with pytest.raises(ConfigError):
            DiscreteGaussian(epsilon=1.0, delta=delta)
    with pytest.raises(ConfigError):
        discrete_gaussian_privacy(1.0, 1.0, sensitivity=0)


def test_discrete_laplace_scale_is_rounded_up() -> None:
    mech = DiscreteLaplace(epsilon=0.3, sensitivity=1)
    assert mech.scale >= 1 / 0.3 and mech.scale == pytest.approx(1 / 0.3, rel=1e-15)
    assert DiscreteLaplace(epsilon=0.5, sensitivity=3).scale == 6.0


def test_discrete_gaussian_meets_its_target_and_records_achieved_delta() -> None:
    mech = DiscreteGaussian(epsilon=1.0, delta=1e-6, sensitivity=1)
    # the discrete Gaussian at the continuous sigma slightly overshoots; sigma was bumped up
    assert mech.sigma >= analytic_gaussian_sigma(1.0, 1e-6)
    assert discrete_gaussian_privacy(mech.sigma, 1.0, 1) <= mech.achieved_delta <= 1e-6
    assert mech.sigma == pytest.approx(4.22, abs=0.05)
    vec = DiscreteGaussian(epsilon=1.0, delta=1e-6, sensitivity=2.0, single_coordinate=False)
    assert discrete_gaussian_vector_privacy(vec.sigma, 1.0, 2.0) <= vec.achieved_delta <= 1e-6
    ledger = PrivacyLedger(epsilon=1.0, delta=1e-6)
    out = mech.release(np.array([10, 20]), noise=SecureNoise(seed=2), ledger=ledger, label="g")
    assert out.dtype == np.int64 and out.shape == (2,)
    assert ledger.spends[0].delta == pytest.approx(mech.achieved_delta)
    assert ledger.spends[0].scale == mech.sigma


def test_release_rejects_fractional_counts() -> None:
    with pytest.raises(InputError):
        DiscreteLaplace(epsilon=1.0).release(
            np.array([1.5]), noise=SecureNoise(seed=1), ledger=PrivacyLedger(epsilon=1.0), label="x"
        )


def test_threshold_histogram_delta_and_threshold() -> None:
    scale, tau = 2.0, 20
    p = math.exp(-1 / scale)
    # one new cell with count 1 passes iff 1 + Z >= tau: P(Z >= tau - 1) = p^(tau-1) / (1 + p)
    assert threshold_delta(scale, tau, 1) == pytest.approx(p ** (tau - 1) / (1 + p), rel=1e-8)
    ledger = PrivacyLedger(epsilon=2.0, delta=1e-5)
    counts = np.array([0, 3, 50, 200])
    rel = threshold_histogram(
        counts, epsilon=0.5, delta=1e-6, noise=SecureNoise(seed=4), ledger=ledger, label="h"
    )
    assert (
        threshold_delta(2.0, rel.threshold, 1) <= 1e-6 < threshold_delta(2.0, rel.threshold - 1, 1)
    )
    assert set(rel.index.tolist()) >= {3} and np.all(rel.values >= rel.threshold)
    assert rel.empty_values.size == 0
    assert (
        ledger.spends[0].delta == pytest.approx(rel.delta)
        and ledger.spends[0].threshold == rel.threshold
    )
    public = threshold_histogram(
        counts,
        epsilon=0.5,
        threshold=5,
        n_empty=10_000,
        noise=SecureNoise(seed=4),
        ledger=ledger,
        label="public domain",
    )
    assert public.delta == 0.0 and ledger.spends[1].delta == 0
    assert public.empty_values.size > 0 and np.all(public.empty_values >= 5)
    with pytest.raises(ConfigError):
        threshold_histogram(
            counts, epsilon=0.5, noise=SecureNoise(seed=4), ledger=ledger, label="x"
        )
    with pytest.raises(ConfigError):
        threshold_histogram(
            counts, epsilon=0.5, threshold=1, noise=SecureNoise(seed=4), ledger=ledger, label="y"
        )
