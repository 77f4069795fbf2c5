"""Counting kernels shared by the in-memory engine and the marginal release (vectorised numpy)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["bound_rank", "count_keys"]


def count_keys(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys in ``[0, size)`` and their counts (bincount when the space is small)."""
    if keys.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if size <= 4 * keys.size + (1 << 20):
        counts = np.bincount(keys, minlength=size)
        present = np.flatnonzero(counts)
        return present.astype(np.int64), counts[present].astype(np.int64)
    present, counts = np.unique(keys, return_counts=True)
    return present.astype(np.int64), counts.astype(np.int64)


def bound_rank(group_cols: Sequence[np.ndarray], order_cols: Sequence[np.ndarray]) -> np.ndarray:
    """Rank of each row within its group (``group_cols``), ordered by ``order_cols``; stable."""
    n = group_cols[0].size
    order = np.lexsort(tuple(reversed([*group_cols, *order_cols])))  # first key most significant
    new_group = np.ones(n, dtype=bool)
    if n:
        same = np.ones(n - 1, dtype=bool)
        for col in group_cols:
            s = col[order]
            same &= s[1:] == s[:-1]
        new_group[1:] = ~same
    starts = np.maximum.accumulate(np.where(new_group, np.arange(n), 0))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - starts
    return rank
