"""Constrained inference on a noisy prefix tree (Chen et al., KDD 2012, section 4.2).

Pure numpy post-processing of the noisy counts; it never sees private data. The tree is given as
flat arrays over its non-root nodes in breadth-first order (every parent before its children):
``parent[v]`` is the index of v's parent (-1 for depth-1 nodes, whose parent is the virtual root)
and ``noisy[v]`` its noisy count. The steps are:

1. Theorem 4.3: along every root-to-leaf path, the minimum-L2 non-increasing (root to leaf) fit of
   the noisy counts (isotonic regression), computed for all paths at once with the min-max formula
   ``fit[m] = min_{j >= m} max_{i <= m} mean[i, j]`` (paths indexed leaf first).
2. Consolidation: each node's estimate is the mean of its fits over the paths of its leaves.
3. Top-down correction: the paper subtracts ``(c(w) - sum children)/|children|`` from every child of
   w when the children's sum exceeds c(w). Subtracting equally can drive a small sibling below zero
   (and then a large sibling above its parent, breaking constraint 1 of Definition 4.1), so the
   excess is removed by water-filling instead: the L2 projection onto {y >= 0, sum y <= c(w)}, which
   subtracts the same amount from every child whenever no child would go negative (the paper's rule)
   and stops at zero otherwise.
4. Rounding, fused with the top-down pass: the children of a node are rounded (largest remainder) to
   non-negative integers whose sum is at most the parent's integer count, so both constraint sets
   of Definition 4.1 hold exactly for the integer counts.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["consistent_counts", "isotonic_paths", "node_depths", "path_matrix", "release_counts"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def node_depths(parent: IntArray) -> IntArray:
    """Depth of each node (1 for children of the root), by height-many vectorised passes."""
    parent = np.asarray(parent, dtype=np.int64)
    depth = np.ones(parent.size, dtype=np.int64)
    has_parent = parent >= 0
    while True:
        new = np.ones_like(depth)
        new[has_parent] = depth[parent[has_parent]] + 1
        if np.array_equal(new, depth):
            return depth
        depth = new


def path_matrix(parent: IntArray) -> tuple[IntArray, IntArray]:
    """Root-to-leaf paths: ``(ids, lengths)`` with ``ids[p, k]`` the k-th ancestor of leaf p.

    Column 0 holds the leaf, column ``lengths[p] - 1`` the depth-1 node; -1 pads shorter paths.
    """
    parent = np.asarray(parent, dtype=np.int64)
    n = parent.size
    has_child = np.zeros(n, dtype=bool)
    has_child[parent[parent >= 0]] = True
    leaves = np.flatnonzero(~has_child)
    columns = []
    cur = leaves
    while True:
        columns.append(cur)
        nxt = np.where(cur >= 0, parent[np.maximum(cur, 0)], -1)
        if not (nxt >= 0).any():
            break
        cur = nxt
    ids = np.stack(columns, axis=1) if columns else np.empty((0, 0), dtype=np.int64)
    lengths = (ids >= 0).sum(axis=1).astype(np.int64)
    return ids, lengths


def isotonic_paths(
    values: FloatArray, lengths: IntArray, weights: FloatArray | None = None
) -> FloatArray:
    """Row-wise minimum-L2 non-decreasing fit of ``values[p, :lengths[p]]`` (Theorem 4.3).

    Uses ``fit[m] = min_{m <= j < len} max_{i <= m} mean[i, j]``: O(len^2) vector operations over
    all rows of the same length at once. With ``weights`` (same shape, > 0) the fit minimises the
    weighted squared error and ``mean`` is the weighted mean (the min-max formula still holds).
    Entries past a row's length are returned as NaN.

    Numerically stable for any positive finite weights: each row's weights are divided by its
    largest (so no product overflows) and floored at :data:`WEIGHT_FLOOR` times it (so no segment
    weighs zero), and each segment's sums are accumulated directly, never as a difference of
    prefix sums (which cancels catastrophically once the weights span many magnitudes).
    """
    values = np.asarray(values, dtype=np.float64)
    lengths = np.asarray(lengths, dtype=np.int64)
    n_rows, width = values.shape
    out = np.full((n_rows, width), np.nan)
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        n = int(length)
        v = values[rows, :n].T  # one contiguous row per position: (n, rows)
        if weights is None:
            w = np.ones_like(v)
        else:
            w = _relative_weights(np.asarray(weights, dtype=np.float64)[rows, :n].T)
        vw = v * w
        fit = np.full((n, rows.size), np.inf)
        for j in range(n):
            # sums over the segments [i, j] for every i <= j: reversed cumulative sums
            seg = np.cumsum(vw[j::-1], axis=0)[::-1]
            seg /= np.cumsum(w[j::-1], axis=0)[::-1]
            np.maximum.accumulate(seg, axis=0, out=seg)  # max over i <= m of mean[i, j]
            np.minimum(fit[: j + 1], seg, out=fit[: j + 1])
        out[rows, :n] = fit.T
    return out


#: the lightest weight relative to the heaviest on a path. A node that light moves a weighted mean
#: by under 2**-60 of its deviation from it: below 1/256 for any count under 2**52 (where floats
#: are still exact integers), so the floor changes no fit by more than integer rounding does
WEIGHT_FLOOR = 2.0**-60


def _relative_weights(w: FloatArray) -> FloatArray:
    """Weights of shape (positions, rows) divided by each row's largest, floored at WEIGHT_FLOOR."""
    if not (np.isfinite(w).all() and (w > 0).all()):
        raise ValueError("isotonic weights must be positive and finite")
    with np.errstate(under="ignore"):  # safe: anything that small is raised to the floor
        return np.maximum(w / w.max(axis=0, keepdims=True), WEIGHT_FLOOR)


def consolidated_estimates(
    parent: IntArray, noisy: npt.ArrayLike, weights: npt.ArrayLike | None = None
) -> FloatArray:
    """Per node, the mean over its leaves' root-to-leaf paths of the isotonic fits (section 4.2);
    ``weights`` (per node, e.g. the inverse noise variance) weight the isotonic fits."""
    noisy = np.asarray(noisy, dtype=np.float64)
    ids, lengths = path_matrix(parent)
    if ids.size == 0:
        return np.zeros(0)
    safe = np.maximum(ids, 0)
    w = None if weights is None else np.where(ids >= 0, np.asarray(weights, float)[safe], 1.0)
    fit = isotonic_paths(np.where(ids >= 0, noisy[safe], 0.0), lengths, w)
    mask = ids >= 0
    total = np.bincount(ids[mask], weights=fit[mask], minlength=noisy.size)
    count = np.bincount(ids[mask], minlength=noisy.size)
    return total / count


def _water_fill(groups: IntArray, x: FloatArray, capacity: FloatArray, n_groups: int) -> FloatArray:
    """L2 projection of each group's ``x`` onto {y >= 0, sum y <= capacity[group]}."""
    x = np.maximum(x, 0.0)
    sums = np.bincount(groups, weights=x, minlength=n_groups)
    over = sums > capacity
    if not over.any():
        return x
    order = np.lexsort((-x, groups))
    xs, gs = x[order], groups[order]
    starts = np.searchsorted(gs, np.arange(n_groups))
    rank = np.arange(xs.size) - starts[gs]
    csum = np.cumsum(xs)
    before = np.concatenate([[0.0], csum])[starts]
    within = csum - before[gs]
    tau_k = (within - capacity[gs]) / (rank + 1)
    active = xs > tau_k
    rho = np.bincount(gs, weights=active, minlength=n_groups).astype(np.int64)
    last = starts + rho - 1
    tau = np.full(n_groups, np.inf)
    ok = rho > 0
    tau[ok] = (within[last[ok]] - capacity[ok]) / rho[ok]
    tau[~over] = 0.0
    y = np.empty_like(x)
    y[order] = np.maximum(xs - tau[gs], 0.0)
    return y


def _round_groups(groups: IntArray, y: FloatArray, n_groups: int) -> IntArray:
    """Largest-remainder rounding: integers whose group sums are round(sum y), floors kept."""
    low = np.floor(y)
    frac = y - low
    target = np.rint(np.bincount(groups, weights=y, minlength=n_groups))
    extra = (target - np.bincount(groups, weights=low, minlength=n_groups)).astype(np.int64)
    order = np.lexsort((-frac, groups))
    gs = groups[order]
    starts = np.searchsorted(gs, np.arange(n_groups))
    rank = np.arange(gs.size) - starts[gs]
    bump = np.zeros(y.size, dtype=np.int64)
    bump[order] = rank < extra[gs]
    return low.astype(np.int64) + bump


def consistent_counts(
    parent: npt.ArrayLike, noisy: npt.ArrayLike, weights: npt.ArrayLike | None = None
) -> IntArray:
    """Consistent non-negative integer counts for a noisy prefix tree (section 4.2, Definition 4.1).

    ``parent`` and ``noisy`` describe the non-root nodes in breadth-first order. The result ``c``
    satisfies ``c[v] <= c[parent[v]]`` and ``sum(c[children of w]) <= c[w]`` for every node.
    ``weights`` (per node, > 0): weighted least squares in step 1, for trees whose levels have
    different noise (inverse variances); ``None`` is the paper's equal-variance case.
    """
    parent = np.asarray(parent, dtype=np.int64)
    n = parent.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    estimate = consolidated_estimates(parent, noisy, weights)
    depth = node_depths(parent)
    counts = np.zeros(n, dtype=np.int64)
    top = depth == 1
    counts[top] = np.rint(np.maximum(estimate[top], 0.0)).astype(np.int64)
    for d in range(2, int(depth.max()) + 1):
        nodes = np.flatnonzero(depth == d)
        par = parent[nodes]
        uniq, groups = np.unique(par, return_inverse=True)
        capacity = counts[uniq].astype(np.float64)
        y = _water_fill(groups, estimate[nodes], capacity, uniq.size)
        counts[nodes] = _round_groups(groups, y, uniq.size)
    return counts


def release_counts(parent: npt.ArrayLike, counts: npt.ArrayLike) -> IntArray:
    """n(v) = c(v) - sum of its children's c: the number of released sequences ending at v."""
    parent = np.asarray(parent, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    has_parent = parent >= 0
    child_sum = np.bincount(parent[has_parent], weights=counts[has_parent], minlength=counts.size)
    return counts - child_sum.astype(np.int64)
