"""Exact samplers: distribution tests against the exact pmf (chi-square), OpenDP, exact resolution
of ambiguous words, secure index sampling, the empty-cell shortcut and fork safety."""

from __future__ import annotations

import math
import os
import pickle
from collections.abc import Callable
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from synth.errors import ConfigError
from synth.privacy import SecureNoise
from synth.privacy._exact import WORD_BITS, BitSource, bounds, precision
from synth.privacy.noise import BLOCK, _laplace_geometric, _two_sided

P_MIN = 1e-5  # seeded tests are deterministic; unseeded ones fail by chance with probability P_MIN


def dlap_cdf(x: np.ndarray, scale: float) -> np.ndarray:
    """Exact ``P(X <= x)`` of the discrete Laplace (float64)."""
    p = math.exp(-1.0 / scale)
    x = np.asarray(x, dtype=np.float64)
    upper = 1.0 - np.exp(-(np.maximum(x, -1.0) + 1.0) / scale) / (1.0 + p)
    lower = np.exp(-np.abs(np.minimum(x, 0.0)) / scale) / (1.0 + p)
    return np.where(x >= 0, upper, lower)


def dgauss_pmf(support: np.ndarray, sigma: float) -> np.ndarray:
    """Exact pmf of ``N_Z(0, σ²)`` on ``support`` (normalised over +-40 sigma)."""
    wide = np.arange(-int(40 * sigma) - 40, int(40 * sigma) + 41)
    norm = np.exp(-(wide.astype(float) ** 2) / (2 * sigma * sigma)).sum()
    return np.exp(-(support.astype(float) ** 2) / (2 * sigma * sigma)) / norm


def binned_pvalue(draws: np.ndarray, edges: np.ndarray, cdf: np.ndarray) -> float:
    """Chi-square p-value of ``draws`` against exact ``cdf = P(X <= edges)``.

    Bins are ``x <= e_0``, ``(e_{i-1}, e_i]``, ``x > e_last``; candidate edges are dropped until
    every bin (tails included) expects at least 5 draws (tails pooled).
    """
    n = draws.size
    kept, kept_cdf, last = [], [], 0.0
    for e, c in zip(edges, cdf, strict=True):
        if (c - last) * n >= 5:
            kept.append(e)
            kept_cdf.append(c)
            last = c
    while kept and (1.0 - kept_cdf[-1]) * n < 5:
        kept.pop()
        kept_cdf.pop()
    probs = np.diff(np.concatenate([[0.0], kept_cdf, [1.0]]))
    counts = np.bincount(np.searchsorted(kept, draws, side="left"), minlength=len(kept) + 1)
    return float(stats.chisquare(counts, probs / probs.sum() * n).pvalue)


def laplace_pvalue(draws: np.ndarray, scale: float) -> float:
    """Chi-square against the exact discrete Laplace pmf (one bin per integer, or ~400 bins)."""
    edges = np.unique(np.linspace(-40 * scale - 2, 40 * scale + 2, 401).round().astype(np.int64))
    return binned_pvalue(draws, edges, dlap_cdf(edges, scale))


@pytest.mark.parametrize("scale", [0.5, 2.0, 10.0, 100.0])
def test_discrete_laplace_matches_exact_pmf_1e6(scale: float) -> None:
    n = 1_000_000
    draws = SecureNoise(seed=int(scale * 10)).discrete_laplace(scale, n)
    assert draws.dtype == np.int64
    assert laplace_pvalue(draws, scale) > P_MIN


@pytest.mark.parametrize("scale", [1e3, 1e6, 1e12])
def test_discrete_laplace_large_scales_decomposition(scale: float) -> None:
    n = 200_000
    draws = SecureNoise(seed=7).discrete_laplace(scale, n)
    quantiles = np.linspace(0.02, 0.98, 49)
    # exact quantile positions: P(X <= x) for x at the continuous quantiles
    edges = np.unique(np.round(stats.laplace.ppf(quantiles, scale=scale)).astype(np.int64))
    assert binned_pvalue(draws, edges, dlap_cdf(edges, scale)) > P_MIN


def test_discrete_laplace_secure_source_1e6() -> None:
    n = 1_000_000
    noise = SecureNoise()
    assert not noise.seeded
    assert laplace_pvalue(noise.discrete_laplace(3.0, n), 3.0) > P_MIN


@pytest.mark.parametrize("sigma", [0.5, 2.0, 10.0, 100.0])
def test_discrete_gaussian_matches_exact_pmf_1e6(sigma: float) -> None:
    n = 1_000_000
    draws = SecureNoise(seed=int(sigma * 100)).discrete_gaussian(sigma, n)
    assert draws.dtype == np.int64
    k = int(12 * sigma) + 3  # the mass beyond 12 sigma is below float64 resolution
    support = np.arange(-k, k + 1)
    cdf = np.cumsum(dgauss_pmf(support, sigma))
    assert binned_pvalue(draws, support, cdf) > P_MIN


def test_discrete_gaussian_large_sigma_moments() -> None:
    sigma = 1e5
    draws = SecureNoise(seed=3).discrete_gaussian(sigma, 200_000).astype(float)
    edges = np.round(stats.norm.ppf(np.linspace(0.02, 0.98, 49), scale=sigma)).astype(np.int64)
    cdf = stats.norm.cdf(edges + 0.5, scale=sigma)  # continuity: exact to ~1e-10 at this sigma
    assert binned_pvalue(draws, edges, cdf) > P_MIN


def _opendp(kind: str, scale: float, n: int) -> np.ndarray:
    # the modules, not opendp.prelude: it also imports its sklearn, polars and ibis extras (seconds)
    import opendp.measurements as m
    from opendp.domains import atom_domain, vector_domain
    from opendp.metrics import l1_distance, l2_distance
    from opendp.mod import enable_features

    enable_features("contrib")
    domain = vector_domain(atom_domain(T=int))
    if kind == "laplace":
        meas = m.make_laplace(domain, l1_distance(T=int), scale=scale)
    else:
        meas = m.make_gaussian(domain, l2_distance(T=int), scale=scale)
    return np.asarray(meas([0] * n), dtype=np.int64)


@pytest.mark.parametrize(("kind", "scale"), [("laplace", 2.0), ("gaussian", 3.0)])
def test_same_distribution_as_opendp(kind: str, scale: float) -> None:
    """Two-sample chi-square between OpenDP (the vetted reference) and our sampler."""
    n = 50_000
    ref = _opendp(kind, scale, n)
    noise = SecureNoise(seed=11)
    ours = (
        noise.discrete_laplace(scale, n) if kind == "laplace" else noise.discrete_gaussian(scale, n)
    )
    lo, hi = -int(3 * scale), int(3 * scale)  # clipping pools the tails
    table = np.array(
        [np.bincount(np.clip(x, lo, hi) - lo, minlength=hi - lo + 1) for x in (ref, ours)]
    )
    assert stats.chi2_contingency(table).pvalue > P_MIN


@pytest.mark.slow
@pytest.mark.parametrize("scale", [0.5, 2.0, 10.0, 100.0])
def test_discrete_laplace_1e7_secure(scale: float) -> None:
    n = 10_000_000
    assert laplace_pvalue(SecureNoise().discrete_laplace(scale, n), scale) > P_MIN


class _FixedFirst(BitSource):
    """A seeded source whose next word is forced (to land exactly on a table threshold)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.forced: int | None = None

    def uint32(self, n: int) -> np.ndarray:
        out = super().uint32(n).copy()
        if self.forced is not None:
            out[0] = self.forced
            self.forced = None
        return out


def test_table_thresholds_are_within_one_of_the_exact_floor() -> None:
    from mpmath import iv

    table = _laplace_geometric(Fraction(3))._table
    with precision(400):  # a much tighter enclosure of r = exp(-1/3) than the table's
        lo, hi = bounds(iv.exp(-iv.mpf(1) / iv.mpf(3)))
    for j in range(len(table.thresholds)):  # C_j = 1 - r^(j+1), decreasing in r
        floor_lo = math.floor((1 - hi ** (j + 1)) * 2**WORD_BITS)
        floor_hi = math.floor((1 - lo ** (j + 1)) * 2**WORD_BITS)
        assert floor_lo - 1 <= int(table.thresholds[j]) <= floor_hi + 1


def _exact_cdf_check(cdf: Callable[[int, int], tuple[int, int]], count: int, exact) -> None:  # type: ignore[no-untyped-def]
    """Every enclosure (lo, hi) of 2^prec C_j contains the true value (computed at 400 bits)."""
    prec = 256
    for j in range(count):
        lo, hi = cdf(prec, j)
        true = exact(j) * mpmath.mpf(2) ** prec
        assert lo <= true <= hi
        assert hi - lo < 2**160


def test_two_sided_table_encloses_the_exact_cdf() -> None:
    scale = Fraction(3)
    sampler = _two_sided(scale)
    k = sampler._k
    with mpmath.workprec(400):
        r = mpmath.exp(-1 / mpmath.mpf(3))

        def exact(j: int) -> mpmath.mpf:  # P(X <= j - k - 1)
            x = j - k - 1
            return r**-x / (1 + r) if x < 0 else 1 - r ** (x + 1) / (1 + r)

        _exact_cdf_check(sampler._table._cdf, 2 * k + 2, exact)


def test_truncated_block_table_encloses_the_exact_cdf() -> None:
    geo = _laplace_geometric(Fraction(10_000))
    assert geo._high is not None  # decomposed: G = 4096 A + B
    with mpmath.workprec(400):
        r = mpmath.exp(-1 / mpmath.mpf(10_000))

        def exact(j: int) -> mpmath.mpf:
            return (1 - r ** (j + 1)) / (1 - r**BLOCK)

        _exact_cdf_check(geo._table._cdf, BLOCK - 1, exact)


def test_exact_exponential_coin() -> None:
    noise = SecureNoise(seed=23)
    gamma = Fraction(1, 2)
    words = noise._source.uint64(5000)
    hits = sum(noise._exp_coin(gamma, int(w)) for w in words)
    assert stats.binomtest(hits, words.size, math.exp(-0.5)).pvalue > P_MIN


def test_numpy_scalar_parameters() -> None:
    noise = SecureNoise(seed=np.int64(3))
    assert noise.discrete_laplace(np.float64(2.0), np.int64(5)).shape == (5,)
    assert noise.discrete_gaussian(np.int64(2), 5).shape == (5,)


def test_ambiguous_word_is_resolved_with_the_exact_conditional_probability() -> None:
    """A word equal to a threshold F_j: outcome j iff V < C_j, i.e. with prob. frac(2^32 C_j)."""
    table = _laplace_geometric(Fraction(2))._table
    source = _FixedFirst(seed=5)
    j = 1
    word = int(table.thresholds[j])
    c_lo, _ = table._bound(j)(256)
    frac = float(c_lo * 2**WORD_BITS - word)  # P(outcome == j | U == F_j)
    trials, hits = 4000, 0
    for _ in range(trials):
        source.forced = word
        hits += int(table.sample(source, 1)[0] == j)
    assert 0 < frac < 1
    assert stats.binomtest(hits, trials, frac).pvalue > P_MIN


def test_seeded_is_reproducible_and_flagged() -> None:
    a, b = SecureNoise(seed=42), SecureNoise(seed=42)
    assert a.seeded and b.seeded
    np.testing.assert_array_equal(a.discrete_laplace(2.0, 1000), b.discrete_laplace(2.0, 1000))
    np.testing.assert_array_equal(a.discrete_gaussian(2.0, 1000), b.discrete_gaussian(2.0, 1000))
    assert not np.array_equal(
        SecureNoise().discrete_laplace(50.0, 100), a.discrete_laplace(50.0, 100)
    )


def test_fork_children_never_repeat_draws() -> None:
    noise = SecureNoise()
    noise.discrete_laplace(5.0, 10)  # warm the tables before forking
    children = []
    for _ in range(2):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            os.close(read)
            with os.fdopen(write, "wb") as out:
                pickle.dump(noise.discrete_laplace(1000.0, 64).tolist(), out)
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as inp:
            children.append(pickle.load(inp))
        os.waitpid(pid, 0)
    parent = noise.discrete_laplace(1000.0, 64).tolist()
    assert children[0] != children[1]
    assert parent not in children


def test_discrete_laplace_tail_is_the_exact_conditional() -> None:
    noise = SecureNoise(seed=9)
    scale, n = 2.0, 200_000
    for threshold in (3, -2):
        draws = noise.discrete_laplace_tail(scale, threshold, n)
        assert draws.min() >= threshold
        edges = np.arange(threshold, threshold + 25)
        below = dlap_cdf(np.array([threshold - 1]), scale)[0]
        cdf = (dlap_cdf(edges, scale) - below) / (1 - below)
        assert binned_pvalue(draws, edges, cdf) > P_MIN


def test_empty_cells_passing_count_is_binomial() -> None:
    noise = SecureNoise(seed=13)
    scale, threshold, n_empty = 2.0, 3, 400
    q = 1 - dlap_cdf(np.array([threshold - 1]), scale)[0]
    counts = np.array(
        [noise.empty_cells_passing(scale, threshold, n_empty).size for _ in range(3000)]
    )
    support = np.arange(0, n_empty + 1)
    assert binned_pvalue(counts, support, stats.binom.cdf(support, n_empty, q)) > P_MIN


def test_empty_cells_passing_huge_domain() -> None:
    noise = SecureNoise(seed=21)
    scale, threshold, n_empty = 1.0, 30, 10**18
    q = math.exp(-threshold / scale) / (1 + math.exp(-1 / scale))
    values = noise.empty_cells_passing(scale, threshold, n_empty)
    assert values.min() >= threshold
    mean, sd = n_empty * q, math.sqrt(n_empty * q)
    assert abs(values.size - mean) < 6 * sd
    assert noise.empty_cells_passing(scale, threshold, 0).size == 0


def test_permutation_and_choice_are_uniform() -> None:
    noise = SecureNoise(seed=17)
    perms = [tuple(noise.permutation(3)) for _ in range(6000)]
    _, counts = np.unique(np.array(perms), axis=0, return_counts=True)
    assert counts.size == 6 and stats.chisquare(counts).pvalue > P_MIN
    pairs = np.array([noise.choice(5, 2) for _ in range(10_000)])
    assert np.all(pairs[:, 0] != pairs[:, 1])
    _, counts = np.unique(pairs, axis=0, return_counts=True)
    assert counts.size == 20 and stats.chisquare(counts).pvalue > P_MIN
    big = noise.choice(10**12, 1000)
    assert np.unique(big).size == 1000 and big.min() >= 0 and big.max() < 10**12
    assert sorted(noise.permutation(1000).tolist()) == list(range(1000))


def test_invalid_parameters_raise_config_error() -> None:
    noise = SecureNoise(seed=1)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ConfigError):
            noise.discrete_laplace(bad, 3)
        with pytest.raises(ConfigError):
            noise.discrete_gaussian(bad, 3)
    with pytest.raises(ConfigError):
        noise.discrete_laplace(1.0, -1)
    with pytest.raises(ConfigError):
        noise.choice(3, 4)
    with pytest.raises(ConfigError):
        SecureNoise(seed=-1)
    assert SecureNoise.max_tv_per_draw("discrete_laplace", 2.0) == 0.0
