"""Noisy prefix tree construction (KDD 2012 Procedure 1) with test-only deterministic noise."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from prefixtree.tree import SubLevel, TaxonomyIndex, build_noisy_tree
from synth.taxonomy import Taxonomy
from tests.conftest import TABLE_1, PassingZeroNoise

# Figure 1: |tr(v)| of every prefix.
FIGURE_1 = {
    ("L1",): 5,
    ("L1", "L2"): 5,
    ("L1", "L2", "L3"): 2,
    ("L1", "L2", "L4"): 2,
    ("L1", "L2", "L4", "L1"): 1,
    ("L3",): 3,
    ("L3", "L2"): 2,
    ("L3", "L2", "L1"): 1,
    ("L3", "L1"): 1,
}


class RecordingNoise(PassingZeroNoise):
    """The shared zero noise (empty cells pass iff threshold <= 0) that records its draws and
    picks empty cells in reverse."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        self.calls.append(("discrete_laplace", size))
        return np.zeros(size, dtype=np.int64)

    def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray:
        self.calls.append(("empty_cells_passing", n_empty))
        return np.zeros(n_empty if threshold <= 0 else 0, dtype=np.int64)

    def choice(self, n: int, k: int) -> np.ndarray:
        # a reversed pick, so the mapping of picked indices back to cells is exercised out of order
        return np.arange(n - 1, n - 1 - k, -1, dtype=np.int64)


def _two_level() -> Taxonomy:
    return Taxonomy.from_edges(
        [
            ("L1", "G12"),
            ("L2", "G12"),
            ("L3", "G34"),
            ("L4", "G34"),
            ("G12", "root"),
            ("G34", "root"),
        ]
    )


def _encode(rows: list[list[str]], locations: list[str], height: int) -> np.ndarray:
    mat = np.full((len(rows), height), -1, dtype=np.int64)
    for i, row in enumerate(rows):
        for k, loc in enumerate(row[:height]):
            mat[i, k] = locations.index(loc)
    return mat


def _prefix_counts(tree, index: TaxonomyIndex) -> dict[tuple[str, ...], int]:
    out: dict[tuple[str, ...], int] = {}
    prefix: dict[int, tuple[str, ...]] = {}
    for v in range(tree.parent.size):
        p = int(tree.parent[v])
        prefix[v] = (prefix[p] if p >= 0 else ()) + (index.locations[int(tree.location[v])],)
        out[prefix[v]] = int(tree.noisy[v])
    return out


def _build(rows, taxonomy, generalized, thresholds, height=4, noise=None, times=None, n_bins=1):
    index = TaxonomyIndex.build(taxonomy, generalized)
    subs = [SubLevel(j=j, scale=1.0, threshold=t) for j, t in enumerate(thresholds)]
    calls: list[tuple[int, int]] = []
    tree = build_noisy_tree(
        _encode(rows, index.locations, height),
        times,
        index=index,
        sub_levels=[subs] * height,
        n_bins=n_bins,
        noise=noise or RecordingNoise(),
        before_sub_level=lambda i, j: calls.append((i, j)),
        max_nodes=10**6,
    )
    return tree, index, calls


@pytest.mark.parametrize("generalized", [[], [1]])
def test_table_1_reproduces_figure_1(generalized: list[int]) -> None:
    thresholds = [1] * (len(generalized) + 1)
    tree, index, calls = _build(TABLE_1, _two_level(), generalized, thresholds)
    assert _prefix_counts(tree, index) == FIGURE_1
    # breadth-first: parents before children, depths non-decreasing
    assert (np.diff(tree.depth) >= 0).all()
    assert all(tree.parent[v] < v for v in range(tree.parent.size))
    # one ledger hook per sub-level per level actually built (depth 4 has nodes, depth 5 none)
    assert calls == [(i, j) for i in range(4) for j in range(len(thresholds))]


def test_generalized_sub_level_counts() -> None:
    tree, index, _ = _build(TABLE_1, _two_level(), [1], [1, 1])
    gen = np.concatenate(tree.generalized)
    level_1 = {index.names[0][int(r[3])]: int(r[5]) for r in gen if r[0] == 1}
    assert level_1 == {"G12": 5, "G34": 3}


def test_generalized_threshold_prunes_whole_group() -> None:
    # G34 has 3 sequences at level 1; a generalized threshold of 4 prunes L3 and everything under it
    tree, index, _ = _build(TABLE_1, _two_level(), [1], [4, 1])
    counts = _prefix_counts(tree, index)
    assert ("L3",) not in counts
    assert counts[("L1",)] == 5


def test_every_candidate_appears_exactly_once_when_everything_passes() -> None:
    # Threshold 0 with zero noise: every empty cell passes, so the tree is complete; this checks
    # that the picked empty cells map to exactly the absent children, without duplicates.
    for generalized in ([], [1]):
        tree, index, _ = _build(
            TABLE_1, _two_level(), generalized, [0] * (len(generalized) + 1), height=3
        )
        counts = _prefix_counts(tree, index)
        assert len(counts) == 4 + 16 + 64
        expected = Counter()
        for row in TABLE_1:
            for k in range(1, min(len(row), 3) + 1):
                expected[tuple(row[:k])] += 1
        for prefix, c in counts.items():
            assert c == expected.get(prefix, 0)


def test_time_bins_candidates_are_non_decreasing() -> None:
    rows = [["L1", "L2"], ["L1", "L3"]]
    times = np.array([[0, 1], [1, 1]])
    tree, index, _ = _build(rows, _two_level(), [], [0], height=2, times=times, n_bins=3)
    # depth 1: 4 locations x 3 bins; depth 2 under bin t: 4 x (3 - t)
    assert (tree.depth == 1).sum() == 12
    d1 = np.flatnonzero(tree.depth == 1)
    d2 = np.flatnonzero(tree.depth == 2)
    assert d2.size == sum(4 * (3 - int(tree.time_bin[v])) for v in d1)
    assert (tree.time_bin[d2] >= tree.time_bin[tree.parent[d2]]).all()
    real = {
        (int(tree.location[v]), int(tree.time_bin[v])): int(tree.noisy[v])
        for v in d1
        if tree.noisy[v]
    }
    l1 = index.locations.index("L1")
    assert real == {(l1, 0): 1, (l1, 1): 1}


def test_multi_level_taxonomy_index_ranges() -> None:
    tax = Taxonomy.from_edges(
        [
            ("a", "x"),
            ("b", "x"),
            ("c", "y"),
            ("d", "z"),
            ("x", "M"),
            ("y", "M"),
            ("z", "N"),
            ("M", "root"),
            ("N", "root"),
            ("e", "root"),
        ]
    )
    index = TaxonomyIndex.build(tax, [1, 2])
    # every node's descendants at the next level are a contiguous range
    for j in range(1, 3):
        for a in range(len(index.names[j - 1])):
            lo, n = int(index.start[j][a]), int(index.size[j][a])
            members = {
                int(index.ancestor[j][leaf])
                for leaf in range(index.n_locations)
                if index.ancestor[j - 1][leaf] == a
            }
            assert members == set(range(lo, lo + n))
    # the shallow leaf 'e' stands for itself at every level
    e = index.locations.index("e")
    assert index.names[0][int(index.ancestor[0][e])] == "e"
    assert index.names[1][int(index.ancestor[1][e])] == "e"


@pytest.mark.parametrize("shuffle", [False, True])
def test_aggregate_sums_runs_like_unique(shuffle: bool) -> None:
    from prefixtree.tree import _aggregate

    rng = np.random.default_rng(0)
    flat = np.sort(rng.integers(0, 50, 400))
    if shuffle:
        rng.shuffle(flat)
    weight = rng.integers(1, 9, flat.size)
    keys, inverse, counts = _aggregate(flat, weight)
    ref_keys, ref_inverse = np.unique(flat, return_inverse=True)
    np.testing.assert_array_equal(keys, ref_keys)
    np.testing.assert_array_equal(inverse, ref_inverse)
    np.testing.assert_array_equal(counts, np.bincount(ref_inverse, weights=weight))
    keys, inverse, counts = _aggregate(flat[:0], weight[:0])
    assert keys.size == counts.size == 0
    distinct = np.arange(0, 30, 3)  # sorted and distinct: the keys are the input, no inverse
    keys, inverse, counts = _aggregate(distinct, np.ones(10, dtype=np.int64))
    assert keys is distinct and inverse is None and counts.tolist() == [1] * 10
