"""Completion hints of the noisy prefix tree: the cells of a locations sub-level whose noisy count
reached the lower hint threshold but not the pass threshold (:attr:`prefixtree.tree.SubLevel.hint`).

They come from the same histogram as the nodes (the noisy-threshold step drawn once, at the hint
threshold; the empty cells that reach it are drawn exactly, Chen et al. 2012, Theorem 4.1, so the
ones above the pass threshold among them are distributed as if drawn there): keeping them is
post-processing. The Markov completion (:mod:`prefixtree.completion`) sends a node's pruned
sequences to them in proportion to their noisy counts.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["Hints", "concatenate_hints", "hint_cells", "split_hints"]

IntArray = npt.NDArray[np.int64]
#: parent node (-1: the root; within its tree level until concatenated), location, time bin, noisy
Hints = tuple[IntArray, IntArray, IntArray, IntArray]


def split_hints(
    present: tuple[IntArray, IntArray, IntArray, npt.NDArray[np.bool_]],
    fake: tuple[IntArray, IntArray, IntArray],
    threshold: int,
) -> tuple[
    tuple[IntArray, IntArray, IntArray],
    npt.NDArray[np.bool_],
    tuple[IntArray, IntArray, IntArray],
]:
    """Cells that reached the hint threshold: those also at ``threshold`` pass (present mask,
    passing empty cells), the others are hints (parent, rank, noisy). The empty cells above the
    hint threshold were drawn exactly (Theorem 4.1), so those above ``threshold`` among them are
    distributed as if drawn at ``threshold``."""
    p_parent, p_rank, p_noisy, reached = present
    f_parent, f_rank, f_values = fake
    passed = reached & (p_noisy >= threshold)
    hint_p = reached & ~passed
    up = f_values >= threshold
    hinted = (
        np.concatenate([p_parent[hint_p], f_parent[~up]]),
        np.concatenate([p_rank[hint_p], f_rank[~up]]),
        np.concatenate([p_noisy[hint_p], f_values[~up]]),
    )
    return hinted, passed, (f_parent[up], f_rank[up], f_values[up])


def hint_cells(
    hinted: tuple[IntArray, IntArray, IntArray],
    parents: tuple[IntArray, IntArray],
    par_start: IntArray,
    par_size: IntArray,
    k: int,
) -> Hints:
    """Hints as (parent's index in its tree level, location, time bin, noisy count), from
    (parent, rank, noisy) and the parents' (tree node, time bin)."""
    h_parent, h_rank, h_noisy = hinted
    tree_node, time_bin = parents
    size = par_size[h_parent]
    first_bin = time_bin[h_parent] // k
    h_bin = np.maximum(time_bin[h_parent], (first_bin + h_rank // size) * k)
    return tree_node[h_parent], par_start[h_parent] + h_rank % size, h_bin, h_noisy


def concatenate_hints(hints: list[Hints]) -> Hints | None:
    """The hints of every level as one set of arrays (None without any)."""
    if not hints:
        return None
    parent, location, time_bin, noisy = (
        np.concatenate([h[c] for h in hints]).astype(np.int64) for c in range(4)
    )
    return parent, location, time_bin, noisy
