"""Splitting a privacy budget into shares that sum to the total, never past it."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

__all__ = ["SHARE_ROUNDING", "budget_shares", "split_budget"]

#: Shares that sum to 1 up to this much are taken as summing to exactly 1 (float shares such as
#: ``[1/3, 2/3]`` or ``w / sum(w)`` miss 1 by a few units in their 16th digit).
SHARE_ROUNDING = Fraction(1, 10**12)


def budget_shares(total: float, shares: Sequence[float]) -> list[float]:
    """``total * share`` for each share as floats whose exact decimal values (the ledger adds the
    shortest decimal form of each float exactly) never sum past ``total``.

    When the shares sum to 1 up to :data:`SHARE_ROUNDING`, the last positive share is what the
    others leave: the shares then sum to ``total`` exactly (whenever that rest is a float's
    shortest decimal form, as it is for totals and shares written with up to about 15 digits), so
    a release that spends them all spends its whole cap and says nothing of an underspend."""
    cap = Fraction(repr(float(total)))
    parts = [Fraction(repr(float(s))) for s in shares]
    positive = [i for i, p in enumerate(parts) if p > 0]
    summed = sum(parts, Fraction(0))
    rest_of = positive[-1] if positive and abs(summed - 1) <= SHARE_ROUNDING else None
    out: list[float] = []
    spent = Fraction(0)
    for i, part in enumerate(parts):
        if i == rest_of:
            others = sum((Fraction(repr(v)) for v in out), Fraction(0))
            later = sum((cap * p for p in parts[i + 1 :]), Fraction(0))  # shares of 0 after it
            value = float(cap - others - later)
        else:
            value = float(cap * part)
        while spent + Fraction(repr(value)) > cap:
            value = float(np.nextafter(value, 0.0))
        spent += Fraction(repr(value))
        out.append(value)
    return out


def split_budget(budget: tuple[float, float], shares: Sequence[float]) -> list[tuple[float, float]]:
    """An (epsilon, delta) ``budget`` split by ``shares``: :func:`budget_shares` on each of the
    two, paired share by share."""
    eps, delta = budget_shares(budget[0], shares), budget_shares(budget[1], shares)
    return list(zip(eps, delta, strict=True))
