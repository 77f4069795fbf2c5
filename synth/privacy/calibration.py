"""Noise calibration: the analytic Gaussian mechanism, the exact privacy of the discrete Gaussian.

- :func:`analytic_gaussian_sigma`: Balle and Wang (2018), Theorem 8 / Algorithm 1: the Gaussian
  mechanism with L2 sensitivity Δ is (ε, δ)-DP iff
  ``Φ(Δ/2σ - εσ/Δ) - e^ε Φ(-Δ/2σ - εσ/Δ) <= δ``; the smallest such σ, for every ε > 0.
- :func:`discrete_gaussian_privacy`: Canonne, Kamath and Steinke (2020), Theorem 7: adding
  ``N_Z(0, σ²)`` to an integer query of sensitivity Δ is (ε, δ)-DP with
  ``δ = P[Z > εσ²/Δ - Δ/2] - e^ε P[Z > εσ²/Δ + Δ/2]``, summed exactly over the integers.
- :func:`discrete_gaussian_vector_privacy`: a vector of independent discrete Gaussians whose L2
  sensitivity is Δ is ρ-zCDP with ρ = Δ²/2σ² (CKS 2020, Theorem 14), hence (ε, δ)-DP with
  ``δ = inf_α exp((α-1)(αρ-ε)) / (α-1) · (1-1/α)^α`` (CKS 2020, Corollary 13).
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np

from synth.errors import ConfigError

# scipy is imported where it is used: releases that use none of these calibrations (the prefix
# tree's discrete Laplace) start without it.

__all__ = [
    "MAX_EPSILON",
    "analytic_gaussian_sigma",
    "check_delta",
    "check_epsilon",
    "check_sensitivity",
    "discrete_gaussian_privacy",
    "discrete_gaussian_vector_privacy",
]

_CHUNK = 1 << 20
_TAIL_SIGMAS = 12.0  # terms beyond 12 sigma are below exp(-72) of the first: past float64 precision


#: The largest epsilon accepted: 2**52 (4.5e15). Beyond it a noise scale 1/epsilon is below the
#: resolution of the counts' float64 companions and the Gaussian calibration (Balle and Wang 2018)
#: leaves mpmath's range; no meaningful privacy is left long before.
MAX_EPSILON = float(2**52)


def check_epsilon(epsilon: float) -> float:
    """``epsilon`` if a finite number in (0, 2**52], else ConfigError."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float | np.number):
        raise ConfigError(f"epsilon must be a number, got {epsilon!r}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if epsilon > MAX_EPSILON:
        raise ConfigError(f"epsilon must be at most 2**52 = 4.5e15, got {epsilon!r}")
    return float(epsilon)


def check_delta(delta: float, *, positive: bool = False) -> float:
    """``delta`` if in [0, 1) (or (0, 1) when ``positive``), else ConfigError."""
    if isinstance(delta, bool) or not isinstance(delta, int | float | np.number):
        raise ConfigError(f"delta must be a number, got {delta!r}")
    if not (0 <= delta < 1) or (positive and delta == 0):
        interval = "(0, 1)" if positive else "[0, 1)"
        raise ConfigError(f"delta must be in {interval}, got {delta!r}")
    return float(delta)


def check_sensitivity(sensitivity: float) -> float:
    """``sensitivity`` if a finite number > 0, else ConfigError."""
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, int | float | np.number):
        raise ConfigError(f"sensitivity must be a number, got {sensitivity!r}")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ConfigError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    return float(sensitivity)


def _gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> mpmath.mpf:
    """Balle and Wang (2018) Theorem 8: the exact delta of the Gaussian mechanism at ``sigma``."""
    with mpmath.workdps(40):
        s, e, d = mpmath.mpf(sigma), mpmath.mpf(epsilon), mpmath.mpf(sensitivity)
        a, b = d / (2 * s), e * s / d
        return mpmath.ncdf(a - b) - mpmath.exp(e) * mpmath.ncdf(-a - b)


@functools.lru_cache(
    maxsize=4096
)  # a pure function of public numbers; the ledger checks every spend
def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest σ (to 1e-12 relative, rounded up) making the Gaussian mechanism (ε, δ)-DP.

    Balle and Wang (2018), Theorem 8 (the condition is monotone in σ; solved by bisection in high
    precision), valid for every ε > 0, unlike the classical ``sqrt(2 ln(1.25/δ)) Δ/ε`` (ε < 1 only).
    """
    eps, dlt = check_epsilon(epsilon), check_delta(delta, positive=True)
    sens = check_sensitivity(sensitivity)
    lo, hi = sens / 2**20, sens / eps
    while _gaussian_delta(hi, eps, sens) > dlt:
        lo, hi = hi, hi * 2
    while _gaussian_delta(lo, eps, sens) <= dlt:
        lo /= 2
    while hi - lo > 1e-12 * hi:
        mid = (lo + hi) / 2
        if _gaussian_delta(mid, eps, sens) > dlt:
            lo = mid
        else:
            hi = mid
    return hi


def _log_upper_tail(sigma: float, m: int) -> float:
    """``log sum_{y >= m} exp(-y²/2σ²)`` for an integer ``m >= 0`` (chunked float64 log-sum-exp)."""
    from scipy.special import logsumexp

    two_s2 = 2.0 * sigma * sigma
    n_terms = int(_TAIL_SIGMAS * sigma) + 2
    logs = []
    for start in range(0, n_terms, _CHUNK):
        k = np.arange(start, min(start + _CHUNK, n_terms), dtype=np.float64)
        logs.append(logsumexp(-(k * (2.0 * m + k)) / two_s2))
    return -(m * m) / two_s2 + float(logsumexp(logs))


def _log_tail_probability(sigma: float, x: float, log_norm: float) -> float:
    """``log P[Z > x]`` for ``Z ~ N_Z(0, σ²)``."""
    m = math.floor(x) + 1
    if m >= 0:
        return _log_upper_tail(sigma, m) - log_norm
    # P[Z >= m] = 1 - P[Z >= 1 - m] for m < 0 (symmetry)
    return math.log1p(-math.exp(_log_upper_tail(sigma, 1 - m) - log_norm))


@functools.lru_cache(
    maxsize=4096
)  # a pure function of public numbers; the ledger checks every spend
def discrete_gaussian_privacy(sigma: float, epsilon: float, sensitivity: int = 1) -> float:
    """The δ that ``N_Z(0, σ²)`` noise achieves at ``epsilon`` on an integer query of sensitivity Δ.

    Canonne, Kamath and Steinke (2020), Theorem 7, exact sums over the support (float64, relative
    error ~1e-13; cost linear in σ).
    """
    sig = check_sensitivity(sigma)
    eps = check_epsilon(epsilon)
    if int(sensitivity) != sensitivity or sensitivity < 1:
        raise ConfigError(f"sensitivity must be a positive integer here, got {sensitivity!r}")
    d = int(sensitivity)
    log_norm = float(np.logaddexp(_log_upper_tail(sig, 0), _log_upper_tail(sig, 1)))
    centre = eps * sig * sig / d
    log_a = _log_tail_probability(sig, centre - d / 2, log_norm)
    log_b = _log_tail_probability(sig, centre + d / 2, log_norm)
    return max(0.0, math.exp(log_a) - math.exp(eps + log_b))


def discrete_gaussian_vector_privacy(
    sigma: float, epsilon: float, sensitivity: float = 1.0
) -> float:
    """δ at ``epsilon`` of independent ``N_Z(0, σ²)`` noise on a vector of L2 sensitivity Δ.

    Via zCDP: ρ = Δ²/2σ² (CKS 2020, Theorem 14) and CKS Corollary 13, optimised over α > 1.
    """
    from scipy.optimize import minimize_scalar

    sig, eps = check_sensitivity(sigma), check_epsilon(epsilon)
    sens = check_sensitivity(sensitivity)
    rho = sens * sens / (2 * sig * sig)

    def log_delta(log_am1: float) -> float:
        a = 1 + math.exp(log_am1)
        return (a - 1) * (a * rho - eps) - math.log(a - 1) + a * math.log1p(-1 / a)

    best = minimize_scalar(
        log_delta, bounds=(-20.0, 20.0), method="bounded", options={"xatol": 1e-10}
    )
    return min(1.0, math.exp(best.fun))
