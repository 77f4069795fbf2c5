"""ArchetypeModel (GMM archetypes of public trips), majority with random ties, bounding."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from archetypes.model import ArchetypeModel, bound_individuals, majority
from synth.errors import ConfigError, InputError


def two_kinds(n: int = 40, seed: int = 0) -> pd.DataFrame:
    """Morning riders (hours 6-8, zone A) and night riders (hours 21-23, zone B), 1-4 trips each."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        night = i % 2 == 1
        for _ in range(rng.integers(1, 5)):
            rows.append(
                {
                    "card": f"c{i}",
                    "hour": int(rng.integers(21, 24) if night else rng.integers(6, 9)),
                    "zone": "B" if night else "A",
                    "mode": "rail" if night else "bus",
                }
            )
    return pd.DataFrame(rows)


def test_majority_counts_and_ties_at_random() -> None:
    groups = np.array([0, 0, 0, 1, 1, 3])
    values = np.array([2, 2, 1, 0, 1, 0])
    seen = {tuple(majority(groups, values, 3, np.random.default_rng(s), 5)) for s in range(40)}
    assert {out[0] for out in seen} == {2}
    assert {out[1] for out in seen} == {0, 1}  # a tie, broken both ways
    assert {(out[2], out[3], out[4]) for out in seen} == {(-1, 0, -1)}  # no entries -> -1


def test_majority_ignores_negative_values() -> None:
    out = majority(np.array([0, 0, 0]), np.array([-1, -1, 2]), 3, np.random.default_rng(0))
    assert out.tolist() == [2]


def test_bound_individuals_keeps_first_trips_by_order() -> None:
    trips = pd.DataFrame({"card": ["a", "a", "a", "b"], "hour": [9, 7, 8, 5]})
    kept = bound_individuals(trips, "card", 2, "hour")
    assert sorted(kept["hour"].tolist()) == [5, 7, 8]
    assert kept.index.tolist() == sorted(kept.index)  # input order preserved
    assert bound_individuals(trips, "card", 2)["hour"].tolist() == [9, 7, 5]


@pytest.mark.parametrize("order", [None, "hour"])
def test_bound_individuals_ignores_a_repeated_index(order: str | None) -> None:
    """A frame whose index repeats (two frames concatenated without ``ignore_index``) is bounded
    by position: each card keeps k rows, not every row sharing a kept row's label (which gave
    the stand-in's counted trips k x the repeats per card, beyond the stated sensitivity)."""
    part = pd.DataFrame({"card": ["a", "a", "a", "a"], "hour": [9, 7, 8, 6]})
    trips = pd.concat([part, part.assign(card="b")])  # index 0 1 2 3 0 1 2 3
    kept = bound_individuals(trips, "card", 1, order)
    assert kept["card"].value_counts().to_dict() == {"a": 1, "b": 1}
    assert kept["hour"].tolist() == ([9, 9] if order is None else [6, 6])
    # a unique but shuffled index: input order, the same rows as a fresh index gives
    shuffled = trips.reset_index(drop=True).set_axis([5, 3, 7, 1, 0, 6, 2, 4])
    again = bound_individuals(shuffled, "card", 2, order)
    fresh = bound_individuals(trips.reset_index(drop=True), "card", 2, order)
    assert again.reset_index(drop=True).equals(fresh.reset_index(drop=True))


def test_model_separates_the_two_kinds_of_individuals() -> None:
    public = two_kinds()
    model = ArchetypeModel(
        n_archetypes=2,
        features=["hour"],
        id_column="card",
        key_columns=["hour", "zone"],
        category_column="mode",
        category_values=["bus", "rail", "ferry"],
        random_state=0,
    ).fit(public)
    ind = model.individuals_
    night = ind.index.str[1:].astype(int) % 2 == 1
    assert ind.loc[night, "archetype"].nunique() == 1
    assert ind.loc[~night, "archetype"].nunique() == 1
    assert ind.loc[night, "archetype"].iloc[0] != ind.loc[~night, "archetype"].iloc[0]
    assert ind["category"].tolist() == [1 if n else 0 for n in night]
    assert model.n_individuals_.sum() == 40 and sorted(model.n_individuals_) == [20, 20]
    counts = public.groupby("card").size()
    for a in range(2):
        members = ind.index[ind["archetype"] == a]
        assert model.trips_per_individual_[a] == pytest.approx(counts[members].mean())
        joint = model.joint(a)
        assert joint["probability"].sum() == pytest.approx(1.0)
        assert joint["zone"].nunique() == 1
    night_trip = pd.DataFrame({"card": ["x"], "hour": [22]})
    night_archetype = ind.loc[night, "archetype"].iloc[0]
    assert model.predict(night_trip).tolist() == [night_archetype]
    assigned = model.assign(two_kinds(seed=5), np.random.default_rng(0))
    assert set(assigned.unique()) == {0, 1} and assigned.index.is_unique


def test_model_errors() -> None:
    public = two_kinds(4)
    with pytest.raises(ConfigError, match="n_archetypes"):
        ArchetypeModel(n_archetypes=0, features=["hour"], id_column="card").fit(public)
    with pytest.raises(InputError, match="missing column"):
        ArchetypeModel(features=["minute"], id_column="card").fit(public)
    with pytest.raises(InputError, match="fewer than n_archetypes"):
        ArchetypeModel(n_archetypes=500, features=["hour"], id_column="card").fit(public)
    with pytest.raises(InputError, match="numeric"):
        ArchetypeModel(n_archetypes=2, features=["zone"], id_column="card").fit(public)
