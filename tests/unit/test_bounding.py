"""The uniform choice of a card's k taps (issue 29): the kept taps keep the card's profile."""

from __future__ import annotations

import pandas as pd
import pytest

from synth.errors import ConfigError
from synth.evaluate import against_reference
from synth.marginals import OpalMarginals, marginal_tables

DAY = "2019-11-28"


def _taps(n_cards: int = 300, added: bool = False) -> pd.DataFrame:
    """Each card taps on at 06:00, 09:00, 12:00, 15:00, 18:00 and 21:00 (six hours, even)."""
    cards = [f"c{i}" for i in range(n_cards)] + (["new"] if added else [])
    hours = [6, 9, 12, 15, 18, 21]
    rows = [(c, pd.Timestamp(f"{DAY} {h:02d}:00"), f"s{h}") for c in cards for h in hours]
    return pd.DataFrame(rows, columns=["card_id", "time", "stop_id"]).assign(mode="BUS")


def _hours(taps: pd.DataFrame, **kw: object) -> pd.Series:
    table = marginal_tables(taps, bin_minutes=60, unit_column="card_id", max_contributions=2, **kw)[
        "on_time"
    ]
    return table.groupby("time")["count"].sum()


def test_uniform_keeps_the_hour_profile_earliest_does_not() -> None:
    """k = 2 of 6 even taps: the uniform choice keeps about a third of each hour; the earliest
    rule keeps only 06:00 and 09:00 (the old and only rule)."""
    taps = _taps()
    uniform = _hours(taps, bounding="uniform", random_state=1)
    assert uniform.sum() == 2 * 300
    assert len(uniform) == 6 and (uniform / 600 - 1 / 6).abs().max() < 0.06
    earliest = _hours(taps, bounding="earliest")
    assert list(earliest.index) == ["06:00", "09:00"]
    # seeded: reproducible; another seed chooses otherwise
    assert uniform.equals(_hours(taps, bounding="uniform", random_state=1))
    assert not uniform.equals(_hours(taps, bounding="uniform", random_state=2))


def test_uniform_choice_is_per_card() -> None:
    """Adding a card moves no other card's choice (the priority is a keyed hash of each event's
    own fields): with the same seed the tables differ by the added card's k taps only."""
    a = _hours(_taps(), bounding="uniform", random_state=3)
    b = _hours(_taps(added=True), bounding="uniform", random_state=3)
    diff = b.reindex(a.index.union(b.index), fill_value=0) - a.reindex(b.index, fill_value=0)
    assert diff.abs().sum() == 2 and (diff >= 0).all()


def test_default_card_release_is_uniform_and_recorded(zero_noise: object) -> None:
    """The release's default: a uniform choice, named in the manifest and the neighbouring
    relation; with zero noise its hour table is flat, where the first-by-time rule (``bounding=
    "earliest"``) publishes two hours only."""
    settings = dict(bin=60, privacy_unit="card_id", max_contributions=2, epsilon=8.0)
    rel = OpalMarginals(**settings, random_state=5).fit(_taps())
    assert rel.parameters()["bounding"] == "uniform"
    assert "uniform random choice" in rel.ledger_.neighbouring
    on_time = rel.tables_["on_time"]
    assert len(on_time[on_time["count"] > 0]) == 6
    first = OpalMarginals(**settings, bounding="earliest", random_state=5).fit(_taps())
    assert "first by time" in first.ledger_.neighbouring
    assert set(first.tables_["on_time"]["time"]) == {"06:00", "09:00"}
    # the check bounds the original as the release did: for the deterministic rule exactly,
    # for the uniform rule in expectation, its bound widened by the release's own draw
    for release in (rel, first):
        report = against_reference(_taps(), release).set_index("table")
        assert report.loc[["on_time", "on_location", "on_time_location"], "passes"].all()


def test_check_of_a_uniform_release_allows_for_its_draw(zero_noise: object) -> None:
    """3000 cards cut to 2 of 6 taps: the release's draw moves each hour by about 26 taps, more
    than the noise bound (39; 20 per two-way cell). Counted in expectation with the draw's
    variance in the bound, the original passes its own check; a check without that term (the
    near miss) fails, and a distorted dataset still fails."""
    from synth.marginals import marginal_tables

    many = _taps(3000)
    settings = dict(bin=60, privacy_unit="card_id", max_contributions=2, epsilon=8.0)
    rel = OpalMarginals(**settings, random_state=5).fit(many)
    report = against_reference(many, rel).set_index("table")
    assert report.loc[["on_time", "on_location", "on_time_location"], "passes"].all()
    expected = marginal_tables(
        many,
        bin_minutes=60,
        unit_column="card_id",
        max_contributions=2,
        bounding="uniform",
        expected=True,
    )["on_time_location"]
    assert expected["count"].to_numpy() == pytest.approx(1000.0)  # 3000 cards x 2/6 per hour
    assert expected["variance"].to_numpy() == pytest.approx(3000 * 2 * (1 / 6) * (5 / 6) * 4 / 5)
    release = rel.tables_["on_time_location"].set_index("time")["count"]
    outside_noise_bound = (release - 1000).abs() > 20
    assert outside_noise_bound.any()  # without the draw's term, the check would fail itself
    bad = many.assign(stop_id="s6")
    assert not against_reference(bad, rel).set_index("table").loc["on_location", "passes"]


def test_uniform_file_with_duckdb_is_loaded_in_memory_and_says_so(tmp_path: object) -> None:
    """A file given to DuckDB is bounded in memory under the uniform rule (the same seeded choice
    as the in-memory engine), and the user who asked for an out-of-core engine is told."""
    from pathlib import Path

    from synth.errors import TransitSynthWarning

    path = Path(str(tmp_path)) / "taps.parquet"
    _taps().to_parquet(path)
    settings = dict(bin=60, privacy_unit="card_id", max_contributions=2, random_state=9)
    mem = OpalMarginals(**settings, engine="memory").fit(_taps())
    with pytest.warns(TransitSynthWarning, match="loaded whole"):
        duck = OpalMarginals(**settings, engine="duckdb").fit(path)
    for name in mem.tables_:
        pd.testing.assert_frame_equal(mem.tables_[name], duck.tables_[name])


def test_bad_bounding_rule() -> None:
    with pytest.raises(ConfigError, match="bounding must be one of"):
        OpalMarginals(privacy_unit="card_id", bounding="latest").fit(_taps())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="bounding must be one of"):
        marginal_tables(_taps(), unit_column="card_id", max_contributions=1, bounding="x")  # type: ignore[arg-type]


def test_cli_bounding_flag(tmp_path: object) -> None:
    """``marginals --bounding earliest`` publishes the first taps; the default the uniform ones."""
    from pathlib import Path

    from synth.cli import main

    folder = Path(str(tmp_path))
    _taps(400).to_csv(folder / "taps.csv", index=False)
    base = ["marginals", str(folder / "taps.csv"), "--epsilon", "8", "--delta", "1e-4"]
    base += ["--bin", "60", "--privacy-unit", "card_id", "--max-contributions", "2", "--quiet"]
    for rule in ("uniform", "earliest"):
        extra = [] if rule == "uniform" else ["--bounding", "earliest"]
        assert main([*base, "--out", str(folder / rule), "--seed", "1", *extra]) == 0
    hours = {
        rule: set(pd.read_csv(folder / rule / "on_time.csv", dtype=str)["time"])
        for rule in ("uniform", "earliest")
    }
    assert hours["earliest"] == {"06:00", "09:00"} and len(hours["uniform"]) == 6
    manifest = (folder / "earliest" / "manifest.json").read_text()
    assert '"bounding": "earliest"' in manifest


def test_datasheet_states_the_bounding_rule(tmp_path: object) -> None:
    """The release's README.md says how each card's k taps were chosen."""
    from pathlib import Path

    settings = dict(bin=60, privacy_unit="card_id", max_contributions=2, random_state=1)
    for rule, words in (("uniform", "uniform random choice"), ("earliest", "first by time")):
        out = Path(str(tmp_path)) / rule
        OpalMarginals(**settings, bounding=rule).fit(_taps()).write(out)  # type: ignore[arg-type]
        assert words in (out / "README.md").read_text()
