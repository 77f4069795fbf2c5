"""Exact discrete noise on a cryptographically secure source.

All samplers are *exact*: the output pmf is the mathematical one, with no rounding of
probabilities (see :mod:`synth.privacy._exact`: inverse-CDF tables searched with 32-bit words,
any undecided comparison refined with more random bits and rigorous interval arithmetic). Hence
no extra delta is owed for sampling error: ``SecureNoise.max_tv_per_draw`` is 0. Randomness comes
from ``os.urandom`` unless a seed is given (then numpy PCG64 raw bits: reproducible, flagged
``.seeded``, NOT private).

- Geometric ``P(G = g) = (1 - r) r**g``: a table for ``g < L`` with the memoryless tail
  ``G | G >= L  =  L + G'``; for large scales ``G = 4096 A + B`` with independent ``A`` (geometric,
  ratio ``r**4096``) and ``B`` (geometric truncated to ``[0, 4096)``), so any scale works.
- Discrete Laplace ``P(x) ∝ exp(-|x|/s)``: one signed table over ``[-8s, 8s]`` with memoryless
  geometric tails for ``s <= 2048``; beyond, the difference of two i.i.d. geometrics of ratio
  ``exp(-1/s)`` (Inusah and Kozubowski 2006).
- Discrete Gaussian by rejection from a discrete Laplace proposal (Canonne, Kamath and Steinke
  2020, Algorithm 3), the acceptance coin ``Bernoulli(exp(-gamma))`` decided exactly.
- Empty cells passing a threshold (Chen et al. KDD 2012, Theorem 4.1, done exactly): the number
  of passing cells is ``Binomial(n, q)``, drawn as the count of geometric gaps fitting in ``n``
  trials; their values are exact conditional tail draws.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache
from typing import Any

import mpmath
import numpy as np
from mpmath import iv

from synth.errors import ConfigError
from synth.privacy._exact import (
    TWO64,
    BitSource,
    Bounds,
    CdfTable,
    LazyUniform,
    bounds,
    precision,
    rational,
)

__all__ = ["SecureNoise"]

BLOCK = 4096  # block size of the large-scale decomposition G = BLOCK * A + B
DIRECT_MAX_SCALE = 2048.0  # up to this scale, one table with a memoryless tail
TAIL_SCALES = 8.0  # table length L ~ TAIL_SCALES * scale: tail mass exp(-8)
CAP = 1 << 62  # geometric draws saturate here (int64 headroom)
# The largest noise scale (or sigma) accepted. Up to it every draw fits int64 with room to spare and
# the saturation at CAP has probability below exp(-2**62 / 2**52) = exp(-1024): beyond any float.
# Any scale > 0 below it is sampled exactly (tiny scales included: exp(-1/scale) is enclosed with
# interval arithmetic whatever its exponent). 2**52 is about 4.5e15: epsilon >= 2.2e-16 per unit
# of sensitivity.
MAX_SCALE = float(2**52)
# Binomial(n, q) of the empty cells: drawn by inverse CDF term by term when n q is small (cost
# proportional to the outcome), by geometric gaps otherwise (then 1/q < 2**62 / SMALL_MEAN).
SMALL_MEAN = 16.0
# Bernoulli(exp(-gamma)) float pre-check: its float error is < 2^-34 while |y| <= 2^15 sigma.
COIN_MARGIN = 2.0**-30
COIN_RANGE = 2.0**15
ACCEPT_RATE = 0.7  # CKS Algorithm 3 accepts 0.52 (small sigma) to 0.76 of proposals; loops if short


def _check_scale(scale: float, name: str = "scale") -> Fraction:
    """``scale`` as an exact Fraction (a float is taken at its exact binary value)."""
    ok = isinstance(scale, numbers.Real) and not isinstance(scale, bool)
    if not (ok and math.isfinite(scale) and scale > 0):
        raise ConfigError(f"{name} must be a positive finite number, got {scale!r}")
    if scale > MAX_SCALE:
        raise ConfigError(
            f"noise {name} {float(scale):.3g} is above the largest supported, 2**52 = 4.5e15 "
            "(--epsilon too small for its sensitivity: the noise would not fit 64-bit integers)"
        )
    return scale if isinstance(scale, Fraction) else Fraction(float(scale))


def _check_size(size: int, name: str = "size") -> int:
    if int(size) != size or size < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {size!r}")
    return int(size)


class _FixedPowers:
    """Integer enclosures ``(lo, hi)`` of ``2**prec * r**k``, cached per precision.

    ``r`` comes as rigorous rational bounds; powers are taken in fixed point, rounding the lower
    bound down and the upper bound up, so every enclosure is rigorous.
    """

    def __init__(self, ratio: Bounds) -> None:
        self._ratio = ratio
        self._cache: dict[int, tuple[list[int], list[int]]] = {}

    def __call__(self, prec: int, upto: int) -> tuple[list[int], list[int]]:
        if prec not in self._cache:
            lo, hi = self._ratio(prec)
            one = 1 << prec
            self._cache[prec] = ([one, math.floor(lo * one)], [one, math.ceil(hi * one)])
        lows, highs = self._cache[prec]
        while len(lows) <= upto:
            lows.append((lows[-1] * lows[1]) >> prec)
            highs.append(-((-highs[-1] * highs[1]) >> prec))
        return lows, highs


class _Geometric:
    """Exact ``P(G = g) = (1 - r) r**g``, ``g >= 0``, for a ratio ``0 < r < 1``.

    ``ratio`` computes ``r`` in ``mpmath.iv`` interval arithmetic at the current precision (each
    level of the large-scale decomposition encloses its own ``r**4096`` directly, so enclosures do
    not widen level after level).
    """

    def __init__(self, ratio_iv: Callable[[], iv.mpf], log2_scale: float) -> None:
        ratio = _enclose(ratio_iv)
        self.power = power = _FixedPowers(ratio)
        self.prec = 160 + 2 * max(0, math.ceil(log2_scale))
        mid = float(sum(ratio(self.prec)) / 2)
        if mid <= 0.0:  # r below 2**-1074: the table holds g = 0 and the (exact) tail
            scale = 0.0
        else:
            scale = 1.0 / -math.log(mid) if mid < 1.0 else math.inf
        if scale <= DIRECT_MAX_SCALE:
            self._length = math.ceil(TAIL_SCALES * scale) + 1

            def cdf(prec: int, j: int) -> tuple[int, int]:  # C_j = 1 - r^(j+1)
                lows, highs = power(prec, j + 1)
                return (1 << prec) - highs[j + 1], (1 << prec) - lows[j + 1]

            self._table = CdfTable(self._length, cdf, self.prec)
            self._high: _Geometric | None = None
        else:
            self._length = BLOCK

            def truncated(prec: int, j: int) -> tuple[int, int]:
                # C_j = (1 - r^(j+1)) / (1 - r^BLOCK) on [0, BLOCK)
                lows, highs = power(prec, BLOCK)
                one = 1 << prec
                den_lo, den_hi = one - highs[BLOCK], one - lows[BLOCK]
                return (
                    ((one - highs[j + 1]) << prec) // den_hi,
                    -((-(one - lows[j + 1]) << prec) // den_lo),
                )

            self._table = CdfTable(BLOCK - 1, truncated, self.prec)
            self._high = _Geometric(lambda: ratio_iv() ** BLOCK, log2_scale - math.log2(BLOCK))

    def sample(self, source: BitSource, size: int, cap: int = CAP) -> np.ndarray:
        """``size`` draws, each saturated at ``cap + 1`` (``cap <= 2**62``)."""
        out = self._table.sample(source, size)
        if self._high is not None:
            high = self._high.sample(source, size, cap // BLOCK + 1)
            out += high * BLOCK
        else:
            tail = np.flatnonzero(out == self._length)
            while tail.size:
                more = self._table.sample(source, tail.size)
                out[tail] += more
                tail = tail[(more == self._length) & (out[tail] <= cap)]
        return np.minimum(out, cap + 1)


def _enclose(value: Callable[[], iv.mpf]) -> Bounds:
    """Rational bounds, at a requested precision, of a real computed with ``mpmath.iv``."""

    def at(prec: int) -> tuple[Fraction, Fraction]:
        with precision(prec + 16):
            return bounds(value(), prec + 16)

    return at


@lru_cache(maxsize=64)
def _laplace_geometric(scale: Fraction) -> _Geometric:
    """The geometric of ratio ``exp(-1/scale)`` (cached per scale: tables are immutable)."""
    return _Geometric(lambda: _laplace_ratio(scale), math.log2(float(scale)))


class _TwoSided:
    """Exact discrete Laplace for scales up to ``DIRECT_MAX_SCALE``: one table over ``[-K, K]``.

    Outcomes beyond ``K`` (mass about ``exp(-8)``) use the memoryless tails
    ``X | X > K  =  K + 1 + G`` and ``X | X < -K  =  -K - 1 - G``. One word and one binary search
    per draw (half the cost of ``G1 - G2``).
    """

    def __init__(self, scale: Fraction) -> None:
        self._geo = _laplace_geometric(scale)
        power = self._geo.power
        self._k = k = math.ceil(TAIL_SCALES * float(scale))

        def cdf(prec: int, j: int) -> tuple[int, int]:
            # C_j = P(X <= j - k - 1): r^m / (1 + r) below 0 (m = k + 1 - j), else 1 - r^m / (1 + r)
            lows, highs = power(prec, k + 2)
            one = 1 << prec
            den_lo, den_hi = one + lows[1], one + highs[1]
            m = abs(j - k - 1) + (j > k)
            lo, hi = (lows[m] << prec) // den_hi, -((-highs[m] << prec) // den_lo)
            return (lo, hi) if j <= k else (one - hi, one - lo)

        self._table = CdfTable(2 * k + 2, cdf, self._geo.prec)

    def sample(self, source: BitSource, size: int) -> np.ndarray:
        x = self._table.sample(source, size) - (self._k + 1)
        low = np.flatnonzero(x == -(self._k + 1))
        x[low] -= self._geo.sample(source, low.size)
        high = np.flatnonzero(x == self._k + 1)
        x[high] += self._geo.sample(source, high.size)
        return x


@lru_cache(maxsize=64)
def _two_sided(scale: Fraction) -> _TwoSided:
    """The one-table discrete Laplace sampler of a (small) scale, cached."""
    return _TwoSided(scale)


def _laplace_ratio(scale: Fraction) -> iv.mpf:
    """Enclosure of ``exp(-1/scale)`` (current precision)."""
    return iv.exp(-1 / rational(scale))


def _upper_tail(scale: Fraction, threshold: int) -> iv.mpf:
    """Enclosure of ``P(X >= threshold)`` for ``X ~ DLap(scale)`` (current precision)."""
    r = _laplace_ratio(scale)
    if threshold >= 1:
        return r**threshold / (1 + r)
    return 1 - r ** (1 - threshold) / (1 + r)


def _log2_upper_tail(scale: Fraction, threshold: int) -> float:
    """``log2 P(X >= threshold)`` (a float estimate, fine for any exponent)."""
    with precision(128):
        low = _upper_tail(scale, threshold)._mpi_[0]
    return float(mpmath.log(mpmath.mpf(low), 2)) if low[1] else -math.inf


@lru_cache(maxsize=64)
def _gap_geometric(scale: Fraction, threshold: int) -> _Geometric:
    """Failures between successes of Bernoulli(q), ``q = P(X >= threshold)``: ratio ``1 - q``."""
    return _Geometric(
        lambda: 1 - _upper_tail(scale, threshold), -_log2_upper_tail(scale, threshold)
    )


def _binomial_cdf(scale: Fraction, threshold: int, n: int, k: int) -> Bounds:
    """Rigorous bounds of ``P(K <= k)`` for ``K ~ Binomial(n, q)``, ``q = P(X >= threshold)``."""

    def at(prec: int) -> tuple[Fraction, Fraction]:
        with precision(prec + 64 + 2 * n.bit_length() + 2 * k.bit_length()):
            q = _upper_tail(scale, threshold)
            term = (1 - q) ** n
            total = term
            for i in range(k):
                term = term * (n - i) / (i + 1) * q / (1 - q)
                total = total + term
            return bounds(total, prec + 16)

    return at


class SecureNoise:
    """Exact discrete noise: ``seed=None`` reads the OS CSPRNG; ``seed=int`` is NOT private.

    Every sampler here is exact (output pmf = the target pmf), so :meth:`max_tv_per_draw` is 0.
    """

    def __init__(self, seed: int | None = None) -> None:
        if seed is not None and (not isinstance(seed, int | np.integer) or seed < 0):
            raise ConfigError(f"seed must be a non-negative integer or None, got {seed!r}")
        self.seed = seed
        self._source = BitSource(None if seed is None else int(seed))

    @property
    def seeded(self) -> bool:
        """True when the bits come from a seeded (reproducible, non-private) stream."""
        return self.seed is not None

    @staticmethod
    def max_tv_per_draw(kind: str = "discrete_laplace", scale: float = 1.0) -> float:
        """Total-variation distance of one draw from the exact pmf: 0 (the samplers are exact)."""
        if kind not in ("discrete_laplace", "discrete_gaussian"):
            raise ConfigError(f"unknown noise kind {kind!r}")
        _check_scale(scale)
        return 0.0

    # -- discrete Laplace ---------------------------------------------------------------------
    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        """Exact ``P(x) ∝ exp(-|x|/scale)`` on the integers (int64).

        One signed table up to ``DIRECT_MAX_SCALE``; beyond, ``G1 - G2`` with decomposed geometrics.
        """
        s, n = _check_scale(scale), _check_size(size)
        if s <= DIRECT_MAX_SCALE:
            return _two_sided(s).sample(self._source, n)
        geo = _laplace_geometric(s)
        return geo.sample(self._source, n) - geo.sample(self._source, n)

    def discrete_laplace_tail(self, scale: float, threshold: int, size: int) -> np.ndarray:
        """Exact draws of ``X ~ DLap(scale)`` conditioned on ``X >= threshold``.

        For ``threshold >= 0`` the tail is memoryless: ``threshold + G``; below 0, rejection
        (acceptance probability > 1/2).
        """
        s, n, t = _check_scale(scale), _check_size(size), int(threshold)
        if t >= 0:
            return t + _laplace_geometric(s).sample(self._source, n)
        out = np.empty(n, dtype=np.int64)
        todo = np.arange(n)
        while todo.size:
            x = self.discrete_laplace(float(s), todo.size)
            ok = x >= t
            out[todo[ok]] = x[ok]
            todo = todo[~ok]
        return out

    def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray:
        """Noisy values (``>= threshold``) of the empty cells that pass, without enumerating them.

        Chen et al. (KDD 2012) Theorem 4.1 for discrete Laplace: each of ``n_empty`` zero cells
        passes independently with ``q = P(X >= threshold)``, so the number passing is
        ``K ~ Binomial(n_empty, q)``; it is drawn exactly as the number of partial sums of
        ``1 + Geometric(1 - q)`` gaps within ``n_empty`` (positions of the successes); the values
        are ``K`` exact draws of ``X | X >= threshold``. Returned in no particular order.
        """
        s, t, n = _check_scale(scale), int(threshold), _check_size(n_empty, "n_empty")
        if n > CAP:
            raise ConfigError(f"n_empty must be at most 2**62, got {n}")
        if not n:
            k = 0
        elif math.log2(n) + _log2_upper_tail(s, t) < math.log2(SMALL_MEAN):
            k = self._binomial_small(s, t, n)
        else:
            k = self._binomial_gaps(_gap_geometric(s, t), n)
        return self.discrete_laplace_tail(float(s), t, k)

    def _binomial_small(self, scale: Fraction, threshold: int, n: int) -> int:
        """``Binomial(n, q)`` by exact inverse CDF, term by term (used when ``n q`` is small)."""
        v = LazyUniform(self._source.word(), self._source)
        k = 0
        while k < n and not v.less_than(_binomial_cdf(scale, threshold, n, k)):
            k += 1
        return k

    def _binomial_gaps(self, gaps: _Geometric, n: int) -> int:
        """Number of successes in ``n`` Bernoulli trials whose failure runs are ``gaps`` draws."""
        count, used, batch = 0, 0, 64
        while True:
            steps = gaps.sample(self._source, batch, cap=n).astype(np.uint64) + np.uint64(1)
            # partial sums stay exact up to the first one exceeding n - used (<= 2^63 + 1)
            pos = np.cumsum(steps, dtype=np.uint64)
            over = pos > np.uint64(n - used)
            if over.any():
                return count + int(np.argmax(over))
            count += batch
            used += int(pos[-1])
            batch *= 2

    # -- discrete Gaussian --------------------------------------------------------------------
    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        """Exact ``P(x) ∝ exp(-x²/2σ²)`` on the integers (int64).

        Canonne, Kamath and Steinke (2020) Algorithm 3: ``Y ~ DLap(t)``, ``t = floor(σ) + 1``,
        accepted with probability ``exp(-(|Y| - σ²/t)² / 2σ²)``.
        """
        sig, n = _check_scale(sigma, "sigma"), _check_size(size)
        t = min(math.floor(sig) + 1, int(MAX_SCALE))  # the proposal's scale (CKS: any t works)
        s2 = sig * sig
        # s2 below the smallest normal float (sigma < 1.5e-154): the float pre-check sees that
        # smallest value (coin 1.0 at y = 0, 0.0 elsewhere: within COIN_MARGIN of the truth)
        s2_float, shift = max(float(s2), sys.float_info.min), float(s2 / t)
        out = np.empty(n, dtype=np.int64)
        filled = 0
        while filled < n:
            m = int((n - filled) / ACCEPT_RATE) + 64  # usually one round suffices
            y = self.discrete_laplace(t, m)
            ay = np.abs(y).astype(np.float64)
            with np.errstate(over="ignore"):
                coin = np.exp(-((ay - shift) ** 2) / (2.0 * s2_float))
            words = self._source.uint64(m)
            v = words.astype(np.float64) * 2.0**-64
            accept = v < coin - COIN_MARGIN
            unsure = np.flatnonzero(~accept & (v <= coin + COIN_MARGIN) | (ay > COIN_RANGE * t))
            accept[unsure] = False
            for i in unsure:
                gamma = (abs(int(y[i])) - s2 / t) ** 2 / (2 * s2)
                accept[i] = self._exp_coin(gamma, int(words[i]))
            kept = y[accept][: n - filled]
            out[filled : filled + kept.size] = kept
            filled += kept.size
        return out

    def _exp_coin(self, gamma: Fraction, word: int) -> bool:
        """Exact ``Bernoulli(exp(-gamma))`` whose uniform begins with ``word``."""

        def c(prec: int) -> tuple[Fraction, Fraction]:
            with precision(prec + 16):
                return bounds(iv.exp(-rational(gamma)), prec + 16)

        return LazyUniform(word, self._source).less_than(c)

    # -- secure index sampling ----------------------------------------------------------------
    def _below(self, m: int, size: int) -> np.ndarray:
        """``size`` uniform integers in ``[0, m)`` (rejection on 64-bit words, exact)."""
        limit = np.uint64(TWO64 - TWO64 % m) if TWO64 % m else None
        out = np.empty(size, dtype=np.int64)
        todo = np.arange(size)
        while todo.size:
            w = self._source.uint64(todo.size)
            ok = np.ones(todo.size, dtype=bool) if limit is None else w < limit
            out[todo[ok]] = (w[ok] % np.uint64(m)).astype(np.int64)
            todo = todo[~ok]
        return out

    def permutation(self, n: int) -> np.ndarray:
        """A uniformly random permutation of ``0..n-1``: sort by distinct uniform 64-bit keys."""
        n = _check_size(n, "n")
        while True:
            keys = self._source.uint64(n)
            order = np.argsort(keys)
            if n < 2 or np.all(np.diff(keys[order]) > 0):  # ties: redraw (probability < n²/2^65)
                return order.astype(np.int64)

    def choice(self, n: int, k: int) -> np.ndarray:
        """``k`` distinct indices of ``0..n-1``: a uniform ordered sample without replacement."""
        n, k = _check_size(n, "n"), _check_size(k, "k")
        if k > n:
            raise ConfigError(f"cannot choose {k} distinct indices out of {n}")
        if 2 * k >= n:
            return self.permutation(n)[:k]
        drawn = np.empty(0, dtype=np.int64)
        while True:
            drawn = np.concatenate([drawn, self._below(n, 2 * k + 16)])
            _, first = np.unique(drawn, return_index=True)
            if first.size >= k:
                return drawn[np.sort(first)[:k]]


def noise_source(random_state: object, *, methods: tuple[str, ...] = ("discrete_laplace",)) -> Any:
    """The noise source a generator's ``random_state`` stands for.

    ``None``: :class:`SecureNoise` on the operating system's secure source (private). An ``int``:
    a seeded :class:`SecureNoise` (reproducible, NOT private). Any other object must provide
    ``methods`` with :class:`SecureNoise`'s signatures (tests pass a zero-noise stand-in).
    """
    if random_state is None:
        return SecureNoise()
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return SecureNoise(seed=int(random_state))
    missing = [m for m in methods if not callable(getattr(random_state, m, None))]
    if isinstance(random_state, bool) or missing:
        raise ConfigError(
            "random_state must be None, an int seed or a SecureNoise-like noise source"
            + (f" (missing {', '.join(missing)})" if missing else "")
        )
    return random_state
