"""Mechanisms: discrete Laplace, discrete Gaussian and the threshold (stability) histogram.

Each mechanism validates its parameters at construction, records its spend in the ledger *before*
drawing noise (an overspend raises BudgetExceededError with no noise drawn) and returns integer
counts plus exact noise from :class:`~synth.privacy.noise.SecureNoise`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from synth.errors import ConfigError, InputError
from synth.privacy.calibration import (
    analytic_gaussian_sigma,
    check_delta,
    check_epsilon,
    check_sensitivity,
    discrete_gaussian_privacy,
    discrete_gaussian_vector_privacy,
)
from synth.privacy.ledger import LedgerBranch, Spend, exact
from synth.privacy.noise import SecureNoise

__all__ = ["DiscreteGaussian", "DiscreteLaplace", "ThresholdRelease", "threshold_histogram"]

DELTA_SAFETY = 1e-9  # relative margin on computed deltas (their float error is ~1e-13)


def _float_at_least(q: Fraction) -> float:
    """The smallest float >= q."""
    f = float(q)
    return f if Fraction(f) >= q else math.nextafter(f, math.inf)


def _integer_counts(counts: np.ndarray) -> np.ndarray:
    arr = np.asarray(counts)
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        return arr.astype(np.int64)
    raise InputError("counts must be integers (a noisy count mechanism adds integer noise)")


def _seeded_note(note: str, noise: SecureNoise) -> str:
    return f"{note} [seeded noise: NOT private]".strip() if noise.seeded else note


class _NoisyCounts:
    """Shared ``record``/``release`` of the count mechanisms (set by subclasses: ``mechanism``,
    ``norm``, ``epsilon``, ``delta``, ``sensitivity``, ``scale`` and ``_noise``)."""

    mechanism: str
    norm: str
    epsilon: float
    delta: float
    sensitivity: float
    scale: float

    def _noise(self, noise: SecureNoise, size: int) -> np.ndarray:
        raise NotImplementedError

    def record(
        self,
        ledger: LedgerBranch,
        *,
        label: str,
        unit: str | None = None,
        threshold: float | None = None,
        note: str = "",
    ) -> Spend:
        """Record this mechanism's spend (when the caller draws the noise itself)."""
        return ledger.spend(
            label=label,
            mechanism=self.mechanism,
            epsilon=self.epsilon,
            delta=self.delta,
            sensitivity=self.sensitivity,
            sensitivity_norm=self.norm,
            scale=self.scale,
            threshold=threshold,
            unit=unit,
            note=note,
        )

    def release(
        self,
        counts: np.ndarray,
        *,
        noise: SecureNoise,
        ledger: LedgerBranch,
        label: str,
        unit: str | None = None,
        threshold: float | None = None,
        note: str = "",
    ) -> np.ndarray:
        """``counts`` + noise (int64, same shape); the spend is recorded first."""
        values = _integer_counts(counts)
        self.record(
            ledger, label=label, unit=unit, threshold=threshold, note=_seeded_note(note, noise)
        )
        return values + self._noise(noise, values.size).reshape(values.shape)


class DiscreteLaplace(_NoisyCounts):
    """``counts + DLap(scale)`` with ``scale = sensitivity / epsilon`` (rounded up): pure ε-DP.

    ``sensitivity`` is the L1 sensitivity of the integer vector released in one call (Ghosh,
    Roughgarden and Sundararajan 2009: the two-sided geometric mechanism).
    """

    mechanism = "discrete_laplace"
    norm = "l1"

    def __init__(self, *, epsilon: float, sensitivity: float = 1) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = check_sensitivity(sensitivity)
        self.delta = 0.0
        self.scale = _float_at_least(exact(sensitivity, "sensitivity") / exact(epsilon, "epsilon"))

    def _noise(self, noise: SecureNoise, size: int) -> np.ndarray:
        return noise.discrete_laplace(self.scale, size)


class DiscreteGaussian(_NoisyCounts):
    """``counts + N_Z(0, σ²)`` with σ from the analytic calibration (Balle and Wang 2018).

    ``achieved_delta`` (= ``delta``, what the ledger records) is the δ the *discrete* Gaussian
    actually achieves at ``epsilon``. With ``single_coordinate=True`` (one unit changes one
    coordinate by at most ``sensitivity``, e.g. a histogram where each unit is in one cell;
    sensitivity rounded up to an integer) it is exact (Canonne, Kamath and Steinke 2020,
    Theorem 7); otherwise ``sensitivity`` is the L2 sensitivity of the vector and the zCDP bound
    (CKS Theorem 14 + Corollary 13) is used. σ is increased above the continuous calibration until
    ``achieved_delta <= delta_target``.
    """

    mechanism = "discrete_gaussian"
    norm = "l2"

    def __init__(
        self,
        *,
        epsilon: float,
        delta: float,
        sensitivity: float = 1,
        single_coordinate: bool = True,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.delta_target = check_delta(delta, positive=True)
        self.sensitivity = check_sensitivity(sensitivity)
        self.single_coordinate = single_coordinate
        if single_coordinate:
            self.sensitivity = float(math.ceil(self.sensitivity))
        self.sigma = self.scale = self._calibrate()
        self.achieved_delta = self.delta = self._padded_delta(self.sigma)
        if self.achieved_delta > self.delta_target:
            raise ConfigError(
                f"discrete Gaussian at sigma={self.sigma:g} achieves delta={self.achieved_delta:g} "
                f"> target {self.delta_target:g}"
            )

    def _padded_delta(self, sigma: float) -> float:
        if self.single_coordinate:
            d = discrete_gaussian_privacy(sigma, self.epsilon, int(self.sensitivity))
        else:
            d = discrete_gaussian_vector_privacy(sigma, self.epsilon, self.sensitivity)
        return d * (1 + DELTA_SAFETY)

    def _calibrate(self) -> float:
        """Smallest σ (to 1e-9 relative) >= the continuous one whose discrete δ meets the target."""
        lo = analytic_gaussian_sigma(self.epsilon, self.delta_target, self.sensitivity)
        if self._padded_delta(lo) <= self.delta_target:
            return lo
        step = 1e-6
        while self._padded_delta(lo * (1 + step)) > self.delta_target:
            step *= 2
            if step > 1e6:
                raise ConfigError("cannot calibrate the discrete Gaussian to this (epsilon, delta)")
        hi = lo * (1 + step)
        while hi - lo > 1e-9 * hi:
            mid = (lo + hi) / 2
            if self._padded_delta(mid) > self.delta_target:
                lo = mid
            else:
                hi = mid
        return hi

    def _noise(self, noise: SecureNoise, size: int) -> np.ndarray:
        return noise.discrete_gaussian(self.sigma, size)


@dataclass(frozen=True)
class ThresholdRelease:
    """Output of :func:`threshold_histogram`.

    ``index``: positions (ascending) in the input ``counts`` of the kept non-empty cells;
    ``values``: their noisy counts; ``empty_values``: noisy counts of the public-domain empty cells
    that passed (assign them to ``noise.choice(n_empty, len(empty_values))`` of the empty cells, in
    the caller's public order); ``threshold``: the integer threshold; ``epsilon``, ``delta``: the
    spend.
    """

    index: np.ndarray
    values: np.ndarray
    empty_values: np.ndarray
    threshold: int
    epsilon: float
    delta: float


def _dlap_upper(scale: float, t: int) -> float:
    """``P(Z >= t)`` for ``Z ~ DLap(scale)``, ``t >= 1``."""
    p = math.exp(-1.0 / scale)
    return math.exp(-t / scale) / (1.0 + p)


def threshold_delta(scale: float, threshold: int, sensitivity: int) -> float:
    """δ of the noisy-threshold histogram with no public domain (:func:`threshold_histogram`)."""
    if threshold <= sensitivity:
        return 1.0
    one_cell = _dlap_upper(scale, threshold - sensitivity)
    many_cells = sensitivity * _dlap_upper(scale, threshold - 1)
    return min(1.0, max(one_cell, many_cells) * (1 + DELTA_SAFETY))


def threshold_histogram(
    counts: np.ndarray,
    *,
    epsilon: float,
    noise: SecureNoise,
    ledger: LedgerBranch,
    label: str,
    delta: float | None = None,
    threshold: int | None = None,
    sensitivity: int = 1,
    n_empty: int | None = None,
    unit: str | None = None,
    note: str = "",
) -> ThresholdRelease:
    """Noisy-threshold (stability-based) histogram with exact discrete Laplace noise.

    ``counts`` are the non-empty cells; each gets ``DLap(sensitivity/epsilon)`` noise and is kept if
    its noisy count is ``>= threshold``. ``sensitivity`` bounds the L1 change of the histogram when
    one unit is added or removed (integer).

    - Without a public domain (``n_empty=None``): a cell that exists only with the unit can appear,
      so the release is (ε, δ)-DP with ``δ = max(P(Z >= τ - Δ), Δ · P(Z >= τ - 1))`` (the union
      bound over the at most Δ new cells, maximised over how the unit's Δ is split among them;
      Korolova et al. 2009, Bun, Nissim and Stemmer 2016; Vadhan 2017, Proposition 3.5). Give either
      ``threshold`` (δ follows) or ``delta`` (the smallest integer threshold meeting it is used).
    - With ``n_empty`` (the number of public-domain cells with a zero count, not in ``counts``):
      every cell of the domain is perturbed, the empty ones through
      :meth:`SecureNoise.empty_cells_passing` (KDD 2012 Theorem 4.1, exact), so the release is pure
      ε-DP (thresholding is post-processing) and ``delta`` only chooses the threshold.
    """
    eps = check_epsilon(epsilon)
    if int(sensitivity) != sensitivity or sensitivity < 1:
        raise ConfigError(f"sensitivity must be a positive integer, got {sensitivity!r}")
    values = _integer_counts(counts).ravel()
    mech = DiscreteLaplace(epsilon=eps, sensitivity=sensitivity)
    mech.mechanism = "threshold_histogram"  # discrete Laplace noise, then a noisy threshold
    if threshold is not None and delta is None:
        tau = math.ceil(threshold)
    elif delta is not None and threshold is None:
        target = check_delta(delta, positive=True)
        tau = sensitivity + 1
        while threshold_delta(mech.scale, tau, sensitivity) > target:
            tau += 1
    else:
        raise ConfigError("give exactly one of delta or threshold")
    if n_empty is None:
        mech.delta = threshold_delta(mech.scale, tau, sensitivity)
        if mech.delta >= 1:
            raise ConfigError(f"threshold {tau} gives no privacy (delta = 1); raise it")
    mech.record(ledger, label=label, unit=unit, threshold=tau, note=_seeded_note(note, noise))
    noisy = values + noise.discrete_laplace(mech.scale, values.size)
    keep = np.flatnonzero(noisy >= tau)
    empty = (
        noise.empty_cells_passing(mech.scale, tau, n_empty)
        if n_empty
        else np.empty(0, dtype=np.int64)
    )
    return ThresholdRelease(keep, noisy[keep], empty, tau, eps, mech.delta)
