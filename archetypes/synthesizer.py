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
k-way marginals (:class:`~archetypes.column_completion.ColumnCompleter`), then checks every value
against the schema.

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
drawn for. The global version stays the default: the per-archetype cells are about ``archetypes``
times smaller for the same noise (figures in ``benchmarks/bench_archetypes.py``).

Without public data, ``public_stand_in`` (:mod:`archetypes.standin`) first releases SBH histograms
of the private trips, expanded into stand-in public trips; its share comes FIRST in ``budget_split``
(stand-in, archetypes, category[, marginals]), unspent given public data. Default since issue 28,
``joint=True`` (:mod:`archetypes.jointfit`): noisy one- and two-way trip tables over the public
domains (one discrete Gaussian, at most k trips per individual) made into one tree model
(:mod:`archetypes.joint`); the two counts above still decide how many individuals of which kind.
Without public data the joint model replaces the stand-in. ``joint=False`` is the above.

Departures from the write-up, all post-processing: the analytic calibration holds for every epsilon
(no cap at 1); the noise is an exact discrete Gaussian; the category is drawn per individual,
jointly with the archetype, rather than per trip independently; trip counts per individual follow
the public distribution of the stratum (same mean as the write-up's constant); the total number of
individuals is the inverse-variance weighted mean of the unclamped noisy totals.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from archetypes.budget import budget_shares
from archetypes.column_completion import ColumnCompleter, Plan
from archetypes.model import ArchetypeModel, bound_individuals
from archetypes.params import PARAMS
from archetypes.private_counts import PrivateCounts
from archetypes.reading import source_of
from archetypes.sampling import (
    PUBLIC_STREAM,
    SAMPLING_STREAM,
    sampling_generator,
)
from archetypes.schema import TripSchema
from archetypes.standin import StandIn, StandInSpec, stand_in_spec
from archetypes.trip_sources import (
    TripSource,
    domain_hint,
    fit_schema,
    one_row_per_id,
    read_trip_inputs,
)
from synth.errors import ConfigError, InputError
from synth.params import Constraint, ParamTable, spell
from synth.privacy import (
    SecureNoise,
    check_budget,
    noise_source,
)

if TYPE_CHECKING:
    from synth.release import ReleaseWriter

__all__ = ["ArchetypeSynthesizer"]


class ArchetypeSynthesizer(PrivateCounts):
    """Differentially private synthetic trips from GMM archetypes and two noisy histograms.

    The scikit-learn estimator contract (:class:`~synth.generator.Generator`): ``fit(data,
    public=None)`` takes the private trips as a DataFrame or a CSV/Parquet path (and the public
    trips the same way), spends the budget in :attr:`ledger_` and returns ``self``;
    :meth:`sample` is post-processing; ``sklearn.base.clone`` gives an unfitted copy.

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

    #: one row per parameter (:mod:`archetypes.params`): validator, config keys, flags
    parameter_table: ClassVar[ParamTable] = PARAMS
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = PARAMS.constraints()
    #: set last in fit: its presence means "fitted"
    _fitted_attribute: ClassVar[str] = "strata_"

    def __init__(
        self,
        *,
        epsilon: float,
        delta: float,
        key_columns: Sequence[str],
        category_column: str,
        id_column: str = "individual_id",
        archetypes: int = 10,
        features: Sequence[str] | None = None,
        completion: Plan = (),
        schema: TripSchema | str | None = None,
        budget_split: tuple[float, ...] = (0.1, 0.9),
        marginals: Sequence[str] = (),
        marginals_by_archetype: bool = False,
        marginal_bins: int = 64,
        public_stand_in: bool | Mapping[str, Any] | None = None,
        joint: bool | Mapping[str, Any] | None = True,
        max_records_per_individual: int = 200,
        order_column: str | None = None,
        n_records: int | None = None,
        unit: str = "individual",
        random_state: int | None = None,
        **renamed: Any,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.key_columns = key_columns
        self.category_column = category_column
        self.id_column = id_column
        self.archetypes = archetypes
        self.features = features
        self.completion = completion
        self.schema = schema
        self.budget_split = budget_split
        self.marginals = marginals
        self.marginals_by_archetype = marginals_by_archetype
        self.public_stand_in = public_stand_in
        self.joint = joint
        self.marginal_bins = marginal_bins
        self.max_records_per_individual = max_records_per_individual
        self.order_column = order_column
        self.n_records = n_records
        self.unit = unit
        self.random_state = random_state
        for name, value in PARAMS.renamed(renamed).items():  # n_archetypes=
            setattr(self, name, value)

    # -- validation --------------------------------------------------------------------------------
    def _check_params(self) -> None:
        """The rules between parameters (ConfigError), checked once per fit by
        :meth:`_validate_params`: the budget, ``budget_split`` against the releases it shares,
        the key columns, the marginals and the joint options; :meth:`_budgets` then only
        divides."""
        check_budget(self.epsilon, self.delta, need_delta=True)  # Gaussian: delta in (0, 1)
        split, names = tuple(self.budget_split), self._budget_names()
        wanted = len(names)
        if len(split) != wanted or any(
            isinstance(s, bool) or not isinstance(s, int | float) or s <= 0 for s in split
        ):
            raise ConfigError(
                f"{spell('budget_split')} must be {wanted} positive shares ({', '.join(names)}),"
                f" got {self.budget_split!r}"
            )
        if sum(Fraction(str(s)) for s in split) > 1:
            raise ConfigError(f"{spell('budget_split')} {self.budget_split!r} sums to more than 1")
        if not list(self.key_columns):
            raise ConfigError(f"{spell('key_columns')} must name at least one column")
        if len(set(self.marginals)) != len(list(self.marginals)):
            raise ConfigError(f"marginals lists a column twice: {list(self.marginals)}")
        if self._joint_on():
            self._joint_options()  # its keys and share

    def _budget_names(self) -> list[str]:
        """The releases ``budget_split`` shares the budget among, in order."""
        names = [
            *(["stand-in"] if self._stand_in_on() else []),
            "archetypes",
            "category",
            *(["marginals"] if list(self.marginals) else []),
        ]
        if self._joint_on() and self._stand_in_on() and len(self.budget_split) == len(names) - 1:
            names.pop(0)  # joint mode: the joint model is the stand-in, its share optional
        return names

    def _budgets(self) -> list[tuple[float, float]]:
        """(epsilon, delta) of each release, in order, from the parameters
        :meth:`_check_params` accepted."""
        eps, delta = self.epsilon, self.delta
        split, names = tuple(self.budget_split), self._budget_names()
        if self._joint_on():  # (joint, archetypes, category)
            return self._joint_budgets(eps, delta, split, names)
        return list(zip(budget_shares(eps, split), budget_shares(delta, split), strict=True))

    def _stand_in_on(self) -> bool:
        option = self.public_stand_in
        if option is None or option is False:
            return False
        if option is True or isinstance(option, Mapping):
            return True
        raise ConfigError(
            f"{spell('public_stand_in')} must be None, a bool or a mapping, got {option!r}"
        )

    def _schema(self, public: pd.DataFrame | None, used: list[str]) -> TripSchema:
        """The public domains (:func:`~archetypes.trip_sources.fit_schema`): the input layout's,
        then ``schema``'s (both read by ``fit``), then the public values of the columns neither
        names."""
        return fit_schema(
            self.given_schema_,
            public,
            used,
            id_column=self.id_column,
            category_column=self.category_column,
            hint=self.domain_hint_,
        )

    # -- fitting -----------------------------------------------------------------------------------
    def fit(
        self,
        data: pd.DataFrame | str | os.PathLike[str] | TripSource,
        public: pd.DataFrame | str | os.PathLike[str] | TripSource | None = None,
    ) -> ArchetypeSynthesizer:
        """Learn archetypes on ``public``; release the noisy histograms of the private trips.

        ``data`` (private) and ``public`` are DataFrames of trips, CSV/Parquet paths or
        :class:`~archetypes.trip_sources.TripSource` (a file and its layout; fit alone reads
        and validates, issue 27). ``public=None`` needs ``public_stand_in`` or ``joint``: a
        release of the private trips is then learnt on instead (its spend comes first in
        :attr:`ledger_`)."""
        self._validate_params()
        self.joint_public_ = public is not None  # the joint share's default depends on it
        self.one_row_per_id_ = one_row_per_id(data)  # the layout's, public: the ledger's words
        self.domain_hint_ = domain_hint(data, public)  # the layout's: a missing domain's error
        budgets = self._budgets()
        joint_budget = budgets.pop(0) if self._joint_on() else None
        stand_in_budget = budgets.pop(0) if self._stand_in_on() and not joint_budget else None
        if public is None and stand_in_budget is None and joint_budget is None:
            raise ConfigError(
                f"no public data: give public trips, or keep {spell('joint')} on (the default: "
                f"the joint model stands in for them), or enable {spell('public_stand_in')} (an "
                "SBH release of the private trips standing in for them, with its own budget share)"
            )
        private, public_trips, self.given_schema_ = read_trip_inputs(
            data, public, id_column=self.id_column, schema=self.schema
        )
        used = self.used_columns_ = self._used_columns(public_trips)
        if len(private) == 0:
            raise InputError("private data: no trips")
        # the joint model counts every used column of the private trips: a misspelt one is
        # named as missing there, before a schema entry is asked for it
        absent = [c for c in used if c not in private.columns] if self._joint_on() else []
        if absent:
            raise InputError(
                f"{source_of(private)}: missing column(s) {', '.join(map(repr, absent))}"
            )
        for name in ("strata_", "ledger_"):  # a failed re-fit leaves no half-fitted model
            self.__dict__.pop(name, None)
        noise = noise_source(self.random_state, methods=("discrete_gaussian",))
        self.ledger_, self.joint_pool_ = self._new_ledger(), None
        if joint_budget is not None:
            self.schema_ = self._schema(public_trips, used)
            self.features_ = self._joint_features(self._features(public_trips), public_trips)
            rng = sampling_generator(self.random_state, PUBLIC_STREAM + 2)
            public_trips = self._fit_joint(private, public_trips, used, joint_budget, noise, rng)
            if self.joint_pool_ is not None:  # coordinates read off the pool's labels (public)
                self.joint_pool_ = self.schema_.derive(self.joint_pool_)
        self._fit_public(private, public_trips, used, stand_in_budget, noise)
        self._set_mechanisms(budgets)
        self._fit_private(private, noise)
        return self

    def _used_columns(self, public: pd.DataFrame | None) -> list[str]:
        """The columns the model reads (keys, category, completion targets and conditions),
        checked against the parameters and the public data."""
        keys = list(self.key_columns)
        if public is not None:
            missing = [c for c in [self.id_column, *keys] if c not in public.columns]
            if missing:
                raise InputError(f"public data: missing column(s) {', '.join(map(repr, missing))}")
        targets = [str(t) for t, _ in self.completion]
        used = list(dict.fromkeys([*keys, self.category_column, *targets]))
        used += [c for _, cond in self.completion for c in cond if c not in used]
        unknown = [c for c in self.marginals if c not in used]
        if unknown:
            raise ConfigError(
                f"marginals {unknown} are neither key, category nor completed columns"
            )
        return used

    def _features(self, public: pd.DataFrame | None) -> list[str]:
        keys = list(self.key_columns)
        if self.features is not None:
            features = list(self.features)
        else:  # numeric in the public domain (a schema's "other" text is not) and public trips
            features = [c for c in keys if c not in self.schema_ or self._numeric_domain(c)]
            if public is not None:
                features = [c for c in features if pd.api.types.is_numeric_dtype(public[c])]
        if not features:
            raise ConfigError("features: no numeric column to cluster (name them in features)")
        return features

    def _fit_public(
        self,
        private: pd.DataFrame,
        public: pd.DataFrame | None,
        used: list[str],
        stand_in_budget: tuple[float, float] | None,
        noise: SecureNoise,
    ) -> None:
        """Schema, features, the stand-in (when no public data) and the public model: the
        mixture, the completer and the marginal bins."""
        self.schema_ = self._schema(public, used)
        features = self.features_ = self._joint_features(self._features(public), public)
        if public is not None:
            public = self.schema_.derive(public)  # coordinates from their labels, as the private's
            missing = [c for c in [self.id_column, *used, *features] if c not in public.columns]
            if missing and self._joint_on() and not self.joint_public_:  # the pool stands in
                raise ConfigError(
                    "without public trips the archetypes cluster the joint model's trips, which "
                    "hold the key, category and completion columns only: "
                    f"{', '.join(map(repr, missing))} (add them to {spell('key_columns')} or "
                    f"{spell('completion')}, or leave them out of {spell('features')})"
                )
            if missing:
                raise InputError(f"public data: missing column(s) {', '.join(map(repr, missing))}")
        # public randomness (the mixture, the stand-in's expansion): its own stream
        public_rng = sampling_generator(self.random_state, PUBLIC_STREAM)
        # private tie-breaks (majorities over private trips) come from the secure source
        self.tie_breaks_ = noise
        self.stand_in_: StandInSpec | None = None
        if public is None:
            assert stand_in_budget is not None
            public = self._stand_in(private, used, features, stand_in_budget, noise, public_rng)
        public = self.schema_.derive(public)  # coordinates from their labels, as the private's
        public = self.schema_.conform(public, source="public data", columns=used)
        public = bound_individuals(
            public, self.id_column, self.max_records_per_individual, self._order(public)
        )
        self.category_values_ = self.schema_.values(self.category_column)
        self.model_ = ArchetypeModel(
            n_archetypes=self.archetypes,
            features=features,
            id_column=self.id_column,
            key_columns=list(self.key_columns),
            category_column=self.category_column,
            category_values=self.category_values_,
            random_state=public_rng,
        ).fit(public)
        plan = () if self._joint_on() else self.completion  # the joint pool has every column
        self.completer_ = ColumnCompleter(plan=plan).fit(public)
        self.marginal_edges_ = {c: self._edges(public, c) for c in self._marginal_columns()}

    def _fit_private(self, private: pd.DataFrame, noise: SecureNoise) -> None:
        """The private queries, their noisy release, and the strata the sampler draws from."""
        # the only other use of the private data
        raw = self._release(self._query(private), noise, self.ledger_)
        self.noisy_archetype_counts_ = np.maximum(raw[0], 0)
        self.noisy_category_counts_ = np.maximum(raw[1], 0)
        self.noisy_marginals_ = {}
        totals = [
            (raw[0], self.archetype_mechanism_.sigma),
            (raw[1], self.category_mechanism_.sigma),
        ]
        if self.marginal_mechanism_ is not None:
            marginals = self._marginal_columns()
            splits = np.cumsum([self._n_released(c) for c in marginals])[:-1]
            for column, part in zip(marginals, np.split(raw[2], splits), strict=True):
                self.noisy_marginals_[column] = np.maximum(part, 0)
                totals.append((part, self.marginal_mechanism_.sigma))
        self.n_individuals_ = self._total(totals)
        # the sampling generator, seeded only now: no stream that touched private data continues
        self.rng_ = sampling_generator(self.random_state, SAMPLING_STREAM)
        self.strata_ = self._strata()  # last: marks the model fitted

    def _numeric_domain(self, column: str) -> bool:
        """Whether a schema column is numeric or categorical with numbers only (a feature)."""
        col = self.schema_[column]
        if col.kind in ("numeric", "coordinate"):
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
        counted = [f for f in features if f not in self.schema_.coordinates()]  # read off labels
        self.stand_in_ = stand_in_spec(
            option,
            key_columns=list(self.key_columns),
            category_column=self.category_column,
            features=counted,
            completion=self.completion,
            needed=list(dict.fromkeys([*used, *counted, *order])),
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
        if len(public) < self.archetypes:
            raise ConfigError(
                f"{spell('public_stand_in')}: the release has {len(public)} trips, fewer than "
                f"archetypes={self.archetypes}; give the stand-in a larger budget share"
            )
        return public

    # -- reporting ---------------------------------------------------------------------------------
    def parameters(self) -> dict[str, Any]:
        """The public parameters of the fitted release, as its manifest records them
        (:meth:`manifest`; its public inputs, the public trips and schema files, are given to
        :meth:`manifest` or :meth:`write`: the fitted model holds frames, not files)."""
        self._check_fitted()
        params: dict[str, Any] = {
            "generator": self.manifest_name(),
            "id_column": self.id_column,
            "order_column": self.order_column,
            "n_archetypes": self.archetypes,
            "key_columns": list(self.key_columns),
            "category_column": self.category_column,
            "budget_split": list(self.budget_split),
            "max_records_per_individual": self.max_records_per_individual,
            "sigma_archetypes": self.archetype_mechanism_.sigma,
            "sigma_categories": self.category_mechanism_.sigma,
            "completion": [[t, list(c)] for t, c in self.completion],
            "seeded": self.random_state is not None,
        }
        if getattr(self, "one_row_per_id_", False):
            params["one_row_per_id"] = True  # the layout's (public): each row its own id
        if self.marginal_mechanism_ is not None:
            params["marginals"] = list(self.marginals)
            params["marginals_by_archetype"] = self.marginals_by_archetype
            params["sigma_marginals"] = self.marginal_mechanism_.sigma
        if self._joint_on():
            joint = self.joint_manifest()
            applied = self._joint_shares(tuple(self.budget_split), self._budget_names())[0]
            # beside the configured share, the share the joint model really got (the stand-in's
            # and marginals' budget_split shares go to it): a function of the configuration
            params["joint"] = {"share": joint.pop("share"), "share_applied": applied, **joint}
        if self.stand_in_ is not None:
            params["public_stand_in"] = {
                **self.stand_in_.to_dict(),
                "kept_cells": list(self.stand_in_cells_),
            }
        return params

    def _write_data(self, release: ReleaseWriter, format: str) -> dict[str, int]:
        """``trips.csv|parquet`` (a fresh :meth:`sample`) and ``schema.json`` (the public
        domains used)."""
        trips = self.sample()
        release.table(trips, "trips", format)
        release.json("schema.json", self.schema_.to_dict())
        return {"rows": len(trips), "individuals": int(trips[self.id_column].nunique())}
