"""Exact sampling machinery: random bit sources, rigorous interval bounds, inverse-CDF tables.

Every sampler in :mod:`synth.privacy.noise` reduces to comparisons ``V < c`` between a uniform
real ``V`` in [0, 1) and a real constant ``c`` (a CDF value, ``exp(-gamma)``). ``V`` is revealed
lazily: its first word ``U`` (32 bits for tables, 64 for coins) decides the comparison unless
``floor(2**bits c)`` is within one of ``U``; only then are more bits drawn, 64 at a time, and
``c`` bounded rigorously (``mpmath.iv`` interval arithmetic, fixed-point integer powers rounded
outwards) at a growing precision, until the comparison is decided. The output distribution is
therefore exactly the target pmf: no rounding of probabilities is ever exposed (the "lazy
uniform" technique of exact inverse-CDF sampling; cf. Knuth and Yao 1976; Canonne, Kamath and
Steinke 2020, section 5).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from fractions import Fraction

import numpy as np
from mpmath import iv
from mpmath.libmp import mpf_shift, round_ceiling, round_floor, to_int, to_rational

__all__ = [
    "BitSource",
    "Bounds",
    "CdfTable",
    "FixedCdf",
    "LazyUniform",
    "bounds",
    "precision",
    "rational",
]

TWO64 = 1 << 64
WORD_BITS = 32  # bits of the first, bulk-drawn word of each inverse-CDF draw
# Bounds: prec -> (lower, upper) Fractions bracketing an exact real, computed at about prec bits.
Bounds = Callable[[int], tuple[Fraction, Fraction]]
# FixedCdf: (prec, j) -> (lo, hi), an integer enclosure of 2**prec * C_j.
FixedCdf = Callable[[int, int], tuple[int, int]]


class BitSource:
    """Uniform 64-bit words: ``os.urandom`` (the OS CSPRNG) or, when seeded, numpy's PCG64 raw bits.

    The secure source keeps no buffer, so a forked child never repeats its parent's words. The
    seeded stream is deterministic (reproducible tests) and offers no privacy.
    """

    def __init__(self, seed: int | None = None) -> None:
        self._pcg = None if seed is None else np.random.PCG64(seed)

    def uint64(self, n: int) -> np.ndarray:
        """``n`` independent uniform words as a uint64 array."""
        if self._pcg is not None:
            return self._pcg.random_raw(n)
        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)

    def uint32(self, n: int) -> np.ndarray:
        """``n`` independent uniform 32-bit words as a uint32 array."""
        if self._pcg is not None:
            return self._pcg.random_raw((n + 1) // 2).view(np.uint32)[:n]
        return np.frombuffer(os.urandom(4 * n), dtype=np.uint32)

    def word(self) -> int:
        """One uniform 64-bit word as a Python int."""
        return int(self.uint64(1)[0])


@contextlib.contextmanager
def precision(bits: int) -> Iterator[None]:
    """Run interval arithmetic (``mpmath.iv``) at ``bits`` bits of working precision."""
    old = iv.prec
    iv.prec = max(int(bits), 53)
    try:
        yield
    finally:
        iv.prec = old


def rational(q: Fraction | int) -> iv.mpf:
    """A rigorous interval enclosing the rational ``q`` at the current precision."""
    q = Fraction(q)
    return iv.mpf(q.numerator) / iv.mpf(q.denominator)


def bounds(x: iv.mpf, prec: int | None = None) -> tuple[Fraction, Fraction]:
    """Rational endpoints of an ``mpmath.iv`` interval: exact, or with ``prec`` rounded outwards
    to multiples of ``2**-prec`` (cheap whatever the exponent: ``exp(-1e300)`` becomes
    ``(0, 2**-prec)`` instead of a fraction with a 10**300-bit denominator)."""
    lo, hi = x._mpi_
    if prec is None:
        return Fraction(*to_rational(lo)), Fraction(*to_rational(hi))
    low = to_int(mpf_shift(lo, prec), round_floor)
    high = to_int(mpf_shift(hi, prec), round_ceiling)
    return Fraction(low, 1 << prec), Fraction(high, 1 << prec)


class LazyUniform:
    """A uniform real V in [0, 1) whose binary expansion is drawn 64 bits at a time on demand.

    Its first ``nbits`` bits are ``first_word`` (already drawn by the caller).
    """

    def __init__(self, first_word: int, source: BitSource, nbits: int = 64) -> None:
        self._bits = first_word
        self._nbits = nbits
        self._source = source

    def less_than(self, c: Bounds) -> bool:
        """Whether V < c, for the real c bracketed by ``c(prec)``; exact (c is drawn-free)."""
        while True:
            lo, hi = c(self._nbits + 64)
            v_lo = Fraction(self._bits, 1 << self._nbits)
            if hi <= v_lo:
                return False
            if lo >= v_lo + Fraction(1, 1 << self._nbits):
                return True
            self._bits = (self._bits << 64) | self._source.word()
            self._nbits += 64


class CdfTable:
    """Exact inverse-CDF sampling of an outcome in ``0..n`` from CDF values ``C_0 <= ... < 1``.

    ``cdf(prec, j)`` returns an integer enclosure ``(lo, hi)`` of ``2**prec * C_j``, where
    ``C_j = P(outcome <= j)``; the outcome is ``#{j : C_j <= V}`` for a lazy uniform V whose first
    32 bits ``U`` are drawn in bulk. The table stores ``F_j ~ floor(2**32 C_j)`` (each within one
    of the true floor): a word at distance >= 2 from every ``F_j`` decides the outcome with one
    binary search; any other word (probability below ``3n / 2**32``) is resolved exactly, drawing
    more bits.
    """

    def __init__(self, n: int, cdf: FixedCdf, prec: int) -> None:
        self._cdf = cdf
        self._prec = prec
        shift = prec - WORD_BITS
        floors = []
        for lo, hi in (cdf(prec, j) for j in range(n)):
            if (hi - lo) >> (shift - 2):
                raise ArithmeticError("CDF enclosure too wide for the table; raise precision")
            floors.append(lo >> shift)
        self.thresholds = np.array(floors, dtype=np.uint64)
        # G_j = F_j + 1 (saturated): the first j with G_j >= U is the first with F_j >= U - 1
        top = (1 << WORD_BITS) - 1
        self._shifted = np.minimum(self.thresholds + 1, top).astype(np.uint32)
        self._padded = np.append(self._shifted, np.uint32(top))

    def _bound(self, j: int) -> Bounds:
        def c(prec: int) -> tuple[Fraction, Fraction]:
            prec = max(prec, self._prec)
            lo, hi = self._cdf(prec, j)
            return Fraction(lo, 1 << prec), Fraction(hi, 1 << prec)

        return c

    def sample(self, source: BitSource, size: int) -> np.ndarray:
        """``size`` exact draws of the outcome index (int64, in ``0..n``)."""
        u = source.uint32(size)
        out = np.searchsorted(self._shifted, u, side="left")
        # undecided iff F_out <= U + 1, i.e. G_out - U <= 2 (no wrap-around: G_out >= U)
        for i in np.flatnonzero(self._padded[out] - u <= 2):
            out[i] = self._resolve(int(u[i]), int(out[i]), source)
        return out

    def _resolve(self, word: int, first: int, source: BitSource) -> int:
        """Outcome for a word near some thresholds: compare V exactly against those ``C_j``."""
        v = LazyUniform(word, source, WORD_BITS)
        j = first
        n = len(self.thresholds)
        while j < n and int(self.thresholds[j]) <= word + 1 and not v.less_than(self._bound(j)):
            j += 1
        return j
