"""The ``joint`` mode of :class:`~archetypes.synthesizer.ArchetypeSynthesizer` (issue 28).

Fitting: the private trips are measured once (:func:`archetypes.measure.measure`: noisy one-way
tables of every column the model reads and two-way tables of a spanning tree, at most ``k`` trips
per individual) and a joint model is estimated from them (:mod:`archetypes.joint`), with the public
trips as a prior when given. Without public trips the joint model's trips stand in for them (one
trip per pseudo-individual), replacing the SBH stand-in. The archetype and category counts are then
released as before (the GooseDP mechanism) and decide how many individuals of which archetype and
category there are and how many trips each makes.

Sampling: each synthetic individual's trips are drawn, by weight, from the joint model's pool of
trips of its archetype and category (coarser when that stratum is empty). The pool carries every
column, so nothing is completed afterwards.

Options (``joint``: ``True`` or a mapping): ``share`` (default 0.8, 0.9 without public trips) of
(epsilon, delta) for the measurements, the rest split by ``budget_split``;
``max_records_per_individual`` (``k``; default: the 90th percentile of the public trips per
individual, or their median when the tables would be mostly noise at the 90th percentile
(:mod:`archetypes.jointpublic`), else the median of the noisy trips-per-individual histogram,
at most 3, never above the synthesizer's bound); ``pool`` (default 100,000) tree-sampled trips in
the pool; ``fine_bins`` (default false; without public trips): numeric columns binned on every
integer below :data:`archetypes.measure.FINE_INTEGERS` for their one-way tables, the default grid a
coarse view for their pairs (Chicago 2014-15, epsilon 1 / 10, 3 runs: 935.5 / 959.7 -> 940.0 /
963.6; but on the 2013 trips as the stand-in, 6 runs: 894.1 / 938.6 -> 889.7 / 936.0, so not
the default; with the stratified draw, 3 runs: 2014-15 937.6 / 962.0 -> 939.4 / 964.1, 2013
904.9 / 941.9 -> 897.9 / 939.2, held-out 2015 879.5 / 931.3 -> 876.4 / 927.4. It loses at
epsilon 10 too, where a fine table's expected noise mass is about 150 trips of 4,400: no rule
on the noise explains it, and the trip count that does is not released before the bins are set).

Without public trips the schema's public groups (:class:`~archetypes.schema.Group`: SUBE's mode,
line and branch from the network metadata) are one model column each, with coarse views (a
hierarchical measurement, :mod:`archetypes.measure`): the configuration's chain measures the
pairs of a grouped column through its coarsest view, and a group's one-way table is weighted
by its number of columns. A plain column with public coarse labels (the schema's ``coarse``:
SUBE's zone grid) gets a coarse view the same way, through which its pairs are measured, and a
group is measured against it; when the measurement's sigma is at most :data:`AUTO_SIGMA` the
coarse views are dropped. Large one-way tables weigh more (``_joint_weight``: the cube root of
their size, a public rule), with public trips or without.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from archetypes.budget import split_budget
from archetypes.joint import (
    JointModel,
    chow_liu_tree,
    decompress,
    maximum_spanning_tree,
    project_simplex,
)
from archetypes.jointdraw import JointDrawing
from archetypes.jointpublic import PublicDesign, stratified_rank
from archetypes.jointtables import JointTables
from archetypes.measure import (
    VIEW_VALUES,
    Discretiser,
    calibrated_gaussian,
    l2_sensitivity,
    spread_individuals,
)
from archetypes.reading import source_of
from archetypes.sampling import systematic_choice
from archetypes.selection import TreeSelection
from archetypes.standin import stand_in_spec
from synth.errors import ConfigError, InputError, TransitSynthWarning
from synth.privacy import DiscreteGaussian, PrivacyLedger, SecureNoise

__all__ = ["JointSampling"]

_KEYS = (
    "share",
    "max_records_per_individual",
    "pool",
    "pairs",
    "max_cells",
    "compress",
    "prior_cells",
    "fine_bins",
    "cell_cap",
)
#: with public trips: the tree-sampled trips' share of the pool's starting mass (the public
#: trips bring the higher-order structure; the tree's fill cells the public period lacks)
TREE_MASS = 0.01
#: ``pairs = "auto"``: every pair is measured when that measurement's sigma is at most this
#: (a public rule on the budget; tuned on Chicago: all pairs win at epsilon 10, lose at 1)
AUTO_SIGMA = 15.0
#: the joint measurements' default share of (epsilon, delta), with and without public trips
#: (without, the archetype and category counts only sort the model's own trips: Tuesday's SUBE
#: cards scored 779 at 0.9 against 771 at 0.8; the Chicago check held, 928 against 926; 0.95
#: scored 3 points more on them but left the archetype counts, which set the number of
#: synthetic individuals, too noisy on small data: 0 to 1,329 trips for 598 at epsilon 2)
SHARE = 0.8
SHARE_WITHOUT_PUBLIC = 0.9
#: k without public trips to read it from
DEFAULT_K = 3
#: without public trips: the share of the joint budget for the trips per individual, and the
#: cells of that histogram (1 .. MAX_COUNT trips, the last holding more)
COUNT_SHARE = 0.1
MAX_COUNT = 16


class JointSampling(PublicDesign, JointTables, JointDrawing, TreeSelection):
    """Fitting and sampling methods of the joint mode (mixed into the synthesizer)."""

    joint: bool | Mapping[str, Any] | None
    public_stand_in: bool | Mapping[str, Any] | None
    key_columns: Any
    category_column: str
    completion: Any
    marginals: Any
    max_records_per_individual: int
    unit: str
    ledger_: PrivacyLedger
    features_: list[str]
    joint_pool_: pd.DataFrame | None

    # -- options -----------------------------------------------------------------------------------
    def _joint_on(self) -> bool:
        option = self.joint
        if option is None or option is False:
            return False
        if option is True or isinstance(option, Mapping):
            return True
        raise ConfigError(f"joint must be None, a bool or a mapping, got {option!r}")

    def _joint_options(self) -> dict[str, Any]:
        option = {} if not isinstance(self.joint, Mapping) else dict(self.joint)
        unknown = sorted(set(option) - set(_KEYS))
        if unknown:
            raise ConfigError(f"joint: unknown key(s) {unknown} (allowed: {', '.join(_KEYS)})")
        default = SHARE if getattr(self, "joint_public_", True) else SHARE_WITHOUT_PUBLIC
        share = option.get("share", default)
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share < 1:
            raise ConfigError(f"joint: share must be in (0, 1), got {share!r}")
        for key in ("max_records_per_individual", "pool", "max_cells"):
            value = option.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"joint: {key} must be a positive integer, got {value!r}")
            if value is not None and value < 1:
                raise ConfigError(f"joint: {key} must be a positive integer, got {value!r}")
        for key in ("compress", "fine_bins"):
            if not isinstance(option.get(key, False), bool):
                raise ConfigError(f"joint: {key} must be true or false, got {option[key]!r}")
        prior = option.get("prior_cells", 5000)
        if isinstance(prior, bool) or not isinstance(prior, int) or prior < 0:
            raise ConfigError(f"joint: prior_cells must be an integer >= 0 (0: off), got {prior!r}")
        cap = option.get("cell_cap", "auto")
        whole = isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1
        if not (cap == "auto" or cap is False or whole):
            raise ConfigError(
                f"joint: cell_cap must be 'auto', a positive integer or false, got {cap!r}"
            )
        pairs = option.get("pairs", "auto")
        if pairs not in ("auto", "all", "tree"):
            raise ConfigError(f"joint: pairs must be 'auto', 'all' or 'tree', got {pairs!r}")
        return {
            "share": share,
            "max_records_per_individual": option.get("max_records_per_individual"),
            "pool": option.get("pool"),
            "pairs": pairs,
            "max_cells": option.get("max_cells") or 100_000,
            "compress": option.get("compress", False),
            "prior_cells": prior,
            "fine_bins": option.get("fine_bins", False),
            "cell_cap": cap,
        }

    def _joint_shares(self, split: tuple[float, ...], names: list[str]) -> list[float]:
        """Shares (joint, archetypes, category): ``share`` to the measurements, the rest split by
        ``budget_split``, whose stand-in and marginals shares (if any) go to the measurements."""
        s = Fraction(str(self._joint_options()["share"]))
        parts = dict(zip(names, (Fraction(str(x)) for x in split), strict=True))
        extra = parts.get("stand-in", Fraction(0)) + parts.get("marginals", Fraction(0))
        rest = 1 - s
        return [
            float(s + rest * extra),
            float(rest * parts["archetypes"]),
            float(rest * parts["category"]),
        ]

    def _joint_budgets(
        self, eps: float, delta: float, split: tuple[float, ...], names: list[str]
    ) -> list[tuple[float, float]]:
        shares = self._joint_shares(split, names)
        return split_budget((eps, delta), shares)

    # -- fitting -----------------------------------------------------------------------------------
    def _joint_columns(self, used: list[str]) -> list[str]:
        return list(used)

    def _joint_tree(self, columns: list[str], codes: np.ndarray | None) -> list[tuple[int, int]]:
        """Chow-Liu tree of the public codes, else the configuration's chain (public rule), over
        the model columns: a view hangs under its group (a public table, not measured), and the
        chain's tables of a grouped column are those of its group's coarsest view (a hierarchical
        measurement: a two-way table of the fine group, 402 x 242 cells for SUBE's routes and
        zones, is noise at card level; on Tuesday's SUBE cards the coarse tables scored 771
        against 745)."""
        disc = self.discretiser_
        if codes is not None and len(disc.model) > 1:
            return chow_liu_tree(codes, disc.sizes)
        spec = stand_in_spec(
            True,
            key_columns=list(self.key_columns),
            category_column=self.category_column,
            features=[],
            completion=self.completion,
            needed=columns,
        )
        return disc.chain(spec.tables, list(self.key_columns))

    def _joint_pairs(
        self, tree: list[tuple[int, int]], sizes: list[int], k: int, budget: tuple[float, float]
    ) -> list[tuple[int, int]]:
        """The two-way tables measured (public rules): the tree's, and where the tree joins a
        group's view to a plain column's coarse view, the whole group against that view too (the
        group stands for several columns: SUBE's mode/line/branch x coarse zones carries line x
        zone and branch x zone at 402 x 32 cells; on Tuesday's SUBE cards 798 against 794 over
        6 noise runs at epsilon 1; at epsilon 10, sigma under :data:`AUTO_SIGMA`, ``_fit_joint``
        drops the coarse views: 842 against 839); with ``pairs = "all"`` every
        other pair of at most ``max_cells`` cells too; ``"auto"`` (default) does so when the
        noise of that measurement (sigma, from the budget, ``k`` and the tables and weights) is at
        most :data:`AUTO_SIGMA`. With public trips, tables over ``prior_cells`` cells are left to
        them."""
        options = self._joint_options()
        d = len(sizes)
        views = self.discretiser_.views
        fixed = {(min(v, p), max(v, p)) for v, (p, _) in views.items()}  # public: not measured
        pairs: list[tuple[int, int]] = [
            (min(e), max(e)) for e in tree if tuple(sorted(e)) not in fixed
        ]
        for a, b in tree:  # a group against a plain column's coarse view (see the docstring)
            for u, v in ((a, b), (b, a)):
                if u in views and v in views and views[u][0] in self.discretiser_.combos:
                    group = views[u][0]
                    if views[v][0] not in self.discretiser_.combos and (group, v) not in pairs:
                        pairs.append((min(group, v), max(group, v)))
        more = [
            (i, j)
            for i in range(d)
            for j in range(i + 1, d)
            if (i, j) not in pairs
            and (i, j) not in fixed
            and sizes[i] * sizes[j] <= options["max_cells"]
        ]
        if self.joint_prior_only_:
            cap = options["prior_cells"]
            pairs = [e for e in pairs if sizes[e[0]] * sizes[e[1]] <= cap]
            more = [e for e in more if sizes[e[0]] * sizes[e[1]] <= cap]
        every = options["pairs"] == "all"
        if options["pairs"] == "auto" and more:
            every = self._sigma(d, pairs + more, k, budget) <= AUTO_SIGMA
        return [(int(a), int(b)) for a, b in (pairs + more if every else pairs)]

    def _joint_design(
        self,
        columns: list[str],
        public_codes: np.ndarray | None,
        k: int,
        budget: tuple[float, float],
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """The tree and the measured pairs over ``discretiser_``'s model columns; when the
        measurement's sigma is at most :data:`AUTO_SIGMA`, without the coarse views of plain
        columns (the discretiser refitted: low noise measures the columns' own tables)."""
        disc = self.discretiser_
        tree = self._joint_tree(columns, public_codes)
        pairs = self._joint_pairs(tree, list(disc.sizes), k, budget)
        if disc.coarse and self._sigma(len(disc.sizes), pairs, k, budget) <= AUTO_SIGMA:
            fine = self._joint_options()["fine_bins"]
            self.discretiser_ = disc = Discretiser.fit(
                self.schema_, columns, None, views=True, groups=True, coarse=False, fine=fine
            )
            tree = self._joint_tree(columns, public_codes)
            pairs = self._joint_pairs(tree, list(disc.sizes), k, budget)
        return tree, pairs

    def _sigma(
        self, d: int, pairs: list[tuple[int, int]], k: int, budget: tuple[float, float]
    ) -> float:
        """The measurement's sigma for the one-way tables (weighted) and ``pairs``, each capped
        per cell as :meth:`_cell_caps` says."""
        tables = [(i,) for i in range(d)] + [tuple(p) for p in pairs]
        weights = [self._joint_weight(t) for t in tables]
        sensitivity = l2_sensitivity(k, weights, self._cell_caps(tables))
        return float(calibrated_gaussian(budget[0], budget[1], sensitivity).sigma)

    def _joint_weight(self, table: tuple[int, ...]) -> int:
        """A one-way table's weight in the measurement (a public rule on the domain sizes): the
        cube root of its cells over :data:`VIEW_VALUES`, rounded, at least 1 (the L1 error of
        ``n`` cells at noise ``sigma / w`` is ``n sigma / w``; at a fixed ``sum w^2`` the total
        is least for ``w`` proportional to ``n^(1/3)``; a table of under 108 cells, every
        Chicago column, keeps weight 1); a group's table at least its number of columns (it
        stands for their one-way tables); a view (a public coarsening) as any other table.
        On Tuesday's SUBE cards: 794 against 779 (the group's weight on its mode view too)."""
        disc = self.discretiser_
        if len(table) != 1:
            return 1
        col = table[0]
        w = max(1, round((disc.sizes[col] / VIEW_VALUES) ** (1 / 3)))
        if col in disc.combos:
            w = max(w, len(disc.model[col].split("/")))
        return int(w)

    def _joint_k(self, public: pd.DataFrame | None, per: np.ndarray | None) -> int:
        """``k``: the option; else the public trips' 90th percentile of trips per individual;
        else the median of the noisy trips-per-individual histogram ``per`` (its release is paid
        for), at most :data:`DEFAULT_K`: the noise grows as ``k``, the trips kept more slowly
        beyond the median (on Tuesday's SUBE cards: k = 1, 2, 3 scored 709, 728, 715)."""
        k = self._joint_options()["max_records_per_individual"]
        if k is None and public is not None:
            counts = public.groupby(self.id_column).size().to_numpy()
            k = math.ceil(float(np.quantile(counts, 0.9)))
        elif k is None and per is not None:
            k = min(DEFAULT_K, int(np.searchsorted(np.cumsum(per), 0.5)) + 1)
        elif k is None:
            k = DEFAULT_K
        return int(max(1, min(k, self.max_records_per_individual)))

    def _fit_joint(
        self,
        private: pd.DataFrame,
        public: pd.DataFrame | None,
        used: list[str],
        budget: tuple[float, float],
        noise: SecureNoise,
        rng: np.random.Generator,
    ) -> pd.DataFrame:
        """Measure, estimate, build the weighted pool; returns the trips the archetypes are
        learnt on (the public trips, or the pool's trips as one-trip pseudo-individuals)."""
        columns = self._joint_columns(used)
        self.count_mechanism_: DiscreteGaussian | None = None
        budget, counts_budget = self._counts_budget(budget, public is None)
        per = (
            None
            if counts_budget is None
            else self._trips_per_individual(private, counts_budget, noise)
        )
        public_c = None if public is None else self.schema_.conform(public, columns=columns)
        # the schema's groups are one model column with public trips or without; their views
        # (and the coarse views of plain columns, ``fine_bins``) without public trips only: with
        # them, measuring the group once (SUBE: mode/line/branch, weight 3, where line and branch
        # were two near-identical tables at weight 2 each, never tied together) gained 2.2-2.6
        # points on 8-12 Tuesday-only SUBE splits at epsilon 1 and 10 at the same k, and the
        # views 0.3-1.0 less (issue 28)
        alone, options = public is None, self._joint_options()
        compress, fine = alone and options["compress"], alone and options["fine_bins"]
        self.discretiser_ = disc = Discretiser.fit(
            self.schema_, columns, public_c, views=alone and not compress, groups=True, fine=fine
        )
        public_codes = None if public_c is None else disc.encode(public_c)
        self.joint_prior_only_ = public_codes is not None and self._joint_options()["prior_cells"]
        self.joint_cap_ = self._joint_cap(public_codes is not None)
        k = self.joint_k_ = self._joint_k(public, per)
        k, tree, pairs, bounded = self._public_design(columns, public_c, public_codes, k, budget)
        codes, ids = self._private_trips(private, columns, k)
        # without public trips: a private tree (selection.py)
        tree, pairs, budget = self._joint_select(codes, tree, pairs, k, budget, noise, alone)
        one, two, pairs = self._joint_tables(
            codes, ids, tree, pairs, k, budget, noise, public_codes, bounded
        )
        model = self.joint_model_ = JointModel(one, two, pairs, tree)
        if public_codes is None:  # the sampling tree: the strongest measured dependencies
            mi = model.mutual_information()
            measured = np.full(mi.shape, -1.0)
            for a, b in pairs:
                measured[a, b] = measured[b, a] = mi[a, b]
            model.edges = maximum_spanning_tree(measured)
        self._joint_pool(model, public_c, public_codes, rng)
        if public is not None:
            return public
        return self._pseudo_public(float(one[0].sum()), per, rng)

    def _counts_budget(
        self, budget: tuple[float, float], alone: bool
    ) -> tuple[tuple[float, float], tuple[float, float] | None]:
        """Without public trips (``alone``) and more than one trip per individual allowed,
        :data:`COUNT_SHARE` of the joint ``budget`` measures the trips per individual: the
        measurements' budget and that share (None when there is no such release)."""
        if not alone or self.max_records_per_individual <= 1:
            return budget, None
        measured, counts = split_budget(budget, [1 - COUNT_SHARE, COUNT_SHARE])
        return measured, counts

    def _joint_pool(
        self,
        model: JointModel,
        public_c: pd.DataFrame | None,
        public_codes: np.ndarray | None,
        rng: np.random.Generator,
    ) -> None:
        """The pool (public trips, tree draws) and its raking weights."""
        columns, disc = self.discretiser_.columns, self.discretiser_
        d = len(disc.model)
        size = self._joint_options()["pool"] or 100_000
        drawn = model.sample(size, rng)
        full = drawn
        if self.joint_maps_ is not None:
            full = np.stack(
                [
                    decompress(drawn[:, i], self.joint_maps_[i], self.joint_one_[i], rng)
                    for i in range(d)
                ],
                axis=1,
            )
        values = disc.decode(full, rng, public_c)
        if public_c is None or public_codes is None:
            pool_codes, frame = drawn, values
            start = np.ones(size)
        else:
            keep = [c for c in public_c.columns if c not in columns and c in self.features_]
            frame = pd.concat(
                [public_c[[*columns, *keep]].reset_index(drop=True), values], ignore_index=True
            )
            pool_codes = np.concatenate([public_codes, drawn])
            start = np.concatenate(
                [np.full(len(public_c), size / len(public_c)), np.full(size, TREE_MASS)]
            )
        self.joint_weights_ = model.weights(pool_codes, start)
        # the draw's public order: the codes over the public domains (``full``, never compressed)
        self.joint_rank_ = stratified_rank(full if public_codes is None else pool_codes, disc.sizes)
        self.joint_pool_ = frame

    def _pseudo_public(
        self,
        total: float,
        per: np.ndarray | None,
        rng: np.random.Generator,
    ) -> pd.DataFrame:
        """Without public trips: pool trips grouped into pseudo-individuals whose trip counts
        follow the noisy trips-per-individual histogram (one each when the bound is 1)."""
        frame = self.joint_pool_
        assert frame is not None
        per = np.ones(1) if per is None else per  # one trip per individual: nothing measured
        n = int(min(max(total, 100.0), 50_000))
        mean = float((np.arange(1, len(per) + 1) * per).sum())
        lengths = rng.choice(np.arange(1, len(per) + 1), size=int(n / mean) + 20, p=per)
        lengths = lengths[: int(np.searchsorted(np.cumsum(lengths), n)) + 1]
        rows = rng.permutation(systematic_choice(self.joint_weights_, int(lengths.sum()), rng))
        pseudo = frame.iloc[rows].reset_index(drop=True)
        pseudo.insert(0, self.id_column, np.repeat(np.arange(len(lengths)), lengths))
        return pseudo

    def _trips_per_individual(
        self, private: pd.DataFrame, budget: tuple[float, float], noise: SecureNoise
    ) -> np.ndarray:
        """Noisy histogram of trips per individual (1 .. ``MAX_COUNT`` or more, in the last
        cell): each individual in one cell, L2 sensitivity 1; returned as probabilities."""
        cap = min(MAX_COUNT, self.max_records_per_individual)
        if self.id_column not in private.columns:
            raise InputError(f"private data: missing column '{self.id_column}'")
        per = np.minimum(private[self.id_column].value_counts(sort=False).to_numpy(), cap)
        exact = np.bincount(per - 1, minlength=cap)
        self.count_mechanism_ = DiscreteGaussian(epsilon=budget[0], delta=budget[1])
        raw = self.count_mechanism_.release(
            exact,
            noise=noise,
            ledger=self.ledger_,
            label=f"trips per {self.unit}",
            unit=self.unit,
            note=f"each {self.unit} counted once, under its number of trips (1 to {cap}, the "
            "last cell holding more): L2 sensitivity 1",
        )
        hist = project_simplex(np.asarray(raw, dtype=float), max(float(raw.sum()), 1.0))
        return hist / hist.sum() if hist.sum() > 0 else np.eye(cap)[0]

    def _private_trips(
        self, private: pd.DataFrame, columns: list[str], k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The private trips conformed, bounded to ``k`` spread trips per individual, encoded,
        and each kept trip's individual (an index, for the per-cell caps:
        :func:`archetypes.measure.capped_counts`)."""
        order = self.order_column if self.order_column in private.columns else None
        need = list(dict.fromkeys([self.id_column, *columns, *([order] if order else [])]))
        missing = [c for c in need if c not in private.columns]
        source = source_of(private)  # the file's name when read from one (its rows numbered)
        if missing:
            raise InputError(f"{source}: missing column(s) {', '.join(map(repr, missing))}")
        trips = self.schema_.conform(private[need], source=source, columns=columns)
        trips = spread_individuals(trips, self.id_column, k, order)
        ids = pd.factorize(trips[self.id_column])[0]
        return self.discretiser_.encode(trips), ids

    def joint_manifest(self) -> dict[str, Any]:
        """The joint measurements for the manifest (each: tables, cells, k, L2 sensitivity, sigma,
        rho, epsilon, delta) and the public bins and compression."""
        disc = self.discretiser_
        out: dict[str, Any] = {
            "share": self._joint_options()["share"],
            "measurements": [m.to_dict(disc.model) for m in self.measurements_],
            "model_columns": list(disc.model),
            "public_groups": [n.split("/") for j, n in enumerate(disc.model) if j in disc.combos],
            "max_records_per_individual": self.joint_k_,
            "bins": {c: e.tolist() for c, e in disc.edges.items()},
        }
        selection = getattr(self, "selection_", None)
        if selection is not None:
            out["selection"] = selection.to_dict(disc.model)
        mech = self.count_mechanism_
        if mech is not None:
            out["trips_per_individual"] = {
                "cells": min(MAX_COUNT, self.max_records_per_individual),
                "sensitivity_l2": mech.sensitivity,
                "sigma": mech.sigma,
                "epsilon": mech.epsilon,
                "delta": mech.delta,
            }
        return out

    def _joint_features(self, features: list[str], public: pd.DataFrame | None) -> list[str]:
        """Without public trips, features lacking a public domain are not clustered (warned)."""
        if not self._joint_on():
            return features
        kept = [f for f in features if f in self.schema_ or (public is not None and f in public)]
        dropped = [f for f in features if f not in kept]
        if dropped and public is None:
            warnings.warn(
                f"no public data: features {dropped} have no public domain and are not clustered "
                "(add them to the schema to use them)",
                TransitSynthWarning,
                stacklevel=3,
            )
        return kept
