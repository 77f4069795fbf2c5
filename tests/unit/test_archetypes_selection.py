"""Without public trips: the private tree selection (archetypes/selection.py) and the fine numeric
bins with their coarse views (archetypes/measure.py ``FINE_INTEGERS``), issue 28."""

from __future__ import annotations

import numpy as np
import pandas as pd

from archetypes import ArchetypeSynthesizer, TripSchema
from archetypes.measure import FINE_INTEGERS, Discretiser, public_grid
from archetypes.selection import forest
from tests.conftest import riders, riders_schema

SCHEMA = TripSchema.from_dict(
    {
        "card": {"kind": "id"},
        "hour": {"kind": "categorical", "values": [6, 7, 8, 21, 22, 23]},
        "zone": {"kind": "categorical", "values": ["A", "B", "C"]},
        "mode": {"kind": "categorical", "values": ["bus", "rail", "ferry"]},
        "pay": {"kind": "categorical", "values": ["cash", "card", "pass"]},
    }
)


def paying(n: int, seed: int) -> pd.DataFrame:
    """One trip per card: hour and zone independent of the rest; ``pay`` a function of ``mode``
    (the chain hangs ``pay`` under ``zone``: only a chosen tree holds mode x pay)."""
    rng = np.random.default_rng(seed)
    mode = rng.choice(["bus", "rail", "ferry"], n)
    pay = np.select([mode == "bus", mode == "rail"], ["cash", "card"], "pass")
    return pd.DataFrame(
        {
            "card": [f"c{i}" for i in range(n)],
            "hour": rng.choice([6, 7, 8, 21, 22, 23], n),
            "zone": rng.choice(["A", "B", "C"], n),
            "mode": mode,
            "pay": pay,
        }
    )


def fit(public: pd.DataFrame | None, **joint: object) -> ArchetypeSynthesizer:
    return ArchetypeSynthesizer(
        schema=SCHEMA,
        epsilon=0.5,
        delta=1e-5,
        key_columns=["hour", "zone"],
        category_column="mode",
        id_column="card",
        archetypes=2,
        max_records_per_individual=1,
        completion=[("pay", ["zone", "hour"])],
        joint={"max_records_per_individual": 1, **joint},
        random_state=4,
    ).fit(paying(3000, 1), public)


def test_fine_numeric_bins_have_the_default_grid_as_coarse_view() -> None:
    schema = TripSchema.from_dict({"miles": {"kind": "numeric", "min": -1, "max": 1000}})
    plain = Discretiser.fit(schema, ["miles"], None)
    assert plain.model == ["miles"] and not plain.views  # the default: unchanged
    fine = Discretiser.fit(schema, ["miles"], None, fine=True)
    assert fine.model == ["miles", "miles:coarse"]
    edges = fine.edges["miles"]
    assert set(range(-1, FINE_INTEGERS + 1)) <= set(edges.tolist())
    grid = public_grid(-1, 1000)
    assert set(grid.tolist()) <= set(edges.tolist())  # every coarse edge is a fine edge
    values = np.array([-1, 0, 5, 9, 10, 17, 18, 31, 32, 45, 1000])
    codes = fine.encode(pd.DataFrame({"miles": values}))
    assert (edges[codes[:, 0]] <= values).all()
    assert (codes[:, 1] == np.searchsorted(grid, values, side="right") - 1).all()
    assert len(set(codes[:, 0].tolist())) == len(values)  # 17 and 18 apart, unlike the grid
    assert codes[5, 1] == codes[6, 1] and codes[8, 1] != codes[9, 1]


def test_forest_orients_each_tree_from_its_lowest_column() -> None:
    assert forest(5, [(3, 1), (1, 2), (4, 0)]) == [(0, 4), (1, 2), (1, 3)]


def test_selection_finds_the_dependence_the_chain_leaves_out(zero_noise: object) -> None:
    syn = fit(None)
    selection = syn.selection_
    assert selection is not None
    names = syn.discretiser_.model
    chosen = [{names[a], names[b]} for a, b in selection.chosen]
    assert {"mode", "pay"} in chosen and len(chosen) == 3
    tables = [{names[i] for i in t} for t in syn.measurements_[0].tables if len(t) == 2]
    assert {"mode", "pay"} in tables
    manifest = syn.joint_manifest()["selection"]
    assert ["mode", "pay"] in manifest["chosen"] and len(manifest["candidates"]) == 6
    assert manifest["sensitivity_l2"] == 4 * np.sqrt(6)
    labels = [s.label for s in syn.ledger_.spends]
    assert labels[0].startswith("joint tree selection") and "joint trip marginals" in labels[1]
    # the selection's share and the measurement's add up to the joint budget
    assert selection.mechanism.epsilon + syn.measurements_[0].mechanism.epsilon <= 0.5 * 0.9 + 1e-12


def test_no_selection_with_public_trips_or_every_pair_measured() -> None:
    assert fit(paying(2000, 2)).selection_ is None
    every = fit(None, pairs="all")
    assert every.selection_ is None
    assert not any("selection" in s.label for s in every.ledger_.spends)


def test_fine_bins_is_an_option_without_public_trips() -> None:
    base: dict = {
        "schema": riders_schema(),
        "epsilon": 0.1,  # sigma above AUTO_SIGMA: the coarse views stay
        "delta": 1e-5,
        "key_columns": ["hour", "zone"],
        "category_column": "mode",
        "id_column": "card",
        "archetypes": 2,
        "completion": [("fare", ["zone", "hour"])],
        "random_state": 3,
    }
    private, public = riders(300, 1), riders(300, 2)
    plain = ArchetypeSynthesizer(**base).fit(private)
    assert "fare:coarse" not in plain.discretiser_.model
    assert plain.discretiser_.edges["fare"].tolist() == list(range(10))  # 9 and 10 share a bin
    fine = ArchetypeSynthesizer(**base, joint={"fine_bins": True}).fit(private)
    assert "fare:coarse" in fine.discretiser_.model
    assert fine.discretiser_.edges["fare"].tolist() == list(range(11))
    given = ArchetypeSynthesizer(**base, joint={"fine_bins": True}).fit(private, public)
    assert "fare:coarse" not in given.discretiser_.model  # with public trips: their quantiles
