"""Statistical privacy tests: correct mechanisms pass, deliberately broken ones (canaries) fail.

Each mechanism is run on neighbouring inputs D, D' (one card added). A vector release of n cells
with the same count is n independent trials of the one-cell mechanism, so the real mechanism code
runs vectorised. Seeded noise keeps the suite deterministic (the transform is the secure one).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from synth.privacy import (
    DiscreteGaussian,
    DiscreteLaplace,
    PrivacyLedger,
    SecureNoise,
    threshold_histogram,
)
from synth.privacy.harness import audit_epsilon, clopper_pearson, tail_events

QUICK, SLOW = 20_000, 1_000_000
EPS = 1.0


def ledger() -> PrivacyLedger:
    return PrivacyLedger(epsilon=10.0, delta=0.5)


def laplace_runner(scale_factor: float = 1.0, seed: int = 0) -> Any:
    """Counts + DLap(scale_factor * 1/EPS); scale_factor 0.5 is the 'half the noise' canary."""
    noise = SecureNoise(seed=seed)
    mech = DiscreteLaplace(epsilon=EPS)

    def run(count: int, n: int) -> np.ndarray:
        if scale_factor == 1.0:
            return mech.release(np.full(n, count), noise=noise, ledger=ledger(), label="count")
        return count + noise.discrete_laplace(mech.scale * scale_factor, n)

    return run


def presence_runner(mode: str, seed: int = 0, delta: float = 1e-6) -> Any:
    """Whether a cell appears in a histogram release; D has the cell empty, D' has count 1.

    ``correct``: threshold_histogram (non-empty cells only, noisy threshold from delta);
    ``no threshold``: every non-empty cell released with noise, none dropped;
    ``low threshold``: noisy threshold 2 regardless of delta.
    """
    noise = SecureNoise(seed=seed)
    scale = 1 / EPS

    def run(count: int, n: int) -> np.ndarray:
        if count == 0:  # only non-empty cells are ever considered
            return np.zeros(n, dtype=bool)
        counts = np.full(n, count)
        if mode == "correct":
            rel = threshold_histogram(
                counts, epsilon=EPS, delta=delta, noise=noise, ledger=ledger(), label="h"
            )
            present = np.zeros(n, dtype=bool)
            present[rel.index] = True
            return present
        noisy = counts + noise.discrete_laplace(scale, n)
        return np.ones(n, dtype=bool) if mode == "no threshold" else noisy >= 2

    return run


def unperturbed_zero_runner(seed: int = 0) -> Any:
    """Opal-style flaw: nonzero counts get noise but true zeros are published as exactly 0."""
    noise = SecureNoise(seed=seed)

    def run(count: int, n: int) -> np.ndarray:
        if count == 0:
            return np.zeros(n, dtype=np.int64)
        return count + noise.discrete_laplace(1 / EPS, n)

    return run


PRESENT = {"cell released": lambda out: np.asarray(out)}


def test_clopper_pearson_bounds() -> None:
    lo, hi = clopper_pearson(50, 100, 0.025)
    assert 0.39 < lo < 0.5 < hi < 0.61
    assert clopper_pearson(0, 100, 0.01)[0] == 0.0
    assert clopper_pearson(100, 100, 0.01)[1] == 1.0
    assert 0 < clopper_pearson(0, 1000, 0.01)[1] < 0.005


@pytest.mark.parametrize("trials", [QUICK, pytest.param(SLOW, marks=pytest.mark.slow)])
def test_discrete_laplace_passes(trials: int) -> None:
    audit = audit_epsilon(laplace_runner(), 5, 6, tail_events(range(2, 10)), trials=trials)
    assert not audit.violates(EPS)
    assert audit.epsilon_lower_bound > 0.5 * EPS  # the test has power: the bound is close to EPS


@pytest.mark.parametrize("trials", [QUICK, pytest.param(SLOW, marks=pytest.mark.slow)])
def test_discrete_gaussian_passes(trials: int) -> None:
    mech = DiscreteGaussian(epsilon=EPS, delta=1e-3)
    noise = SecureNoise(seed=1)

    def run(count: int, n: int) -> np.ndarray:
        return mech.release(np.full(n, count), noise=noise, ledger=ledger(), label="g")

    events = tail_events(range(-6, 8))
    audit = audit_epsilon(run, 0, 1, events, trials=trials, delta=mech.achieved_delta)
    assert not audit.violates(EPS)


@pytest.mark.parametrize("trials", [QUICK, pytest.param(SLOW, marks=pytest.mark.slow)])
def test_threshold_histogram_passes(trials: int) -> None:
    delta = 1e-6
    audit = audit_epsilon(
        presence_runner("correct", delta=delta), 0, 1, PRESENT, trials=trials, delta=delta
    )
    assert not audit.violates(EPS)
    assert audit.rates["cell released"][1] < 1e-3


@pytest.mark.parametrize("trials", [QUICK, pytest.param(SLOW, marks=pytest.mark.slow)])
def test_canary_half_noise_scale_is_flagged(trials: int) -> None:
    audit = audit_epsilon(laplace_runner(0.5), 5, 6, tail_events(range(2, 10)), trials=trials)
    assert audit.violates(EPS)
    assert audit.epsilon_lower_bound > 1.5 * EPS  # true epsilon is 2


@pytest.mark.parametrize("trials", [QUICK, pytest.param(SLOW, marks=pytest.mark.slow)])
def test_canary_unperturbed_zeros_are_flagged(trials: int) -> None:
    events = {"published 0": lambda out: np.asarray(out) == 0}
    audit = audit_epsilon(unperturbed_zero_runner(), 0, 1, events, trials=trials, delta=1e-6)
    assert audit.violates(EPS)


@pytest.mark.parametrize("mode", ["no threshold", "low threshold"])
@pytest.mark.parametrize("trials", [QUICK, pytest.param(SLOW, marks=pytest.mark.slow)])
def test_canary_missing_or_low_threshold_is_flagged(mode: str, trials: int) -> None:
    audit = audit_epsilon(presence_runner(mode), 0, 1, PRESENT, trials=trials, delta=1e-6)
    assert audit.violates(EPS)
    assert audit.event == "cell released" and audit.direction == "D' vs D"
