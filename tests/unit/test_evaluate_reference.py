"""Reference check: synthetic microdata against an SBH release (synth.evaluate.reference)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.errors import InputError
from synth.evaluate.reference import against_reference
from synth.marginals.grid import TABLES
from synth.marginals.opal import OpalMarginals


def _trips(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    on = pd.Timestamp("2016-07-25") + pd.to_timedelta(rng.integers(6 * 60, 20 * 60, n), unit="m")
    stops = np.array([f"s{i}" for i in range(5)])
    return pd.DataFrame(
        {
            "mode": rng.choice(["bus", "ferry"], n),
            "on_time": on,
            "on_stop": rng.choice(stops, n, p=[0.4, 0.3, 0.1, 0.1, 0.1]),
            "off_time": on + pd.Timedelta(minutes=30),
            "off_stop": rng.choice(stops, n),
        }
    )


@pytest.fixture(scope="module")
def private() -> pd.DataFrame:
    return _trips(30_000, 0)


@pytest.fixture(scope="module")
def release(private: pd.DataFrame) -> OpalMarginals:
    return OpalMarginals(bin=60, random_state=11).fit(private)


def test_the_private_data_agrees_with_its_release(
    private: pd.DataFrame, release: OpalMarginals
) -> None:
    report = against_reference(private, release).set_index("table")
    assert list(report.index) == list(TABLES)
    assert report["compared"].all()
    assert (report["tvd"] < 0.02).all()
    assert (report["outside_fraction"] <= 0.05).all()


def test_distorted_microdata_is_flagged(private: pd.DataFrame, release: OpalMarginals) -> None:
    bad = private.assign(
        on_stop="s0", on_time=private["on_time"].dt.floor("D") + pd.Timedelta("8h")
    )
    report = against_reference(bad, release).set_index("table")
    for name in ("on_time", "on_location", "on_time_location"):
        assert report.loc[name, "tvd"] > 0.5
        assert report.loc[name, "outside_bound"] > 0
    assert report.loc["off_location", "outside_bound"] == 0  # untouched side still agrees


def test_release_directory_and_sequences(
    private: pd.DataFrame, release: OpalMarginals, tmp_path: Path
) -> None:
    out = release.write(tmp_path / "rel").path
    a = against_reference(private, release)
    b = against_reference(private, out)
    pd.testing.assert_frame_equal(a, b)
    seqs = pd.DataFrame(
        {
            "seq_id": np.arange(len(private)).astype(str),
            "pos": 0,
            "location": private["on_stop"],
        }
    )
    report = against_reference(seqs, release).set_index("table")
    assert report.loc["on_location", "compared"]
    assert not report.loc["on_time", "compared"]
    assert not report.loc["off_location", "compared"]
    # summed over the 2 modes x 1 day partitions: the bound doubles
    assert (
        report.loc["on_location", "error_bound"]
        == 2 * a.set_index("table").loc["on_location", "error_bound"]
    )
    assert report.loc["on_location", "tvd"] < 0.02
    with pytest.raises(InputError, match="manifest"):
        against_reference(private, tmp_path)


def test_consistent_release_bounds_derived_tables(private: pd.DataFrame) -> None:
    rel = OpalMarginals(bin=60, mode="consistent", random_state=5).fit(private)
    report = against_reference(private, rel).set_index("table")
    two_way = report.loc["on_time_location", "error_bound"]
    assert report.loc["on_time", "error_bound"] == 5 * two_way  # 5 locations summed
    assert report.loc["on_location", "error_bound"] == 24 * two_way  # 24 bins summed
    assert (report["outside_bound"] == 0).all()


# ---------------------------------------------------------------- card unit: like with like
def _card_taps(n_cards: int, seed: int) -> pd.DataFrame:
    """Simulated taps of a card-unit world: 1 to 9 tap-ons per card (heavy cards tap late, so a
    bound of k taps per card moves the hour profile), some tap-offs, 12 stops, two modes."""
    rng = np.random.default_rng(seed)
    per_card = rng.choice(
        np.arange(1, 10), n_cards, p=[0.3, 0.3, 0.15, 0.1, 0.05, 0.04, 0.03, 0.02, 0.01]
    )
    card = np.repeat(np.arange(n_cards), per_card)
    rank = np.concatenate([np.arange(c) for c in per_card])
    minute = np.clip(6 * 60 + rank * 110 + rng.integers(0, 90, card.size), 0, 1439)
    stops = np.array([f"s{i}" for i in range(12)])
    p = np.linspace(2, 1, 12) / np.linspace(2, 1, 12).sum()
    taps = pd.DataFrame(
        {
            "card_id": card.astype(str),
            "time": pd.Timestamp("2019-11-28") + pd.to_timedelta(minute, unit="m"),
            "stop_id": rng.choice(stops, card.size, p=p),
            "mode": np.where(card % 3 == 0, "SUB", "COL"),
            "tap": np.where(rng.random(card.size) < 0.2, "off", "on"),
        }
    )
    return taps


CARD_SETTINGS = dict(
    epsilon=8.0,
    delta=7.5e-7,
    mode="consistent",
    bin=60,
    modes=["COL", "SUB"],
    days=["2019-11-28"],
    privacy_unit="card_id",
    max_contributions=3,
)


@pytest.fixture(scope="module")
def card_taps() -> pd.DataFrame:
    return _card_taps(15_000, 3)


@pytest.mark.parametrize("mode", ["consistent", "sbh"])
def test_the_original_passes_its_own_card_unit_check(card_taps: pd.DataFrame, mode: str) -> None:
    """The release bounds each card to k = 3 taps per side (first by time), which moves the hour
    profile: the check bounds the original the same way, so it passes its own check (on the old
    code, which compared the unbounded data, the one-way TV was > 0.1)."""
    release = OpalMarginals(**{**CARD_SETTINGS, "mode": mode}, random_state=4).fit(card_taps)
    report = against_reference(card_taps, release).set_index("table")
    assert report["compared"].all()
    assert (report["within_bound"] >= 0.95).all()
    one_way = ["on_time", "on_location", "off_time", "off_location"]
    assert (report.loc[one_way, "tvd"] <= 0.05).all()
    assert report["passes"].all()
    assert (report["coverage"] > 0.5).all()  # most of the data lies in published cells
    # the microdata compared holds at most k taps per card and side
    tally = card_taps.groupby(["card_id", "tap"]).size().clip(upper=3).groupby("tap").sum()
    assert report.loc["on_time", "microdata_total"] == pytest.approx(tally["on"])
    assert report.loc["off_time", "microdata_total"] == pytest.approx(tally["off"])


def test_unbounded_comparison_would_not_pass(card_taps: pd.DataFrame) -> None:
    """Near miss: the same release against the data counted without its bounding (what the
    check did before) is far off, so the bounding step is what makes the check fair."""
    from synth.marginals import marginal_tables

    release = OpalMarginals(**CARD_SETTINGS, random_state=4).fit(card_taps)
    unbounded = marginal_tables(card_taps, bin_minutes=60)["on_time"]
    bounded = marginal_tables(
        card_taps, bin_minutes=60, unit_column="card_id", max_contributions=3
    )["on_time"]
    shares = [t.groupby("time")["count"].sum() for t in (unbounded, bounded)]
    a, b = (s.reindex(shares[0].index, fill_value=0) / s.sum() for s in shares)
    assert 0.5 * float(np.abs(a - b).sum()) > 0.1
    assert against_reference(card_taps, release).set_index("table").loc["on_time", "passes"]


def test_distorted_synthetic_fails_the_card_unit_check(card_taps: pd.DataFrame) -> None:
    release = OpalMarginals(**CARD_SETTINGS, random_state=4).fit(card_taps)
    bad = card_taps.assign(stop_id="s11", time=card_taps["time"].dt.floor("D") + pd.Timedelta("5h"))
    report = against_reference(bad, release).set_index("table")
    assert not report.loc["on_location", "passes"]
    assert not report.loc["on_time", "passes"]
    assert report.loc["on_time_location", "within_bound"] < 0.95


def test_bounding_uses_the_public_partitions_first(zero_noise: object) -> None:
    """The check bounds as the mechanism does: events outside the public days are dropped before
    each card keeps its first k, so a card's early tap on another day does not take a place."""
    from synth.marginals import marginal_tables

    taps = pd.DataFrame(
        {
            "card_id": ["a", "a", "a", "b"],
            "time": pd.to_datetime(
                ["2019-11-27 06:00", "2019-11-28 07:00", "2019-11-28 09:00", "2019-11-28 08:00"]
            ),
            "stop_id": ["s1", "s1", "s2", "s1"],
            "mode": "COL",
        }
    )
    tables = marginal_tables(
        taps, bin_minutes=60, days=["2019-11-28"], unit_column="card_id", max_contributions=2
    )
    assert int(tables["on_time"]["count"].sum()) == 3
    assert set(tables["on_time"]["day"]) == {"2019-11-28"}
    one = marginal_tables(
        taps, bin_minutes=60, days=["2019-11-28"], unit_column="card_id", max_contributions=1
    )["on_time"]
    assert dict(zip(one["time"], one["count"], strict=True)) == {"07:00": 1, "08:00": 1}
    release = OpalMarginals(
        bin=60,
        days=["2019-11-28"],
        modes=["COL"],
        privacy_unit="card_id",
        max_contributions=1,
        epsilon=1e6,
        delta=0.5,
        random_state=zero_noise,  # type: ignore[arg-type]
    ).fit(taps)
    assert int(release.tables_["on_time"]["count"].sum()) in (0, 2)  # thresholded or both kept


def test_synthetic_sequences_are_bounded_as_cards(card_taps: pd.DataFrame) -> None:
    """A synthetic sequence is one card: it keeps the release's k taps too."""
    release = OpalMarginals(**CARD_SETTINGS, random_state=4).fit(card_taps)
    on = card_taps[card_taps["tap"] == "on"]
    seqs = pd.DataFrame(
        {
            "seq_id": on["card_id"].to_numpy(),
            "pos": on.groupby("card_id").cumcount().to_numpy(),
            "location": on["stop_id"].to_numpy(),
            "time": on["time"].to_numpy(),
            "mode": on["mode"].to_numpy(),
        }
    )
    report = against_reference(seqs, release).set_index("table")
    expected = on.groupby("card_id").size().clip(upper=3).sum()
    assert report.loc["on_time", "microdata_total"] == pytest.approx(expected)
    assert report.loc["on_time", "passes"]


def test_the_report_shows_the_check(card_taps: pd.DataFrame) -> None:
    from synth.report.manifests import reference_section

    release = OpalMarginals(**CARD_SETTINGS, random_state=4).fit(card_taps)
    own = against_reference(card_taps, release)
    bad = against_reference(card_taps.assign(stop_id="s11"), release)
    text = reference_section({"original": own, "broken": bad})
    assert "passes" in text and "data in published cells" in text
    assert ">NO (" in text and ">yes<" in text


# ---------------------------------------------------------------- the demo's SUBE reference
def _sube(day: str) -> pd.DataFrame:
    from synth import datasets
    from synth.records import load_taps

    taps = datasets.sube_taps(day)
    taps = load_taps(taps[taps["id_tarjeta"].notna()], location_column="id_linea")
    return taps.rename(columns={"id_linea": "stop_id", "modo": "mode"})


def test_the_demo_bound_is_the_public_tuesday_percentile() -> None:
    """k of the demo's reference release is a public fact: the 99th percentile of tap-ons per card
    on the public Tuesday (the private Wednesday is not read to choose it)."""
    from synth.cli.demo import demo_settings

    tuesday = _sube("tuesday")
    per_card = tuesday[tuesday["tap"] == "on"].groupby("card_id").size()
    k = demo_settings()["marginals"].params["max_contributions"]
    assert k == int(np.ceil(np.percentile(per_card, 99)))


def test_the_original_sube_taps_pass_their_own_check() -> None:
    """The demo's reference release (its config, seeded) against the taps it was made from."""
    from synth.cli.demo import demo_settings

    taps = _sube("wednesday")
    params = demo_settings()["marginals"].params
    assert params["bounding"] == "uniform"  # each card's 7 taps: a uniform choice
    release = OpalMarginals(**params, random_state=2).fit(taps)
    report = against_reference(taps, release).set_index("table")
    assert (report["within_bound"] >= 0.95).all()
    assert (report.loc[["on_time", "on_location", "off_time", "off_location"], "tvd"] <= 0.05).all()
    assert report["passes"].all()
    # the bound keeps the profile: the bounded Wednesday is within TV 0.01 of the whole day
    from synth.marginals import marginal_tables

    whole = marginal_tables(taps, bin_minutes=60)["on_time"].groupby("time")["count"].sum()
    cut = (
        marginal_tables(
            taps,
            bin_minutes=60,
            unit_column="card_id",
            max_contributions=params["max_contributions"],
            bounding="uniform",
            random_state=4,
        )["on_time"]
        .groupby("time")["count"]
        .sum()
    )
    cut = cut.reindex(whole.index, fill_value=0)
    assert 0.5 * float(np.abs(whole / whole.sum() - cut / cut.sum()).sum()) < 0.002


def test_card_unit_check_from_the_release_directory(
    card_taps: pd.DataFrame, tmp_path: Path
) -> None:
    """The manifest carries what the check needs (unit, k, partitions, bins): a release directory
    gives the same check as the fitted release."""
    release = OpalMarginals(**CARD_SETTINGS, random_state=4).fit(card_taps)
    out = release.write(tmp_path / "rel").path
    pd.testing.assert_frame_equal(
        against_reference(card_taps, release), against_reference(card_taps, out)
    )
