"""ArchetypeSynthesizer without public data (the SBH stand-in) and per-archetype marginals."""

from __future__ import annotations

import tomllib
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from archetypes import ArchetypeSynthesizer, TripSchema, chicago_taxi_schema, chicago_taxi_trips
from archetypes.standin import StandIn, stand_in_spec
from synth.errors import ConfigError
from synth.privacy import PrivacyLedger, SecureNoise
from tests.conftest import riders, riders_schema
from tests.conftest import riders_synthesizer as synthesizer

SCHEMA = riders_schema()

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SPLIT = (0.5, 0.1, 0.4)


def stand_in(**kwargs: object) -> ArchetypeSynthesizer:
    params: dict = {"public_stand_in": True, "budget_split": SPLIT, "epsilon": 4.0}
    params.update(kwargs)
    return synthesizer(**params)


def spends(syn: ArchetypeSynthesizer) -> list[dict]:
    return [s for s in syn.manifest()["composition"] if s["type"] == "spend"]


def test_ledger_totals_and_order_of_the_spends() -> None:
    syn = stand_in(delta=1e-5).fit(riders(1500, 1))
    labels = [s["label"] for s in spends(syn)]
    # default tables: the two key columns, then mode by hour, then fare by zone; then the counts
    assert labels == [
        "public stand-in: SBH of hour, zone",
        "public stand-in: SBH of mode, hour",
        "public stand-in: SBH of fare, zone",
        "archetype histogram",
        "mode histogram",
    ]
    stand = spends(syn)[:3]
    assert all(s["mechanism"] == "discrete_laplace_threshold" for s in stand)
    assert all(s["sensitivity"] == 1 and s["sensitivity_norm"] == "l1" for s in stand)
    # weights 3 : 1 : 1 of the stand-in's share (0.5 of epsilon 4 = 2)
    eps = [Fraction(s["epsilon_exact"]) for s in spends(syn)]
    assert sum(eps[:3]) <= 2 and float(sum(eps[:3])) == pytest.approx(2.0)
    assert [float(e) for e in eps[:3]] == pytest.approx([1.2, 0.4, 0.4])
    assert [float(e) for e in eps[3:]] == pytest.approx([0.4, 1.6])
    assert sum(eps) <= 4 and syn.ledger_.spent_epsilon == pytest.approx(4.0)
    assert syn.ledger_.spent_delta <= 1e-5
    assert sum(Fraction(s["delta_exact"]) for s in stand) <= Fraction("5e-6")
    params = syn.manifest()["parameters"]["public_stand_in"]
    assert params["tables"] == [["hour", "zone"], ["mode", "hour"], ["fare", "zone"]]
    assert params["max_records_per_individual"] == 1 and len(params["kept_cells"]) == 3


def test_sample_lies_in_the_domain_and_is_reproducible() -> None:
    private = riders(1500, 1)
    a = stand_in(random_state=3).fit(private).sample()
    b = stand_in(random_state=3).fit(private).sample()
    c = stand_in(random_state=4).fit(private).sample()
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)
    SCHEMA.validate(a)
    assert list(a.columns) == ["card", "hour", "zone", "mode", "fare"]
    # the stand-in has one trip per individual, so has the sample; about as many as private cards
    assert a["card"].is_unique
    assert len(a) == pytest.approx(1500, rel=0.1)
    # the night/rail and morning/bus structure survives the release
    night = a["hour"] >= 21
    assert (a.loc[night, "mode"] == "rail").mean() > 0.9
    assert (a.loc[~night, "zone"] == "A").mean() > 0.9


def test_marginals_and_n_records_with_the_stand_in() -> None:
    syn = stand_in(
        marginals=["hour"], budget_split=(0.5, 0.1, 0.2, 0.2), n_records=400, random_state=1
    ).fit(riders(1500, 1))
    out = syn.sample()
    assert len(out) == 400
    SCHEMA.validate(out)
    assert [s["label"] for s in spends(syn)][3:] == [
        "archetype histogram",
        "mode histogram",
        "one-way histograms of hour",
    ]
    assert syn.ledger_.spent_epsilon == pytest.approx(4.0)


def test_public_data_wins_and_the_stand_in_share_is_not_spent() -> None:
    syn = stand_in().fit(riders(300, 1), riders(200, 0))
    assert [s["label"] for s in spends(syn)] == ["archetype histogram", "mode histogram"]
    assert syn.ledger_.spent_epsilon == pytest.approx(4.0 * 0.5)
    assert syn.stand_in_ is None and "public_stand_in" not in syn.manifest()["parameters"]


def test_configuration_errors() -> None:
    private = riders(300, 1)
    with pytest.raises(ConfigError, match="no public data"):
        synthesizer().fit(private)
    with pytest.raises(ConfigError, match=r"3 positive shares \(stand-in, archetypes, category\)"):
        stand_in(budget_split=(0.1, 0.9)).fit(private)
    no_fare = TripSchema({k: v for k, v in SCHEMA.columns.items() if k != "fare"})
    with pytest.raises(ConfigError, match="public domain"):
        stand_in(schema=no_fare).fit(private)
    with pytest.raises(ConfigError, match="unknown key"):
        stand_in(public_stand_in={"epsilon": 1.0}).fit(private)
    with pytest.raises(ConfigError, match="no table releases"):
        stand_in(public_stand_in={"tables": [["hour", "zone"], ["mode"]]}).fit(private)
    with pytest.raises(ConfigError, match="adds no column"):
        stand_in(public_stand_in={"tables": [["hour"], ["hour"]]}).fit(private)
    with pytest.raises(ConfigError, match="weights"):
        stand_in(public_stand_in={"weights": [1, 2]}).fit(private)
    with pytest.raises(ConfigError, match="kept no cell"):
        stand_in(epsilon=0.01).fit(riders(30, 1))
    with pytest.raises(ConfigError, match="public_stand_in must be"):
        stand_in(public_stand_in="yes").fit(private)


def test_custom_tables_and_uniform_fallback() -> None:
    option = {
        "tables": [["hour", "mode"], ["zone", "hour"], ["fare"]],
        "weights": [1, 1, 0.01],  # the fare table gets almost nothing: no cell, uniform fare
        "max_records_per_individual": 2,
    }
    syn = stand_in(public_stand_in=option, epsilon=8.0, random_state=2).fit(riders(1500, 1))
    assert syn.stand_in_cells_[2] == 0
    out = syn.sample()
    SCHEMA.validate(out)
    assert set(out["fare"]) > {1, 2, 3, 4}  # drawn from the whole schema range 0..10
    stand = spends(syn)[:3]
    assert [s["sensitivity"] for s in stand] == [2, 2, 2]  # l1 = the stand-in's bound


def test_wide_numeric_columns_use_the_public_grid() -> None:
    schema = TripSchema.from_dict(
        {"id": {"kind": "id"}, "fare": {"kind": "numeric", "min": -1, "max": 9900}}
    )
    spec = stand_in_spec(
        True, key_columns=["fare"], category_column="fare", features=[], completion=(), needed=[]
    )
    releaser = StandIn(spec, schema=schema, id_column="id", order_column=None)
    values = np.array([-1, 0, 5, 8, 9, 12, 100, 1000, 9900])
    coded = releaser.encode(pd.DataFrame({"fare": values}), ["fare"])
    grid = releaser.grids_["fare"]
    assert grid[0] == -1 and grid[-1] <= 9900 and len(grid) < 40
    assert (coded["fare"].to_numpy()[:5] == np.searchsorted(grid, values[:5], "right") - 1).all()
    decoded = releaser.decode(coded, np.random.default_rng(0))["fare"].to_numpy()
    assert (decoded[:4] == values[:4]).all()  # values up to 8 are exact
    lo, hi = grid[coded["fare"]], np.append(grid[1:] - 1, 9900)[coded["fare"]]
    assert ((decoded >= lo) & (decoded <= hi)).all()


def test_histograms_record_before_noise() -> None:
    spec = stand_in_spec(
        True,
        key_columns=["hour", "zone"],
        category_column="mode",
        features=["hour"],
        completion=[("fare", ["zone"])],
        needed=["hour", "zone", "mode", "fare"],
    )
    releaser = StandIn(spec, schema=SCHEMA, id_column="card", order_column="hour")
    ledger = PrivacyLedger(epsilon=1.0, delta=1e-6, unit="card")
    tables = releaser.histograms(
        riders(500, 1), epsilon=1.0, delta=1e-6, noise=SecureNoise(seed=0), ledger=ledger
    )
    assert len(tables) == 3 and ledger.spent_epsilon == pytest.approx(1.0)
    with pytest.raises(Exception, match="past the cap"):
        releaser.histograms(
            riders(500, 1), epsilon=1.0, delta=1e-6, noise=SecureNoise(seed=0), ledger=ledger
        )


def test_per_archetype_marginals() -> None:
    public = riders(400, 0, night_share=0.2)
    private = riders(1500, 1, night_share=0.2)
    private.loc[private["mode"] == "bus", "hour"] = 8
    kwargs = {
        "epsilon": 20.0,
        "budget_split": (0.1, 0.2, 0.7),
        "marginals": ["hour", "fare"],
        "marginals_by_archetype": True,
    }
    syn = synthesizer(**kwargs).fit(private, public)
    spend = spends(syn)[2]
    assert spend["label"] == "one-way histograms per archetype of hour, fare"
    assert spend["sensitivity"] == pytest.approx(np.sqrt(2))
    assert len(syn.noisy_marginals_["hour"]) == 2 * 24
    histograms = syn._query(private)
    # one cell per individual and column: each column's histogram sums to the individuals
    cells = [24 * 2, syn._n_cells("fare") * 2]
    hour, fare = np.split(histograms[2], [cells[0]])
    assert hour.sum() == fare.sum() == private["card"].nunique()
    # a neighbour (one more card, three trips) moves one cell of each column by 1: L2 sqrt(2)
    # (one trip per card, and a clear majority for the new one: no random tie-breaks)
    single = private.groupby("card").head(1)
    extra = pd.DataFrame(
        {"card": "new", "hour": [22, 22, 23], "zone": "B", "mode": "rail", "fare": [3, 3, 4]}
    )
    diff = syn._query(pd.concat([single, extra], ignore_index=True))[2] - syn._query(single)[2]
    assert np.abs(diff[: cells[0]]).sum() == np.abs(diff[cells[0] :]).sum() == 1
    assert np.sqrt((diff**2).sum()) == pytest.approx(np.sqrt(2))
    out = syn.sample()
    SCHEMA.validate(out)
    assert (out.loc[out["hour"] < 12, "hour"] == 8).mean() > 0.6
    with pytest.raises(ConfigError, match="marginals_by_archetype"):
        synthesizer(marginals_by_archetype="yes").fit(private, public)


def _taxi_config() -> dict:
    params = tomllib.loads((CONFIGS / "taxi-archetypes.toml").read_text())["trips"]["parameters"]
    params = {k: v for k, v in params.items() if k not in ("epsilon", "delta")}
    params["completion"] = [(t, tuple(c)) for t, c in params["completion"]]
    return params


def test_chicago_without_public_data(shared_data: Path) -> None:
    raw = pd.read_csv(shared_data / "chicago-taxi/chicago_taxi_simple.csv")
    private = chicago_taxi_trips(raw, years=[2014, 2015])
    schema = chicago_taxi_schema(private.iloc[:0])  # no public trips: the published 2013 list
    params = {**_taxi_config(), "budget_split": (0.7, 0.03, 0.09, 0.18), "joint": False}
    syn = ArchetypeSynthesizer(
        epsilon=10.0, delta=2.5e-5, schema=schema, public_stand_in=True, random_state=0, **params
    ).fit(private)
    out = syn.sample()
    schema.validate(out)
    assert len(out) == pytest.approx(len(private), rel=0.05)
    assert set(out["company"]) <= set(schema.values("company"))
    assert set(out["company"]) != {"Unknown"}  # was all "Unknown" before the published list
    labels = [s["label"] for s in spends(syn)]
    assert labels[:3] == [
        "public stand-in: SBH of shift, pickup_community_area",
        "public stand-in: SBH of dropoff_community_area, pickup_community_area",
        "public stand-in: SBH of company, shift",
    ]
    assert len(labels) == 8 + 3
    assert syn.ledger_.spent_epsilon <= 10.0 and syn.ledger_.spent_delta <= 2.5e-5
    assert syn.ledger_.spent_epsilon == pytest.approx(10.0)
    # the busiest pickup area of the private trips is the busiest synthetic one
    top = private["pickup_community_area"].value_counts().index[0]
    assert out["pickup_community_area"].value_counts().index[0] == top
