"""Splitting a privacy budget into shares that never sum past the total."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

__all__ = ["budget_shares"]


def budget_shares(total: float, shares: Sequence[float]) -> list[float]:
    """``total * share`` for each share as floats whose exact decimal values never sum past
    ``total`` (the ledger adds the shortest decimal form of each float exactly)."""
    cap = Fraction(str(total))
    out: list[float] = []
    spent = Fraction(0)
    for share in shares:
        value = float(cap * Fraction(str(share)))
        while spent + Fraction(repr(value)) > cap:
            value = float(np.nextafter(value, 0.0))
        spent += Fraction(repr(value))
        out.append(value)
    return out
