"""ArchetypeSynthesizer: calibration, budget split, reproducibility, domains, private-data use."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from archetypes import (
    ArchetypeSynthesizer,
    chicago_taxi_schema,
    chicago_taxi_trips,
    sube_schema,
    sube_trips,
)
from archetypes.budget import budget_shares, split_budget
from archetypes.sampling import balanced_choice, rake, systematic_choice
from synth.errors import ConfigError, InputError
from synth.privacy import DiscreteGaussian, analytic_gaussian_sigma
from tests.conftest import riders, riders_schema
from tests.conftest import riders_synthesizer as synthesizer

SCHEMA = riders_schema()

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_sigma_and_budget_split_match_the_calibration() -> None:
    syn = synthesizer(epsilon=2.0, delta=1e-5).fit(riders(300, 1), riders(200, 0))
    expected = DiscreteGaussian(epsilon=0.2, delta=1e-6)
    assert syn.archetype_mechanism_.sigma == pytest.approx(expected.sigma)
    assert syn.archetype_mechanism_.sigma >= analytic_gaussian_sigma(0.2, 1e-6) * (1 - 1e-9)
    assert syn.category_mechanism_.sigma == pytest.approx(
        DiscreteGaussian(epsilon=1.8, delta=9e-6).sigma
    )
    manifest = syn.manifest()
    spends = [s for s in manifest["composition"] if s["type"] == "spend"]
    assert [s["label"] for s in spends] == ["archetype histogram", "mode histogram"]
    assert [s["epsilon_exact"] for s in spends] == ["1/5", "9/5"]
    assert all(s["sensitivity"] == 1 and s["sensitivity_norm"] == "l2" for s in spends)
    assert all(s["mechanism"] == "discrete_gaussian" for s in spends)
    assert syn.ledger_.spent_epsilon == 2.0 and syn.ledger_.spent_delta <= 1e-5
    assert manifest["privacy_unit"] == "individual"


def test_budget_shares_never_exceed_the_total() -> None:
    from fractions import Fraction

    for total in (0.3, 1.0, 0.7, 1e-5, 2.5e-5, 10.0):
        for split in ((0.1, 0.9), (0.1, 0.3, 0.6), (1 / 3, 1 / 3, 1 / 3)):
            parts = budget_shares(total, split)
            # issue 26: exact shares that sum to the total (float shares summed below it, and
            # every release that spent them all warned that it had stopped early)
            spent = sum(Fraction(repr(p)) for p in parts)
            assert Fraction(str(total)) * (1 - Fraction(1, 10**15)) <= spent <= Fraction(str(total))
            assert parts == pytest.approx([total * s for s in split])
    for total, split in ((1.0, (1 / 3, 2 / 3)), (0.3, (0.1, 0.3, 0.6)), (1.0, (1 / 3,) * 3)):
        assert sum(Fraction(repr(p)) for p in budget_shares(total, split)) == Fraction(str(total))
    assert budget_shares(1.0, [0.5, 0.25, 0.0]) == [0.5, 0.25, 0.0]  # not summing to 1: as given


def test_split_budget_pairs_the_shares_of_epsilon_and_delta() -> None:
    from fractions import Fraction

    shares = [0.1, 0.9]
    parts = split_budget((0.3, 1e-5), shares)
    eps, delta = budget_shares(0.3, shares), budget_shares(1e-5, shares)
    assert parts == list(zip(eps, delta, strict=True))
    assert sum(Fraction(repr(e)) for e, _ in parts) == Fraction("0.3")  # whole, never past
    assert sum(Fraction(repr(d)) for _, d in parts) <= Fraction("1e-5")
    assert parts[0][0] < parts[1][0] and parts[0][1] < parts[1][1]  # the order of the shares


def test_fit_and_sample_are_reproducible_under_random_state() -> None:
    private, public = riders(300, 1), riders(200, 0)
    a = synthesizer(random_state=3).fit(private, public).sample()
    b = synthesizer(random_state=3).fit(private, public).sample()
    c = synthesizer(random_state=4).fit(private, public).sample()
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)


def test_every_sampled_value_lies_in_the_schema_domain() -> None:
    syn = synthesizer(n_records=500).fit(riders(300, 1), riders(200, 0))
    out = syn.sample()
    assert len(out) == 500
    assert list(out.columns) == ["card", "hour", "zone", "mode", "fare"]
    SCHEMA.validate(out)
    # the category histogram covers the whole public domain, "ferry" (never seen) included
    assert len(syn.noisy_category_counts_) == 3
    assert (syn.noisy_archetype_counts_ >= 0).all() and (syn.noisy_category_counts_ >= 0).all()
    # synthetic individuals keep ids; each one's trips are ordered by hour (a daily trip chain)
    assert out["card"].dtype == np.int64
    assert (out.groupby("card")["hour"].diff().dropna() >= 0).all()
    assert out["card"].nunique() < len(out)


def test_only_the_two_histograms_touch_the_private_data() -> None:
    public, private = riders(200, 0), riders(300, 1)
    other = private.copy()
    other["fare"] = 0  # not a feature nor the category: must not matter
    other["zone"] = "D"
    a = synthesizer().fit(private, public)
    b = synthesizer().fit(other[["card", "hour", "mode"]], public)
    pd.testing.assert_frame_equal(a.sample(), b.sample())
    c = synthesizer().fit(private.assign(mode="ferry"), public)
    assert c.noisy_category_counts_[2] > c.noisy_category_counts_[:2].max()


def test_noisy_counts_follow_the_private_data() -> None:
    public = riders(300, 0, night_share=0.5)
    private = riders(2000, 1, night_share=0.9)
    syn = synthesizer(epsilon=50.0, archetypes=2).fit(private, public)
    assert syn.noisy_category_counts_.sum() == pytest.approx(2000, rel=0.02)
    assert syn.noisy_category_counts_[1] / syn.noisy_category_counts_.sum() > 0.85
    out = syn.sample()
    per_card = out.groupby("card")["mode"].agg(lambda m: m.mode().iloc[0])
    assert (per_card == "rail").mean() > 0.8
    assert out["card"].nunique() == pytest.approx(2000, rel=0.05)


def test_contribution_bound_takes_first_trips_by_order() -> None:
    public = riders(200, 0)
    private = pd.DataFrame(
        {
            "card": ["x"] * 4,
            "hour": [7, 22, 23, 21],
            "zone": ["A", "B", "B", "B"],
            "mode": ["bus", "rail", "rail", "rail"],
        }
    )
    syn = synthesizer(max_records_per_individual=1).fit(private, public)
    archetypes, categories = syn._query(private)
    assert categories.tolist() == [1, 0, 0]  # only the 7 o'clock bus trip is kept
    assert archetypes.sum() == 1
    syn = synthesizer(max_records_per_individual=4).fit(private, public)
    assert syn._query(private)[1].tolist() == [0, 1, 0]


def test_marginals_get_their_own_budget_line_and_reweight() -> None:
    public = riders(400, 0, night_share=0.2)
    private = riders(1500, 1, night_share=0.2)
    private.loc[private["mode"] == "bus", "hour"] = 8  # all morning trips moved to 8 o'clock
    kwargs = {"epsilon": 20.0, "budget_split": (0.1, 0.2, 0.7), "marginals": ["hour", "fare"]}
    syn = synthesizer(**kwargs).fit(private, public)
    spends = [s for s in syn.manifest()["composition"] if s["type"] == "spend"]
    assert spends[2]["label"] == "one-way histograms of hour, fare"
    assert spends[2]["sensitivity"] == pytest.approx(np.sqrt(2))
    assert syn.ledger_.spent_epsilon == pytest.approx(20.0)
    out = syn.sample()
    SCHEMA.validate(out)
    plain = synthesizer(epsilon=20.0).fit(private, public).sample()
    # individuals are reweighted by their most frequent hour (what was released), so the share of
    # 8 o'clock trips rises from about 1/3 towards 1
    reweighted = (out.loc[out["hour"] < 12, "hour"] == 8).mean()
    unweighted = (plain.loc[plain["hour"] < 12, "hour"] == 8).mean()
    assert unweighted < 0.45 and reweighted > unweighted + 0.2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"budget_split": (0.5, 0.6)}, "sums to more than 1"),
        ({"budget_split": (0.1, 0.2, 0.7)}, "2 positive shares"),
        ({"marginals": ["hour"]}, "3 positive shares"),
        ({"max_records_per_individual": 0}, "max_records_per_individual"),
        ({"archetypes": 0}, "archetypes"),
        ({"key_columns": []}, "key_columns"),
        ({"random_state": 1.5}, "random_state"),
        ({"n_records": -1}, "n_records"),
    ],
)
def test_bad_parameters_are_config_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        synthesizer(**kwargs).fit(riders(50, 1), riders(50, 0))


def test_bad_inputs_are_input_errors() -> None:
    with pytest.raises(InputError, match="private data: missing column"):
        synthesizer().fit(riders(50, 1).drop(columns="mode"), riders(50, 0))
    with pytest.raises(InputError, match="public data: missing column"):
        synthesizer().fit(riders(50, 1), riders(50, 0).drop(columns="fare"))
    with pytest.raises(InputError, match="no trips"):
        synthesizer().fit(riders(50, 1).iloc[:0], riders(50, 0))
    bad = riders(50, 1)
    bad.loc[3, "hour"] = 30
    with pytest.raises(InputError, match="private data: column 'hour', row 4"):
        synthesizer().fit(bad, riders(50, 0))
    with pytest.raises(ConfigError, match="fit"):
        synthesizer().sample()


def test_helpers() -> None:
    rng = np.random.default_rng(0)
    drawn = balanced_choice(np.array([5, 6, 7]), 7, rng)
    assert sorted(np.bincount(drawn)[5:].tolist()) == [2, 2, 3]
    picked = systematic_choice(np.array([1.0, 0.0, 3.0]), 8, rng)
    assert np.bincount(picked, minlength=3).tolist() == [2, 0, 6]
    table = rake(np.ones((2, 2)), np.array([3.0, 1.0]), np.array([2.0, 2.0]))
    assert table.sum(axis=1) == pytest.approx([3, 1]) and table.sum(axis=0) == pytest.approx([2, 2])


def _config(name: str) -> dict:
    params = tomllib.loads((CONFIGS / name).read_text())["trips"]["parameters"]
    params = {k: v for k, v in params.items() if k not in ("epsilon", "delta")}
    params["completion"] = [(t, tuple(c)) for t, c in params["completion"]]
    params["budget_split"] = tuple(params["budget_split"])
    return params


def test_chicago_taxi_configuration(shared_data: Path) -> None:
    raw = pd.read_csv(shared_data / "chicago-taxi/chicago_taxi_simple.csv")
    public = chicago_taxi_trips(raw, years=[2013])
    private = chicago_taxi_trips(raw, years=[2014, 2015])
    schema = chicago_taxi_schema(public)
    syn = ArchetypeSynthesizer(
        epsilon=1.0, delta=2.5e-5, schema=schema, random_state=0, **_config("taxi-archetypes.toml")
    ).fit(private, public)
    out = syn.sample()
    schema.validate(out)
    assert len(out) == pytest.approx(len(private), rel=0.05)
    assert out["taxi_id"].is_unique  # each trip its own individual
    assert set(out["company"]) <= set(schema.values("company"))
    assert [s["label"] for s in syn.manifest()["composition"]] == [
        # the joint mode: 9 one-way tables and 4 of the public tree (pickup x dropoff, 6,241
        # cells, is left to the public trips, and so are the tables that would be mostly noise
        # next to 4,388 public trips: shift x dropoff, dropoff x fare, fare x trip seconds)
        "joint trip marginals (13 tables)",
        "archetype histogram",
        "company histogram",
    ]


def test_sube_configuration(shared_data: Path) -> None:
    folder = shared_data / "sube-buenos-aires"
    public = sube_trips(folder / "martes_trx.csv")
    private = sube_trips(folder / "miercoles_trx.csv")
    schema = sube_schema(public, folder / "metadata_amba_2019_m1.csv")
    syn = ArchetypeSynthesizer(
        epsilon=1.0, delta=1e-5, schema=schema, random_state=0, **_config("transit-archetypes.toml")
    ).fit(private, public)
    out = syn.sample()
    schema.validate(out)
    assert out["card_id"].nunique() == pytest.approx(private["card_id"].nunique(), rel=0.05)
    assert len(out) == pytest.approx(len(private), rel=0.05)
    assert (out.groupby("card_id")["hour"].diff().dropna() >= 0).all()
    assert syn.manifest()["privacy_unit"] == "card"


def test_sube_schema_takes_another_days_fare_products_and_stages() -> None:
    """A fare product the public day never shows goes to -1 and a stage past 9 to 9, value by
    value, so another day's taps never fail on them (the swapped SUBE days did: fare 14)."""
    public = pd.DataFrame(
        {"line": ["1"], "branch": ["2"], "zone": ["-34.60,-58.40"], "fare_type": [1], "stage": [0]}
    )
    schema = sube_schema(public)
    private = pd.DataFrame(
        {
            "card_id": ["a", "a", "b"],
            "hour": [7, 8, 9],
            "mode": ["COL", "COL", "SUB"],
            "line": ["1", "1", "1"],
            "branch": ["2", "2", "2"],
            "zone": ["-34.60,-58.40"] * 3,
            "fare_type": [1, 14, 1],
            "stage": [0, 1, 12],
        }
    )
    conformed = schema.conform(private)
    assert conformed["fare_type"].tolist() == [1, -1, 1]
    assert conformed["stage"].tolist() == [0, 1, 9]
    assert schema.columns["fare_type"].values == (1, -1)
