"""Archetypes learnt from PUBLIC trips (GooseDP write-up, "Pre-processing: Archetype Generation").

A StandardScaler + scikit-learn GaussianMixture with ``n_archetypes`` components is fitted on the
feature columns of the public trips; each trip gets its most likely component, each individual
(taxi, card) the archetype that most of its trips fall in (ties at random). Per archetype the model
keeps the number of public individuals, their mean trips per individual and the pool of their trips,
whose key columns form the archetype's joint distribution (``joint``). Individuals are further split
by their dominant category (company, mode; ties at random) so that
:class:`~archetypes.synthesizer.ArchetypeSynthesizer` can draw trips for a synthetic individual of
archetype ``a`` and category ``c`` from the public individuals of the same stratum. Nothing here
reads private data; ``assign`` is the per-individual map applied to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd
from sklearn.mixture import GaussianMixture
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from archetypes.reading import order_key
from synth.errors import ConfigError, InputError

__all__ = ["ArchetypeModel", "TieBreaker", "bound_individuals", "majority"]


class TieBreaker(Protocol):
    """A secure source of uniform random permutations (e.g. :class:`synth.privacy.SecureNoise`)."""

    def permutation(self, n: int) -> np.ndarray: ...


def majority(
    groups: np.ndarray,
    values: np.ndarray,
    n_values: int,
    rng: np.random.Generator | TieBreaker,
    n_groups: int | None = None,
) -> np.ndarray:
    """For group codes ``0..n_groups-1`` and value codes ``0..n_values-1`` (same length; negative
    values are ignored), the most frequent value of each group, ties broken uniformly at random;
    -1 for a group without entries.

    ``rng``: a numpy generator (public data) or, for private data, the secure noise source
    (:class:`~synth.privacy.SecureNoise`, whose ``permutation`` ranks the ties)."""
    groups = np.asarray(groups, dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    if n_groups is None:
        n_groups = int(groups.max()) + 1 if len(groups) else 0
    keep = values >= 0
    groups, values = groups[keep], values[keep]
    out = np.full(n_groups, -1, dtype=np.int64)
    if len(groups) == 0:
        return out
    if np.bincount(groups, minlength=n_groups).max() == 1:  # one entry per group: nothing to vote
        out[groups] = values
        return out
    pairs, counts = np.unique(groups * n_values + values, return_counts=True)
    group, value = pairs // n_values, pairs % n_values
    tie = (
        rng.random(len(pairs))
        if isinstance(rng, np.random.Generator)
        else rng.permutation(len(pairs))  # a uniform random rank from the secure source
    )
    # one sort: by group, then count descending, then the uniform tie-break
    order = np.lexsort((tie, -counts, group))
    first = np.ones(len(order), dtype=bool)
    first[1:] = group[order][1:] != group[order][:-1]
    out[group[order][first]] = value[order][first]
    return out


def bound_individuals(
    trips: pd.DataFrame, id_column: str, k: int, order_column: str | None = None
) -> pd.DataFrame:
    """At most ``k`` trips per individual: the first ``k`` by ``order_column`` (input order when
    None, ties by input order). Deterministic, so a retried run bounds the same way. The order is
    read value by value (:func:`archetypes.reading.order_key`: numbers, or times as
    :mod:`synth.times` reads them; missing last), never by the column's type alone. Rows are
    kept by position (in input order), whatever the frame's index."""
    if order_column is None:
        position = np.arange(len(trips))
    else:
        key = order_key(trips[order_column], order_column, "trips")
        position = np.argsort(key, kind="stable")
    ranked = trips.iloc[position]
    keep = ranked.groupby(id_column, sort=False).cumcount().to_numpy() < k
    # by position, never by index label: a frame with a repeated label (pd.concat without
    # ignore_index) would give every row of that label back, k times over per individual
    return trips.iloc[np.sort(position[keep])]


class ArchetypeModel:
    """GMM archetypes of public trips, with per-archetype statistics (GooseDP step 0).

    Parameters are keyword-only and stored as given; ``fit`` learns. ``features`` are numeric
    columns clustered by the mixture (missing values are imputed with the public mean);
    ``key_columns`` (default ``features``) form each archetype's joint distribution;
    ``category_column`` splits individuals by their dominant category. The mixture is fitted on at
    most ``max_fit_rows`` public trips drawn at random (None: all), then labels every trip.
    ``random_state`` seeds the mixture, that draw and the tie-breaking.
    """

    def __init__(
        self,
        *,
        n_archetypes: int = 10,
        features: Sequence[str],
        id_column: str,
        key_columns: Sequence[str] | None = None,
        category_column: str | None = None,
        category_values: Sequence[Any] | None = None,
        max_fit_rows: int | None = 10_000,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.n_archetypes = n_archetypes
        self.features = features
        self.id_column = id_column
        self.key_columns = key_columns
        self.category_column = category_column
        self.category_values = category_values
        self.max_fit_rows = max_fit_rows
        self.random_state = random_state

    # -- fitting -----------------------------------------------------------------------------------
    def fit(self, public: pd.DataFrame) -> ArchetypeModel:
        """Fit the mixture on the public trips and compute the per-archetype statistics."""
        if not isinstance(self.n_archetypes, int) or self.n_archetypes < 1:
            raise ConfigError(f"n_archetypes must be a positive integer, got {self.n_archetypes!r}")
        features = list(self.features)
        if not features:
            raise ConfigError("features must name at least one numeric column")
        keys = list(self.key_columns) if self.key_columns is not None else features
        needed = [self.id_column, *features, *keys]
        if self.category_column is not None:
            needed.append(self.category_column)
        missing = [c for c in dict.fromkeys(needed) if c not in public.columns]
        if missing:
            raise InputError(f"public data: missing column(s) {', '.join(map(repr, missing))}")
        if len(public) < self.n_archetypes:
            raise InputError(
                f"public data: {len(public)} trips, fewer than n_archetypes={self.n_archetypes}"
            )
        rng = _generator(self.random_state)
        public = public.reset_index(drop=True)
        x = self._features(public, fit=True)
        # one BLAS thread: the tiny d x d solves of the EM steps only lose time to thread handoffs
        rows = np.arange(len(x))
        if self.max_fit_rows is not None and len(x) > self.max_fit_rows:
            rows = rng.choice(len(x), size=self.max_fit_rows, replace=False)
        with threadpool_limits(limits=1):
            self.gmm_ = GaussianMixture(
                n_components=self.n_archetypes,
                covariance_type="full",
                reg_covar=1e-4,
                random_state=int(rng.integers(2**31 - 1)),
            ).fit(x[rows])
            labels = self.gmm_.predict(x)
        self.key_columns_ = keys
        ids, id_codes = _codes(public[self.id_column])
        arche = majority(id_codes, labels, self.n_archetypes, rng, len(ids))
        if self.category_column is not None:
            self.category_values_ = (
                tuple(self.category_values)
                if self.category_values is not None
                else tuple(pd.unique(public[self.category_column]))
            )
            cat_codes = _category_codes(public[self.category_column], self.category_values_)
            known = cat_codes >= 0
            dominant = majority(
                id_codes[known], cat_codes[known], len(self.category_values_), rng, len(ids)
            )
        else:
            self.category_values_ = ()
            dominant = np.zeros(len(ids), dtype=np.int64)
        n_trips = np.bincount(id_codes, minlength=len(ids))
        self.individuals_ = pd.DataFrame(
            {"archetype": arche, "category": dominant, "n_trips": n_trips},
            index=pd.Index(ids, name=self.id_column),
        )
        extra = [] if self.category_column is None else [self.category_column]
        trips = public[list(dict.fromkeys([*keys, *extra]))].copy()
        trips["archetype"] = arche[id_codes]
        trips["category"] = dominant[id_codes]
        self.trips_ = trips
        self.trip_labels_ = np.asarray(labels, dtype=np.int64)  # each public trip's component
        self.n_individuals_ = np.bincount(arche, minlength=self.n_archetypes)
        total = np.bincount(arche, weights=n_trips, minlength=self.n_archetypes)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.trips_per_individual_ = np.where(
                self.n_individuals_ > 0, total / np.maximum(self.n_individuals_, 1), 0.0
            )
        return self

    def _features(self, trips: pd.DataFrame, *, fit: bool = False) -> np.ndarray:
        cols = list(self.features)
        missing = [c for c in cols if c not in trips.columns]
        if missing:
            raise InputError(f"missing feature column(s) {', '.join(map(repr, missing))}")
        try:
            x = trips[cols].apply(pd.to_numeric, errors="raise").to_numpy(dtype=float)
        except (TypeError, ValueError) as exc:
            raise InputError(f"feature columns {cols} must be numeric: {exc}") from None
        if fit:
            self.scaler_ = StandardScaler().fit(x)
        scaled = self.scaler_.transform(x)
        return np.asarray(np.nan_to_num(scaled, nan=0.0), dtype=float)  # missing -> public mean

    # -- using -------------------------------------------------------------------------------------
    def predict(self, trips: pd.DataFrame) -> np.ndarray:
        """The most likely archetype of each trip."""
        x = self._features(trips)
        with threadpool_limits(limits=1):
            return np.asarray(self.gmm_.predict(x), dtype=np.int64)

    def assign(self, trips: pd.DataFrame, rng: np.random.Generator | TieBreaker) -> pd.Series:
        """The archetype of each individual: the one most of its trips fall in, ties at random
        (from ``rng``: the secure noise source for private trips, see :func:`majority`).
        Exactly one archetype per individual (what makes the archetype histogram sensitivity 1)."""
        ids, codes = _codes(trips[self.id_column])
        arche = majority(codes, self.predict(trips), self.n_archetypes, rng, len(ids))
        return pd.Series(arche, index=pd.Index(ids, name=self.id_column), name="archetype")

    def joint(self, archetype: int) -> pd.DataFrame:
        """The archetype's joint distribution of the key columns over its public trips
        (columns = key columns + ``probability``), as in the write-up's 3-way marginals file."""
        pool = self.trips_.loc[self.trips_["archetype"] == archetype, self.key_columns_]
        out = pool.groupby(self.key_columns_, sort=True).size().rename("probability").reset_index()
        out["probability"] = out["probability"] / max(len(pool), 1)
        return out


def _generator(random_state: int | np.random.Generator | None) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.default_rng(random_state)


def _codes(ids: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Unique ids (in order of appearance) and each row's code."""
    codes, uniques = pd.factorize(ids, sort=False)
    if (codes < 0).any():
        row = int(np.flatnonzero(codes < 0)[0])
        raise InputError(f"id column '{ids.name}', row {row + 1}: missing individual id")
    return np.asarray(uniques), np.asarray(codes, dtype=np.int64)


def _category_codes(values: pd.Series, domain: Sequence[Any]) -> np.ndarray:
    """Index of each value in ``domain`` (-1 when absent)."""
    return np.asarray(pd.Index(list(domain)).get_indexer(values.to_numpy()), dtype=np.int64)
