"""The bound on trips per individual, undone with the public trips (issue 28, the public path).

The joint measurements count at most ``k`` trips per individual (:func:`archetypes.measure.
spread_individuals`), so they estimate the tables of the BOUNDED trips, which differ from those of
all trips: a busy card's later trips are left out. With public trips, the same bound is applied to
them (a per-individual rule) and:

1. each noisy table is shrunk towards the public BOUNDED table (:func:`archetypes.joint.
   consistent_tables`' prior): like for like, so that the empirical-Bayes weight measures the
   change between the periods, not the bound;
2. the estimated bounded tables are then mapped back to all trips cell by cell by the public
   ratio of all trips to bounded trips (:func:`unbound_tables`: the ratio estimator of survey
   sampling, Cochran 1977, ch. 6, with the public period as the auxiliary data; a pseudo-count of
   one keeps empty cells finite), and the two-way tables raked again to the corrected one-way
   tables. Post-processing of the released tables and public data.

Because the bound's distortion is corrected from public data, ``k`` can be small, which divides the
noise (sigma grows as ``k``): :func:`median_k` takes the median of the public trips per
individual, the rule used without public trips on the noisy histogram. On Tuesday's SUBE cards
(half of the cards public, half private, two splits, one-way tables at epsilon 1) the mean TV of
the seven columns' tables was 49.6 at k = 2 with the correction against 52.7-53.0 at k = 5 (the
90th percentile, the rule before) without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from archetypes.joint import consistent_tables, project_simplex, rake_table
from archetypes.measure import (
    Discretiser,
    Measurement,
    calibrated_gaussian,
    capped_counts,
    l2_sensitivity,
    spread_individuals,
    table_cells,
)
from synth.errors import ConfigError

__all__ = [
    "Bounded",
    "PublicDesign",
    "bound_ratios",
    "bounded_trips",
    "cap_ratios",
    "informative_one_way",
    "informative_pairs",
    "median_k",
    "noise_share",
    "public_table",
    "stratified_rank",
    "unbound_model",
    "unbound_tables",
]


#: E|N(0, sigma^2)| / sigma: a cell's expected absolute noise over sigma
ABS_NOISE = math.sqrt(2 / math.pi)
#: ``cell_cap = "auto"`` with public trips: the tables count a card at most once per cell when,
#: counting every trip, a one-way table's :func:`noise_share` would exceed this (the capped
#: counts' public ratio has an error of its own, which only pays against large noise). Chosen on
#: 5-8 Tuesday-only SUBE splits (half the cards private, half public; 3 noise runs each), cap
#: minus no cap at the share: +3.5 at 0.88 (epsilon 1), +3.0 at 0.32 (3), +0.7 at 0.22 (5),
#: -0.1 at 0.13 (10), -2.3 at 0.07 (20); Chicago (one trip per taxi) is unaffected
CAP_NOISE_SHARE = 0.2


def median_k(public: pd.DataFrame, id_column: str, cap: int) -> int:
    """The median of the PUBLIC trips per individual (rounded up), at most ``cap``, at least 1."""
    counts = public.groupby(id_column).size().to_numpy()
    median = math.ceil(float(np.median(counts))) if len(counts) else 1
    return int(max(1, min(median, cap)))


def noise_share(sizes: Sequence[int], weights: Sequence[int], sigma: float, trips: int) -> float:
    """The largest expected noise mass of the one-way tables (``sizes``, measured at noise
    ``sigma / weight``: cells x sigma / weight x :data:`ABS_NOISE`) over the number of PUBLIC
    trips ``trips`` (bounded like the private)."""
    return max(
        (n * sigma / w * ABS_NOISE for n, w in zip(sizes, weights, strict=True)), default=0.0
    ) / max(trips, 1)


def informative_one_way(
    sizes: Sequence[int], weights: Sequence[int], sigma: float, trips: int
) -> bool:
    """Whether every one-way table carries at least as much signal as noise: its
    :func:`noise_share` at most 1."""
    return noise_share(sizes, weights, sigma, trips) <= 1.0


class Bounded(NamedTuple):
    """Trips bounded to ``k`` per individual: their codes and each one's individual (an index)."""

    codes: np.ndarray
    ids: np.ndarray


def bounded_trips(
    public: pd.DataFrame, disc: Discretiser, id_column: str, k: int, order_column: str | None
) -> Bounded:
    """The conformed PUBLIC trips bounded to ``k`` per individual by the private trips' rule
    (:func:`~archetypes.measure.spread_individuals`), coded by ``disc``, with their individuals."""
    order = order_column if order_column in public.columns else None
    trips = spread_individuals(public, id_column, k, order)
    return Bounded(disc.encode(trips), pd.factorize(trips[id_column])[0])


def cap_ratios(
    bounded: Bounded,
    tables: Sequence[tuple[int, ...]],
    sizes: Sequence[int],
    caps: Sequence[int | None],
) -> list[np.ndarray]:
    """Per table, the PUBLIC ratio of bounded trips to their counts capped per individual and cell
    (:func:`~archetypes.measure.capped_counts`), each plus one: the factor that maps a capped
    table back to bounded trips cell by cell (the ratio estimator, Cochran 1977, ch. 6, as
    :func:`bound_ratios`); 1 for a table without a cap."""
    out = []
    for table, cap in zip(tables, caps, strict=True):
        if cap is None:
            out.append(np.ones(tuple(sizes[i] for i in table)))
            continue
        cell, shape = table_cells(bounded.codes, table, sizes)
        cells = int(np.prod(shape))
        trips = np.bincount(cell, minlength=cells) + 1.0
        capped = capped_counts(cell, cells, bounded.ids, cap) + 1.0
        out.append((trips / capped).reshape(shape))
    return out


def bound_ratios(
    full: np.ndarray,
    bounded: np.ndarray,
    tables: Sequence[tuple[int, ...]],
    sizes: Sequence[int],
) -> list[np.ndarray]:
    """Per table, the public ratio (all trips / bounded trips, each as a share of its total, with
    a pseudo-count of one per cell) of the coded PUBLIC trips ``full`` and their bounded subset
    ``bounded``: 1 where the bound changes nothing."""
    out = []
    for table in tables:
        counts = []
        for codes in (full, bounded):
            cell, shape = table_cells(codes, table, sizes)
            c = np.bincount(cell, minlength=int(np.prod(shape))).astype(float) + 1.0
            counts.append(c / c.sum())
        out.append((counts[0] / counts[1]).reshape(shape))
    return out


def unbound_tables(
    one: list[np.ndarray],
    two: list[np.ndarray],
    pairs: list[tuple[int, int]],
    one_ratio: list[np.ndarray],
    two_ratio: list[np.ndarray],
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Estimated bounded-trip tables mapped to all trips: each one-way table times its ratio
    (kept at its total), each two-way table times its ratio and raked to the new one-way tables."""
    fixed = []
    for table, ratio in zip(one, one_ratio, strict=True):
        total = float(table.sum())
        scaled = table * ratio
        fixed.append(project_simplex(scaled / max(float(scaled.sum()), 1e-12) * total, total))
    raked = [
        rake_table(table * ratio, fixed[i], fixed[j])
        for table, ratio, (i, j) in zip(two, two_ratio, pairs, strict=True)
    ]
    return fixed, raked


def unbound_model(
    one: list[np.ndarray],
    two: list[np.ndarray],
    tables: list[tuple[int, ...]],
    full: np.ndarray,
    bounded: np.ndarray,
    disc: Discretiser,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """:func:`unbound_tables` for the estimated tables of ``tables`` (the one-way tables of every
    model column of ``disc``, then the two-way ones), the ratios from the coded public trips
    ``full`` and ``bounded``; a view's table is again its parent's coarsening."""
    pairs = [(t[0], t[1]) for t in tables if len(t) == 2]
    ones = [t for t in tables if len(t) == 1]
    sizes = list(disc.sizes)
    one, two = unbound_tables(
        one,
        two,
        pairs,
        bound_ratios(full, bounded, ones, sizes),
        bound_ratios(full, bounded, [tuple(p) for p in pairs], sizes),
    )
    for view, (parent, mapping) in disc.views.items():
        one[view] = np.bincount(mapping, weights=one[parent], minlength=len(one[view]))
    return one, two


def informative_pairs(
    pairs: Sequence[tuple[int, int]], sizes: Sequence[int], sigma: float, trips: int
) -> list[tuple[int, int]]:
    """The two-way tables worth measuring next to public trips: those whose expected noise mass
    (cells x sigma x :data:`ABS_NOISE`) is at most the number of PUBLIC trips ``trips`` (bounded
    like the private ones), so that the table carries at least as much signal as noise; the
    others are left to the public trips' conditionals. ``sigma``: the measurement's with every
    pair of ``pairs`` (a public computation from the budget, ``k`` and the tables)."""
    return [(a, b) for a, b in pairs if sizes[a] * sizes[b] * sigma * ABS_NOISE <= max(trips, 1)]


class PublicDesign:
    """The design of the joint measurements next to public trips (mixed into
    :class:`~archetypes.jointfit.JointSampling`, which provides the methods declared here)."""

    discretiser_: Discretiser
    id_column: str
    order_column: str | None
    joint_k_: int
    joint_cap_: int | None
    _joint_options: Callable[[], dict[str, Any]]
    _joint_weight: Callable[[tuple[int, ...]], int]
    _sigma: Callable[[int, list[tuple[int, int]], int, tuple[float, float]], float]
    _joint_design: Callable[
        [list[str], np.ndarray | None, int, tuple[float, float]],
        tuple[list[tuple[int, int]], list[tuple[int, int]]],
    ]

    def _public_design(
        self,
        columns: list[str],
        public: pd.DataFrame | None,
        public_codes: np.ndarray | None,
        k: int,
        budget: tuple[float, float],
    ) -> tuple[int, list[tuple[int, int]], list[tuple[int, int]], Bounded | None]:
        """The tree and the measured pairs (``_joint_design`` at ``k``); with public trips
        (``public`` conformed, ``public_codes`` coded), unless the options fix them, ``k`` (the
        public 90th percentile of trips per individual) becomes the public median when at the
        90th percentile a one-way table would be mostly noise (:func:`informative_one_way`; the
        design is redone at the new ``k``), and with ``pairs = "auto"`` the two-way tables
        measured are those not mostly noise (:func:`informative_pairs`). Returns ``k``, the tree,
        the measured pairs and the public trips bounded to ``k``, coded (public rules on the
        budget, the domains and the public trips).
        Without public trips: ``k``, the design and None. The per-cell cap first
        (:meth:`_public_cap`)."""
        disc, options = self.discretiser_, self._joint_options()
        if public is None or public_codes is None:
            tree, pairs = self._joint_design(columns, public_codes, k, budget)
            return k, tree, pairs, None
        d = len(disc.sizes)
        bounded = bounded_trips(public, disc, self.id_column, k, self.order_column)
        weights = [self._joint_weight((i,)) for i in range(d)]
        if options["cell_cap"] == "auto":
            self.joint_cap_ = self._public_cap(weights, len(bounded.codes), k, budget)
        tree, pairs = self._joint_design(columns, public_codes, k, budget)
        # with public trips the model has no views: the design never refits the discretiser
        assert self.discretiser_ is disc
        sigma = self._sigma(d, pairs, k, budget)
        if options["max_records_per_individual"] is None and not informative_one_way(
            disc.sizes, weights, sigma, len(bounded.codes)
        ):
            k = self.joint_k_ = median_k(public, self.id_column, k)
            tree, pairs = self._joint_design(columns, public_codes, k, budget)
            bounded = bounded_trips(public, disc, self.id_column, k, self.order_column)
        if options["pairs"] == "auto":
            sigma = self._sigma(d, pairs, k, budget)
            pairs = informative_pairs(pairs, disc.sizes, sigma, len(bounded.codes))
        return k, tree, pairs, bounded

    def _public_cap(
        self, weights: list[int], trips: int, k: int, budget: tuple[float, float]
    ) -> int | None:
        """``cell_cap = "auto"`` with public trips: cap 1 when, counting every trip, a one-way
        table (``weights``) would have a :func:`noise_share` at ``k`` over the ``trips`` bounded
        public trips above :data:`CAP_NOISE_SHARE`, else no cap (public rules on the budget,
        the domains, ``k`` and the public trips)."""
        uncapped = l2_sensitivity(k, weights, [None] * len(weights))
        sigma = calibrated_gaussian(budget[0], budget[1], uncapped).sigma
        share = noise_share(self.discretiser_.sizes, weights, sigma, trips)
        return 1 if share > CAP_NOISE_SHARE else None

    def _public_tables(
        self,
        measured: Measurement,
        tables: list[tuple[int, ...]],
        public_codes: np.ndarray,
        bounded: Bounded,
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The consistent tables (:func:`~archetypes.joint.consistent_tables`) of the
        ``measured`` bounded trips (a capped table first mapped to bounded trips by its public
        ratio, :func:`cap_ratios`, its sigma scaled by the ratio's root mean square), shrunk
        towards the public trips bounded alike (``bounded``), then mapped to all trips by the
        public ratios (:func:`unbound_model`)."""
        disc = self.discretiser_
        sizes = list(disc.sizes)
        caps = measured.caps or [None] * len(tables)
        ratios = cap_ratios(bounded, tables, sizes, caps)
        estimates = [y * r for y, r in zip(measured.estimates, ratios, strict=True)]
        sigmas = [
            s * float(np.sqrt(np.mean(r**2))) for s, r in zip(measured.sigmas, ratios, strict=True)
        ]
        priors: list[np.ndarray | None] = [public_table(bounded.codes, t, sizes) for t in tables]
        one, two = consistent_tables(
            estimates, tables, sigmas, priors, len(sizes), views=disc.views
        )
        return unbound_model(one, two, tables, public_codes, bounded.codes, disc)

    def _joint_cap(self, public: bool) -> int | None:
        """The per-cell cap of the measurements (``cell_cap``) before the public design:
        ``false`` and ``"auto"`` none (with public trips :meth:`_public_cap` then decides
        ``"auto"``: their ratios map capped tables back to trips, :func:`cap_ratios`); an
        integer needs public trips."""
        cap = self._joint_options()["cell_cap"]
        if cap == "auto" or cap is False:
            return None
        if not public:
            raise ConfigError(
                f"joint: cell_cap = {cap} needs public trips (their ratios map the capped "
                "counts back to trips); set it to 'auto' or false"
            )
        return int(cap)

    def _cell_caps(self, tables: list[tuple[int, ...]]) -> list[int | None]:
        """Each table's per-cell cap (:meth:`_joint_cap`, set by the fit: a public rule)."""
        return [self.joint_cap_] * len(tables)


def public_table(codes: np.ndarray, table: tuple[int, ...], sizes: Sequence[int]) -> np.ndarray:
    """Public probabilities of a table."""
    cell, shape = table_cells(codes, table, sizes)
    counts = np.bincount(cell, minlength=int(np.prod(shape))).reshape(shape).astype(float)
    return counts / max(counts.sum(), 1.0)


def stratified_rank(codes: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Rank of each pool row in the order of its codes, the model column with the most values
    first (ties: model order). The synthetic trips are drawn systematically along this order
    (:func:`archetypes.sampling.systematic_choice`), which stratifies the draw by those columns
    (systematic sampling from an ordered list, implicit stratification: Cochran 1977, ch. 8): each
    cell's count is within one of its expected count, so the sample's own noise in the largest
    tables shrinks. On Tuesday's SUBE cards (half public, half private, 3 splits x 3 runs):
    888.5 -> 889.8 at epsilon 1, 906.9 -> 908.9 at epsilon 10. Without public trips (the codes of
    the model's own pool over the public domains), 3 runs at epsilon 1 / 10: Tuesday's SUBE taps
    as the private data 798.4 / 843.4 -> 800.4 / 845.1, Chicago 2013 903.1 / 939.5 -> 904.9 /
    941.9. A public rule on the domains: never the values' frequencies."""
    keys = sorted(range(len(sizes)), key=lambda j: (-sizes[j], j))
    order = np.lexsort(tuple(codes[:, j] for j in reversed(keys)))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank
