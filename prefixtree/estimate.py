"""Expected size of a noisy prefix tree, from public facts only, before any data is read.

Chen et al. 2012 (Theorem 4.2): an empty candidate cell passes a threshold ``t`` under discrete
Laplace noise of scale ``b`` with probability ``P = p^t / (1 + p)``, ``p = exp(-1 / b)``; the
number of empty nodes grows level after level by the expected number of empty children passing
per parent. Per tree level, with ``m_j`` the most candidates of a parent at sub-level j and
``q_j = m_j P_j`` the empty cells passing per parent there, every parent cell, real or empty,
brings at most ``q_j`` empty cells to sub-level j, and the
real (data-holding) surviving cells of a sub-level are at most the candidate paths of that depth
and at most :data:`REAL_NODES` (a surviving real node needs a noisy count above the
threshold: a level holds at most ``N / t`` of them, 10^4-10^5 for the 10^6-10^7 cards a laptop
holds; beyond, the runtime guard of :mod:`prefixtree.tree` stops the tree before it grows).

Memory is :data:`BYTES_PER_NODE` per node (the tree's arrays, consistency's path matrix, the
release's location paths, for h around 10).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BYTES_PER_NODE", "REAL_NODES", "TreeEstimate", "available_memory", "estimate_tree"]

REAL_NODES = 100_000
BYTES_PER_NODE = 400


@dataclass(frozen=True)
class TreeEstimate:
    """Expected nodes per tree level (real + empty) and the memory they imply."""

    nodes: list[float]
    empty: list[float]

    @property
    def total(self) -> float:
        return float(sum(self.nodes))

    @property
    def bytes(self) -> float:
        return self.total * BYTES_PER_NODE

    def first_level_over(self, limit: float) -> int | None:
        """The first tree level (1-based) at which the running total exceeds ``limit``."""
        running = 0.0
        for i, n in enumerate(self.nodes):
            running += n
            if running > limit:
                return i + 1
        return None


def pass_probability(scale: float, threshold: float) -> float:
    """P(discrete Laplace noise of ``scale`` >= ``threshold``) for ``threshold`` >= 1."""
    p = math.exp(-1.0 / scale)
    t = max(math.ceil(threshold), 1)
    return math.exp(t * math.log(p)) / (1 + p) if p > 0 else 0.0


def estimate_tree(
    candidates: Sequence[Sequence[float]],
    scales: Sequence[Sequence[float]],
    thresholds: Sequence[Sequence[float]],
    n_locations: float,
) -> TreeEstimate:
    """Expected nodes per level. Per tree level i, per sub-level j: ``candidates[i][j]`` the most
    candidate cells of a parent (children x time bins), ``scales``/``thresholds`` its noise."""
    nodes: list[float] = []
    empty_all: list[float] = []
    real, empty = 1.0, 0.0  # the root
    for cand, sc, th in zip(candidates, scales, thresholds, strict=True):
        for m, s, t in zip(cand, sc, th, strict=True):
            # every parent cell (real or empty) has at most m candidates, q of them empty passing
            empty = min((real + empty) * m * pass_probability(s, t), 1e30)
            real = min(real * m, float(REAL_NODES))
        nodes.append(real + empty)
        empty_all.append(empty)
    return TreeEstimate(nodes, empty_all)


def available_memory() -> float:
    """Bytes of memory available to this process (physical memory when unknown), or inf."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return math.inf
