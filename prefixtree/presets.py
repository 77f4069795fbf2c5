"""Named configurations of the prefix tree: ``auto`` (the default, from public facts) and ``kdd12``.

``kdd12`` is Chen et al. 2012 as published: hybrid, ``eps_bar = epsilon / h`` per level, the
paper's budget split and thresholds (``2 sqrt(2) / eps``), no completion.

``auto`` is derived from first principles and checked on simulated data and the public SUBE
Tuesday file (never on the data it is scored on); it reads only public facts: epsilon, the height
h, the taxonomy (its size, fan-outs, group sizes) and the time bins. Never the private data.

- Thresholds: the ``candidates`` rule (at most ``false_children`` empty children pass per parent in
  expectation, from the public number of candidates), so empty nodes never multiply (Chen et al.
  2012, Theorem 4.2: the tree grows as ``(|candidates| P(pass))^h``).
- Level weights: frequent patterns are short and every sequence has a first location, while the
  mass at depth i shrinks with i; the first level gets weight 1, the second
  ``max(1, ln(candidates) / 2)`` (it must separate many more candidates), and each deeper level
  :data:`DECAY` times the one above, floored at :data:`FLOOR`: a level's share of epsilon follows
  the mass it holds. The completion's Markov chain, read off all levels, carries the long patterns.
- False children: :data:`FALSE_CHILDREN` at the first level, then scaled by the square of the
  level's weight relative to the largest (floored at :data:`MIN_FALSE_CHILDREN`): an empty
  child passing a level's threshold takes about that threshold's worth of sequences from its
  parent in consistency, and the thresholds grow as the weights fall.
- Generalized levels (hybrid): a generalized sub-level is used only when it pays for itself:
  it lowers the locations' pass threshold below the simple tree's without starving any location
  that would pass there (:func:`generalized_split`). Under the candidates thresholds that never
  happens (``ln`` is additive: the group's and the locations' thresholds together need
  ``ln(G f_max / A^2) > ln(|locations| / A)``), so ``auto`` is the simple variant; measured on
  simulated taxonomies (dense 16 / 4, wide 190 / 6 skewed, sparse 500 / 50, Montreal 68 / 4) a
  hybrid tree at the same thresholds found fewer or as many frequent patterns. A hybrid tree asked
  for (``variant="hybrid"``) follows the same rule: it uses the generalized levels that pay, and
  with none (a warning says so) it is the simple tree, so hybrid is never worse than simple; an
  explicit ``budget_split`` forces a level. Only with ``coarse_time_bin`` (time generalizes
  too) does it take :func:`hybrid_split`: the group's threshold ``sqrt(f)`` times the
  locations' instead of the paper's ``f`` times (``2 / f`` of the budget), which nothing passes
  on wide fan-outs. Measured with that split forced, hybrid lost to simple on every shape
  (``benchmarks/bench_prefixtree.py defaults``, config ``hybrid-sqrt``).
- Completion: Markov, with a noisy root count (:data:`ROOT_SHARE` of epsilon, its own ledger line)
  so the released volume matches the noisy number of sequences: mass pruned at the first level is
  completed too.
- Completion hints: the cells a level's histogram pruned are not all alike; where the noise is
  small their noisy counts still say where a node's pruned sequences went. On the levels whose
  weight is at least half the largest (under these weights the second, whose histogram decides
  the pairs), the cells whose noisy count reaches a lower threshold, the candidates rule at
  :data:`HINT_CELLS` empty cells per parent instead of the level's false children, are kept as
  hints: a node's first completion step follows them in proportion to their noisy counts, for as
  much of its pruned mass as they hold (post-processing of the same histogram). A hint, fake or
  not, receives on average at most its own noisy count and never more than the level's pass
  threshold (the cap of a pruned child).
  Chosen on SUBE Tuesday (TP@100 67.0 -> 68.35 over 40 seeds; 1, 3, 10 and 30 cells tried).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from synth.taxonomy import Taxonomy

__all__ = [
    "DECAY",
    "FALSE_CHILDREN",
    "FLOOR",
    "HINT_CELLS",
    "PRESETS",
    "ROOT_SHARE",
    "auto_config",
    "auto_false_children",
    "auto_weights",
    "generalized_split",
    "hybrid_split",
    "kdd12",
]

PRESETS = ("auto", "kdd12")
DECAY = 0.25
FLOOR = 0.02
FALSE_CHILDREN = 0.2
MIN_FALSE_CHILDREN = 1e-3
ROOT_SHARE = 0.01
HINT_CELLS = 3.0

#: The paper's settings (what the parameters defaulted to before the auto preset).
KDD12: dict[str, Any] = {
    "variant": "hybrid",
    "threshold_rule": "paper",
    "false_children": 1.0,
    "completion": "none",
    "level_weights": None,
    "budget_split": None,
    "root_share": 0.0,
    "completion_hints": 0.0,
}


def kdd12() -> dict[str, Any]:
    """The paper's settings (Chen et al. 2012)."""
    return dict(KDD12)


def auto_weights(height: int, candidates: int) -> list[float]:
    """Per tree level: 1; ``w_2 = max(1, ln(candidates) / 2)``; then a quarter of the level
    above (:data:`DECAY`), floored at :data:`FLOOR`. ``candidates``: locations x time bins."""
    second = max(1.0, math.log(max(candidates, 1)) / 2)
    rest = [max(FLOOR, second * DECAY ** (i - 1)) for i in range(1, height)]
    return [1.0, *rest][:height]


def auto_false_children(weights: list[float]) -> list[float]:
    """Per tree level: :data:`FALSE_CHILDREN` times the square of the level's weight relative to
    the largest, floored at :data:`MIN_FALSE_CHILDREN`; the first level (one parent, the root,
    holding every sequence) gets the largest's."""
    top = max(weights)
    rest = [max(MIN_FALSE_CHILDREN, FALSE_CHILDREN * (w / top) ** 2) for w in weights[1:]]
    return [FALSE_CHILDREN, *rest][: len(weights)]


def _candidate_levels(taxonomy: Taxonomy, false_children: float) -> list[tuple[int, float, float]]:
    """Per inner level g with at least two groups: (g, a, b), ``a = ln(G / A)``,
    ``b = ln(f_max / A)`` (G groups, the largest of f_max locations, A false children)."""
    leaves = taxonomy.leaves()
    out = []
    for g in range(1, taxonomy.height):
        sizes = Counter(taxonomy.generalize(leaf, g) for leaf in leaves)
        if 2 <= len(sizes) < len(leaves):
            a = math.log(max(len(sizes) / false_children, 1.0 + 1e-9))
            b = math.log(max(max(sizes.values()) / false_children, 1.0 + 1e-9))
            out.append((g, a, b))
    return out


def generalized_split(taxonomy: Taxonomy, false_children: float) -> dict[int, float]:
    """``{taxonomy level: share}`` of the generalized level that pays for itself, or ``{}``.

    A generalized sub-level with share ``s`` pays for itself when it never starves a location
    that would pass in the simple tree (a group holding only that location's mass must pass:
    ``a / s <= T``) and lowers the locations' threshold (``b / (1 - s) < T``), thresholds in
    units of the level's ``1 / epsilon``, ``T = ln(|locations| / A)`` the simple tree's. Both hold
    for some s iff ``a + b < T``, i.e. ``G f_max < |locations| A``: never with ``A <= 1`` (G
    groups of at most f_max locations hold all of them). Under the candidates thresholds a
    generalized level never pays; the rule is kept so that it is the documented decision."""
    simple = math.log(max(len(taxonomy.leaves()) / false_children, 1.0))
    best: tuple[float, int, float] | None = None
    for g, a, b in _candidate_levels(taxonomy, false_children):
        if a + b < simple:
            share = a / simple
            locations = b / (1 - share)
            if best is None or locations < best[0]:
                best = (locations, g, share)
    return {} if best is None else {best[1]: round(best[2], 6)}


def hybrid_split(taxonomy: Taxonomy, false_children: float) -> dict[int, float]:
    """The split of a hybrid trajectory tree with ``coarse_time_bin`` under ``auto``: the
    lowest inner level with ``s = a / (a + sqrt(f) b)`` (f the mean fan-out), so the group's
    threshold is ``sqrt(f)`` times the locations' (a group of f locations typically holds the
    mass of about sqrt(f) of them) instead of the paper's f times, which nothing passes on wide
    fan-outs; ``{}`` without an inner level."""
    levels = _candidate_levels(taxonomy, false_children)
    if not levels:
        return {}
    g, a, b = levels[-1]
    groups = len({taxonomy.generalize(leaf, g) for leaf in taxonomy.leaves()})
    f_mean = len(taxonomy.leaves()) / groups
    return {g: round(a / (a + math.sqrt(f_mean) * b), 6)}


def auto_config(taxonomy: Taxonomy, height: int, time_bins: int | None = None) -> dict[str, Any]:
    """The ``auto`` preset's choices (module docstring), from public facts only."""
    bins = math.ceil(1440 / time_bins) if isinstance(time_bins, int) and time_bins > 0 else 1
    weights = auto_weights(height, len(taxonomy.leaves()) * bins)
    false_children = auto_false_children(weights)
    split = generalized_split(taxonomy, false_children[0])
    return {
        "variant": "hybrid" if split else "simple",
        "threshold_rule": "candidates",
        "false_children": false_children,
        "completion": "markov",
        "level_weights": weights,
        "budget_split": split or None,
        "root_share": ROOT_SHARE,
        "completion_hints": HINT_CELLS,
    }
