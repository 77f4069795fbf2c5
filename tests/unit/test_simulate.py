"""synth.simulate: determinism, chunking, realism checks and labelling of simulated data."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from synth import datasets, simulate
from synth.errors import ConfigError, InputError
from synth.io import read_table
from synth.records import load_sequences, sequences_from_taps
from synth.simulate import (
    network_model,
    simulate_sequences,
    simulate_taps,
    write_simulated_sequences,
)
from synth.taxonomy import Taxonomy


def test_deterministic_and_labelled() -> None:
    a = simulate_sequences(500, seed=3)
    b = simulate_sequences(500, seed=3)
    c = simulate_sequences(500, seed=4)
    assert a.equals(b) and not a.equals(c)
    assert a.attrs["simulated"] is True and a.attrs["simulation"]["seed"] == 3
    assert list(a.columns) == ["seq_id", "pos", "location"]
    assert a["seq_id"].nunique() == 500 and a["seq_id"].iloc[0] == "000"
    assert a["seq_id"].is_monotonic_increasing


def test_long_format_contract() -> None:
    seqs = simulate_sequences(2000, seed=1)
    tax = datasets.montreal_taxonomy()
    assert set(seqs["location"]) <= set(tax.leaves())
    again = load_sequences(seqs, taxonomy=tax)  # valid input for the loaders, unchanged
    assert again.drop(columns=[]).equals(seqs[["seq_id", "pos", "location"]])
    first = seqs["pos"].to_numpy() == 0
    assert first.sum() == 2000
    same_seq = ~first[1:]
    loc = seqs["location"].to_numpy()
    assert not np.any(loc[1:][same_seq] == loc[:-1][same_seq])  # a trip goes somewhere else


def test_length_distribution() -> None:
    seqs = simulate_sequences(40_000, seed=2)
    lengths = seqs.groupby("seq_id").size()
    assert lengths.mean() == pytest.approx(4.21, abs=0.08)
    assert lengths.max() > 20 and lengths.max() <= 90  # long tail, capped
    assert 0.1 < (lengths == 1).mean() < 0.4
    short = simulate_sequences(5000, seed=2, mean_length=2.0, max_length=3)
    assert short.groupby("seq_id").size().max() <= 3


def test_popularity_and_gravity() -> None:
    seqs = simulate_sequences(20_000, seed=5)
    share = seqs["location"].value_counts(normalize=True)
    assert share.iloc[:7].sum() > 0.25  # heavy-tailed: the top 10% of stations
    net = datasets.montreal_network().drop_duplicates("station").set_index("station")
    lat = np.radians(net.loc[seqs["location"], "lat"].to_numpy())
    lon = np.radians(net.loc[seqs["location"], "lon"].to_numpy())
    same = seqs["pos"].to_numpy()[1:] > 0
    hop = np.hypot(lat[1:] - lat[:-1], (lon[1:] - lon[:-1]) * np.cos(lat[1:]))[same]
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, len(lat), 20_000), rng.integers(0, len(lat), 20_000)
    random_pairs = np.hypot(lat[i] - lat[j], (lon[i] - lon[j]) * np.cos(lat[i]))
    assert hop.mean() < 0.8 * random_pairs.mean()  # gravity: trips favour nearby stations


def test_time_of_day() -> None:
    seqs = simulate_sequences(3000, seed=7, with_time=True)
    t = seqs["time"]
    assert t.dt.normalize().nunique() == 1
    assert t.min() >= pd.Timestamp("2012-01-04 05:30") and t.max() <= pd.Timestamp(
        "2012-01-04 23:59"
    )
    diffs = t.diff().dt.total_seconds().to_numpy()[1:]
    assert (diffs[seqs["pos"].to_numpy()[1:] > 0] >= 0).all()
    first_hours = t[seqs["pos"] == 0].dt.hour
    assert first_hours.between(6, 9).mean() > 0.4  # morning peak


def test_blocks_and_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simulate, "BLOCK", 1000)
    full = simulate_sequences(2500, seed=11, with_time=True)
    path = write_simulated_sequences(tmp_path / "sim.parquet", 2500, seed=11, with_time=True)
    back = read_table(path)
    pd.testing.assert_frame_equal(back, full, check_dtype=False)
    assert pq.read_schema(path).metadata[b"transit_synth.simulated"] == b"true"
    csv = write_simulated_sequences(tmp_path / "sim.csv", 2500, seed=11)
    assert read_table(csv, dtype={"seq_id": str})["location"].equals(full["location"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sim.csv", "sim.parquet"]
    empty = write_simulated_sequences(tmp_path / "none.parquet", 0, seed=1)
    assert len(read_table(empty)) == 0
    with pytest.raises(ConfigError, match="unknown simulation option"):
        write_simulated_sequences(tmp_path / "x.parquet", 10, colour="red")


def test_taps_round_trip() -> None:
    taps = simulate_taps(800, seed=9)
    assert list(taps.columns) == ["card_id", "time", "stop_id"] and taps.attrs["simulated"]
    assert taps["time"].is_monotonic_increasing
    seqs = sequences_from_taps(taps)
    expected = simulate_sequences(800, seed=9, with_time=True)
    assert seqs["location"].tolist() == expected["location"].tolist()
    assert seqs["seq_id"].tolist() == expected["seq_id"].tolist()
    by_card = simulate_taps(50, seed=9, order="card")
    assert by_card["card_id"].is_monotonic_increasing
    with pytest.raises(ConfigError):
        simulate_taps(5, order="random")


def test_other_networks(shared_data: Path) -> None:
    fan = Taxonomy.from_fanout([f"s{i:04d}" for i in range(1000)], 10)
    seqs = simulate_sequences(3000, taxonomy=fan, seed=1)
    assert set(seqs["location"]) <= set(fan.leaves())
    gen = seqs.groupby("seq_id")["location"].agg(list)
    same_group = sum(  # without coordinates, tree distance makes nearby leaves likelier
        fan.generalize(a, 2) == fan.generalize(b, 2)
        for seq in gen
        for a, b in itertools.pairwise(seq)
    )
    pairs = sum(len(seq) - 1 for seq in gen)
    assert same_group / pairs > 0.1  # vs 1% for uniformly random destinations
    feed = shared_data / "gtfs" / "caltrain-2017-07-24.zip"
    tax = Taxonomy.from_gtfs(feed)
    coords = simulate.gtfs_coordinates(feed)
    sim = simulate_sequences(500, taxonomy=tax, coordinates=coords, seed=1)
    assert set(sim["location"]) <= set(tax.leaves())


def test_regularity_makes_cards_commute_between_two_anchors() -> None:
    sim = simulate_sequences(2000, regularity=1.0, home_return=1.0, seed=3)
    sim = sim.sort_values(["seq_id", "pos"])
    for _, locs in sim.groupby("seq_id")["location"]:
        seq = locs.tolist()
        assert seq[0::2] == [seq[0]] * len(seq[0::2])  # home at every even position
        assert len(set(seq[1::2])) <= 1  # the same anchor at every odd position
        assert all(a != b for a, b in itertools.pairwise(seq))
    base = simulate_sequences(300, seed=5)
    assert not simulate_sequences(300, seed=5, regularity=0.5).equals(base)


def test_errors() -> None:
    with pytest.raises(ConfigError):
        simulate_sequences(10, regularity=1.5)
    with pytest.raises(ConfigError):
        simulate_sequences(-1)
    with pytest.raises(ConfigError):
        simulate_sequences(10, mean_length=0.5)
    with pytest.raises(ConfigError):
        simulate_sequences(10, home_return=2.0)
    with pytest.raises(ConfigError):
        simulate_sequences(10, distance_scale=0.0)
    with pytest.raises(ConfigError):
        simulate_sequences(10, taxonomy=Taxonomy.from_edges([("a", "root")]))
    tax = Taxonomy.from_edges([("a", "root"), ("b", "root")])
    with pytest.raises(InputError, match="no lat/lon for location 'b'"):
        network_model(tax, pd.DataFrame({"location": ["a"], "lat": [1.0], "lon": [2.0]}))
    assert len(simulate_sequences(0, seed=1)) == 0


@pytest.mark.slow
def test_scale_one_million(tmp_path: Path) -> None:
    path = write_simulated_sequences(tmp_path / "m.parquet", 1_000_000, seed=1)
    assert pq.read_metadata(path).num_rows == pytest.approx(4.21e6, rel=0.01)
