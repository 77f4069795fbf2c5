"""``transit-synth export``: real releases of both generators exported, re-read and validated."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth import datasets
from synth.cli import main
from synth.export import utm
from synth.simulate import gtfs_coordinates, simulate_sequences
from synth.taxonomy import Taxonomy


@pytest.fixture(scope="module")
def seq_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prefix-tree trajectory release (60-minute bins) of simulated Montreal sequences."""
    tmp = tmp_path_factory.mktemp("seq")
    simulate_sequences(20000, with_time=True, seed=2).to_csv(tmp / "seqs.csv", index=False)
    datasets.montreal_taxonomy().to_csv(tmp / "tax.csv")
    out = tmp / "release"
    args = [
        "sequences",
        str(tmp / "seqs.csv"),
        "--taxonomy",
        str(tmp / "tax.csv"),
        "--epsilon",
        "10",
        "--height",
        "5",
        "--time-bin",
        "60",
        "--time-model",  # bin-start labels: these tests check the exports' bins
        "tree",
        "--out",
        str(out),
        "--seed",
        "1",
        "--quiet",
    ]
    assert main(args) == 0
    return out


@pytest.fixture(scope="module")
def taxi_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An archetype release of the embedded Chicago taxi sample."""
    out = tmp_path_factory.mktemp("taxi") / "release"
    taxi = str(datasets.path("chicago_taxi"))
    args = [
        "trips",
        taxi,
        "--public",
        taxi,
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--out",
        str(out),
        "--input-format",
        "chicago-taxi",
        "--id-column",
        "taxi_id",
        "--key-columns",
        "shift,pickup_community_area,dropoff_community_area",
        "--category-column",
        "company",
        "--archetypes",
        "3",
        "--seed",
        "1",
        "--quiet",
    ]
    assert main(args) == 0
    return out


def _legs(seqs: pd.DataFrame) -> pd.DataFrame:
    """Consecutive locations of each sequence, computed here independently of synth.export."""
    s = seqs.sort_values(["seq_id", "pos"])
    nxt = s.groupby("seq_id")["location"].shift(-1)
    return pd.DataFrame({"origin": s["location"], "destination": nxt, "time": s["time"]}).dropna()


def _sorted(df: pd.DataFrame) -> bool:
    keys = list(df[["origin", "destination", "bin"]].itertuples(index=False, name=None))
    return keys == sorted(keys) and len(set(keys)) == len(keys)


def test_sequences_od(seq_release: Path, tmp_path: Path) -> None:
    out = tmp_path / "od"
    assert main(["export", str(seq_release), "--to", "od", "--out", str(out), "--quiet"]) == 0
    od = pd.read_csv(out / "od.csv", dtype={"origin": str, "destination": str, "bin": str})
    seqs = pd.read_csv(seq_release / "sequences.csv", dtype=str)
    legs = _legs(seqs)
    assert len(legs) > 100 and od["count"].sum() == len(legs)
    assert _sorted(od) and (od["count"] > 0).all()
    assert set(od["bin"]) == set(legs["time"].str.slice(0, 5))
    expected = legs.assign(bin=legs["time"].str.slice(0, 5)).value_counts(
        ["origin", "destination", "bin"]
    )
    got = od.set_index(["origin", "destination", "bin"])["count"]
    pd.testing.assert_series_equal(got.sort_index(), expected.sort_index(), check_names=False)
    info = json.loads((out / "export-od.json").read_text())
    assert info["legs"] == len(legs) and info["bin_minutes"] == 60
    # three-hour bins merge the release's hourly ones
    assert (
        main(
            [
                "export",
                str(seq_release),
                "--to",
                "od",
                "--out",
                str(out),
                "--bin",
                "180",
                "--format",
                "parquet",
                "--quiet",
            ]
        )
        == 0
    )
    wide = pd.read_parquet(out / "od.parquet")
    assert wide["count"].sum() == len(legs) and _sorted(wide)
    assert {int(b[:2]) % 3 for b in wide["bin"]} == {0}


def test_sequences_matsim_montreal(seq_release: Path, tmp_path: Path) -> None:
    out = tmp_path / "sim"
    args = ["export", str(seq_release), "--to", "matsim", "--stops", "montreal", "--out", str(out)]
    assert main([*args, "--quiet"]) == 0
    root = ET.parse(out / "population.xml").getroot()
    seqs = pd.read_csv(seq_release / "sequences.csv", dtype=str)
    persons = root.findall("person")
    assert len(persons) == seqs["seq_id"].nunique()
    legs = _legs(seqs)
    moving = legs[legs["origin"] != legs["destination"]]  # a place tapped again is one activity
    assert len(legs) > len(moving) > 0
    assert len(root.findall(".//leg[@mode='pt']")) == len(moving)
    crs = root.find("attributes/attribute[@name='coordinateReferenceSystem']")
    assert crs is not None and crs.text == "EPSG:32188"
    net = datasets.montreal_network().drop_duplicates("station").set_index("station")
    ordered = seqs.assign(pos=seqs["pos"].astype(int)).sort_values("pos")
    by_seq = dict(list(ordered.groupby("seq_id")))
    for person in persons:
        xy = [(a.get("x"), a.get("y")) for a in person.iter("activity")]
        assert all(a != b for a, b in itertools.pairwise(xy))  # no leg of length zero
    for person in persons[:: max(1, len(persons) // 300)]:
        acts = person.findall("plan/activity")
        steps = by_seq[person.get("id")]
        locs, times = steps["location"].tolist(), steps["time"].tolist()
        runs = [i for i in range(len(locs)) if i + 1 == len(locs) or locs[i + 1] != locs[i]]
        names = [a.find("attributes/attribute[@name='stop_id']").text for a in acts]
        assert names == [locs[i] for i in runs]
        for act, name in zip(acts, names, strict=True):
            assert float(act.get("x")) == pytest.approx(net.loc[name, "x_mtm8"], abs=1e-3)
            assert float(act.get("y")) == pytest.approx(net.loc[name, "y_mtm8"], abs=1e-3)
        ends = [a.get("end_time") for a in acts]
        assert ends[-1] is None
        # each departure (the last tap of a run at one place) lies inside its release bin
        for end, i in zip(ends[:-1], runs[:-1], strict=True):
            assert times[i][:5] <= end[:5] < f"{int(times[i][:2]) + 1:02d}:00"


def test_taxi_od_and_matsim(taxi_release: Path, tmp_path: Path) -> None:
    trips = pd.read_csv(taxi_release / "trips.csv")
    out = tmp_path / "taxi"
    assert (
        main(
            [
                "export",
                str(taxi_release),
                "--to",
                "od",
                "--format",
                "parquet",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    od = pd.read_parquet(out / "od.parquet")
    assert od["count"].sum() == len(trips) and _sorted(od)
    assert set(od["bin"]) <= {"00:00", "08:00", "16:00"}  # the three shifts of a day
    pair = trips.groupby(["pickup_community_area", "dropoff_community_area"]).size()
    got = od.groupby(["origin", "destination"])["count"].sum()
    got.index = got.index.map(lambda k: (int(k[0]), int(k[1])))
    pd.testing.assert_series_equal(got.sort_index(), pair.sort_index(), check_names=False)
    # community-area centroids (made-up test coordinates) for the MATSim plans
    areas = pd.DataFrame({"stop_id": np.arange(-1, 78)})
    areas["x"], areas["y"] = areas["stop_id"] * 1000.0, areas["stop_id"] * -500.0
    areas.to_csv(tmp_path / "areas.csv", index=False)
    assert (
        main(
            [
                "export",
                str(taxi_release),
                "--to",
                "matsim",
                "--stops",
                str(tmp_path / "areas.csv"),
                "--crs",
                "EPSG:26916",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    root = ET.parse(out / "population.xml").getroot()
    persons = root.findall("person")
    assert len(persons) == trips["taxi_id"].nunique() == len(trips)
    for person, (_, trip) in zip(
        persons[:200], trips.sort_values("taxi_id").iterrows(), strict=False
    ):
        assert person.get("id") == str(trip["taxi_id"])
        acts = person.findall("plan/activity")
        assert float(acts[0].get("x")) == trip["pickup_community_area"] * 1000.0
        assert float(acts[-1].get("y")) == trip["dropoff_community_area"] * -500.0
        # a trip inside one area is one activity: no leg of length zero
        same = trip["pickup_community_area"] == trip["dropoff_community_area"]
        assert len(acts) == (1 if same else 2)
    info = json.loads((out / "export-matsim.json").read_text())
    inside = int((trips["pickup_community_area"] == trips["dropoff_community_area"]).sum())
    assert inside > 0 and info["activities_merged_at_the_same_place"] == inside


def test_gtfs_release(shared_data: Path, tmp_path: Path) -> None:
    feed = shared_data / "gtfs" / "caltrain-2017-07-24.zip"
    tax = Taxonomy.from_gtfs(feed)
    coords = gtfs_coordinates(feed)
    seqs = simulate_sequences(4000, taxonomy=tax, coordinates=coords, seed=5)
    seqs.to_csv(tmp_path / "seqs.csv", index=False)
    rel = tmp_path / "rel"
    assert (
        main(
            [
                "sequences",
                str(tmp_path / "seqs.csv"),
                "--taxonomy",
                str(feed),
                "--epsilon",
                "5",
                "--height",
                "4",
                "--out",
                str(rel),
                "--seed",
                "2",
                "--quiet",
            ]
        )
        == 0
    )
    assert main(["export", str(rel), "--to", "matsim", "--stops", str(feed), "--quiet"]) == 0
    root = ET.parse(rel / "population.xml").getroot()
    assert root.find("attributes/attribute").text == "EPSG:32610"
    ll = coords.drop_duplicates("location").set_index("location")
    x, y, _ = utm(ll["lat"].to_numpy(), ll["lon"].to_numpy(), zone=10, south=False)
    ll["x"], ll["y"] = x, y
    acts = root.findall(".//activity")
    seqs = pd.read_csv(rel / "sequences.csv", dtype=str)
    seqs = seqs.assign(pos=seqs["pos"].astype(int)).sort_values(["seq_id", "pos"])
    again = seqs["location"].eq(seqs.groupby("seq_id")["location"].shift(-1)).sum()
    assert len(acts) == len(seqs) - again  # a stop tapped again is one activity
    for act in acts[:: max(1, len(acts) // 200)]:
        stop = act.find("attributes/attribute").text
        assert float(act.get("x")) == pytest.approx(ll.loc[stop, "x"], abs=1e-3)
    od_ends = [a.get("end_time") for a in acts if a.get("end_time")]
    assert od_ends and min(od_ends) == "08:00:00"  # no times: documented defaults


def test_user_errors_exit_2_and_write_nothing(seq_release: Path, tmp_path: Path) -> None:
    out = tmp_path / "never"
    stops = tmp_path / "few.csv"
    pd.DataFrame({"stop_id": ["McGill"], "x": [1.0], "y": [2.0]}).to_csv(stops, index=False)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "synth",
            "export",
            str(seq_release),
            "--to",
            "matsim",
            "--stops",
            str(stops),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("transit-synth export: error: no coordinates")
    assert not out.exists()
    assert main(["export", str(seq_release), "--to", "matsim", "--out", str(out)]) == 2
    assert main(["export", str(seq_release), "--to", "od", "--bin", "45", "--out", str(out)]) == 2
    assert main(["export", str(tmp_path), "--to", "od"]) == 2
    assert not out.exists()
