"""Private choice of the two-way tables without public trips (issue 28): MST's tree selection
(McKenna, Miklau and Sheldon 2021, "Winning the NIST Contest") on this package's mechanisms.

Without public trips the configuration's chain (:meth:`archetypes.measure.Discretiser.chain`) can
leave out the strongest dependencies (Chicago: payment type x tips, company x miles). Instead, the
tree of two-way tables is chosen on the private trips, paid for in the ledger:

- Candidates (public): every pair of the chain's nodes (a plain column, a plain column's coarse
  view, a group's coarsest view; :meth:`~archetypes.measure.Discretiser.positions`) whose table
  has at most ``max_cells`` cells.
- Score of a pair ``(i, j)`` (:func:`dependence_scores`): the L1 distance between the two-way
  table of the bounded trips and the independent table of its own margins,
  ``floor(sum |n_ab - n_a n_b / n|)`` (MST's score, with the exact margins instead of noisy
  one-way tables: no separate one-way round, whose split of the Gaussian costs more under basic
  composition). One trip added changes the table by 1 in L1 and the independent table by
  ``(3n + 1) / (n + 1) < 3`` (the outer product of the margins over the total), so the score by
  less than 4; the floor keeps an integer bound: :data:`SCORE_SENSITIVITY` per trip, ``4 k`` per
  individual of at most ``k`` trips.
- Release (:func:`select_tree`): the vector of the ``c`` candidates' scores with ONE discrete
  Gaussian (Canonne, Kamath and Steinke 2020), L2 sensitivity ``4 k sqrt(c)``, calibrated to
  :data:`SELECT_SHARE` of the joint measurements' (epsilon, delta); the spend is recorded first.
- The tree (post-processing): Kruskal's maximum spanning tree of the noisy scores, started from
  the public edges (a view under its group), so it never closes a cycle through them.

The budget share is a public constant; the selection runs only when the measurement would not
already hold every pair (``pairs = "auto"`` at low noise: there the tree only orders sampling),
and only on a schema without public groups (a public rule): their chain is a hierarchical design
(a group measured against a coarse view) that the candidates do not cover (SUBE Wednesday
without public trips, epsilon 1, 3 noise runs: the selection 784, the chain 801).

Chicago without public trips, epsilon 1, 6 noise runs: the chain 928.1, the selection 933.7 on
the 2014-15 trips (9,781; it finds payment type x tips: TV 0.42 -> under 0.05); on the 2013
trips (4,388), the stand-in the share was chosen on, 892.3 against 894.1 (within the noise). With
the joint option ``fine_bins``: 932.1 against 937.2 (2014-15), 891.8 against 889.7 (2013).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from archetypes.budget import split_budget
from archetypes.measure import calibrated_gaussian
from synth.privacy import DiscreteGaussian, LedgerBranch, SecureNoise

__all__ = [
    "SCORE_SENSITIVITY",
    "SELECT_SHARE",
    "Selection",
    "TreeSelection",
    "dependence_scores",
    "forest",
    "select_tree",
]

#: the selection's share of the joint measurements' (epsilon, delta), chosen on the public Chicago
#: 2013 trips as the private stand-in (epsilon 1, 6 noise runs: 0.02, 0.05, 0.1, 0.2 scored 885,
#: 886, 894, 891; the configuration's chain 892)
SELECT_SHARE = 0.1
#: the L1 dependence score's sensitivity per trip (see the module docstring)
SCORE_SENSITIVITY = 4


def dependence_scores(
    codes: np.ndarray, sizes: Sequence[int], candidates: Sequence[tuple[int, int]]
) -> np.ndarray:
    """``floor(sum_ab |n_ab - n_a n_b / n|)`` of each candidate pair of columns of ``codes``."""
    n = max(len(codes), 1)
    out = np.empty(len(candidates), dtype=np.int64)
    for at, (i, j) in enumerate(candidates):
        cell = codes[:, i] * sizes[j] + codes[:, j]
        table = np.bincount(cell, minlength=sizes[i] * sizes[j]).reshape(sizes[i], sizes[j])
        independent = np.outer(table.sum(1), table.sum(0)) / n
        out[at] = math.floor(float(np.abs(table - independent).sum()))
    return out


def forest(d: int, edges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (parent, child) edges of an acyclic undirected edge set over ``d`` columns, each tree
    rooted at its lowest column (breadth first)."""
    near: dict[int, list[int]] = {i: [] for i in range(d)}
    for a, b in edges:
        near[a].append(b)
        near[b].append(a)
    seen: set[int] = set()
    out: list[tuple[int, int]] = []
    for root in range(d):
        if root in seen or not near[root]:
            continue
        seen.add(root)
        queue = [root]
        while queue:
            node = queue.pop(0)
            for other in sorted(near[node]):
                if other not in seen:
                    seen.add(other)
                    out.append((node, other))
                    queue.append(other)
    return out


@dataclass
class Selection:
    """The released selection: its candidates, the mechanism and the chosen edges."""

    candidates: list[tuple[int, int]]
    mechanism: DiscreteGaussian
    k: int
    chosen: list[tuple[int, int]]
    noisy: np.ndarray  # the released scores (kept out of the manifest)

    def to_dict(self, columns: Sequence[str]) -> dict[str, Any]:
        """Manifest form: candidates, chosen pairs, unit bound, sensitivity, sigma, rho."""
        mech = self.mechanism
        return {
            "score": "floor of the L1 distance from the independent table of its margins",
            "candidates": [[columns[a], columns[b]] for a, b in self.candidates],
            "chosen": [[columns[a], columns[b]] for a, b in self.chosen],
            "max_records_per_individual": self.k,
            "sensitivity_l2": mech.sensitivity,
            "sigma": mech.sigma,
            "rho": mech.sensitivity**2 / (2 * mech.sigma**2),
            "epsilon": mech.epsilon,
            "delta": mech.delta,
        }


def select_tree(
    codes: np.ndarray,
    sizes: Sequence[int],
    candidates: Sequence[tuple[int, int]],
    fixed: Sequence[tuple[int, int]],
    *,
    k: int,
    epsilon: float,
    delta: float,
    noise: SecureNoise,
    ledger: LedgerBranch,
    unit: str,
    names: Sequence[str],
) -> Selection:
    """Release the candidates' scores on ``codes`` (the bounded private trips, at most ``k`` per
    individual) with one discrete Gaussian and keep the maximum spanning tree of the noisy scores
    (Kruskal, ties by candidate order), started from the public ``fixed`` edges."""
    pairs = [(int(a), int(b)) for a, b in candidates]
    exact = dependence_scores(codes, sizes, pairs)
    sensitivity = SCORE_SENSITIVITY * k * math.sqrt(len(pairs))
    mechanism = calibrated_gaussian(epsilon, delta, sensitivity)
    listed = "; ".join(f"{names[a]} x {names[b]}" for a, b in pairs)
    raw = mechanism.release(
        exact,
        noise=noise,
        ledger=ledger,
        label=f"joint tree selection ({len(pairs)} candidate pairs)",
        unit=unit,
        note=f"L1 dependence score of each candidate pair ({listed}) on at most {k} trips per "
        f"{unit}: {SCORE_SENSITIVITY} per trip, L2 sensitivity {SCORE_SENSITIVITY} x {k} x "
        f"sqrt({len(pairs)}); the maximum spanning tree of the noisy scores is post-processing",
    )
    root = list(range(len(sizes)))

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for a, b in fixed:
        root[find(a)] = find(b)
    chosen = []
    for at in sorted(range(len(pairs)), key=lambda i: -int(raw[i])):  # stable: ties in order
        a, b = pairs[at]
        if find(a) != find(b):
            root[find(a)] = find(b)
            chosen.append((a, b))
    return Selection(pairs, mechanism, k, chosen, np.asarray(raw, dtype=np.int64))


class TreeSelection:
    """The selection step of the joint mode's fit (mixed into the synthesizer, before the
    measurement; :class:`~archetypes.jointfit.JointSampling` provides the attributes)."""

    discretiser_: Any
    ledger_: Any
    unit: str
    selection_: Selection | None

    def _joint_options(self) -> dict[str, Any]:  # pragma: no cover - JointSampling's
        raise NotImplementedError

    def _joint_pairs(
        self, tree: list[tuple[int, int]], sizes: list[int], k: int, budget: tuple[float, float]
    ) -> list[tuple[int, int]]:  # pragma: no cover - JointSampling's
        raise NotImplementedError

    def _joint_select(
        self,
        codes: np.ndarray,
        tree: list[tuple[int, int]],
        pairs: list[tuple[int, int]],
        k: int,
        budget: tuple[float, float],
        noise: SecureNoise,
        private_tree: bool,
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]], tuple[float, float]]:
        """Without public trips (``private_tree``), on a schema without public groups, when the
        candidates can span the nodes and the measurement would not hold every candidate pair
        (public rules): :data:`SELECT_SHARE` of ``budget`` chooses the tree (:func:`select_tree`)
        and the pairs are those of that tree; returns the tree, pairs and the budget left (else
        the given ones, untouched)."""
        self.selection_ = None
        disc = self.discretiser_
        nodes = sorted({disc.positions()[c] for c in disc.columns})
        cap = self._joint_options()["max_cells"]
        candidates = [
            (a, b)
            for i, a in enumerate(nodes)
            for b in nodes[i + 1 :]
            if disc.sizes[a] * disc.sizes[b] <= cap
        ]
        measured = {(min(e), max(e)) for e in pairs}
        if (
            not private_tree
            or disc.combos  # a grouped schema: the configuration's hierarchical chain stays
            or len(candidates) < len(nodes)
            or set(candidates) <= measured
        ):
            return tree, pairs, budget
        (eps, delta), rest = split_budget(budget, [SELECT_SHARE, 1 - SELECT_SHARE])
        fixed = [(p, v) for v, (p, _) in disc.views.items()]
        self.selection_ = select_tree(
            codes,
            disc.sizes,
            candidates,
            fixed,
            k=k,
            epsilon=eps,
            delta=delta,
            noise=noise,
            ledger=self.ledger_,
            unit=self.unit,
            names=disc.model,
        )
        tree = forest(len(disc.sizes), [*self.selection_.chosen, *fixed])
        return tree, self._joint_pairs(tree, list(disc.sizes), k, rest), rest
