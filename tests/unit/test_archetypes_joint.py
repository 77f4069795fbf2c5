"""The joint mode of ArchetypeSynthesizer (issue 28): measurement helpers, the consistent tree
model, budgets, and fitting with and without public data."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from archetypes import ArchetypeSynthesizer, TripSchema, sube_schema
from archetypes.joint import (
    JointModel,
    compression,
    consistent_tables,
    decompress,
    maximum_spanning_tree,
    project_simplex,
    reconcile,
)
from archetypes.jointfit import AUTO_SIGMA
from archetypes.measure import Discretiser, public_grid, spread_individuals
from archetypes.schema import Column
from synth.errors import ConfigError
from tests.conftest import riders, riders_schema, riders_synthesizer

SCHEMA = riders_schema()


def joint(**kwargs: object) -> ArchetypeSynthesizer:
    """:func:`tests.conftest.riders_synthesizer` in the joint mode (the default), epsilon 2."""
    params: dict = {"epsilon": 2.0, "random_state": 3, "joint": True}
    params.update(kwargs)
    return riders_synthesizer(**params)


def test_project_simplex_is_the_closest_non_negative_table_of_the_total() -> None:
    out = project_simplex(np.array([5.0, -2.0, 1.0, 0.5]), 4.0)
    assert out.min() >= 0 and out.sum() == pytest.approx(4.0)
    np.testing.assert_allclose(out, [4.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(project_simplex(np.array([1.0, 2.0]), 3.0), [1.0, 2.0])


def test_spread_individuals_keeps_k_trips_over_the_day() -> None:
    trips = pd.DataFrame({"id": [1] * 7 + [2] * 2, "t": [*range(7), 0, 1]})
    kept = spread_individuals(trips, "id", 2, "t")
    assert kept["t"].tolist() == [1, 5, 0, 1]  # ranks 1 and 5 of 7; both trips of the short day
    assert spread_individuals(trips, "id", 1, "t")["t"].tolist() == [3, 1]


def test_public_grid_and_quantile_bins_are_public() -> None:
    grid = public_grid(-1, 100)
    assert grid[0] == -1 and (np.diff(grid) > 0).all() and grid[-1] <= 100
    schema = TripSchema.from_dict({"fare": {"kind": "numeric", "min": 0, "max": 50}})
    public = pd.DataFrame({"fare": np.arange(40)})
    with_public = Discretiser.fit(schema, ["fare"], public)
    assert with_public.size("fare") <= 33 and with_public.edges["fare"][0] == 0
    codes = with_public.encode(pd.DataFrame({"fare": [0, 39, 50]}))
    assert codes[:, 0].tolist()[0] == 0 and codes[2, 0] == with_public.size("fare") - 1


GROUPED = {
    "schema": {
        "mode": {"kind": "categorical", "values": ["bus", "rail"]},
        "line": {"kind": "categorical", "values": ["1", "2", "3", "?"], "other": "?"},
        "hour": {"kind": "categorical", "values": list(range(24))},
    },
    "groups": [
        {"columns": ["mode", "line"], "values": [["bus", "1"], ["bus", "2"], ["rail", "3"]]}
    ],
}


def test_a_public_group_is_one_model_column_with_a_coarse_view() -> None:
    schema = TripSchema.from_dict(GROUPED)
    disc = Discretiser.fit(schema, ["hour", "line", "mode"], None)
    # (mode, line) over its 3 combinations + the fallbacks (bus, ?), (rail, ?); views of both
    assert disc.model == ["hour", "mode/line", "mode", "line"]
    assert disc.sizes == [24, 5, 2, 4]
    trips = pd.DataFrame(
        {"hour": [7, 8, 9], "mode": ["rail", "bus", "rail"], "line": ["3", "2", "1"]}
    )
    codes = disc.encode(trips)
    assert codes[:, 1].tolist() == [2, 1, 4]  # (rail, 1) is not in the list: (rail, ?)
    assert codes[:, 2].tolist() == [1, 0, 1] and codes[:, 3].tolist() == [2, 1, 3]
    back = disc.decode(codes, np.random.default_rng(0), None)
    assert back.columns.tolist() == ["hour", "line", "mode"]
    assert (
        back["line"].tolist() == ["3", "2", "?"] and back["mode"].tolist() == trips["mode"].tolist()
    )
    # without groups every column stands alone; without views the group stands alone
    assert Discretiser.fit(schema, ["hour", "line", "mode"], None, groups=False).model == [
        "hour",
        "line",
        "mode",
    ]
    no_views = Discretiser.fit(schema, ["hour", "line", "mode"], None, views=False)
    assert no_views.model == ["hour", "mode/line"] and not no_views.views


def test_with_public_trips_a_group_is_measured_once_without_its_views() -> None:
    """With public trips the schema's group is one model column too (its columns' tables were
    two near-identical measurements before), without views; the manifest names it."""
    schema = TripSchema.from_dict(GROUPED)
    rng = np.random.default_rng(3)

    def taps(n: int, prefix: str) -> pd.DataFrame:
        combo = rng.integers(0, 3, n)
        return pd.DataFrame(
            {
                "card": [f"{prefix}{i // 2}" for i in range(n)],
                "hour": rng.integers(5, 23, n),
                "mode": np.array(["bus", "bus", "rail"])[combo],
                "line": np.array(["1", "2", "3"])[combo],
            }
        )

    syn = ArchetypeSynthesizer(
        schema=schema,
        epsilon=2.0,
        delta=1e-5,
        id_column="card",
        key_columns=["hour", "line"],
        category_column="mode",
        archetypes=2,
        order_column="hour",
        random_state=0,
    ).fit(taps(400, "a"), taps(300, "p"))
    assert syn.discretiser_.model == ["hour", "mode/line"] and not syn.discretiser_.views
    joint_part = syn.manifest()["parameters"]["joint"]
    assert joint_part["public_groups"] == [["mode", "line"]]
    assert joint_part["measurements"][0]["tables"][:2] == [["hour"], ["mode/line"]]
    out = syn.sample()
    pairs = set(zip(out["mode"], out["line"], strict=True))
    assert pairs <= {("bus", "1"), ("bus", "2"), ("rail", "3")}


def test_one_way_weights_grow_with_the_table_size() -> None:
    """The public rule of ``_joint_weight``: round(cbrt(cells / 32)), at least 1; a group's table
    at least its number of columns; a view as any table of its size."""
    wide = {
        c: {"kind": "categorical", "values": [f"v{i}" for i in range(n)]}
        for c, n in [("zone", 120), ("stop", 600), ("area", 100)]
    }
    schema = TripSchema.from_dict({**GROUPED, "schema": {**GROUPED["schema"], **wide}})
    syn = joint(schema=schema)
    syn.discretiser_ = disc = Discretiser.fit(
        schema, ["hour", "line", "mode", "zone", "stop", "area"], None
    )
    assert disc.model == ["hour", "mode/line", "mode", "line", "zone", "stop", "area"]
    weights = [syn._joint_weight((j,)) for j in range(len(disc.model))]
    # hour 24 cells: 1; the group: its 2 columns; the views of mode and line: 1 (one column
    # each); zone 120 cells: 2; stop 600: 3; area 100: 1
    assert weights == [1, 2, 1, 1, 2, 3, 1]
    assert syn._joint_weight((0, 2)) == 1  # two-way tables: weight 1


def test_a_coarse_view_carries_the_chain_and_meets_the_group() -> None:
    """A plain column's public coarse labels: a view (``zone:coarse``) through which the chain
    measures the column's pairs, and the group is measured against it (``_joint_pairs``)."""
    zones = [f"z{i}" for i in range(40)]
    zone = {"kind": "categorical", "values": zones, "coarse": [f"c{i // 10}" for i in range(40)]}
    schema = TripSchema.from_dict({**GROUPED, "schema": {**GROUPED["schema"], "zone": zone}})
    disc = Discretiser.fit(schema, ["hour", "line", "mode", "zone"], None)
    assert disc.model == ["hour", "mode/line", "mode", "line", "zone", "zone:coarse"]
    assert disc.sizes[-1] == 4 and disc.views[5][0] == 4
    codes = disc.encode(
        pd.DataFrame({"hour": [1], "mode": ["bus"], "line": ["2"], "zone": ["z17"]})
    )
    assert codes[0, 5] == 1  # z17 is in c1
    assert disc.decode(codes, np.random.default_rng(0), None).columns.tolist() == [
        "hour",
        "line",
        "mode",
        "zone",
    ]
    tree = disc.chain([("zone", "line")], ["hour", "line"])
    assert tree == [(0, 2), (2, 5)]  # hour - mode (line's coarsest view) - zone:coarse
    syn = joint(schema=schema)
    syn.discretiser_ = disc
    syn.joint_prior_only_ = False
    syn.joint_cap_ = None  # no public trips: no per-cell cap
    pairs = syn._joint_pairs(tree, disc.sizes, 1, (0.1, 1e-6))  # sigma too large for "all"
    assert pairs == [(0, 2), (2, 5), (1, 5)]  # and mode/line x zone:coarse
    # with public trips (groups=False) no view is made
    assert "zone:coarse" not in Discretiser.fit(schema, ["zone"], None, groups=False).model


def test_sube_zones_get_a_public_coarse_grid() -> None:
    """The finest grid of multiples of 0.05 degrees with at most 32 cells over the public zones
    (a 12 x 12 block of 0.05-degree zones: 0.15 degrees, 4 x 4 cells; "unknown" stays)."""
    grid = [f"{-34.0 - 0.05 * i:.2f},{-58.0 - 0.05 * j:.2f}" for i in range(12) for j in range(12)]
    public = pd.DataFrame({"line": "1", "branch": "2", "fare_type": 0, "zone": [*grid, "unknown"]})
    zone = sube_schema(public)["zone"]
    labels = dict(zip(zone.values, zone.coarse, strict=True))
    assert len(set(zone.coarse)) <= 32 and labels["unknown"] == "unknown"
    assert len(set(zone.coarse)) == 17  # 0.10 degrees would make 7 x 7 + 1 = 50 cells
    assert labels["-34.00,-58.00"] == labels["-34.05,-58.10"] == "-34.05,-58.05"


def test_coarse_views_only_when_the_noise_is_large() -> None:
    """``_fit_joint`` drops the coarse views when the measurement's sigma is at most
    AUTO_SIGMA (a public rule on the budget, ``k`` and the tables)."""
    zone = Column("zone", "categorical", ("A", "B", "C", "D"), coarse=("n", "n", "s", "s"))
    schema = SCHEMA.replace(zone)
    private = riders(300, 1)
    noisy = joint(schema=schema, epsilon=0.1).fit(private)
    assert "zone:coarse" in noisy.discretiser_.model
    assert noisy.measurements_[0].mechanism.sigma > AUTO_SIGMA
    sharp = joint(schema=schema, epsilon=200.0).fit(private)
    assert "zone:coarse" not in sharp.discretiser_.model
    assert sharp.measurements_[0].mechanism.sigma <= AUTO_SIGMA


def test_groups_are_checked_against_the_domains() -> None:
    bad = {**GROUPED, "groups": [{"columns": ["mode", "line"], "values": [["bus", "9"]]}]}
    with pytest.raises(ConfigError, match="not a combination"):
        TripSchema.from_dict(bad)
    no_other = {**GROUPED, "groups": [{"columns": ["line", "mode"], "values": [["1", "bus"]]}]}
    with pytest.raises(ConfigError, match="needs an 'other' value"):
        TripSchema.from_dict(no_other)
    with pytest.raises(ConfigError, match="groups must be a list"):
        TripSchema.from_dict({**GROUPED, "groups": {"columns": []}})


def test_reconcile_is_the_least_squares_consistent_pair() -> None:
    mapping = np.array([0, 0, 1])
    parent, view = reconcile(np.array([4.0, 6.0, 5.0]), 1.0, np.array([12.0, 5.0]), 2.0, mapping)
    np.testing.assert_allclose(np.bincount(mapping, weights=parent), view)
    # the view's cell 0: (12 / 2 + 10 / 2) / (1 / 2 + 1 / 2) = 11, spread evenly over 4 and 6
    np.testing.assert_allclose(view, [11.0, 5.0])
    np.testing.assert_allclose(parent, [4.5, 6.5, 5.0])


def test_consistent_tables_share_their_margins() -> None:
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 50, size=(4, 3)).astype(float)
    noisy = [
        truth.sum(1) + rng.normal(0, 3, 4),
        truth.sum(0) + rng.normal(0, 3, 3),
        truth + rng.normal(0, 3, (4, 3)),
    ]
    one, two = consistent_tables(noisy, [(0,), (1,), (0, 1)], 3.0, [None] * 3, 2)
    assert min(t.min() for t in [*one, *two]) >= 0
    np.testing.assert_allclose(two[0].sum(1), one[0], rtol=1e-6)
    np.testing.assert_allclose(two[0].sum(0), one[1], rtol=1e-6)
    assert one[0].sum() == pytest.approx(truth.sum(), rel=0.05)


def test_tree_model_samples_its_conditionals_and_rakes_a_pool() -> None:
    table = np.array([[30.0, 10.0], [0.0, 60.0]])
    model = JointModel([table.sum(1), table.sum(0)], [table], [(0, 1)], [(0, 1)])
    drawn = model.sample(20_000, np.random.default_rng(1))
    freq = np.bincount(drawn[:, 0] * 2 + drawn[:, 1], minlength=4) / len(drawn)
    np.testing.assert_allclose(freq, table.ravel() / 100, atol=0.02)
    pool = np.array([[0, 0], [0, 1], [1, 1], [1, 0]])
    w = model.weights(pool, np.ones(4))
    np.testing.assert_allclose(w / w.sum(), [0.3, 0.1, 0.6, 0.0], atol=1e-3)
    assert maximum_spanning_tree(np.array([[0, 1.0, -1], [1.0, 0, -1], [-1, -1, 0]])) == [(0, 1)]


def test_compression_and_decompression() -> None:
    mapping = compression(np.array([50, 3, 40, -2]), threshold=10)
    assert mapping.tolist() == [0, 2, 1, 2]
    values = decompress(
        np.array([0, 1, 2, 2, 2]), mapping, np.array([50, 3, 40, 0]), np.random.default_rng(0)
    )
    assert values[:2].tolist() == [0, 2] and set(values[2:]) == {1}  # value 3 has no mass


def test_joint_is_the_default_and_states_every_measurement() -> None:
    syn = joint().fit(riders(300, 1), riders(200, 0))
    manifest = syn.manifest()
    spends = [s for s in manifest["composition"] if s["type"] == "spend"]
    assert [s["label"] for s in spends] == [
        # hour, zone, mode, fare and the tree's 3 pairs: counted at most once per card and cell
        # (public trips), the noise is low enough for the pairs to carry more signal than noise
        # next to 200 public trips (archetypes.jointpublic.informative_pairs)
        "joint trip marginals (7 tables)",
        "archetype histogram",
        "mode histogram",
    ]
    (measured,) = manifest["parameters"]["joint"]["measurements"]
    assert measured["per_cell_caps"] == [1] * 7
    assert measured["sensitivity_l2"] == pytest.approx(np.sqrt(syn.joint_k_ * 7))
    assert measured["rho"] == pytest.approx(
        measured["sensitivity_l2"] ** 2 / 2 / measured["sigma"] ** 2
    )
    # 80% to the joint measurements, the rest split 0.1 / 0.9 as budget_split says
    assert Fraction(repr(spends[0]["epsilon"])) == pytest.approx(Fraction(16, 10), rel=1e-12)
    assert syn.ledger_.spent_epsilon <= 2.0
    out = syn.sample()
    SCHEMA.validate(out)
    assert set(out.columns) == {"card", "hour", "zone", "mode", "fare"}
    assert (out.groupby("card")["hour"].diff().dropna() >= 0).all()


def test_without_public_data_the_default_split_runs() -> None:
    """The stand-in failed with a three-share split ("budget_split must be 4 positive shares");
    the joint model needs no share of its own."""
    private = riders(300, 1)
    syn = joint(marginals=["fare"], budget_split=(0.1, 0.3, 0.6)).fit(private)
    out = syn.sample()
    SCHEMA.validate(out)
    assert len(private) / 2 < len(out) < 2 * len(private)  # tiny data: the noise is large
    assert out.groupby("card").size().max() > 1  # the noisy trips-per-card histogram is used
    # the trips per card first: their noisy median sets k (here at most DEFAULT_K = 3)
    m = len(syn.measurements_[0].tables)  # 7, or all 10 pairs when k's noise is small enough
    assert [s["label"] for s in syn.manifest()["composition"] if s["type"] == "spend"][:2] == [
        "trips per individual",
        f"joint trip marginals ({m} tables)",
    ]
    assert 1 <= syn.joint_k_ <= 3
    assert {"bus", "rail"} <= set(out["mode"])
    with pytest.raises(ConfigError, match="budget_split must be 4"):  # the old mode unchanged
        joint(
            marginals=["fare"], budget_split=(0.1, 0.3, 0.6), joint=False, public_stand_in=True
        ).fit(private)
    # --public-stand-in with the config's split: the stand-in share goes to the joint measurements
    joint(budget_split=(0.5, 0.1, 0.4), public_stand_in=True).fit(private)


def test_without_public_data_columns_need_a_schema_domain() -> None:
    schema = TripSchema({k: v for k, v in SCHEMA.columns.items() if k != "fare"})
    with pytest.raises(ConfigError, match=r"public domain in the schema.*fare"):
        joint(schema=schema).fit(riders(50, 1))


def test_bad_joint_options_are_config_errors() -> None:
    for option, message in [
        ({"share": 1.5}, "share must be in"),
        ({"pairs": "some"}, "pairs must be"),
        ({"nope": 1}, "unknown key"),
        ({"max_records_per_individual": 0}, "positive integer"),
        ({"fine_bins": "no"}, "fine_bins must be true or false"),
        ({"compress": 1}, "compress must be true or false"),
        ({"prior_cells": "many"}, r"prior_cells must be an integer >= 0"),
        ({"prior_cells": -1}, r"prior_cells must be an integer >= 0"),
        ({"cell_cap": 0}, "cell_cap must be 'auto', a positive integer or false"),
        ({"cell_cap": True}, "cell_cap must be 'auto', a positive integer or false"),
        ({"cell_cap": "1"}, "cell_cap must be 'auto', a positive integer or false"),
    ]:
        with pytest.raises(ConfigError, match=message):
            joint(joint=option).fit(riders(50, 1), riders(50, 0))
    with pytest.raises(ConfigError, match="cell_cap = 2 needs public trips"):
        joint(joint={"cell_cap": 2}).fit(riders(50, 1))


def test_cell_cap_options_set_each_tables_cap_and_the_sensitivity() -> None:
    """``cell_cap``: "auto" caps at 1 with public trips and not without; false counts every trip;
    an integer C caps at C: the L2 sensitivity is sqrt(sum w^2 (floor(k/C) C^2 + (k mod C)^2))."""
    private, public = riders(300, 1), riders(200, 0)

    def measured(option: object, with_public: bool = True) -> tuple[list[object], float, int]:
        syn = joint(joint={"cell_cap": option, "pairs": "tree"})
        syn.fit(private, public if with_public else None)
        m = syn.measurements_[0]
        return m.caps, m.mechanism.sensitivity, len(m.tables)

    caps, sensitivity, n = measured("auto")
    k = 3  # the public riders' 90th percentile of trips per card
    assert caps == [1] * n and sensitivity == pytest.approx(np.sqrt(k * n))
    caps, sensitivity, n = measured(False)
    assert caps == [None] * n and sensitivity == pytest.approx(k * np.sqrt(n))
    caps, sensitivity, n = measured(2)
    assert caps == [2] * n and sensitivity == pytest.approx(np.sqrt((4 + 1) * n))
    caps, _, n = measured("auto", with_public=False)
    assert caps == [None] * n


def test_spread_individuals_breaks_ties_by_the_trips_own_values_not_row_order() -> None:
    """Trips of one card at the same hour: the kept ones are the same whatever the input order
    (the generator contract's shuffled input changed a seeded release when k bound)."""
    trips = pd.DataFrame(
        {"card": ["a"] * 5 + ["b"], "hour": [7, 7, 7, 9, 9, 8], "zone": list("CABEDA")}
    )
    kept = []
    for seed in range(4):
        shuffled = trips.sample(frac=1.0, random_state=seed).reset_index(drop=True)
        out = spread_individuals(shuffled, "card", 2, "hour")
        kept.append(sorted(map(tuple, out.to_numpy().tolist())))
    assert all(k == kept[0] for k in kept)
    assert len(kept[0]) == 3
    unordered = [
        sorted(map(tuple, spread_individuals(trips.iloc[::s], "card", 2, None).to_numpy().tolist()))
        for s in (1, -1)
    ]
    assert unordered[0] == unordered[1]


@pytest.mark.parametrize(
    ("public", "kwargs", "configured", "applied"),
    [
        (True, {}, 0.8, 0.8),
        (True, {"marginals": ["fare"], "budget_split": (0.1, 0.3, 0.6)}, 0.8, 0.92),
        (False, {"budget_split": (0.5, 0.1, 0.4), "public_stand_in": True}, 0.9, 0.95),
    ],
)
def test_the_manifest_states_the_share_the_joint_model_really_got(
    public: bool, kwargs: dict, configured: float, applied: float
) -> None:
    """``parameters.joint.share`` is the configured option; the stand-in's and marginals'
    ``budget_split`` shares go to the joint model too, and ``share_applied`` says so: the sum of
    its spends (trips per individual, tree selection, tables) over the budget."""
    syn = joint(**kwargs).fit(riders(300, 1), riders(200, 0) if public else None)
    manifest = syn.manifest()
    stated = manifest["parameters"]["joint"]
    assert (stated["share"], stated["share_applied"]) == (configured, applied)
    own = ("joint ", "trips per ")
    spent = sum(
        Fraction(s["epsilon_exact"])
        for s in manifest["composition"]
        if s["type"] == "spend" and s["label"].startswith(own)
    )
    assert spent / 2 == Fraction(str(applied))  # epsilon 2
