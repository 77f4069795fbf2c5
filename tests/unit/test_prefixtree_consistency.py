"""Consistency of the noisy prefix tree (KDD 2012 section 4.2): hand-computed and random trees."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest

from prefixtree.consistency import (
    consistent_counts,
    consolidated_estimates,
    isotonic_paths,
    node_depths,
    path_matrix,
    release_counts,
)


def _weighted_pava(y: list[float], w: list[float]) -> list[float]:
    """Weighted pool-adjacent-violators (reference implementation)."""
    blocks: list[list[float]] = []  # [weighted sum, weight, count]
    for v, wv in zip(y, w, strict=True):
        blocks.append([v * wv, wv, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, sw, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += sw
            blocks[-1][2] += c
    out: list[float] = []
    for s, sw, c in blocks:
        out.extend([s / sw] * int(c))
    return out


def _pava(y: list[float]) -> list[float]:
    """Textbook pool-adjacent-violators for a non-decreasing fit (reference implementation)."""
    return _weighted_pava(y, [1.0] * len(y))


def test_isotonic_matches_pava_on_ragged_rows() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 9, size=300)
    values = rng.normal(20, 10, size=(300, 8))
    fit = isotonic_paths(values, lengths)
    for row, n in enumerate(lengths):
        np.testing.assert_allclose(fit[row, :n], _pava(list(values[row, :n])))
        assert np.isnan(fit[row, n:]).all()


def test_weighted_isotonic_matches_weighted_pava() -> None:
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 7, size=200)
    values = rng.normal(20, 10, size=(200, 6))
    weights = rng.uniform(0.01, 5.0, size=(200, 6))
    fit = isotonic_paths(values, lengths, weights)
    for row, n in enumerate(lengths):
        expected = _weighted_pava(list(values[row, :n]), list(weights[row, :n]))
        np.testing.assert_allclose(fit[row, :n], expected)
    # equal weights are the unweighted fit
    np.testing.assert_allclose(
        isotonic_paths(values, lengths, np.full(values.shape, 3.0)), isotonic_paths(values, lengths)
    )


def test_weights_trust_the_precise_level() -> None:
    # parent 20 (precise), child 310 (a very noisy level): the weighted fit stays near the parent
    parent = np.array([-1, 0])
    noisy = np.array([20.0, 310.0])
    plain = consolidated_estimates(parent, noisy)
    weighted = consolidated_estimates(parent, noisy, np.array([1 / 200, 1 / 4000]))
    assert plain[0] == pytest.approx(165.0)
    assert weighted[0] == pytest.approx((20 / 200 + 310 / 4000) / (1 / 200 + 1 / 4000))
    counts = consistent_counts(parent, noisy, np.array([1 / 200, 1 / 4000]))
    assert counts.tolist() == [34, 34]


def test_isotonic_hand_cases() -> None:
    fit = isotonic_paths(np.array([[3.0, 1.0, 0.0], [0.0, 10.0, 5.0]]), np.array([2, 3]))
    np.testing.assert_allclose(fit[0, :2], [2.0, 2.0])
    np.testing.assert_allclose(fit[1], [0.0, 7.5, 7.5])


def test_paths_and_depths() -> None:
    # root -> a(0), b(1); a -> c(2), d(3); c -> e(4)
    parent = np.array([-1, -1, 0, 0, 2])
    np.testing.assert_array_equal(node_depths(parent), [1, 1, 2, 2, 3])
    ids, lengths = path_matrix(parent)
    paths = {tuple(row[:n].tolist()) for row, n in zip(ids, lengths, strict=True)}
    assert paths == {(1,), (3, 0), (4, 2, 0)}


def test_consolidated_estimate_is_mean_over_leaf_paths() -> None:
    # root -> a(0); a -> b(1), c(2). Noisy: a=10, b=14, c=4.
    # Path (b, a): [14, 10] violates -> both 12. Path (c, a): [4, 10] fine.
    est = consolidated_estimates(np.array([-1, 0, 0]), np.array([10, 14, 4]))
    np.testing.assert_allclose(est, [(12 + 10) / 2, 12, 4])


def test_top_down_correction_hand_tree() -> None:
    # root -> a(0)=20, b(1)=5 ; a -> c(2)=12, d(3)=14. Isotonic keeps everything (paths ok).
    # sum of a's children 26 > 20 -> subtract 3 each: c=9, d=11 (the paper's rule, no clipping).
    counts = consistent_counts(np.array([-1, -1, 0, 0]), np.array([20, 5, 12, 14]))
    np.testing.assert_array_equal(counts, [20, 5, 9, 11])
    np.testing.assert_array_equal(release_counts(np.array([-1, -1, 0, 0]), counts), [0, 5, 9, 11])


def test_water_filling_never_goes_negative() -> None:
    # a=10 with children 20 and 1: isotonic on path (20,10) gives 15,15 -> a = (15 + 10) / 2 = 12.5
    # -> a rounds to 12 (banker's rounding); children 15 and 1 must sum <= 12, both >= 0:
    # the paper's equal split would give 13 and -1; water-filling gives 12 and 0.
    counts = consistent_counts(np.array([-1, 0, 0]), np.array([10, 20, 1]))
    np.testing.assert_array_equal(counts, [12, 12, 0])


def test_consistent_children_untouched_when_under_parent() -> None:
    counts = consistent_counts(np.array([-1, 0, 0, 1]), np.array([30, 10, 8, 7]))
    np.testing.assert_array_equal(counts, [30, 10, 8, 7])


def _random_tree(rng: np.random.Generator, n: int) -> np.ndarray:
    parent = np.full(n, -1, dtype=np.int64)
    n_top = int(rng.integers(1, 5))
    for v in range(n_top, n):
        parent[v] = rng.integers(0, v)
    # relabel to breadth-first order
    depth = node_depths(parent)
    order = np.lexsort((np.arange(n), depth))
    new_id = np.empty(n, dtype=np.int64)
    new_id[order] = np.arange(n)
    out = np.where(parent[order] >= 0, new_id[np.maximum(parent[order], 0)], -1)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_random_trees_satisfy_definition_4_1(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    parent = _random_tree(rng, n)
    noisy = rng.integers(-5, 60, size=n)
    counts = consistent_counts(parent, noisy)
    assert counts.dtype == np.int64
    assert (counts >= 0).all()
    has_parent = parent >= 0
    # constraint 1: a child never exceeds its parent
    assert (counts[has_parent] <= counts[parent[has_parent]]).all()
    # constraint 2: the children's sum never exceeds the parent
    child_sum = np.bincount(parent[has_parent], weights=counts[has_parent], minlength=n)
    assert (child_sum <= counts).all()
    assert (release_counts(parent, counts) >= 0).all()


def test_consistent_input_is_a_fixed_point() -> None:
    # An already-consistent integer tree (true prefix counts) is returned unchanged.
    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(2, 80))
        parent = _random_tree(rng, n)
        ends = rng.integers(0, 5, size=n)
        counts = ends.copy()
        for v in reversed(range(n)):  # children have larger ids: accumulate upwards
            if parent[v] >= 0:
                counts[parent[v]] += counts[v]
        # keep path isotonic strict: only trees where counts are non-increasing down the paths
        out = consistent_counts(parent, counts)
        np.testing.assert_array_equal(out, counts)


def test_empty_tree() -> None:
    assert consistent_counts(np.zeros(0, dtype=np.int64), np.zeros(0)).size == 0


def test_small_exhaustive_two_level_trees() -> None:
    for a, b, c in itertools.product(range(0, 8), repeat=3):
        counts = consistent_counts(np.array([-1, 0, 0]), np.array([a, b, c]))
        assert counts[1] + counts[2] <= counts[0]
        assert (counts >= 0).all()


def test_weights_spanning_any_magnitude_stay_finite_and_exact() -> None:
    # issue 26: inverse variances from a huge epsilon (1e300 next to 1) overflowed the weighted
    # sums to inf and the fit to NaN; the fit is invariant to scaling all weights of a row
    rng = np.random.default_rng(3)
    values = rng.normal(20, 10, size=(50, 4))
    lengths = np.full(50, 4)
    base = rng.uniform(0.5, 2.0, size=(50, 4))
    huge = base * np.array([1e300, 1.0, 1e-300, 1e150])
    with np.errstate(all="raise"):
        fit = isotonic_paths(values, lengths, huge)
    assert np.isfinite(fit).all()
    rel = huge / huge.max(axis=1, keepdims=True)
    for row in range(50):
        w = np.maximum(rel[row], 2.0**-60)
        expected = _weighted_pava(list(values[row]), list(w))
        np.testing.assert_allclose(fit[row], expected, rtol=1e-9, atol=1e-9)
    # a heavy node pins the fit; light ones behind it are still fitted, not cancelled away
    fit = isotonic_paths(np.array([[5.0, 3.0, 100.0]]), np.array([3]), np.array([[1, 1, 1e200]]))
    np.testing.assert_allclose(fit[0], [4.0, 4.0, 100.0])


@pytest.mark.parametrize("epsilon", [1e-3, 1e-2, 0.1, 1.0, 10.0, 90.0, 1e3, 1e4, 1e5, 1e6])
def test_prefix_tree_is_consistent_and_non_empty_for_any_epsilon(epsilon: float) -> None:
    # issue 26: from epsilon ~90 the weighted fit returned NaN and the release was empty
    from prefixtree import PrefixTreeSynthesizer
    from tests.conftest import flat_taxonomy

    rows = [(f"c{i}", k, f"s{(i + k) % 2}") for i in range(40000) for k in range(3)]
    data = pd.DataFrame(rows, columns=["seq_id", "pos", "location"])
    syn = PrefixTreeSynthesizer(
        epsilon=epsilon, height=3, taxonomy=flat_taxonomy(4), random_state=1
    )
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error", RuntimeWarning)
        syn.fit(data)
    tree = syn.tree_
    assert syn.n_sequences() > 0
    count = tree["count"].to_numpy()
    parent = tree["parent"].to_numpy()
    inner = parent >= 0
    assert (count[inner] <= count[parent[inner]]).all()
    child_sum = np.bincount(parent[inner], weights=count[inner], minlength=count.size)
    assert (child_sum <= count).all()
    assert (tree["ending"] >= 0).all()
    if epsilon >= 1e3:  # every scale (the length table's 2% share too) far below one count
        assert syn.n_sequences() == 40000
