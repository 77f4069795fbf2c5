"""The end of :meth:`PrefixTreeSynthesizer.fit <prefixtree.synthesizer.PrefixTreeSynthesizer.fit>`:
the noisy tree the builder drew (:class:`~prefixtree.tree.BuiltTree`) made consistent (Chen et al.
2012, section 4.2, weighted by each level's inverse noise variance when the levels' noise differs),
its endings n(v), the Markov completion of the pruned mass (:mod:`prefixtree.completion`) and the
fitted ``tree_`` frame. Post-processing of the noisy counts only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from prefixtree.completion import complete_sequences
from prefixtree.consistency import WEIGHT_FLOOR, consistent_counts, release_counts
from prefixtree.tree import BuiltTree
from synth.generator import Generator

__all__ = ["FittedTree"]


def _relative_inverse_variances(scales: list[float]) -> np.ndarray:
    """Inverse noise variances of discrete Laplace noise at ``scales``, divided by the largest.

    The variance is ``2 p / (1 - p)**2`` with ``p = exp(-1/scale)``; its inverse is computed in the
    log domain, ``2 log(1 - p) + 1/scale - log 2``, so that a tiny scale (a huge epsilon: about
    ``exp(1/scale)``) neither overflows nor a huge one underflows before the ratio is taken; ratios
    are floored at :data:`~prefixtree.consistency.WEIGHT_FLOOR`, as the fit itself does.
    """
    inv = 1.0 / np.asarray(scales, dtype=np.float64)
    log_w = 2.0 * np.log(-np.expm1(-inv)) + inv
    return np.exp(np.maximum(log_w - log_w.max(), math.log(WEIGHT_FLOOR)))


class FittedTree(Generator):
    """The end of :class:`~prefixtree.synthesizer.PrefixTreeSynthesizer`'s ``fit``: from the
    noisy tree to the fitted attributes (``tree_``, ``generalized_``, ``root_count_``)."""

    # parameters and fitted state, set by the synthesizer
    height: int
    time_bins: int | None
    locations_: list[str]
    n_time_bins_: int
    random_state: Any
    sub_levels_: pd.DataFrame
    generalized_: pd.DataFrame
    tree_: pd.DataFrame
    _root_scale: float | None
    _completed: Any

    def _tree_time_bins(self) -> int | None:
        return self.time_bins

    def _finish(self, built: BuiltTree, level_scale: list[float]) -> None:
        # inverse noise variance of each node's level (2 p / (1 - p)^2 for the discrete Laplace
        # with p = exp(-1/scale)); equal across levels unless level_weights differ. End cells are
        # leaves under their node, drawn with the next level's noise.
        n = built.parent.size
        height = int(self.height)
        shallow = np.flatnonzero(built.depth < height) if built.end_noisy is not None else None
        parent, noisy, depth = built.parent, built.noisy, built.depth
        if shallow is not None and built.end_noisy is not None:
            parent = np.concatenate([parent, shallow])
            noisy = np.concatenate([noisy, built.end_noisy[shallow]])
            depth = np.concatenate([depth, built.depth[shallow] + 1])
        weights = None
        root_scale = self._root_scale if built.root_noisy is not None else None
        root = root_scale is not None
        if len(set(level_scale)) > 1 or root_scale is not None:
            scales = list(level_scale) + ([] if root_scale is None else [float(root_scale)])
            inverse_variance = _relative_inverse_variances(scales)
            weights = inverse_variance[depth - 1]
        if root:  # the root is node 0 of the consistency: depth-1 nodes hang under it
            parent = np.concatenate([[-1], np.where(parent >= 0, parent + 1, 0)])
            noisy = np.concatenate([[built.root_noisy], noisy])
            weights = np.concatenate([inverse_variance[-1:], weights])
        all_counts = consistent_counts(parent, noisy, weights)
        if root:
            root_count = int(all_counts[0])
            all_counts = all_counts[1:]
            parent = parent[1:] - 1
            top = int(all_counts[:n][built.depth == 1].sum())
            self.root_count_: int | None = root_count
            root_rest = max(root_count - top, 0)
        else:
            self.root_count_ = None
            root_rest = 0
        rest = release_counts(parent, all_counts)[:n]
        counts = all_counts[:n]
        self._completed = None
        continued: np.ndarray | None = None
        if shallow is None:
            ending = rest
        else:
            ending = counts.copy()
            ending[shallow] = all_counts[n:]
            continued = np.zeros(n, dtype=np.int64)
            continued[shallow] = rest[shallow]
            n_loc = len(self.locations_)
            state = built.time_bin * n_loc + built.location
            self._completed = complete_sequences(
                built.parent,
                built.depth,
                state,
                counts,
                ending,
                continued,
                height=height,
                n_states=n_loc * self.n_time_bins_,
                n_locations=n_loc,
                child_cap=self._child_cap(height),
                rng=np.random.default_rng(
                    self.random_state
                    if isinstance(self.random_state, int | np.integer)
                    and not isinstance(self.random_state, bool)
                    else None
                ),
                root_continued=root_rest,
                hints=built.hints,
            )
        self.generalized_ = pd.DataFrame(
            np.concatenate(built.generalized) if built.generalized else np.zeros((0, 6), int),
            columns=["depth", "sub_level", "parent", "taxonomy_node", "time_bin", "noisy_count"],
        )
        # last: the fitted tree marks the model fitted
        self.tree_ = self._tree_frame(built, counts, ending, continued)

    def _tree_frame(
        self,
        built: BuiltTree,
        counts: np.ndarray,
        ending: np.ndarray,
        continued: np.ndarray | None,
    ) -> pd.DataFrame:
        """The fitted tree: one row per non-generalized node (see the synthesizer's docstring)."""
        height = int(self.height)
        tree = pd.DataFrame(
            {
                "node": np.arange(built.parent.size, dtype=np.int64),
                "parent": built.parent,
                "depth": built.depth,
                "location": pd.Categorical.from_codes(
                    built.location, categories=pd.Index(self.locations_)
                ),
                "noisy_count": built.noisy,
                "count": counts,
                "ending": ending,
            }
        )
        if continued is not None and built.end_noisy is not None:
            end_noisy = pd.Series(built.end_noisy, dtype="Int64")
            end_noisy[built.depth >= height] = pd.NA
            tree.insert(6, "end_noisy", end_noisy)
            tree["continued"] = continued
        if self._tree_time_bins() is not None:
            tree.insert(4, "time_bin", built.time_bin)
        return tree

    def _child_cap(self, height: int) -> np.ndarray:
        """Per depth d (0: the root): the largest pass threshold of level d + 1 (a pruned child's
        noisy count was below it)."""
        plan = self.sub_levels_
        top = plan.groupby("level")["threshold"].max()
        cap = np.zeros(height + 1, dtype=np.int64)
        levels = top.index.to_numpy(dtype=np.int64)
        cap[levels - 1] = np.maximum(top.to_numpy(dtype=np.int64), 1)
        return cap
