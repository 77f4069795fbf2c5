"""Sampling from a fitted :class:`~archetypes.synthesizer.ArchetypeSynthesizer`: post-processing
of its noisy histograms with public data only (GooseDP "Step 2").

:class:`ArchetypeSampling` holds the synthesizer's sampling methods (strata, draws, raking); the
numpy generators here are for non-private randomness only.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from archetypes.column_completion import ColumnCompleter
from archetypes.model import ArchetypeModel, majority
from archetypes.schema import TripSchema
from synth.errors import ConfigError
from synth.generator import Generator
from synth.params import spell

__all__ = [
    "ArchetypeSampling",
    "balanced_choice",
    "rake",
    "sampling_generator",
    "systematic_choice",
]

#: synthetic individuals drawn per output individual before the raking resample (marginals only),
#: at most POOL_MAX in all: the pool only has to cover the public support, the resample (with
#: replacement) may then be larger than the pool
POOL_FACTOR = 4
POOL_MAX = 200_000
#: raking sweeps at most (noisy margins need not be consistent, so IPF may not converge exactly)
RAKING_ITERATIONS = 30
#: spawn keys of the numpy streams derived from an int ``random_state`` (the noise uses the seed
#: itself): the public model's, and the sampler's
PUBLIC_STREAM = 1
SAMPLING_STREAM = 2


def sampling_generator(random_state: int | None, stream: int) -> np.random.Generator:
    """A numpy generator for non-private randomness: fresh OS entropy when ``random_state`` is
    None, else the ``stream``-th child of the seed (never the noise's own stream)."""
    if random_state is None:
        return np.random.default_rng(int.from_bytes(os.urandom(16), "big"))
    return np.random.default_rng(np.random.SeedSequence(int(random_state), spawn_key=(stream,)))


def rake(seed: np.ndarray, rows: np.ndarray, cols: np.ndarray, iterations: int = 200) -> np.ndarray:
    """Iterative proportional fitting of ``seed`` (strictly positive) to row and column totals of
    equal sum."""
    table = seed.astype(float).copy()
    for _ in range(iterations):
        table *= (rows / np.maximum(table.sum(axis=1), 1e-300))[:, None]
        table *= (cols / np.maximum(table.sum(axis=0), 1e-300))[None, :]
        if np.allclose(table.sum(axis=1), rows, rtol=1e-9, atol=1e-9):
            break
    return table


def balanced_choice(pool: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws from ``pool``, each element ``size // len(pool)`` times, the remainder
    without replacement, shuffled: the same expectation as i.i.d. draws with less sampling noise."""
    copies, rest = divmod(size, len(pool))
    out = np.concatenate([np.tile(pool, copies), rng.choice(pool, size=rest, replace=False)])
    return rng.permutation(out)


def systematic_choice(weights: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` indices drawn with probability proportional to ``weights`` by systematic
    resampling (one uniform offset; each index appears floor or ceil of its expected count)."""
    if size == 0:
        return np.array([], dtype=np.int64)
    cumulative = np.cumsum(weights / weights.sum())
    points = (rng.random() + np.arange(size)) / size
    chosen = np.minimum(np.searchsorted(cumulative, points, side="right"), len(weights) - 1)
    return rng.permutation(chosen)


class ArchetypeSampling(Generator):
    """The sampling half of :class:`~archetypes.synthesizer.ArchetypeSynthesizer` (post-processing
    of the fitted state only)."""

    # parameters and fitted state, set by the synthesizer
    id_column: str
    category_column: str
    order_column: str | None
    archetypes: int
    n_records: int | None
    marginal_bins: int
    marginals_by_archetype: bool
    schema_: TripSchema
    model_: ArchetypeModel
    completer_: ColumnCompleter
    category_values_: tuple[Any, ...]
    marginal_edges_: dict[str, np.ndarray | None]
    noisy_archetype_counts_: np.ndarray
    noisy_category_counts_: np.ndarray
    noisy_marginals_: dict[str, np.ndarray]
    n_individuals_: float
    strata_: np.ndarray
    rng_: np.random.Generator
    completion_fallbacks_: object

    def _order(self, frame: pd.DataFrame) -> str | None:
        return self.order_column if self.order_column in frame.columns else None

    def _codes(self, frame: pd.DataFrame, column: str) -> np.ndarray:
        """Index of each value in the category domain."""
        index = pd.Index(list(self.schema_.values(column)))
        return np.asarray(index.get_indexer(frame[column].to_numpy()), dtype=np.int64)

    def _edges(self, public: pd.DataFrame, column: str) -> np.ndarray | None:
        """Bin edges of a numeric marginal column, from PUBLIC values (None: categorical)."""
        if self.schema_[column].kind != "numeric":
            return None
        values = np.unique(public[column].to_numpy(dtype=float))
        if len(values) > self.marginal_bins:
            qs = np.linspace(0, 1, self.marginal_bins + 1)[1:-1]
            values = np.unique(np.quantile(public[column].to_numpy(dtype=float), qs))
            return values
        return values[1:]

    def _n_cells(self, column: str) -> int:
        edges = self.marginal_edges_[column]
        return len(self.schema_.values(column)) if edges is None else len(edges) + 1

    def _n_released(self, column: str) -> int:
        """Cells of a marginal's released histogram (archetype x value when per archetype)."""
        return self._n_cells(column) * (self.archetypes if self.marginals_by_archetype else 1)

    def _bin(self, frame: pd.DataFrame, column: str) -> np.ndarray:
        edges = self.marginal_edges_[column]
        if edges is None:
            return self._codes(frame, column)
        return np.searchsorted(edges, frame[column].to_numpy(dtype=float), side="right")

    @staticmethod
    def _total(releases: list[tuple[np.ndarray, float]]) -> float:
        """Inverse-variance weighted mean of the unclamped noisy totals (post-processing)."""
        weights = [1.0 / (len(raw) * sigma**2) for raw, sigma in releases]
        total = sum(w * float(np.sum(raw)) for w, (raw, _) in zip(weights, releases, strict=True))
        return max(total / sum(weights), 0.0)

    def _strata(self) -> np.ndarray:
        """Expected synthetic individuals per (archetype, category): the public table of
        individuals, raked to the two clamped noisy histograms scaled to the estimated total."""
        k, c = self.archetypes, len(self.category_values_)
        ind = self.model_.individuals_
        known = ind["category"].to_numpy() >= 0
        public = np.zeros((k, c))
        np.add.at(
            public, (ind["archetype"].to_numpy()[known], ind["category"].to_numpy()[known]), 1
        )
        rows = self.noisy_archetype_counts_.astype(float)
        cols = self.noisy_category_counts_.astype(float)
        if rows.sum() == 0:
            rows = public.sum(axis=1) + 1e-9
        if cols.sum() == 0:
            cols = public.sum(axis=0) + 1e-9
        total = self.n_individuals_
        rows, cols = rows / rows.sum() * total, cols / cols.sum() * total
        seed = public + 1e-6 * (public.sum(axis=1, keepdims=True) + 1) / c
        return rake(seed, rows, cols)

    # -- sampling ----------------------------------------------------------------------------------
    def sample(self, n_records: int | None = None) -> pd.DataFrame:
        """Synthetic trips (post-processing only): id, key columns, category, completed columns.

        ``n_records`` (default: the constructor's) fixes the number of trips: the strata are scaled
        to it, individuals are shuffled and the trips cut at ``n_records``."""
        self._check_fitted()
        n_records = self.n_records if n_records is None else n_records
        if n_records is not None and (
            isinstance(n_records, bool) or not isinstance(n_records, int) or n_records < 0
        ):
            raise ConfigError(
                f"{spell('n_records')} must be a non-negative integer, got {n_records!r}"
            )
        strata = self.strata_
        if strata.sum() <= 0 and n_records:
            strata = np.ones_like(strata)
        mean_trips = float((strata * self._mean_trips()).sum() / max(strata.sum(), 1e-12))
        wanted = strata.sum() if n_records is None else 1.05 * n_records / max(mean_trips, 1e-12)
        out = self._individuals(strata / max(strata.sum(), 1e-12), wanted)
        while n_records is not None and len(out) < n_records:
            wanted *= 1.25
            out = self._individuals(strata / max(strata.sum(), 1e-12), wanted)
        if n_records is not None:
            out = out.iloc[:n_records]
        order = [self.id_column]
        if self.order_column is not None and self.order_column in out.columns:
            order.append(self.order_column)
        out = out.sort_values(order, kind="stable").reset_index(drop=True)
        self.schema_.validate(out, source="synthetic trips")
        return out

    def _individuals(self, shares: np.ndarray, wanted: float) -> pd.DataFrame:
        """About ``wanted`` synthetic individuals (shuffled, ids 0..), completed; with marginals,
        resampled from a larger pool by raking weights."""
        if not self.noisy_marginals_:
            out, _ = self._draw(shares * wanted)
            out, self.completion_fallbacks_ = self.completer_.complete(out, self.rng_)
            return out
        pool, archetype = self._draw(shares * min(wanted * POOL_FACTOR, POOL_MAX))
        pool, self.completion_fallbacks_ = self.completer_.complete(pool, self.rng_)
        weights = self._raking_weights(pool, archetype)
        if len(weights) == 0:
            return pool
        count = int(np.floor(wanted + self.rng_.random()))
        chosen = systematic_choice(weights, count, self.rng_)
        ids = pool[self.id_column].to_numpy()
        starts = np.searchsorted(ids, np.arange(len(weights)))
        sizes = np.bincount(ids, minlength=len(weights))
        lengths = sizes[chosen]
        first = np.repeat(starts[chosen] - (np.cumsum(lengths) - lengths), lengths)
        out = pool.iloc[first + np.arange(int(lengths.sum()))].reset_index(drop=True)
        out[self.id_column] = np.repeat(np.arange(count), lengths)
        return out

    def _raking_weights(self, pool: pd.DataFrame, archetype: np.ndarray) -> np.ndarray:
        """Weights of the pool's individuals whose weighted histograms of category and each
        released marginal (one value per individual, as released; per archetype: the (archetype,
        value) cell, ``archetype`` being each pool individual's stratum) match the noisy ones."""
        ids = pool[self.id_column].to_numpy()
        n = int(ids.max()) + 1 if len(ids) else 0
        rng = self.rng_
        margins: list[tuple[np.ndarray, np.ndarray]] = []
        cat = majority(
            ids, self._codes(pool, self.category_column), len(self.category_values_), rng, n
        )
        margins.append((cat, self.noisy_category_counts_.astype(float)))
        for column, noisy in self.noisy_marginals_.items():
            n_cells = self._n_cells(column)
            codes = majority(ids, self._bin(pool, column), n_cells, rng, n)
            if self.marginals_by_archetype:
                codes = np.where(codes >= 0, archetype[:n] * n_cells + codes, -1)
            margins.append((codes, noisy.astype(float)))
        weights = np.ones(n)
        prepared = [(np.flatnonzero(codes >= 0), codes[codes >= 0], t) for codes, t in margins]
        for _ in range(RAKING_ITERATIONS):
            change = 0.0
            for index, codes, target in prepared:
                current = np.bincount(codes, weights=weights[index], minlength=len(target))
                goal = target / max(target.sum(), 1e-12) * current.sum()
                factor = np.where(current > 0, goal / np.maximum(current, 1e-300), 1.0)
                change = max(change, float(np.abs(factor[current > 0] - 1).max(initial=0.0)))
                weights[index] *= factor[codes]
            if change < 1e-4:
                break
        return weights

    def _draw(self, strata: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
        """Individuals per stratum by stochastic rounding; each individual's trip count and its
        trips' key columns (with the category) resampled from the stratum's public individuals.
        Also returns the archetype (stratum) of each synthetic id."""
        rng, model = self.rng_, self.model_
        counts = np.floor(strata + rng.random(strata.shape)).astype(np.int64)
        ind, trips = model.individuals_, model.trips_
        columns = list(dict.fromkeys([*model.key_columns_, self.category_column]))
        ind_arch, ind_cat = ind["archetype"].to_numpy(), ind["category"].to_numpy()
        trip_arch, trip_cat = trips["archetype"].to_numpy(), trips["category"].to_numpy()
        n_trips_public = ind["n_trips"].to_numpy()
        rows: list[np.ndarray] = []
        lengths: list[np.ndarray] = []
        forced_to: list[np.ndarray] = []
        drawn_for: list[np.ndarray] = []
        for a, cat in zip(*np.nonzero(counts), strict=True):
            drawn_for.append(np.full(int(counts[a, cat]), a, dtype=np.int64))
            pool_ind, pool_trip, forced = self._pool(a, cat, ind_arch, ind_cat, trip_arch, trip_cat)
            n_trips = n_trips_public[balanced_choice(pool_ind, int(counts[a, cat]), rng)]
            rows.append(balanced_choice(pool_trip, int(n_trips.sum()), rng))
            lengths.append(n_trips)
            forced_to.append(np.full(int(n_trips.sum()), cat if forced else -1))
        if not rows:
            empty = {col: trips[col].iloc[:0] for col in columns}
            frame = pd.DataFrame({self.id_column: np.array([], dtype=np.int64), **empty})
            return frame, np.array([], dtype=np.int64)
        out = trips[columns].iloc[np.concatenate(rows)].reset_index(drop=True)
        forced_cat = np.concatenate(forced_to)
        if (forced_cat >= 0).any():
            values = np.asarray(self.category_values_, dtype=object)
            column = out[self.category_column].to_numpy(dtype=object).copy()
            column[forced_cat >= 0] = values[forced_cat[forced_cat >= 0]]
            out[self.category_column] = pd.Series(column).astype(trips[self.category_column].dtype)
        n_trips = np.concatenate(lengths)
        # ids in random order, so that cutting at n_records favours no stratum
        ids = rng.permutation(len(n_trips))
        out.insert(0, self.id_column, np.repeat(ids, n_trips))
        archetype = np.empty(len(ids), dtype=np.int64)
        archetype[ids] = np.concatenate(drawn_for)
        return out.sort_values(self.id_column, kind="stable").reset_index(drop=True), archetype

    def _mean_trips(self) -> np.ndarray:
        """Mean public trips per individual of each (archetype, category) stratum, archetype mean
        where the stratum is empty."""
        ind = self.model_.individuals_
        k, c = self.archetypes, len(self.category_values_)
        known = ind["category"].to_numpy() >= 0
        a, cat = ind["archetype"].to_numpy()[known], ind["category"].to_numpy()[known]
        total = np.zeros((k, c))
        num = np.zeros((k, c))
        np.add.at(total, (a, cat), ind["n_trips"].to_numpy()[known])
        np.add.at(num, (a, cat), 1)
        fallback = np.where(
            self.model_.trips_per_individual_ > 0,
            self.model_.trips_per_individual_,
            max(float(ind["n_trips"].mean()), 1.0),
        )
        return np.where(num > 0, total / np.maximum(num, 1), fallback[:, None])

    @staticmethod
    def _pool(
        a: int,
        cat: int,
        ind_arch: np.ndarray,
        ind_cat: np.ndarray,
        trip_arch: np.ndarray,
        trip_cat: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, bool]:
        """Public individuals and trips to draw from for stratum (a, cat), coarser when empty:
        (a, cat), then (any archetype, cat), then (a, any category) with the category forced,
        then everything with the category forced."""
        candidates = (
            ((ind_arch == a) & (ind_cat == cat), (trip_arch == a) & (trip_cat == cat), False),
            (ind_cat == cat, trip_cat == cat, False),
            (ind_arch == a, trip_arch == a, True),
        )
        for ind_mask, trip_mask, forced in candidates:
            if ind_mask.any():
                return np.flatnonzero(ind_mask), np.flatnonzero(trip_mask), forced
        return np.arange(len(ind_arch)), np.arange(len(trip_arch)), True
