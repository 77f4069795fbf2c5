"""Mechanisms: discrete Laplace, discrete Gaussian and the threshold (stability) histogram.

Each mechanism validates its parameters at construction, records its spend in the ledger *before*
drawing noise (an overspend raises BudgetExceededError with no noise drawn) and returns integer
counts plus exact noise from :class:`~synth.privacy.noise.SecureNoise`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

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

__all__ = [
    "DiscreteGaussian",
    "DiscreteLaplace",
    "ThresholdHistogram",
    "ThresholdRelease",
    "least_threshold",
    "threshold_delta",
    "threshold_histogram",
    "threshold_release",
]

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
    """Output of :meth:`ThresholdHistogram.release` and :func:`threshold_histogram`.

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


def least_threshold(scale: float, sensitivity: int, delta: float, low: int) -> int:
    """The least integer threshold >= ``low`` whose :func:`threshold_delta` is <= ``delta``.

    ``threshold_delta`` decreases in the threshold, so doubling then bisection finds it in
    O(log) evaluations, whatever the scale.
    """
    high = low
    while threshold_delta(scale, high, sensitivity) > delta:
        low, high = high + 1, 2 * high
    while low < high:
        middle = (low + high) // 2
        if threshold_delta(scale, middle, sensitivity) > delta:
            low = middle + 1
        else:
            high = middle
    return high


def threshold_release(
    counts: np.ndarray,
    *,
    scale: float,
    threshold: int,
    noise: Any,
    n_empty: int | None = None,
    batch: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The noisy-threshold step: ``(noisy counts, passed mask, passing empty-cell values)``.

    Every present cell gets ``DLap(scale)`` noise (drawn in batches of ``batch`` cells when given,
    so the sampler's temporaries stay small) and passes when its noisy count is ``>= threshold``;
    with ``n_empty`` (public-domain cells with a zero count, never enumerated) the passing empty
    cells' values are drawn exactly (Chen et al. 2012, Theorem 4.1). The privacy accounting is the
    caller's (:class:`ThresholdHistogram` states it); this is the one place the noise is drawn.
    """
    values = np.asarray(counts, dtype=np.int64)
    if batch is None:
        noisy = values + np.asarray(noise.discrete_laplace(scale, int(values.size)), np.int64)
    else:
        noisy = np.empty(values.size, dtype=np.int64)
        for lo in range(0, values.size, batch):
            hi = min(lo + batch, values.size)
            noisy[lo:hi] = noise.discrete_laplace(scale, hi - lo)
        noisy += values
    passed = noisy >= threshold
    empty = (
        np.asarray(noise.empty_cells_passing(scale, threshold, int(n_empty)), np.int64)
        if n_empty is not None
        else np.empty(0, dtype=np.int64)
    )
    return noisy, passed, empty


@dataclass(frozen=True)
class ThresholdHistogram:
    """The noisy-threshold (stability-based) histogram; its privacy map as data, before any input.

    ``unit``: the privacy unit (``"row"``: neighbours replace one row; otherwise neighbours add or
    remove one unit, bounded to change at most ``l0`` cells, each by at most ``linf``, ``l1`` in
    all); ``epsilon``, ``delta``: what a release spends (``delta = 0`` when ``pure``: every
    public-domain cell is perturbed and the threshold is post-processing); ``scale``: the discrete
    Laplace scale; ``threshold``: a noisy count is kept when it is ``>= threshold``. Build it with
    :meth:`for_rows` or :meth:`for_units`; :meth:`release` draws the noise.
    """

    epsilon: Fraction
    delta: Fraction
    scale: float
    threshold: int
    unit: str
    l0: int
    l1: int
    linf: int
    pure: bool

    @classmethod
    def for_rows(
        cls, epsilon: float | Fraction, delta: float | Fraction, *, pure: bool = False
    ) -> ThresholdHistogram:
        """Row unit (replace one row): scale ``2/epsilon``, threshold ``2 ln(2/delta)/epsilon + 1``
        (its ceiling; Algorithm 1 of Asghar, Tyler and Kaafar 2018, Theorem 5)."""
        eps, dlt = _threshold_budget(epsilon, delta, pure)
        scale = float(DiscreteLaplace(epsilon=float(eps), sensitivity=2).scale)
        threshold = 1 if dlt == 0 else math.ceil(1.0 + scale * math.log(2.0 / float(dlt)))
        return cls(eps, Fraction(0) if pure else dlt, scale, int(threshold), "row", 2, 2, 1, pure)

    @classmethod
    def for_units(
        cls,
        epsilon: float | Fraction,
        delta: float | Fraction,
        *,
        unit: str,
        sensitivity: int,
        pure: bool = False,
        threshold: int | None = None,
    ) -> ThresholdHistogram:
        """Add or remove one unit changing at most ``sensitivity`` cells by ``sensitivity`` in
        all: scale ``sensitivity/epsilon``; the least threshold ``> sensitivity`` with
        :func:`threshold_delta` ``<= delta`` (or ``threshold`` as given, ``delta`` following)."""
        eps, dlt = _threshold_budget(epsilon, delta, pure or threshold is not None)
        k = int(sensitivity)
        scale = float(DiscreteLaplace(epsilon=float(eps), sensitivity=k).scale)
        if threshold is not None:
            tau = math.ceil(threshold)
            dlt = Fraction(0) if pure else exact(threshold_delta(scale, tau, k), "delta")
            if dlt >= 1:
                raise ConfigError(f"threshold {tau} gives no privacy (delta = 1); raise it")
        else:
            tau = k + 1 if dlt == 0 else least_threshold(scale, k, float(dlt), k + 1)
        return cls(eps, Fraction(0) if pure else dlt, scale, int(tau), unit, k, k, k, pure)

    def error_bound(self, beta: float = 0.05) -> int:
        """Per-cell error bound, holding with probability ``>= 1 - beta`` (exact; Asghar, Tyler
        and Kaafar 2018, Theorem 6).

        With ``X ~ DLap(scale)``, ``P(|X| > m) = 2 p^(m+1)/(1+p)``, ``p = exp(-1/scale)``. Let ``m``
        be the least integer with ``P(|X| > m) <= beta``. A released cell is off by ``|X| <= m``; a
        suppressed cell had ``c + X < threshold``, so ``c <= threshold - 1 + m``.
        """
        if not 0.0 < beta < 1.0:
            raise ConfigError(f"beta must be in (0, 1), got {beta!r}")
        p = math.exp(-1.0 / self.scale)
        if p == 0.0:  # scale below 1/745: |X| > 0 has probability below 1e-323
            return self.threshold - 1
        m = max(0, math.ceil(math.log(beta * (1.0 + p) / 2.0) / math.log(p) - 1.0))
        while m > 0 and 2.0 * p**m / (1.0 + p) <= beta:
            m -= 1
        while 2.0 * p ** (m + 1) / (1.0 + p) > beta:
            m += 1
        return self.threshold - 1 + m

    def to_dict(self, beta: float = 0.05) -> dict[str, Any]:
        """The privacy map as JSON-ready fields, plus the error bound at ``beta``."""
        out = asdict(self)
        out["epsilon"], out["delta"] = float(self.epsilon), float(self.delta)
        out["error_bound"] = self.error_bound(beta)
        out["error_bound_beta"] = beta
        return out

    def release(
        self,
        counts: np.ndarray,
        noise: Any,
        *,
        n_empty: int | None = None,
        batch: int | None = None,
    ) -> ThresholdRelease:
        """Noise and threshold the present cells' ``counts``; in pure mode ``n_empty`` (the
        public-domain cells with a zero count) is required. Record the spend first."""
        if self.pure and n_empty is None:
            raise ConfigError("pure mode needs the public domain of every table")
        noisy, passed, empty = threshold_release(
            _integer_counts(counts).ravel(),
            scale=self.scale,
            threshold=self.threshold,
            noise=noise,
            n_empty=n_empty if self.pure else None,
            batch=batch,
        )
        keep = np.flatnonzero(passed)
        return ThresholdRelease(
            keep, noisy[keep], empty, self.threshold, float(self.epsilon), float(self.delta)
        )


def _threshold_budget(
    epsilon: float | Fraction, delta: float | Fraction, zero_delta_ok: bool
) -> tuple[Fraction, Fraction]:
    eps, dlt = exact(epsilon, "epsilon"), exact(delta, "delta")
    if eps <= 0:
        raise ConfigError(f"epsilon must be > 0, got {float(eps)}")
    if not 0 <= dlt < 1 or (dlt == 0 and not zero_delta_ok):
        raise ConfigError(f"delta must be in (0, 1) (pure mode: [0, 1)), got {float(dlt)}")
    return eps, dlt


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
    """Noisy-threshold (stability-based) histogram with exact discrete Laplace noise: a
    :class:`ThresholdHistogram` over ``sensitivity``-bounded units, recorded, then released.

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
    if (threshold is None) == (delta is None):
        raise ConfigError("give exactly one of delta or threshold")
    values = _integer_counts(counts).ravel()
    hist = ThresholdHistogram.for_units(
        eps,
        Fraction(0) if delta is None else check_delta(delta, positive=True),
        unit=unit or "unit",
        sensitivity=int(sensitivity),
        pure=n_empty is not None,
        threshold=threshold,
    )
    if delta is not None and n_empty is None:  # spend the delta the threshold achieves
        hist = ThresholdHistogram.for_units(
            eps, 0, unit=hist.unit, sensitivity=hist.l1, threshold=hist.threshold
        )
    ledger.spend(
        label=label,
        mechanism="threshold_histogram",  # discrete Laplace noise, then a noisy threshold
        epsilon=eps,
        delta=float(hist.delta),
        sensitivity=float(sensitivity),
        sensitivity_norm="l1",
        scale=hist.scale,
        threshold=hist.threshold,
        unit=unit,
        note=_seeded_note(note, noise),
    )
    return hist.release(values, noise, n_empty=n_empty if n_empty else None)
