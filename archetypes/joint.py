"""One joint distribution of trips consistent with the noisy marginals of :mod:`archetypes.measure`
(issue 28). Pure post-processing of the released tables and public data.

Which tables: the one-way table of every column and the two-way tables of a spanning tree of the
columns. The tree is a public choice: with public trips, the maximum spanning tree of their
pairwise mutual information (Chow and Liu 1968); without, a tree picked on the private trips and
paid for in the ledger, as MST does (McKenna et al. 2021; :mod:`archetypes.selection`), or on a
schema with public groups the chain the configuration already states (key columns in order, the
category and each completion target under its first conditioning column).

Estimation (:func:`consistent_tables`), a purpose-built stand-in for Private-PGM (McKenna, Sheldon
and Miklau 2019) on a tree, where it is exact up to the projections:

1. the total: the inverse-variance weighted mean of the table sums;
2. each one-way table: the inverse-variance weighted mean of its own measurement and the margins
   of the two-way tables that contain the column; with public trips, shrunk towards the public
   table scaled to the total, by the empirical-Bayes weight ``tau^2 / (tau^2 + sigma^2)`` per cell
   (``tau^2`` proportional to the public count plus one, its factor from the tables' own excess
   variance); then projected on the non-negative vectors of that total (Euclidean simplex
   projection, Duchi et al. 2008);
3. each two-way table: shrunk and projected the same way, then raked (iterative proportional
   fitting) to the two one-way tables, so that neighbouring tables share their margins exactly.

Sampling (:class:`JointModel`): a pool of trips -- the public trips (when given) and trips drawn by
ancestral sampling along the tree -- is weighted by raking to every estimated table; synthetic trips
are then drawn from the pool by weight. The public rows bring their higher-order structure; the
tree draws bring the cells the public period lacks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = [
    "JointModel",
    "chow_liu_tree",
    "compression",
    "consistent_tables",
    "decompress",
    "maximum_spanning_tree",
    "project_simplex",
    "rake_table",
    "reconcile",
]

#: raking sweeps (weights of the pool, two-way tables)
RAKE_ITERATIONS = 40


def project_simplex(y: np.ndarray, total: float) -> np.ndarray:
    """The closest (Euclidean) non-negative array to ``y`` summing to ``total``."""
    flat = y.astype(float).ravel()
    if total <= 0 or flat.size == 0:
        return np.zeros_like(y, dtype=float)
    u = np.sort(flat)[::-1]
    css = np.cumsum(u) - total
    ind = np.arange(1, flat.size + 1)
    cond = u - css / ind > 0
    rho = int(ind[cond][-1]) if cond.any() else flat.size
    theta = css[rho - 1] / rho
    return np.maximum(flat - theta, 0.0).reshape(y.shape)


def _mutual_information(a: np.ndarray, b: np.ndarray, na: int, nb: int) -> float:
    joint = np.bincount(a * nb + b, minlength=na * nb).reshape(na, nb).astype(float)
    joint /= max(joint.sum(), 1.0)
    pa, pb = joint.sum(1, keepdims=True), joint.sum(0, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(joint > 0, joint * np.log(joint / (pa * pb)), 0.0)
    return float(terms.sum())


def chow_liu_tree(codes: np.ndarray, sizes: Sequence[int]) -> list[tuple[int, int]]:
    """Edges of the maximum spanning tree of the pairwise mutual information of PUBLIC codes
    (Prim's algorithm from column 0; each edge as (parent, child))."""
    d = codes.shape[1]
    mi = np.zeros((d, d))
    for i in range(d):
        for j in range(i + 1, d):
            mi[i, j] = mi[j, i] = _mutual_information(codes[:, i], codes[:, j], sizes[i], sizes[j])
    return maximum_spanning_tree(mi)


def _shrink(y: np.ndarray, sigma2: float, prior: np.ndarray | None) -> np.ndarray:
    """Empirical-Bayes mean of a noisy table towards ``prior`` (public counts at the private total):
    per cell variance ``tau^2 = c (prior + 1)``, ``c`` from the excess of the squared deviations."""
    if prior is None:
        return y.astype(float)
    excess = float(((y - prior) ** 2).sum() - sigma2 * y.size)
    c = max(excess, 0.0) / float((prior + 1).sum())
    tau2 = c * (prior + 1)
    weight = tau2 / (tau2 + sigma2)
    return np.asarray(weight * y + (1 - weight) * prior, dtype=float)


def reconcile(
    parent: np.ndarray, parent_var: float, view: np.ndarray, view_var: float, mapping: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Consistent estimates of a table and of its public coarsening (``view[c]`` = the sum of the
    ``parent`` cells ``i`` with ``mapping[i] == c``), from unbiased estimates with per-cell
    variances: the least-squares solution (Hay, Rastogi, Miklau and Suciu 2010's hierarchical
    consistency, two levels): each view cell is the inverse-variance mean of its estimate and its
    parent cells' sum, and the difference is spread evenly over those parent cells."""
    n = np.bincount(mapping, minlength=len(view)).astype(float)
    summed = np.bincount(mapping, weights=parent, minlength=len(view))
    var_sum = np.maximum(n, 1.0) * parent_var
    best = np.where(n > 0, (view / view_var + summed / var_sum) / (1 / view_var + 1 / var_sum), 0.0)
    fixed = parent + ((best - summed) / np.maximum(n, 1.0))[mapping]
    return fixed, best


def rake_table(seed: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Raking of a two-way table to row and column totals (zero rows/columns of the seed get the
    independent table's mass first, so every positive total can be met)."""
    total = max(rows.sum(), 1e-12)
    table = seed + 1e-9 * np.outer(rows, cols) / total
    for _ in range(RAKE_ITERATIONS):
        table *= (rows / np.maximum(table.sum(1), 1e-300))[:, None]
        table *= (cols / np.maximum(table.sum(0), 1e-300))[None, :]
    return table


def consistent_tables(
    noisy: Sequence[np.ndarray],
    tables: Sequence[tuple[int, ...]],
    sigma: float | Sequence[float],
    priors: Sequence[np.ndarray | None],
    d: int,
    *,
    views: Mapping[int, tuple[int, np.ndarray]] | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The one-way tables of the ``d`` columns and the two-way tables, consistent (see the module
    docstring). ``sigma``: the noise of all tables or of each; ``priors``: public tables
    (probabilities) aligned with ``noisy``, or None; ``views``: column -> (parent column, code
    map) when a column is a public function of another (:func:`reconcile`)."""
    sigmas = [float(sigma)] * len(noisy) if np.isscalar(sigma) else list(sigma)  # type: ignore[arg-type]
    sums = np.array([float(y.sum()) for y in noisy])
    var = np.array([s**2 * y.size for y, s in zip(noisy, sigmas, strict=True)])
    total = max(float(np.sum(sums / var) / np.sum(1 / var)), 1.0)
    shrunk = [
        _shrink(y, s**2, None if p is None else p * total)
        for y, s, p in zip(noisy, sigmas, priors, strict=True)
    ]
    means: list[np.ndarray] = []
    variances: list[float] = []
    for col in range(d):
        estimates, weights = [], []
        for y, table, s in zip(shrunk, tables, sigmas, strict=True):
            if col not in table:
                continue
            axis = tuple(a for a, c in enumerate(table) if c != col)
            other = int(np.prod([y.shape[a] for a in axis])) if axis else 1
            estimates.append(y.sum(axis=axis) if axis else y)
            weights.append(1.0 / (other * s**2))
        means.append(np.average(np.stack(estimates), axis=0, weights=weights))
        variances.append(1.0 / float(np.sum(weights)))
    for view, (parent, mapping) in (views or {}).items():
        means[parent], means[view] = reconcile(
            means[parent], variances[parent], means[view], variances[view], mapping
        )
    one = [project_simplex(mean, total) for mean in means]
    for view, (parent, mapping) in (views or {}).items():  # exact: the view of the parent
        one[view] = np.bincount(mapping, weights=one[parent], minlength=len(one[view]))
    two: list[np.ndarray] = []
    for y, table in zip(shrunk, tables, strict=True):
        if len(table) != 2:
            continue
        i, j = table
        two.append(rake_table(project_simplex(y, total), one[i], one[j]))
    return one, two


class JointModel:
    """Model of the coded columns: ``one`` one-way tables, ``two`` two-way tables of ``pairs``;
    ancestral sampling along ``edges`` (a forest of (parent, child) pairs, each a measured pair
    in either order) and pool weights raked to every table (post-processing)."""

    def __init__(
        self,
        one: list[np.ndarray],
        two: list[np.ndarray],
        pairs: list[tuple[int, int]],
        edges: list[tuple[int, int]],
    ) -> None:
        self.one = one
        self.two = two
        self.pairs = pairs
        self.edges = edges

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` coded trips drawn along the tree (roots from their one-way tables)."""
        d = len(self.one)
        out = np.full((size, d), -1, dtype=np.int64)
        children = {child for _, child in self.edges}
        for col in range(d):
            if col not in children:
                p = self.one[col] / max(self.one[col].sum(), 1e-12)
                out[:, col] = _draw(p[None, :], np.zeros(size, dtype=np.int64), rng)
        done = set(range(d)) - children
        pending = list(self.edges)
        while pending:
            ready = [e for e in pending if e[0] in done]
            if not ready:  # pragma: no cover - edges always form a forest rooted at non-children
                raise AssertionError("edges do not form a tree")
            parent, child = ready[0]
            pending.remove(ready[0])
            out[:, child] = _draw(self._conditional(parent, child), out[:, parent], rng)
            done.add(child)
        return out

    def _table(self, a: int, b: int) -> np.ndarray:
        if (a, b) in self.pairs:
            return self.two[self.pairs.index((a, b))]
        return self.two[self.pairs.index((b, a))].T

    def _conditional(self, parent: int, child: int) -> np.ndarray:
        """P(child | parent) rows (uniform where the parent value has no mass)."""
        table = self._table(parent, child)
        rows = table.sum(1, keepdims=True)
        n = table.shape[1]
        return np.where(rows > 0, table / np.maximum(rows, 1e-300), 1.0 / n)

    def weights(self, pool: np.ndarray, start: np.ndarray) -> np.ndarray:
        """Raking weights of the coded ``pool`` rows (from ``start``) whose weighted one-way and
        two-way tables match the model's."""
        targets: list[tuple[np.ndarray, np.ndarray]] = []
        for col, table in enumerate(self.one):
            targets.append((pool[:, col], table.ravel()))
        for (a, b), table in zip(self.pairs, self.two, strict=True):
            targets.append((pool[:, a] * table.shape[1] + pool[:, b], table.ravel()))
        w = start.astype(float).copy()
        for _ in range(RAKE_ITERATIONS):
            change = 0.0
            for cell, target in targets:
                current = np.bincount(cell, weights=w, minlength=target.size)
                goal = target / max(target.sum(), 1e-12) * current.sum()
                factor = np.where(current > 0, goal / np.maximum(current, 1e-300), 1.0)
                change = max(change, float(np.abs(factor[current > 0] - 1).max(initial=0.0)))
                w *= factor[cell]
            if change < 1e-3:
                break
        return w

    def mutual_information(self) -> np.ndarray:
        """Pairwise mutual information of the estimated two-way tables (0 for unmeasured pairs)."""
        d = len(self.one)
        mi = np.zeros((d, d))
        for (a, b), table in zip(self.pairs, self.two, strict=True):
            joint = table / max(table.sum(), 1e-12)
            pa, pb = joint.sum(1, keepdims=True), joint.sum(0, keepdims=True)
            with np.errstate(divide="ignore", invalid="ignore"):
                terms = np.where(joint > 0, joint * np.log(joint / (pa * pb)), 0.0)
            mi[a, b] = mi[b, a] = float(terms.sum())
        return mi


def maximum_spanning_tree(weights: np.ndarray) -> list[tuple[int, int]]:
    """(parent, child) edges of the maximum spanning forest of a symmetric weight matrix (Prim's
    algorithm from column 0; a negative weight is no edge: the next column starts a new tree)."""
    d = weights.shape[0]
    inside, edges = [0], []
    while len(inside) < d:
        best = max(
            ((i, j) for i in inside for j in range(d) if j not in inside),
            key=lambda e: weights[e[0], e[1]],
        )
        if weights[best] >= 0:
            edges.append(best)
        inside.append(best[1])
    return edges


def _draw(conditional: np.ndarray, parent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row from ``conditional[parent[row]]`` (inverse CDF, grouped by parent)."""
    cdf = np.cumsum(conditional, axis=1)
    cdf /= cdf[:, -1:]
    u = rng.random(len(parent))
    out = np.empty(len(parent), dtype=np.int64)
    order = np.argsort(parent, kind="stable")
    bounds = np.searchsorted(parent[order], np.arange(conditional.shape[0] + 1))
    for value in np.flatnonzero(np.diff(bounds)):
        rows = order[bounds[value] : bounds[value + 1]]
        out[rows] = np.minimum(np.searchsorted(cdf[value], u[rows]), conditional.shape[1] - 1)
    return out


def compression(noisy: np.ndarray, threshold: float) -> np.ndarray:
    """Code map of a column for the two-way tables (MST's domain compression, McKenna et al.
    2021): values whose noisy one-way count reaches ``threshold`` keep a code each, in order; the
    others share the last code. Post-processing of a released table."""
    kept = noisy >= threshold
    out = np.full(len(noisy), int(kept.sum()), dtype=np.int64)
    out[kept] = np.arange(int(kept.sum()))
    return out


def decompress(
    codes: np.ndarray, mapping: np.ndarray, one: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Values of compressed codes: a kept code's value, or for the shared code a value drawn from
    the estimated one-way table ``one`` restricted to the values it holds."""
    counts = np.bincount(mapping)
    inverse = np.zeros(len(counts), dtype=np.int64)
    inverse[mapping] = np.arange(len(mapping))  # exact for the codes held by one value
    out = inverse[codes]
    shared = counts[codes] > 1
    if shared.any():
        rare = np.flatnonzero(counts[mapping] > 1)
        p = np.maximum(one[rare].astype(float), 0.0)
        p = p / p.sum() if p.sum() > 0 else np.full(len(rare), 1.0 / len(rare))
        out[shared] = rare[rng.choice(len(rare), size=int(shared.sum()), p=p)]
    return out
