"""Private one- and two-way marginals of trips over PUBLIC domains (issue 28; McKenna, Miklau and
Sheldon 2021, "Winning the NIST Contest", MST: noisy 1-way and tree 2-way marginals).

Every column the joint model reads is mapped to codes 0..n-1 by a per-value rule on a public
domain (:class:`Discretiser`): a categorical column by its schema values, a numeric column by
bins that are public -- the quantiles of the PUBLIC trips when there are some, else a fixed grid
over the schema range (integers up to 8, then half octaves). No domain is read off the private
data, so every cell, zero or not, is released: no stability threshold.

The measurement (:func:`measure`): each individual's trips are bounded to ``k`` of them, spread
over its day (the ranks ``floor((2j + 1) n / 2k)``, ``j < k``, of its ``n`` trips ordered by the
order column: a per-individual rule), and counted in every measured table: the one-way table of each
column and the two-way table of each chosen pair. One individual changes each table by at most
``k`` in L2 norm (all its trips in one cell), so the concatenated vector of ``m`` tables (table
``t`` released as ``w_t`` x counts) has L2 sensitivity ``k sqrt(sum w_t^2)`` (``k sqrt(m)``
unweighted); when table ``t`` counts at most ``c_t`` trips of an individual per cell (with public
trips, Wilson et al. 2020), ``sqrt(sum w_t^2 (floor(k / c_t) c_t^2 + (k mod c_t)^2))``
(:func:`l2_sensitivity`; ``sqrt(k sum w_t^2)`` at ``c_t = 1``). It gets ONE discrete Gaussian
(Canonne, Kamath and Steinke 2020) whose sigma is calibrated by
:class:`~synth.privacy.DiscreteGaussian` (vector zCDP bound, Balle and Wang 2018's analytic
calibration as the start) for the (epsilon, delta) share; zCDP ``rho = sensitivity^2 /
(2 sigma^2)`` is stated beside it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from archetypes.reading import order_key
from archetypes.schema import TripSchema
from synth.errors import ConfigError, InputError
from synth.privacy import DiscreteGaussian, LedgerBranch, SecureNoise

__all__ = [
    "Discretiser",
    "Measurement",
    "calibrated_gaussian",
    "capped_counts",
    "cell_square_bound",
    "l2_sensitivity",
    "measure",
    "public_grid",
    "spread_individuals",
    "table_cells",
]

#: at most this many public-quantile bins per numeric column
MAX_BINS = 32


def public_grid(lo: int, hi: int, integers: int = 9) -> np.ndarray:
    """Lower bin edges over ``[lo, hi]``: every integer up to ``integers - 1`` (default 8), then
    half octaves (mirrored for negatives); a fixed public rule. Every edge of the default grid is
    an edge of a grid with more ``integers``."""
    top = max(abs(lo), abs(hi), 1)
    steps = np.rint(2.0 ** (np.arange(6, 2 * math.log2(top) + 2) / 2)).astype(np.int64)
    positive = np.unique(np.concatenate([np.arange(0, integers + 1), steps]))
    edges = np.unique(np.concatenate([-positive[::-1] + 1, positive]))
    edges = edges[(edges > lo) & (edges <= hi)]
    return np.concatenate([[lo], edges]).astype(np.int64)


#: ``fine`` (the joint option ``fine_bins``, without public trips): a numeric column's own bins
#: hold every integer below 32 (its one-way table), its coarse view the default grid (its two-way
#: tables). Consumers read small integers (miles, dollars) as categories: Chicago's 2013 trips
#: re-binned on the default grid and drawn uniformly within their bins score 982 against
#: themselves, on this grid 995 (2014-15: 982, 996)
FINE_INTEGERS = 32

#: a group column with at most this many values also gets a coarse view (its own model column,
#: a function of the group's code: measured cheaply, never sampled apart from the group)
VIEW_VALUES = 32


@dataclass
class Discretiser:
    """Per-value codes of the model's columns on public domains (see the module docstring).

    ``columns`` are the trip columns; the MODEL columns (``model``, ``sizes``) are those columns,
    except that the columns of a schema :class:`~archetypes.schema.Group` are one model column
    (named ``"a/b/c"``, coded over the group's public combinations), followed by a view of each
    of its columns with at most :data:`VIEW_VALUES` values (``views``: model position -> (group
    position, code map)): hierarchical, public structure, so that a coarse column is measured on
    its own and a fine one is not measured twice."""

    schema: TripSchema
    columns: list[str]
    edges: dict[str, np.ndarray]
    model: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    combos: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)
    views: dict[int, tuple[int, np.ndarray]] = field(default_factory=dict)

    @classmethod
    def fit(
        cls,
        schema: TripSchema,
        columns: Sequence[str],
        public: pd.DataFrame | None,
        *,
        views: bool = True,
        groups: bool = True,
        coarse: bool = True,
        fine: bool = False,
    ) -> Discretiser:
        """Bins of the numeric columns: public quantiles (``public``) or the public grid; the
        model columns (``views=False``: the groups without their views; ``groups=False``: every
        column on its own, with no view; ``coarse=False``: no coarse view of a plain column;
        ``fine``: the public grid with :data:`FINE_INTEGERS`, the default grid its coarse view)."""
        edges: dict[str, np.ndarray] = {}
        for column in columns:
            if column not in schema:
                raise ConfigError(
                    f"joint: column '{column}' has no public domain: add it to the schema "
                    "(--schema, a categorical values list or a numeric min/max)"
                )
            col = schema[column]
            if col.kind == "id":
                raise ConfigError(f"joint: column '{column}' is an id column, not a trip attribute")
            if col.kind != "numeric":
                continue
            assert col.minimum is not None and col.maximum is not None
            lo, hi = int(col.minimum), int(col.maximum)
            if public is not None:
                values = public[column].to_numpy(dtype=float)
                q = np.quantile(values, np.linspace(0, 1, MAX_BINS + 1)[1:-1])
                inner = np.unique(np.floor(q).astype(np.int64) + 1)
                edges[column] = np.concatenate([[lo], inner[(inner > lo) & (inner <= hi)]])
            else:
                edges[column] = public_grid(lo, hi, FINE_INTEGERS if fine else 9)
        out = cls(schema, list(columns), edges)
        out._model(views, groups, coarse)
        return out

    def _model(self, views: bool, use_groups: bool, coarse: bool = True) -> None:
        """The model columns (groups whose columns are all modelled become one, plus views)."""
        groups = [
            g for g in self.schema.groups if use_groups and set(g.columns) <= set(self.columns)
        ]
        grouped = {c: g for g in groups for c in g.columns}
        for column in self.columns:
            group = grouped.get(column)
            if group is None:
                self.model.append(column)
                self.sizes.append(
                    len(self.edges[column])
                    if column in self.edges
                    else len(self.schema.values(column))
                )
                if views and use_groups and coarse:
                    self._coarse_view(column)
                continue
            if column != group.columns[0]:
                continue
            cols = [self.schema[c] for c in group.columns]
            combos = list(group.values)
            for first in cols[0].values:  # the fallback of each first value
                fallback = (first, *(c.other for c in cols[1:]))
                if fallback not in group.values:
                    combos.append(fallback)
            at = len(self.model)
            self.model.append("/".join(group.columns))
            self.sizes.append(len(combos))
            self.combos[at] = combos
            for j, col in enumerate(cols):
                if views and len(col.values) <= VIEW_VALUES:
                    index = {v: i for i, v in enumerate(col.values)}
                    self.views[len(self.model)] = (at, np.array([index[c[j]] for c in combos]))
                    self.model.append(col.name)
                    self.sizes.append(len(col.values))

    @property
    def coarse(self) -> bool:
        """Whether a plain column has a coarse view (:meth:`_coarse_view`)."""
        return any(parent not in self.combos for parent, _ in self.views.values())

    def _coarse_view(self, column: str) -> None:
        """A view of a plain column over its schema's public ``coarse`` labels (at most
        :data:`VIEW_VALUES` of them, fewer than its values), or of a numeric column over the
        default grid when its own bins are finer, named ``"column:coarse"``."""
        if column in self.edges:
            col, fine = self.schema[column], self.edges[column]
            assert col.minimum is not None and col.maximum is not None
            grid = public_grid(int(col.minimum), int(col.maximum))
            if len(grid) < len(fine):  # every grid edge is a fine edge
                mapping = np.searchsorted(grid, fine, side="right") - 1
                self.views[len(self.model)] = (len(self.model) - 1, mapping)
                self.model.append(f"{column}:coarse")
                self.sizes.append(len(grid))
            return
        coarse = self.schema[column].coarse if column not in self.edges else ()
        labels = list(dict.fromkeys(coarse))
        if not coarse or len(labels) > VIEW_VALUES or len(labels) >= len(coarse):
            return
        index = {v: i for i, v in enumerate(labels)}
        self.views[len(self.model)] = (len(self.model) - 1, np.array([index[v] for v in coarse]))
        self.model.append(f"{column}:coarse")
        self.sizes.append(len(labels))

    def size(self, column: str) -> int:
        """The number of codes of a model column."""
        return self.sizes[self.model.index(column)]

    def positions(self) -> dict[str, int]:
        """The model column standing for each trip column in the two-way tables: itself, a
        grouped column its group's coarsest view, a plain column with a coarse view that view."""
        position = {c: i for i, c in enumerate(self.model) if c in self.columns}
        for j, name in enumerate(self.model):  # a grouped column: its group's coarsest view
            for c in name.split("/"):
                position.setdefault(c, j)
        for view, (group, _) in sorted(self.views.items(), key=lambda v: -self.sizes[v[0]]):
            for c in self.model[group].split("/"):  # a plain column: its coarse view
                position[c] = view
        return position

    def chain(self, tables: Sequence[Sequence[str]], keys: Sequence[str]) -> list[tuple[int, int]]:
        """The (parent, child) forest over the model columns of a configuration's two-way
        ``tables`` (key columns first, in order): a grouped column stands as its group's coarsest
        view, and each view hangs under its group."""
        position = self.positions()
        edges = []
        for table in tables:
            if len(table) == 2 and table[0] in position and table[1] in position:
                edges.append((position[table[1]], position[table[0]]))
        ordered = [c for c in dict.fromkeys(keys) if c in position]
        if len(ordered) >= 2:
            edges.insert(0, (position[ordered[0]], position[ordered[1]]))
        edges += [(parent, view) for view, (parent, _) in self.views.items()]
        seen = {edges[0][0]} if edges else {0}
        tree: list[tuple[int, int]] = []
        grown = True
        while grown:  # keep a forest: a child once, its parent already placed
            grown = False
            for parent, child in edges:
                if parent != child and child not in seen and parent in seen:
                    tree.append((parent, child))
                    seen.add(child)
                    grown = True
        return tree

    def encode(self, trips: pd.DataFrame) -> np.ndarray:
        """Codes ``(n_trips, n_model_columns)`` of conformed trips (a per-value rule)."""
        out = np.empty((len(trips), len(self.model)), dtype=np.int64)
        for j, column in enumerate(self.model):
            if j in self.views:
                parent, mapping = self.views[j]
                out[:, j] = mapping[out[:, parent]]
            elif j in self.combos:
                out[:, j] = self._combo_codes(trips, j)
            elif column in self.edges:
                values = trips[column].to_numpy(dtype=np.int64)
                out[:, j] = np.searchsorted(self.edges[column], values, side="right") - 1
            else:
                index = pd.Index(list(self.schema.values(column)))
                codes = index.get_indexer(trips[column].to_numpy())
                if (codes < 0).any():
                    row = int(np.flatnonzero(codes < 0)[0])
                    raise InputError(f"column '{column}', row {row + 1}: value outside the domain")
                out[:, j] = codes
        return out

    def _combo_codes(self, trips: pd.DataFrame, j: int) -> np.ndarray:
        """Codes of a group's combinations; one outside the list: its first value's fallback."""
        names = self.model[j].split("/")
        combos = self.combos[j]
        index = pd.MultiIndex.from_tuples(combos)
        codes = index.get_indexer(pd.MultiIndex.from_arrays([trips[c].to_numpy() for c in names]))
        if (codes < 0).any():
            others = tuple(self.schema[n].other for n in names[1:])
            fallback = {c[0]: i for i, c in enumerate(combos) if c[1:] == others}
            values = trips[names[0]].to_numpy()
            for row in np.flatnonzero(codes < 0):
                if values[row] not in fallback:  # trips are conformed first: never
                    raise InputError(f"column '{names[0]}', row {row + 1}: outside the domain")
                codes[row] = fallback[values[row]]
        return codes

    def decode(
        self, codes: np.ndarray, rng: np.random.Generator, public: pd.DataFrame | None
    ) -> pd.DataFrame:
        """Values of model codes: categorical values (a group's combination split into its
        columns); a numeric bin becomes a public value drawn from the bin (``public``), else a
        uniform integer in it."""
        out: dict[str, Any] = {}
        for j, column in enumerate(self.model):
            code = codes[:, j]
            if j in self.views:
                continue
            if j in self.combos:
                combos = np.asarray(self.combos[j], dtype=object)
                for i, name in enumerate(column.split("/")):
                    out[name] = pd.Series(combos[code, i]).infer_objects()
                continue
            if column not in self.edges:
                values = np.asarray(self.schema.values(column), dtype=object)
                out[column] = pd.Series(values[code]).infer_objects()
                continue
            edges = self.edges[column]
            top = int(self.schema[column].maximum or 0)
            lo, hi = edges[code], np.append(edges[1:] - 1, top)[code]
            value = lo + np.floor(rng.random(len(code)) * (hi - lo + 1)).astype(np.int64)
            if public is not None:
                seen = np.sort(public[column].to_numpy(dtype=np.int64))
                bins = np.searchsorted(edges, seen, side="right") - 1
                start = np.searchsorted(bins, code, side="left")
                count = np.searchsorted(bins, code, side="right") - start
                pick = start + np.floor(rng.random(len(code)) * count).astype(np.int64)
                value = np.where(count > 0, seen[np.minimum(pick, len(seen) - 1)], value)
            out[column] = value
        return pd.DataFrame(out)[self.columns]


def spread_individuals(
    trips: pd.DataFrame, id_column: str, k: int, order_column: str | None
) -> pd.DataFrame:
    """At most ``k`` trips per individual: of its ``n`` trips (by ``order_column``, ties by a hash
    of each trip's own values, never the input's row order) the ranks ``floor((2j + 1) n / 2k)``,
    ``j < k`` -- spread over the day, not the first ``k`` (a rule on the individual's own trips).
    The order is read value by value (:func:`archetypes.reading.order_key`) and rows are kept by
    position, never by index label (a repeated label would give every row of that label back)."""
    # ties (and every trip without an order column) by a hash of the trip's own values: never the
    # input's row order, and no bias towards any value (a lexical order of the values would keep
    # the same-hour trips of the smallest line ids)
    own = [c for c in trips.columns if c != id_column]
    keys = [pd.util.hash_pandas_object(trips[own].astype(str), index=False).to_numpy()]
    if order_column is not None:
        keys.insert(0, order_key(trips[order_column], order_column, "trips"))
    position = np.lexsort(tuple(reversed(keys)))
    group = trips.iloc[position].groupby(id_column, sort=False)
    r = group.cumcount().to_numpy(dtype=np.int64)
    n = group[id_column].transform("size").to_numpy(dtype=np.int64)
    j = np.maximum(-((n - 2 * r * k) // (2 * n)), 0)  # the first j whose rank is >= r
    keep = (n <= k) | ((j < k) & (((2 * j + 1) * n) // (2 * k) == r))
    return trips.iloc[np.sort(position[keep])]


def cell_square_bound(k: int, cap: int | None) -> int:
    """The largest sum of squares of one individual's counts in one table when it has at most
    ``k`` trips and each cell counts at most ``cap`` of them (None: no cap): ``floor(k / c)``
    cells of ``c`` and one of the rest, ``c = min(cap, k)`` (the sum of squares of counts
    summing to ``k``, each at most ``c``, is largest when they are as unequal as allowed); ``k^2``
    uncapped, ``k`` at cap 1 (at most ``k`` distinct cells of one each)."""
    c = k if cap is None else max(1, min(int(cap), k))
    return (k // c) * c * c + (k % c) ** 2


def l2_sensitivity(k: int, weights: Sequence[int], caps: Sequence[int | None]) -> float:
    """L2 sensitivity of the weighted tables (table ``t`` released as ``w_t`` x counts) when an
    individual adds at most ``k`` trips and at most ``caps[t]`` to each cell of table ``t``:
    ``sqrt(sum_t w_t^2 cell_square_bound(k, cap_t))`` (each table's worst case at once: one
    individual's trips can fill every table's worst case together). Uncapped, ``k sqrt(sum w^2)``.
    The per-cell bound is Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo and Gipson 2020's
    ("Differentially private SQL with bounded user contribution") L-infinity bound per partition
    next to their L0 bound (here ``k`` trips, so at most ``k`` cells)."""
    return math.sqrt(
        sum(int(w) ** 2 * cell_square_bound(k, c) for w, c in zip(weights, caps, strict=True))
    )


def table_cells(
    codes: np.ndarray, table: Sequence[int], sizes: Sequence[int]
) -> tuple[np.ndarray, tuple[int, ...]]:
    """Each coded trip's cell of ``table`` (columns of ``codes``, domain ``sizes``) as one flat
    index, and the table's shape."""
    shape = tuple(int(sizes[i]) for i in table)
    return np.ravel_multi_index(tuple(codes[:, i] for i in table), shape), shape


def capped_counts(
    cell: np.ndarray, cells: int, ids: np.ndarray | None, cap: int | None
) -> np.ndarray:
    """Counts of the coded ``cell`` of each trip, each individual (``ids``, aligned with
    ``cell``) counting at most ``cap`` trips per cell (None: every trip)."""
    if cap is None:
        return np.bincount(cell, minlength=cells).astype(np.int64)
    if ids is None:
        raise ConfigError("joint: a per-cell cap needs each trip's individual")
    key = ids.astype(np.int64) * cells + cell
    unique, counts = np.unique(key, return_counts=True)
    kept = np.minimum(counts, int(cap))
    return np.bincount(unique % cells, weights=kept, minlength=cells).astype(np.int64)


@functools.lru_cache(maxsize=64)
def calibrated_gaussian(epsilon: float, delta: float, sensitivity: float) -> DiscreteGaussian:
    """The calibrated vector discrete Gaussian (calibration cached: it is a pure function)."""
    return DiscreteGaussian(
        epsilon=epsilon, delta=delta, sensitivity=sensitivity, single_coordinate=False
    )


@dataclass
class Measurement:
    """The noisy tables (unclamped integers) and what was measured."""

    tables: list[tuple[int, ...]]  # column positions of each table
    shapes: list[tuple[int, ...]]
    noisy: list[np.ndarray]  # as released: weight x counts + noise
    mechanism: DiscreteGaussian
    k: int
    weights: list[int] = field(default_factory=list)
    caps: list[int | None] = field(default_factory=list)  # per table: at most this per cell

    @property
    def estimates(self) -> list[np.ndarray]:
        """Unbiased count estimates: each released table over its weight."""
        return [y / w for y, w in zip(self.noisy, self.weights, strict=True)]

    @property
    def sigmas(self) -> list[float]:
        """The noise of each estimate: sigma over the table's weight."""
        return [self.mechanism.sigma / w for w in self.weights]

    def to_dict(self, columns: Sequence[str]) -> dict[str, Any]:
        """Manifest form: every table, the unit's bound, sensitivity, sigma and rho."""
        mech = self.mechanism
        return {
            "tables": [[columns[i] for i in t] for t in self.tables],
            "cells": [int(np.prod(s)) for s in self.shapes],
            "weights": list(self.weights),
            "max_records_per_individual": self.k,
            "per_cell_caps": list(self.caps) if any(c is not None for c in self.caps) else None,
            "sensitivity_l2": mech.sensitivity,
            "sigma": mech.sigma,
            "rho": mech.sensitivity**2 / (2 * mech.sigma**2),
            "epsilon": mech.epsilon,
            "delta": mech.delta,
        }


def measure(
    codes: np.ndarray,
    sizes: Sequence[int],
    tables: Sequence[tuple[int, ...]],
    *,
    k: int,
    epsilon: float,
    delta: float,
    noise: SecureNoise,
    ledger: LedgerBranch,
    unit: str,
    names: Sequence[str],
    what: str = "",
    weights: Sequence[int] | None = None,
    ids: np.ndarray | None = None,
    caps: Sequence[int | None] | None = None,
) -> Measurement:
    """Count ``codes`` (the bounded private trips, at most ``k`` per individual) in every table and
    release the concatenation with one discrete Gaussian (spend recorded first). ``weights``
    (positive integers, default 1): table ``t`` is released as ``w_t`` x counts + noise, so its
    estimate has noise ``sigma / w_t``. ``caps`` (default none): table ``t`` counts at most
    ``caps[t]`` trips of an individual (``ids``, aligned with ``codes``) per cell. The L2
    sensitivity is :func:`l2_sensitivity`: ``k sqrt(sum w_t^2)`` uncapped (one individual's ``k``
    trips in one cell of every table), ``sqrt(k sum w_t^2)`` at cap 1 (``k`` cells of one)."""
    tables = [tuple(t) for t in tables]
    shapes = [tuple(int(sizes[i]) for i in t) for t in tables]
    w = [1] * len(tables) if weights is None else [int(x) for x in weights]
    if len(w) != len(tables) or any(x < 1 for x in w):
        raise ConfigError("joint: one positive integer weight per table")
    cap: list[int | None] = [None] * len(tables) if caps is None else list(caps)
    if len(cap) != len(tables) or any(c is not None and int(c) < 1 for c in cap):
        raise ConfigError("joint: one per-cell cap (a positive integer or None) per table")
    exact = []
    for table, shape, wt, c in zip(tables, shapes, w, cap, strict=True):
        cell, _ = table_cells(codes, table, sizes)
        exact.append(wt * capped_counts(cell, int(np.prod(shape)), ids, c))
    mechanism = calibrated_gaussian(epsilon, delta, l2_sensitivity(k, w, cap))
    raw = mechanism.release(
        np.concatenate(exact),
        noise=noise,
        ledger=ledger,
        label=f"joint trip marginals ({what}{len(tables)} tables)",
        unit=unit,
        note=_note(tables, names, k, w, cap, unit),
    )
    parts = np.split(np.asarray(raw, dtype=np.int64), np.cumsum([len(e) for e in exact])[:-1])
    noisy = [p.reshape(s) for p, s in zip(parts, shapes, strict=True)]
    return Measurement(tables, shapes, noisy, mechanism, k, w, cap)


def _note(
    tables: list[tuple[int, ...]],
    names: Sequence[str],
    k: int,
    w: list[int],
    cap: list[int | None],
    unit: str,
) -> str:
    """The ledger's note of a measurement: what is counted and its L2 sensitivity."""
    m = len(tables)
    listed = "; ".join(" x ".join(names[i] for i in t) for t in tables)
    norm = sum(x * x for x in w)
    if all(c is None for c in cap):
        scale = f"sqrt({m})" if norm == m else f"sqrt({norm}) (weights {', '.join(map(str, w))})"
        return (
            f"trip counts over public domains, at most {k} trips per {unit}, in {m} tables "
            f"({listed}): L2 sensitivity {k} {scale}; zCDP rho = sensitivity^2 / (2 sigma^2)"
        )
    squares = " + ".join(f"{x}^2 x {cell_square_bound(k, c)}" for x, c in zip(w, cap, strict=True))
    caps = ", ".join("-" if c is None else str(c) for c in cap)
    return (
        f"trip counts over public domains, at most {k} trips per {unit} and at most (per table: "
        f"{caps}) per {unit} and cell, in {m} tables ({listed}): L2 sensitivity "
        f"sqrt({squares}) = {l2_sensitivity(k, w, cap):.6g}; zCDP rho = sensitivity^2 / (2 sigma^2)"
    )
