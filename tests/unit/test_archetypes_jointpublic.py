"""The joint measurements next to public trips (issue 28, archetypes/jointpublic.py): the bound on
trips per card undone by public ratios, the public median ``k`` when the tables would be mostly
noise, the two-way tables left to the public trips when they would be mostly noise, and the
synthetic trips drawn along a public code order (stratified)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from archetypes import ArchetypeSynthesizer, TripSchema
from archetypes.jointpublic import (
    ABS_NOISE,
    CAP_NOISE_SHARE,
    Bounded,
    bound_ratios,
    cap_ratios,
    informative_one_way,
    informative_pairs,
    median_k,
    noise_share,
    stratified_rank,
    unbound_tables,
)
from archetypes.sampling import systematic_choice

SCHEMA = TripSchema.from_dict(
    {
        "card": {"kind": "id"},
        "hour": {"kind": "categorical", "values": list(range(24))},
        "zone": {"kind": "categorical", "values": ["A", "B", "C"]},
        "mode": {"kind": "categorical", "values": ["bus", "rail"]},
    }
)


def cards(light: int, heavy: int, start: int = 0) -> pd.DataFrame:
    """``light`` cards with one trip (zone A, bus) and ``heavy`` cards with 6 trips over the day,
    their later trips in zone B by rail (the trips a bound of k < 6 leaves out)."""
    rows = [(f"l{start + i}", 8, "A", "bus") for i in range(light)]
    for i in range(heavy):
        rows += [
            (f"h{start + i}", h, "A" if h < 12 else "B", "rail") for h in (7, 9, 11, 13, 15, 17)
        ]
    return pd.DataFrame(rows, columns=["card", "hour", "zone", "mode"])


def synth(epsilon: float, **joint: object) -> ArchetypeSynthesizer:
    return ArchetypeSynthesizer(
        schema=SCHEMA,
        epsilon=epsilon,
        delta=1e-5,
        key_columns=["hour", "zone"],
        category_column="mode",
        id_column="card",
        archetypes=2,
        order_column="hour",
        random_state=0,
        joint=dict(joint) if joint else True,
    )


def test_median_k_of_the_public_cards() -> None:
    assert median_k(cards(3, 2), "card", 5) == 1
    assert median_k(cards(2, 3), "card", 5) == 5  # capped
    assert median_k(cards(2, 3), "card", 10) == 6


def test_ratios_are_one_without_a_bound_and_undo_it_otherwise() -> None:
    codes = np.array([[0, 1], [1, 1], [1, 0], [2, 1]])
    (ratio,) = bound_ratios(codes, codes, [(0, 1)], [3, 2])
    np.testing.assert_array_equal(ratio, np.ones((3, 2)))
    full = np.array([0.0] * 10 + [1.0] * 30)  # the bound kept 10 of value 0, 5 of value 1
    bounded = np.array([0.0] * 10 + [1.0] * 5)
    one_ratio = bound_ratios(full[:, None].astype(int), bounded[:, None].astype(int), [(0,)], [2])
    (one,), _ = unbound_tables([np.array([10.0, 5.0])], [], [], one_ratio, [])
    assert one.sum() == pytest.approx(15.0)  # the estimate's total is kept
    # each cell times (f + 1) / (b + 1) over the totals': 10 and 5 x 31 / 6
    assert one / one.sum() == pytest.approx([60 / 215, 155 / 215], rel=1e-9)
    assert abs(one[1] / one.sum() - 0.75) < abs(5 / 15 - 0.75) / 5  # close to all trips' 3/4


def test_unbound_two_way_tables_share_the_new_margins() -> None:
    rng = np.random.default_rng(0)
    full = rng.integers(0, 3, size=(200, 2))
    bounded = full[::2]
    one = [np.bincount(bounded[:, i], minlength=3).astype(float) for i in range(2)]
    two = [np.histogram2d(bounded[:, 0], bounded[:, 1], bins=[3, 3], range=[[0, 3], [0, 3]])[0]]
    ones = bound_ratios(full, bounded, [(0,), (1,)], [3, 3])
    pair = bound_ratios(full, bounded, [(0, 1)], [3, 3])
    fixed, (table,) = unbound_tables(one, two, [(0, 1)], ones, pair)
    np.testing.assert_allclose(table.sum(1), fixed[0], rtol=1e-6)
    np.testing.assert_allclose(table.sum(0), fixed[1], rtol=1e-6)


def test_informative_rules_at_the_boundary() -> None:
    sigma = 10.0
    trips = math.floor(4 * 5 * sigma * ABS_NOISE)  # a 4 x 5 table's expected noise mass
    assert informative_pairs([(0, 1), (0, 2)], [4, 5, 6], sigma, trips + 1) == [(0, 1)]
    assert informative_pairs([(0, 1), (0, 2)], [4, 5, 6], sigma, trips - 1) == []
    assert informative_one_way([20, 3], [1, 1], sigma, trips + 1)
    assert not informative_one_way([21, 3], [1, 1], sigma, trips + 1)  # one value more
    assert informative_one_way([40, 3], [2, 1], sigma, trips + 1)  # a weight divides the noise


def test_the_bound_is_undone_on_the_production_path(zero_noise: object) -> None:
    """Zero noise, the same cards public and private, k = 1 (the public median): the bounded
    trips are all zone A, bus; the estimated zone table is that of all trips (a third B).
    Without the public ratios it would be the bounded trips' (no B at all)."""
    data = cards(60, 30)
    syn = synth(1.0).fit(data, data)
    assert syn.joint_k_ == 1
    zone = syn.discretiser_.model.index("zone")
    one = syn.joint_model_.one[zone]
    truth = data["zone"].value_counts(normalize=True).reindex(["A", "B", "C"], fill_value=0)
    assert one / one.sum() == pytest.approx(truth.to_numpy(), abs=0.02)


def test_k_and_pairs_follow_the_public_noise_rules() -> None:
    public, private = cards(60, 30), cards(50, 20, start=100)
    low = synth(0.5).fit(private, public)  # mostly noise at k = 6 (the 90th percentile)
    assert low.joint_k_ == 1
    tables = low.measurements_[0].tables
    assert all(len(t) == 1 for t in tables)  # the pairs left to the public trips
    high = synth(1000.0).fit(private, public)  # informative at k = 6
    assert high.joint_k_ == 6
    assert any(len(t) == 2 for t in high.measurements_[0].tables)
    fixed = synth(0.5, max_records_per_individual=4, pairs="tree").fit(private, public)
    assert fixed.joint_k_ == 4  # the options are kept as given
    assert any(len(t) == 2 for t in fixed.measurements_[0].tables)


def test_noise_share_and_cap_ratios() -> None:
    # the larger of 10 x 10 / 1 and 400 x 10 / 2 cells' noise, over 1000 public trips
    assert noise_share([10, 400], [1, 2], 10.0, 1000) == pytest.approx(2000 * ABS_NOISE / 1000)
    assert informative_one_way([10, 400], [1, 2], 10.0, 1596)  # 1595.8 of noise
    assert not informative_one_way([10, 400], [1, 2], 10.0, 1595)
    # card 0: two trips in cell 1, one in cell 0; card 1: one in cell 1 -> capped 1 and 2
    bounded = Bounded(np.array([[1], [1], [0], [1]]), np.array([0, 0, 0, 1]))
    (ratio,) = cap_ratios(bounded, [(0,)], [3], [1])
    np.testing.assert_allclose(ratio, [(1 + 1) / (1 + 1), (3 + 1) / (2 + 1), 1.0])
    (same,) = cap_ratios(bounded, [(0,)], [3], [None])
    np.testing.assert_allclose(same, 1.0)


def test_the_cap_follows_the_public_noise_rule() -> None:
    """``cell_cap = "auto"``: cap 1 where counting every trip would leave a one-way table's noise
    share above CAP_NOISE_SHARE (epsilon 1 here), none where it is below (epsilon 200); the same
    on two private inputs that share nothing (a public rule); an integer cap applies always."""
    public = cards(40, 40)
    for private in (cards(30, 10, start=100), cards(5, 60, start=500)):
        noisy, sharp = synth(1.0).fit(private, public), synth(200.0).fit(private, public)
        n = len(noisy.measurements_[0].tables)
        assert noisy.measurements_[0].caps == [1] * n
        assert sharp.measurements_[0].caps == [None] * len(sharp.measurements_[0].tables)
        forced = synth(200.0, cell_cap=1).fit(private, public).measurements_[0]
        assert forced.caps == [1] * len(forced.tables)
    assert 0 < CAP_NOISE_SHARE < 1


def test_a_draw_along_the_stratified_rank_meets_each_cell_within_one() -> None:
    rng = np.random.default_rng(5)
    codes = np.stack([rng.integers(0, 3, 5000), rng.integers(0, 40, 5000)], axis=1)
    weights = rng.random(5000)
    rank = stratified_rank(codes, [3, 40])
    order = np.argsort(rank)
    assert (np.diff(codes[order, 1]) >= 0).all()  # the 40-value column first
    size = 997
    expected = np.bincount(codes[:, 1], weights=weights, minlength=40) / weights.sum() * size
    drawn = order[systematic_choice(weights[order], size, rng)]
    assert np.abs(np.bincount(codes[drawn, 1], minlength=40) - expected).max() < 1
    unsorted = systematic_choice(weights, size, rng)  # in pool order: not stratified
    assert np.abs(np.bincount(codes[unsorted, 1], minlength=40) - expected).max() > 2
    fitted = synth(1.0).fit(cards(50, 20, start=100), cards(60, 30))
    assert fitted.joint_rank_ is not None and len(fitted.joint_rank_) == len(fitted.joint_pool_)


def test_without_public_trips_the_draw_is_stratified_along_the_public_domains() -> None:
    fitted = synth(1.0).fit(cards(50, 20, start=100))  # no public trips: the pool is the model's
    rank, pool = fitted.joint_rank_, fitted.joint_pool_
    assert rank is not None and pool is not None and len(rank) == len(pool)
    assert sorted(rank.tolist()) == list(range(len(pool)))
    disc = fitted.discretiser_
    codes = disc.encode(fitted.schema_.conform(pool, columns=disc.model))[np.argsort(rank)]
    keys = [disc.model.index(c) for c in ("hour", "zone", "mode")]  # most values first
    flat = np.ravel_multi_index(tuple(codes[:, j] for j in keys), (24, 3, 2))
    assert (np.diff(flat) >= 0).all()  # the domains' order, never the values' frequencies
    assert len(np.unique(codes[:, keys[0]])) > 1
