"""SBH calibration: the stability histogram's noise scale and threshold per privacy unit.

A :class:`SBHCalibration` is :class:`synth.privacy.ThresholdHistogram`, the one noisy-threshold
mechanism of the privacy core: its privacy map (unit, sensitivities, epsilon, delta, threshold) is
data, known before any input is read.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Protocol

import numpy as np

from synth.errors import ConfigError
from synth.params import spell
from synth.privacy import LedgerBranch, PrivacyLedger, ThresholdHistogram, exact

__all__ = [
    "NOISE_METHODS",
    "NoiseSource",
    "SBHCalibration",
    "calibrate",
    "fresh_ledger",
    "record_spend",
]

#: What SBH uses of a noise source (:class:`synth.privacy.SecureNoise` or a test stand-in).
NOISE_METHODS = ("discrete_laplace", "empty_cells_passing", "choice")

#: Noise scale, threshold and sensitivities of one stability histogram (a noisy count is kept when
#: it is ``>= threshold``; ``delta`` is what the release spends, 0 in pure mode).
SBHCalibration = ThresholdHistogram


class NoiseSource(Protocol):
    """What is used of :class:`synth.privacy.SecureNoise` (tests pass a zero-noise stand-in)."""

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray: ...

    def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray: ...

    def choice(self, n: int, k: int) -> np.ndarray: ...


def calibrate(
    epsilon: float | Fraction,
    delta: float | Fraction,
    *,
    privacy_unit: str | None = None,
    max_contributions: int = 1,
    pure: bool = False,
) -> SBHCalibration:
    """Scale and threshold of a stability histogram.

    **Row unit** (``privacy_unit=None``; neighbours replace one row, 000 Theorem 5): Algorithm 1
    exactly, scale ``2/epsilon`` and the threshold ``2 ln(2/delta)/epsilon + 1`` (as an integer: its
    ceiling, the same test for integer counts). With the discrete Laplace the bad event of the proof
    has ``P(X >= 2 ln(2/delta)/epsilon) = p^ceil(.)/(1+p) < delta/2``, so Theorem 5 carries over.

    **Card unit** (``privacy_unit`` names the unit column; neighbours add or remove one card, whose
    rows were bounded to ``k = max_contributions``): the card changes at most ``l0 = k`` cells, each
    by at most ``linf = k``, ``l1 = k`` in total. Scale ``b = l1/epsilon``; the threshold ``tau`` is
    the least integer ``> k`` with :func:`synth.privacy.threshold_delta` ``(b, tau, k) <=
    delta``, i.e. ``max(P(X >= tau - k), k P(X >= tau - 1)) <= delta`` (the privacy core's
    threshold primitive).

    *Proof* (card unit). Let ``D = D' + card``; ``S`` = cells with a positive count in ``D'``,
    ``U`` = cells positive only in ``D`` (their count in ``D`` is the card's ``c_u >= 1``, with
    ``sum c <= l1``). Cells outside ``S u U`` are never released by either. The outputs on ``S``
    are a noisy vector whose L1 distance between ``D`` and ``D'`` is ``<= l1``, thresholded per cell
    (post-processing): ``e^(l1/b) = e^epsilon``-indistinguishable. A ``U`` cell is released from
    ``D`` only if ``c_u + X >= tau`` and never from ``D'``; by the union bound ``q = P(some U cell
    is released) <= sum_u P(X >= tau - c_u)``, a convex function of ``(c_u)`` over ``{c_u >= 1,
    sum c_u <= k}``, so it is largest at a vertex, and over the vertices ``(k - j + 1, 1, ..., 1)``
    the sum is convex in ``j``: ``q <= max(P(X >= tau - k), k P(X >= tau - 1)) <= delta``. Let
    ``M_S`` be the release without the ``U`` cells; ``M(D) = M_S(D)`` unless a ``U`` cell passes.
    For any set ``O``: ``P[M(D) in O] <= P[M_S(D) in O] + q <= e^eps P[M(D') in O] + delta``; and,
    the ``U`` noise being independent, ``(1-q) P[M(D') in O] <= e^eps P[M_S(D) in O, no U cell
    passes] <= e^eps P[M(D) in O]``, so ``P[M(D') in O] <= e^eps P[M(D) in O] + q``. Hence
    (epsilon, delta)-DP.
    ``tests/dp/test_sbh_dp.py`` checks both units with the DP harness.

    **Pure** (``pure=True``, 001 section 3): every domain cell is perturbed, so the noisy vector is
    epsilon-DP (L1 sensitivity 2 for a row swap, ``k`` for a card) and the threshold is
    post-processing; ``delta`` then only sets it (the same formula; ``delta = 0`` keeps every noisy
    count ``>= linf``, row unit ``>= 1``) and the release spends ``delta = 0``.
    """
    eps = exact(epsilon, "epsilon")
    dlt = exact(delta, "delta")
    if eps <= 0:
        raise ConfigError(f"epsilon must be > 0, got {float(eps)}")
    if not 0 <= dlt < 1 or (dlt == 0 and not pure):
        raise ConfigError(f"delta must be in (0, 1) (pure mode: [0, 1)), got {float(dlt)}")
    if isinstance(max_contributions, bool) or not isinstance(max_contributions, int | np.integer):
        raise ConfigError(
            f"{spell('max_contributions')} must be an integer >= 1, got {max_contributions!r}"
        )
    k = int(max_contributions)
    if k < 1:
        raise ConfigError(f"{spell('max_contributions')} must be >= 1, got {k}")
    if privacy_unit is None:
        if k != 1:
            raise ConfigError(
                f"{spell('max_contributions')} needs a {spell('privacy_unit')} "
                f"column (the unit is a row)"
            )
        return ThresholdHistogram.for_rows(eps, dlt, pure=pure)
    return ThresholdHistogram.for_units(eps, dlt, unit=str(privacy_unit), sensitivity=k, pure=pure)


def fresh_ledger(cal: SBHCalibration) -> PrivacyLedger:
    neighbouring = (
        "replace one row by another"
        if cal.unit == "row"
        else f"add or remove one {cal.unit}'s rows (at most {cal.l1} kept)"
    )
    return PrivacyLedger(
        epsilon=cal.epsilon, delta=cal.delta, unit=cal.unit, neighbouring=neighbouring
    )


def record_spend(
    book: LedgerBranch, label: str, cal: SBHCalibration, note: str = "", *, seeded: bool = False
) -> None:
    """Record one stability histogram's spend (before any noise is drawn)."""
    if cal.pure:
        detail = "every public-domain cell perturbed, zeros included; threshold is post-processing"
    elif cal.unit == "row":
        detail = "Algorithm 1 of 000: present cells only, kept when >= threshold"
    else:
        detail = (
            f"threshold histogram: l0={cal.l0}, l1={cal.l1}, linf={cal.linf}; present cells only"
        )
    book.spend(
        label=label,
        mechanism="discrete_laplace" if cal.pure else "discrete_laplace_threshold",
        epsilon=cal.epsilon,
        delta=cal.delta,
        sensitivity=cal.l1,
        sensitivity_norm="l1",
        scale=cal.scale,
        threshold=cal.threshold,
        note="; ".join(
            x for x in (detail, note, "seeded noise: NOT private" if seeded else "") if x
        ),
    )
