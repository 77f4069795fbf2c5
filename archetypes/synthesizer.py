"""GMM-archetype trip synthesizer (GooseDP, NIST DP Temporal Map Challenge, sprint 3).

``fit(private, public)`` learns archetypes on the public trips
(:class:`~archetypes.model.ArchetypeModel`) and makes exactly two queries of the private trips
("Step 1: Private Analysis"):

1. the number of individuals per archetype (each individual assigned to the single archetype most of
   its trips fall in), and
2. the number of individuals per category (each individual's most frequent company / mode / fare
   product, ties at random), over the schema's full domain, values never seen included.

Each histogram changes by 1 in one cell when one individual (with all their trips, at most
``max_records_per_individual`` of them) is added or removed: L2 sensitivity 1. Each gets discrete
Gaussian noise with sigma from the analytic calibration (Balle and Wang 2018) for its share of the
budget, ``budget_split`` (default (0.1, 0.9) as in the write-up), and is clamped at 0; the spends
compose sequentially in :attr:`ledger_`. Everything else is post-processing of the noisy counts with
public data ("Step 2"): :meth:`sample` draws individuals per (archetype, category) from the two
noisy histograms (raked onto the public archetype x category table), their trip counts and key
columns from the public individuals of the same stratum, and completes the other columns from public
k-way marginals (:class:`~archetypes.completion.ColumnCompleter`), then checks every value against
the schema.

Optional, beyond the write-up: ``marginals`` names further columns whose one-way histograms of the
individuals' most frequent (binned) values are released in ONE discrete Gaussian application (L2
sensitivity sqrt(m) for m columns, since an individual is in one cell of each) with the third share
of ``budget_split``; :meth:`sample` then draws a larger pool of synthetic individuals and resamples
it with raking (iterative proportional fitting) weights that match the noisy archetype, category and
marginal histograms. This corrects shifts between the public and private periods that the two counts
cannot see. With ``marginals_by_archetype=True`` (the issue's formulation) each individual is
counted in the histogram of ITS ARCHETYPE for each listed column (one cell in each of m archetype x
value histograms, still L2 sensitivity sqrt(m), one discrete Gaussian), and the raking matches the
pool's (archetype, value) histograms, the archetype of a pool individual being the stratum it was
drawn for. The global version stays the default: the per-archetype cells are about ``n_archetypes``
times smaller for the same noise (figures in ``benchmarks/bench_archetypes.py``).

Without public data, ``public_stand_in`` (see :mod:`archetypes.standin`) first releases
stability-based histograms of the private trips and uses their expansion as the public trips. Its
share comes FIRST in ``budget_split``: (stand-in, archetypes, category[, marginals]); the spends
compose sequentially in the same ledger. Given public data, the stand-in is not released and its
share is not spent.

Departures from the write-up, all post-processing: the analytic calibration holds for every epsilon
(no cap at 1); the noise is an exact discrete Gaussian; the category is drawn per individual,
jointly with the archetype, rather than per trip independently; trip counts per individual follow
the public distribution of the stratum (same mean as the write-up's constant); the total number of
individuals is the inverse-variance weighted mean of the unclamped noisy totals.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from archetypes.budget import budget_shares
from archetypes.completion import ColumnCompleter, Plan
from archetypes.model import ArchetypeModel, bound_individuals, majority
from archetypes.schema import TripSchema
from archetypes.standin import StandIn, StandInSpec, stand_in_spec
from synth.errors import ConfigError, InputError
from synth.privacy import (
    DiscreteGaussian,
    PrivacyLedger,
    SecureNoise,
    check_budget,
    noise_source,
)

__all__ = [
    "ArchetypeSynthesizer",
    "balanced_choice",
    "budget_shares",
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


class ArchetypeSynthesizer:
    """Differentially private synthetic trips from GMM archetypes and two noisy histograms.

    Parameters (keyword-only, stored as given; validated in ``fit``):
        epsilon, delta: the total budget, per individual (``unit``).
        key_columns: columns drawn jointly per archetype (e.g. shift, pickup and dropoff area).
        category_column: the per-individual category whose noisy histogram is released.
        id_column: the individual's id (taxi, card); synthetic individuals get new ids 0..N-1.
        features: numeric columns the mixture clusters (default: the numeric key columns).
        completion: ``[(target, [conditioning columns]), ...]`` filled in that order.
        schema: public domains (a :class:`TripSchema` or a JSON path); columns it lacks get the
            values seen in the PUBLIC data as their domain.
        budget_split: shares of (epsilon, delta) for the archetype and the category histograms, and
            a third one for ``marginals`` when given; they may sum to less than 1. With
            ``public_stand_in``, one more share comes FIRST: (stand-in, archetypes, category
            [, marginals]).
        marginals: extra columns whose one-way histograms are released (see the module docstring).
        marginals_by_archetype: release the ``marginals`` per archetype (archetype x value cells)
            instead of globally.
        public_stand_in: None/False (public data required), True or a mapping of options
            (:mod:`archetypes.standin`): without public data, an SBH release of the private trips
            stands in for it.
        marginal_bins: numeric marginal columns with more distinct public values get this many
            bins at public quantiles.
        max_records_per_individual: contribution bound (first trips by ``order_column``).
        order_column: orders an individual's trips (bounding, and the synthetic trip chains).
        n_records: number of synthetic trips (None: as many individuals as the noisy counts say).
        unit: name of the privacy unit in the ledger ("taxi", "card", ...).
        random_state: None = secure noise and tie-breaks, and a sampler seeded from the OS after
            the private queries; an int makes them reproducible and the release NOT private.
    """

    def __init__(
        self,
        *,
        epsilon: float,
        delta: float,
        key_columns: Sequence[str],
        category_column: str,
        id_column: str = "individual_id",
        n_archetypes: int = 10,
        features: Sequence[str] | None = None,
        completion: Plan = (),
        schema: TripSchema | str | None = None,
        budget_split: tuple[float, ...] = (0.1, 0.9),
        marginals: Sequence[str] = (),
        marginals_by_archetype: bool = False,
        marginal_bins: int = 64,
        public_stand_in: bool | Mapping[str, Any] | None = None,
        max_records_per_individual: int = 200,
        order_column: str | None = None,
        n_records: int | None = None,
        unit: str = "individual",
        random_state: int | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.key_columns = key_columns
        self.category_column = category_column
        self.id_column = id_column
        self.n_archetypes = n_archetypes
        self.features = features
        self.completion = completion
        self.schema = schema
        self.budget_split = budget_split
        self.marginals = marginals
        self.marginals_by_archetype = marginals_by_archetype
        self.public_stand_in = public_stand_in
        self.marginal_bins = marginal_bins
        self.max_records_per_individual = max_records_per_individual
        self.order_column = order_column
        self.n_records = n_records
        self.unit = unit
        self.random_state = random_state

    # -- validation --------------------------------------------------------------------------------
    def _budgets(self) -> list[tuple[float, float]]:
        """Validate the parameters; (epsilon, delta) of each release, in order."""
        check_budget(self.epsilon, self.delta, need_delta=True)  # Gaussian: delta in (0, 1)
        eps, delta = self.epsilon, self.delta
        split = tuple(self.budget_split)
        names = [
            *(["stand-in"] if self._stand_in_on() else []),
            "archetypes",
            "category",
            *(["marginals"] if list(self.marginals) else []),
        ]
        wanted = len(names)
        if len(split) != wanted or any(
            isinstance(s, bool) or not isinstance(s, int | float) or s <= 0 for s in split
        ):
            raise ConfigError(
                f"budget_split must be {wanted} positive shares ({', '.join(names)}),"
                f" got {self.budget_split!r}"
            )
        if not isinstance(self.marginals_by_archetype, bool):
            raise ConfigError(
                f"marginals_by_archetype must be true or false, got {self.marginals_by_archetype!r}"
            )
        if sum(Fraction(str(s)) for s in split) > 1:
            raise ConfigError(f"budget_split {self.budget_split!r} sums to more than 1")
        for name in ("max_records_per_individual", "n_archetypes", "marginal_bins"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.n_records is not None and (
            isinstance(self.n_records, bool)
            or not isinstance(self.n_records, int)
            or self.n_records < 0
        ):
            raise ConfigError(f"n_records must be a non-negative integer, got {self.n_records!r}")
        if not list(self.key_columns):
            raise ConfigError("key_columns must name at least one column")
        if self.random_state is not None and (
            isinstance(self.random_state, bool)
            or not isinstance(self.random_state, int | np.integer)
        ):
            raise ConfigError(f"random_state must be None or an int, got {self.random_state!r}")
        if len(set(self.marginals)) != len(list(self.marginals)):
            raise ConfigError(f"marginals lists a column twice: {list(self.marginals)}")
        return list(zip(budget_shares(eps, split), budget_shares(delta, split), strict=True))

    def _stand_in_on(self) -> bool:
        option = self.public_stand_in
        if option is None or option is False:
            return False
        if option is True or isinstance(option, Mapping):
            return True
        raise ConfigError(f"public_stand_in must be None, a bool or a mapping, got {option!r}")

    def _schema(self, public: pd.DataFrame | None, used: list[str]) -> TripSchema:
        if isinstance(self.schema, TripSchema):
            schema = self.schema
        elif isinstance(self.schema, str | Path):
            schema = TripSchema.from_json(self.schema)
        elif self.schema is None:
            schema = TripSchema()
        else:
            raise ConfigError(
                f"schema must be a TripSchema, a JSON path or None, got {self.schema!r}"
            )
        inferred = [c for c in used if c not in schema and c != self.id_column]
        if inferred and public is None:
            raise ConfigError(
                f"without public data every column needs a public domain in the schema: {inferred}"
            )
        if inferred and public is not None:
            schema = schema.replace(
                *TripSchema.from_public(public, categorical=inferred).columns.values()
            )
        if schema[self.category_column].kind != "categorical":
            raise ConfigError(f"category column '{self.category_column}' must be categorical")
        return schema

    # -- fitting -----------------------------------------------------------------------------------
    def fit(
        self, private: pd.DataFrame, public: pd.DataFrame | None = None
    ) -> ArchetypeSynthesizer:
        """Learn archetypes on ``public``; release the noisy histograms of ``private``.

        ``public=None`` needs ``public_stand_in``: an SBH release of ``private`` is then learnt
        on instead (its spend comes first in :attr:`ledger_`)."""
        budgets = self._budgets()
        stand_in_budget = budgets.pop(0) if self._stand_in_on() else None
        if public is None and stand_in_budget is None:
            raise ConfigError(
                "no public data: give public trips, or enable public_stand_in (an SBH release of "
                "the private trips standing in for them, with its own budget share)"
            )
        keys = list(self.key_columns)
        if public is not None:
            missing = [c for c in [self.id_column, *keys] if c not in public.columns]
            if missing:
                raise InputError(f"public data: missing column(s) {', '.join(map(repr, missing))}")
        marginals = list(self.marginals)
        targets = [str(t) for t, _ in self.completion]
        used = list(dict.fromkeys([*keys, self.category_column, *targets]))
        used += [c for _, cond in self.completion for c in cond if c not in used]
        unknown = [c for c in marginals if c not in used]
        if unknown:
            raise ConfigError(
                f"marginals {unknown} are neither key, category nor completed columns"
            )
        if len(private) == 0:
            raise InputError("private data: no trips")
        self.schema_ = self._schema(public, used)
        if self.features is not None:
            features = list(self.features)
        elif public is not None:
            features = [c for c in keys if pd.api.types.is_numeric_dtype(public[c])]
        else:
            features = [c for c in keys if self._numeric_domain(c)]
        if not features:
            raise ConfigError("features: no numeric column to cluster (name them in features)")
        self.features_ = features
        if public is not None:
            missing = [c for c in [self.id_column, *used, *features] if c not in public.columns]
            if missing:
                raise InputError(f"public data: missing column(s) {', '.join(map(repr, missing))}")

        noise = noise_source(self.random_state, methods=("discrete_gaussian",))
        # public randomness (the mixture, the stand-in's expansion): its own stream
        public_rng = sampling_generator(self.random_state, PUBLIC_STREAM)
        # private tie-breaks (majorities over private trips) come from the secure source
        self.tie_breaks_ = noise
        self.ledger_ = self._new_ledger()
        self.stand_in_: StandInSpec | None = None
        if public is None:
            assert stand_in_budget is not None
            public = self._stand_in(private, used, features, stand_in_budget, noise, public_rng)

        public = self.schema_.conform(public, source="public data", columns=used)
        public = bound_individuals(
            public, self.id_column, self.max_records_per_individual, self._order(public)
        )
        self.category_values_ = self.schema_.values(self.category_column)
        self.model_ = ArchetypeModel(
            n_archetypes=self.n_archetypes,
            features=features,
            id_column=self.id_column,
            key_columns=keys,
            category_column=self.category_column,
            category_values=self.category_values_,
            random_state=public_rng,
        ).fit(public)
        self.completer_ = ColumnCompleter(plan=self.completion).fit(public)
        self.marginal_edges_ = {c: self._edges(public, c) for c in marginals}

        (eps1, delta1), (eps2, delta2) = budgets[:2]
        self.archetype_mechanism_ = DiscreteGaussian(epsilon=eps1, delta=delta1, sensitivity=1)
        self.category_mechanism_ = DiscreteGaussian(epsilon=eps2, delta=delta2, sensitivity=1)
        self.marginal_mechanism_: DiscreteGaussian | None = None
        if marginals:
            eps3, delta3 = budgets[2]
            self.marginal_mechanism_ = DiscreteGaussian(
                epsilon=eps3,
                delta=delta3,
                sensitivity=math.sqrt(len(marginals)),
                single_coordinate=len(marginals) == 1,
            )

        # the only other use of the private data
        raw = self._release(self._query(private), noise, self.ledger_)

        self.noisy_archetype_counts_ = np.maximum(raw[0], 0)
        self.noisy_category_counts_ = np.maximum(raw[1], 0)
        self.noisy_marginals_: dict[str, np.ndarray] = {}
        totals = [
            (raw[0], self.archetype_mechanism_.sigma),
            (raw[1], self.category_mechanism_.sigma),
        ]
        if self.marginal_mechanism_ is not None:
            splits = np.cumsum([self._n_released(c) for c in marginals])[:-1]
            for column, part in zip(marginals, np.split(raw[2], splits), strict=True):
                self.noisy_marginals_[column] = np.maximum(part, 0)
                totals.append((part, self.marginal_mechanism_.sigma))
        self.n_individuals_ = self._total(totals)
        self.strata_ = self._strata()
        # the sampling generator, seeded only now: no stream that touched private data continues
        self.rng_ = sampling_generator(self.random_state, SAMPLING_STREAM)
        return self

    def _numeric_domain(self, column: str) -> bool:
        """Whether a schema column is numeric or categorical with numbers only (a feature)."""
        col = self.schema_[column]
        if col.kind == "numeric":
            return True
        return col.kind == "categorical" and all(
            isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
            for v in col.values
        )

    def _stand_in(
        self,
        private: pd.DataFrame,
        used: list[str],
        features: list[str],
        budget: tuple[float, float],
        noise: SecureNoise,
        rng: np.random.Generator,
    ) -> pd.DataFrame:
        """The SBH release standing in for public trips (:mod:`archetypes.standin`); ``rng``
        expands the noisy tables (post-processing)."""
        option = self.public_stand_in
        assert option is not None and option is not False
        order = [str(self.order_column)] if self.order_column in private.columns else []
        self.stand_in_ = stand_in_spec(
            option,
            key_columns=list(self.key_columns),
            category_column=self.category_column,
            features=features,
            completion=self.completion,
            needed=list(dict.fromkeys([*used, *features, *order])),
        )
        releaser = StandIn(
            self.stand_in_,
            schema=self.schema_,
            id_column=self.id_column,
            order_column=self.order_column,
        )
        public = releaser.release(
            private,
            epsilon=budget[0],
            delta=budget[1],
            noise=noise,
            ledger=self.ledger_,
            rng=rng,
        )
        self.stand_in_cells_ = releaser.kept_cells_
        if len(public) < self.n_archetypes:
            raise ConfigError(
                f"public_stand_in: the release has {len(public)} trips, fewer than "
                f"n_archetypes={self.n_archetypes}; give the stand-in a larger budget share"
            )
        return public

    def _query(self, private: pd.DataFrame) -> list[np.ndarray]:
        """The exact histograms released: individuals per archetype, per category and (when
        ``marginals``) per binned value of each marginal column, the latter concatenated. Each
        individual (its first ``max_records_per_individual`` trips) is ONE value in each."""
        marginals = list(self.marginals)
        columns = list(dict.fromkeys([*self.features_, self.category_column, *marginals]))
        order = [] if self.order_column in (None, *columns) else [self.order_column]
        missing = [c for c in [self.id_column, *columns, *order] if c not in private.columns]
        if missing:
            raise InputError(f"private data: missing column(s) {', '.join(map(repr, missing))}")
        private = private[list(dict.fromkeys([self.id_column, *columns, *order]))]
        private = self.schema_.conform(private, source="private data", columns=columns)
        if private[self.id_column].isna().any():
            row = int(np.flatnonzero(private[self.id_column].isna().to_numpy())[0])
            raise InputError(f"private data: column '{self.id_column}', row {row + 1}: missing id")
        private = bound_individuals(
            private, self.id_column, self.max_records_per_individual, self._order(private)
        )
        id_codes, _ = pd.factorize(private[self.id_column], sort=False)
        ties = self.tie_breaks_  # secure: the private ties never touch a numpy generator
        archetypes = self.model_.assign(private, ties).to_numpy()
        n_cat = len(self.category_values_)
        category = majority(id_codes, self._codes(private, self.category_column), n_cat, ties)
        out = [
            np.bincount(archetypes, minlength=self.n_archetypes),
            np.bincount(category[category >= 0], minlength=n_cat),
        ]
        for column in marginals:
            n_cells = self._n_cells(column)
            value = majority(id_codes, self._bin(private, column), n_cells, ties)
            if self.marginals_by_archetype:  # the cell (archetype, value): still one per column
                value = np.where(value >= 0, archetypes * n_cells + value, -1)
            out.append(np.bincount(value[value >= 0], minlength=self._n_released(column)))
        return out if not marginals else [out[0], out[1], np.concatenate(out[2:])]

    def _new_ledger(self) -> PrivacyLedger:
        return PrivacyLedger(
            epsilon=self.epsilon,
            delta=self.delta,
            unit=self.unit,
            neighbouring=(
                f"add or remove one {self.unit} with all its trips "
                f"(at most {self.max_records_per_individual} kept)"
            ),
        )

    def _release(
        self,
        histograms: list[np.ndarray],
        noise: SecureNoise,
        ledger: PrivacyLedger | None = None,
    ) -> list[np.ndarray]:
        """Noise the histograms of :meth:`_query` and record each spend in ``ledger`` (default: a
        new :attr:`ledger_`; the spend is recorded before the noise is drawn)."""
        if ledger is None:
            self.ledger_ = ledger = self._new_ledger()
        raw = [
            self.archetype_mechanism_.release(
                histograms[0],
                noise=noise,
                ledger=ledger,
                label="archetype histogram",
                note=f"{self.n_archetypes} archetypes; each {self.unit} in exactly one (the "
                "archetype of most of its trips), so L2 sensitivity 1",
            ),
            self.category_mechanism_.release(
                histograms[1],
                noise=noise,
                ledger=ledger,
                label=f"{self.category_column} histogram",
                note=f"{len(histograms[1])} values of the public domain; each {self.unit} counted "
                "once under its most frequent value, so L2 sensitivity 1",
            ),
        ]
        if self.marginal_mechanism_ is not None:
            m = len(list(self.marginals))
            per = " per archetype" if self.marginals_by_archetype else ""
            cell = "(archetype, value) cell" if per else "(binned) value"
            raw.append(
                self.marginal_mechanism_.release(
                    histograms[2],
                    noise=noise,
                    ledger=ledger,
                    label=f"one-way histograms{per} of {', '.join(self.marginals)}",
                    note=f"each {self.unit} counted once per column under its most frequent "
                    f"{cell}: one cell in each of {m} histograms, L2 sensitivity sqrt({m})",
                )
            )
        return [np.asarray(r, dtype=np.int64) for r in raw]

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
        return self._n_cells(column) * (self.n_archetypes if self.marginals_by_archetype else 1)

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
        k, c = self.n_archetypes, len(self.category_values_)
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
        if not hasattr(self, "strata_"):
            raise ConfigError("call fit() before sample()")
        n_records = self.n_records if n_records is None else n_records
        if n_records is not None and (
            isinstance(n_records, bool) or not isinstance(n_records, int) or n_records < 0
        ):
            raise ConfigError(f"n_records must be a non-negative integer, got {n_records!r}")
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
        k, c = self.n_archetypes, len(self.category_values_)
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

    # -- reporting ---------------------------------------------------------------------------------
    def manifest(
        self, public_inputs: Mapping[str, str | os.PathLike[str]] | None = None
    ) -> dict[str, Any]:
        """The ledger's release manifest with this synthesizer's parameters; ``public_inputs``
        (role -> file: public trips, schema) are fingerprinted, the private trips never."""
        params: dict[str, Any] = {
            "generator": "archetypes",
            "id_column": self.id_column,
            "order_column": self.order_column,
            "n_archetypes": self.n_archetypes,
            "key_columns": list(self.key_columns),
            "category_column": self.category_column,
            "budget_split": list(self.budget_split),
            "max_records_per_individual": self.max_records_per_individual,
            "sigma_archetypes": self.archetype_mechanism_.sigma,
            "sigma_categories": self.category_mechanism_.sigma,
            "completion": [[t, list(c)] for t, c in self.completion],
            "seeded": self.random_state is not None,
        }
        if self.marginal_mechanism_ is not None:
            params["marginals"] = list(self.marginals)
            params["marginals_by_archetype"] = self.marginals_by_archetype
            params["sigma_marginals"] = self.marginal_mechanism_.sigma
        if self.stand_in_ is not None:
            params["public_stand_in"] = {
                **self.stand_in_.to_dict(),
                "kept_cells": list(self.stand_in_cells_),
            }
        return self.ledger_.to_dict(parameters=params, public_inputs=public_inputs)
