"""The exact samplers over the whole valid range of scales, and clear refusals beyond it."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from synth.errors import ConfigError
from synth.privacy.calibration import MAX_EPSILON, analytic_gaussian_sigma, check_epsilon
from synth.privacy.noise import MAX_SCALE, SecureNoise

TINY = [5e-324, 1e-300, 1e-3, 1 / 745, 3e-3]  # exp(-1/scale) below every float, down to denormals
HUGE = [1e12, MAX_SCALE / 2, MAX_SCALE]


@pytest.mark.parametrize("scale", TINY)
def test_tiny_scales_are_exactly_zero_noise(scale: float) -> None:
    noise = SecureNoise(seed=1)
    started = time.perf_counter()
    assert not noise.discrete_laplace(scale, 1000).any()
    assert not noise.discrete_gaussian(scale, 1000).any()
    # P(X >= 1) = exp(-1/scale) / (1 + ...) is below 1e-145: no empty cell passes, and the
    # tail conditioned on X >= 1 is exactly 1 (memoryless tail with ratio ~ 0)
    assert noise.empty_cells_passing(scale, 2, 2**62).size == 0
    assert (noise.discrete_laplace_tail(scale, 1, 100) == 1).all()
    assert time.perf_counter() - started < 30  # was 40-60 s and 2.3 GB at 1e-300 (not a benchmark)


@pytest.mark.parametrize("scale", HUGE)
def test_huge_scales_fit_int64_and_have_the_right_spread(scale: float) -> None:
    noise = SecureNoise(seed=2)
    x = noise.discrete_laplace(scale, 2000)
    assert x.dtype == np.int64
    # E|X| ~ scale for a discrete Laplace of a large scale; 2000 draws: within 15 %
    assert 0.85 < np.abs(x).mean() / scale < 1.15
    g = noise.discrete_gaussian(scale, 2000)
    assert 0.85 < g.std() / scale < 1.15
    tail = noise.empty_cells_passing(scale, 3, 1000)
    assert (tail >= 3).all()
    assert 500 < tail.size < 700  # Binomial(1000, ~1/2)


@pytest.mark.parametrize("scale", [MAX_SCALE * 1.0001, 1e16, 1e300, math.inf, 0.0, -1.0])
def test_scales_beyond_the_limit_are_refused_up_front(scale: float) -> None:
    noise = SecureNoise(seed=3)
    with pytest.raises(ConfigError, match="scale"):
        noise.discrete_laplace(scale, 1)
    with pytest.raises(ConfigError):
        noise.empty_cells_passing(scale, 1, 10)


def test_binomial_of_rare_passes_is_exact_in_both_regimes() -> None:
    """q = P(X >= t) around 2**-58 with n = 2**62: the term-by-term inverse CDF (n q < 16) and the
    gap route (n q >= 16) give the same Binomial mean."""
    noise = SecureNoise(seed=4)
    scale = 1.0
    # P(X >= t) = r**t / (1 + r), r = exp(-1): t = 40 -> n q ~ 9.3 (small route), t = 38 -> 69
    small = [noise.empty_cells_passing(scale, 40, 2**62).size for _ in range(200)]
    gaps = [noise.empty_cells_passing(scale, 38, 2**62).size for _ in range(200)]
    r = math.exp(-1.0)
    for draws, t in ((small, 40), (gaps, 38)):
        mean = 2**62 * r**t / (1 + r)
        assert abs(np.mean(draws) - mean) < 4 * math.sqrt(mean / len(draws))


def test_epsilon_limits() -> None:
    assert check_epsilon(MAX_EPSILON) == MAX_EPSILON
    with pytest.raises(ConfigError, match="at most"):
        check_epsilon(1e308)
    sigma = analytic_gaussian_sigma(MAX_EPSILON, 1e-5)
    assert 0 < sigma < 1e-7
    assert analytic_gaussian_sigma(1e-12, 1e-5) > 1e4  # delta-limited, finite
