"""Sampling in the ``joint`` mode of :class:`~archetypes.synthesizer.ArchetypeSynthesizer`
(issue 28; the fitting is :mod:`archetypes.jointfit`): each synthetic individual's trips are drawn,
by weight, from the joint model's pool of trips, its archetypes following the public (or
pseudo-public) individuals' mix (GooseDP's archetypes; the pool's weights from the noisy
marginals)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from archetypes.sampling import ArchetypeSampling, balanced_choice, rake, systematic_choice

__all__ = ["JointDrawing"]


class JointDrawing(ArchetypeSampling):
    """The joint mode's sampling methods (mixed into the synthesizer through
    :class:`~archetypes.jointfit.JointSampling`)."""

    features_: list[str]
    joint_pool_: pd.DataFrame | None
    joint_weights_: np.ndarray
    joint_rank_: np.ndarray | None
    discretiser_: Any

    def _joint_labels(self) -> np.ndarray:
        """The mixture's archetype of each pool trip."""
        pool = self.joint_pool_
        assert pool is not None
        frame = pool.copy()
        for f in self.features_:
            if f not in frame.columns:
                frame[f] = np.nan
        return self.model_.predict(frame)

    def _draw(self, strata: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
        """As the base class, but each individual's trips come from the joint pool by weight: an
        individual of archetype ``a`` draws each trip's archetype ``b`` from ``P(b | a)`` (the
        public individuals' mix, raked so that the synthetic trips' archetypes follow the pool),
        then a pool trip of archetype ``b``."""
        if getattr(self, "joint_pool_", None) is None:
            return super()._draw(strata)
        pool = self.joint_pool_
        assert pool is not None
        rng, ind = self.rng_, self.model_.individuals_
        if not hasattr(self, "joint_labels_"):
            self.joint_labels_ = self._joint_labels()
        arche = self.joint_labels_
        counts = np.floor(strata + rng.random(strata.shape)).astype(np.int64)
        ind_arch, ind_cat = ind["archetype"].to_numpy(), ind["category"].to_numpy()
        n_public = ind["n_trips"].to_numpy()
        weights = self.joint_weights_
        lengths, drawn_for = [], []
        for a, c in zip(*np.nonzero(counts), strict=True):
            n = int(counts[a, c])
            drawn_for.append(np.full(n, a, dtype=np.int64))
            who = np.flatnonzero((ind_arch == a) & (ind_cat == c))
            who = who if len(who) else np.flatnonzero(ind_arch == a)
            who = who if len(who) else np.arange(len(ind_arch))
            lengths.append(n_public[balanced_choice(who, n, rng)])
        if not lengths:
            frame = pool.iloc[:0].copy()
            frame.insert(0, self.id_column, np.array([], dtype=np.int64))
            return frame, np.array([], dtype=np.int64)
        n_trips = np.concatenate(lengths)
        trip_arch = np.repeat(np.concatenate(drawn_for), n_trips)
        mix = self._trip_mix(np.bincount(trip_arch, minlength=self.archetypes), weights, arche)
        target = np.empty(len(trip_arch), dtype=np.int64)
        for a in np.unique(trip_arch):  # each trip's pool archetype, from the raked mix
            at = np.flatnonzero(trip_arch == a)
            target[at] = rng.choice(self.archetypes, size=len(at), p=mix[a])
        rows = np.empty(len(trip_arch), dtype=np.int64)
        for b in np.unique(target):
            at = np.flatnonzero(target == b)
            cand = np.flatnonzero((arche == b) & (weights > 0))
            rank = getattr(self, "joint_rank_", None)  # None: a model fitted before the rank
            if rank is not None:  # systematic draws along a public code order: stratified
                cand = cand[np.argsort(rank[cand], kind="stable")]
            rows[at] = rng.permutation(cand[systematic_choice(weights[cand], len(at), rng)])
        out = pool.iloc[rows].reset_index(drop=True)
        out = out[[c for c in out.columns if c in self._outputs()]]
        ids = rng.permutation(len(n_trips))
        out.insert(0, self.id_column, np.repeat(ids, n_trips))
        archetype = np.empty(len(ids), dtype=np.int64)
        archetype[ids] = np.concatenate(drawn_for)
        return out.sort_values(self.id_column, kind="stable").reset_index(drop=True), archetype

    def _trip_mix(self, trips: np.ndarray, weights: np.ndarray, arche: np.ndarray) -> np.ndarray:
        """``P(pool archetype b | individual archetype a)``: the public individuals' trips, raked
        to the synthetic trips per ``a`` (rows) and the pool's weight per ``b`` (columns)."""
        k = self.archetypes
        model = self.model_
        seed = np.zeros((k, k))
        np.add.at(seed, (model.trips_["archetype"].to_numpy(), model.trip_labels_), 1)
        pool_mass = np.bincount(arche, weights=weights, minlength=k)
        cols = pool_mass / max(pool_mass.sum(), 1e-12) * trips.sum()
        seed = seed / np.maximum(seed.sum(1, keepdims=True), 1e-12)
        seed = seed + 1e-3 * cols[None, :] / max(cols.sum(), 1e-12)
        table = rake(seed, trips.astype(float) + 1e-12, cols + 1e-12 * (cols.sum() == 0))
        return table / np.maximum(table.sum(1, keepdims=True), 1e-300)

    def _outputs(self) -> list[str]:
        return self.discretiser_.columns
