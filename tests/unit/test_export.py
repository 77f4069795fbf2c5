"""synth.export: plans from releases, OD matrices, coordinates, MATSim XML read back."""

from __future__ import annotations

import gzip
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth import datasets
from synth.errors import ConfigError, InputError
from synth.export import (
    export_release,
    load_coordinates,
    od_matrix,
    plan_end_times,
    read_release,
    transverse_mercator,
    utm,
    write_od,
    write_population,
)

GRS80 = (6378137.0, 1 / 298.257222101)


def _release(tmp: Path, name: str, frame: pd.DataFrame, params: dict, stem: str) -> Path:
    d = tmp / name
    d.mkdir()
    frame.to_csv(d / f"{stem}.csv", index=False)
    manifest = {"parameters": params, "privacy_unit": "card", "spent": {"epsilon": 1.0}}
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


SEQS = pd.DataFrame(
    {
        "seq_id": [0, 0, 0, 1, 1, 2, 10, 10],
        "pos": [0, 1, 2, 0, 1, 0, 0, 1],
        "location": ["A", "B", "A", "B", "C", "A", "A", "B"],
        "time": ["07:00", "07:00", "08:00", "07:00", "09:00", "05:00", "08:00", "08:00"],
    }
)


@pytest.fixture
def seq_dir(tmp_path: Path) -> Path:
    params = {"generator": "prefixtree", "time_bin_minutes": 60}
    return _release(tmp_path, "seq", SEQS, params, "sequences")


def test_sequence_od_counts_and_bins(seq_dir: Path) -> None:
    rel = read_release(seq_dir)
    assert rel.kind == "sequences" and rel.bin_width == 60
    assert rel.n_persons == 4 and rel.n_legs == 4
    assert rel.steps["person"].drop_duplicates().tolist() == ["0", "1", "2", "10"]  # numeric
    od = od_matrix(rel)
    expected = [
        ("A", "B", "07:00", 1),
        ("A", "B", "08:00", 1),
        ("B", "A", "07:00", 1),
        ("B", "C", "07:00", 1),
    ]
    assert list(od.itertuples(index=False, name=None)) == expected
    assert od["count"].sum() == rel.n_legs
    wide = od_matrix(rel, bin_minutes=120)
    assert list(wide.itertuples(index=False, name=None)) == [
        ("A", "B", "06:00", 1),
        ("A", "B", "08:00", 1),
        ("B", "A", "06:00", 1),
        ("B", "C", "06:00", 1),
    ]
    with pytest.raises(ConfigError, match="multiple of the release's own time bins"):
        od_matrix(rel, bin_minutes=90)
    with pytest.raises(ConfigError, match=r"1\.\.1440"):
        od_matrix(rel, bin_minutes=0)


def test_sequences_without_time_have_one_bin(tmp_path: Path) -> None:
    d = _release(tmp_path, "s", SEQS.drop(columns="time"), {"generator": "prefixtree"}, "sequences")
    rel = read_release(d)
    assert rel.bin_width is None
    od = od_matrix(rel)
    assert set(od["bin"]) == {"all"}
    assert list(od.itertuples(index=False, name=None)) == [
        ("A", "B", "all", 2),
        ("B", "A", "all", 1),
        ("B", "C", "all", 1),
    ]
    ends = plan_end_times(rel) / 60  # defaults: 08:00, then every 60 minutes
    np.testing.assert_array_equal(ends[:3], [480, 540, np.nan])


def test_end_times_spread_inside_bins(seq_dir: Path) -> None:
    rel = read_release(seq_dir)
    ends = plan_end_times(rel) / 60
    # person 0: two legs in the 07:00 bin -> 07:15 and 07:45; last activity has no end
    np.testing.assert_array_equal(ends[:3], [7 * 60 + 15, 7 * 60 + 45, np.nan])
    # person 1: one leg in 07:00 -> 07:30; person 2: no leg; person 10: 08:30
    np.testing.assert_array_equal(ends[3:], [450, np.nan, np.nan, 510, np.nan])


def test_end_times_never_decrease(tmp_path: Path) -> None:
    seqs = pd.DataFrame(
        {
            "seq_id": ["a"] * 4,
            "pos": range(4),
            "location": list("ABAB"),
            "time": ["09:00", "08:00", "09:00", "10:00"],
        }
    )
    params = {"generator": "prefixtree", "time_bin_minutes": 60}
    d = _release(tmp_path, "s", seqs, params, "sequences")
    ends = plan_end_times(read_release(d)) / 60
    # 09:00 and the 08:00 lifted to 09:00 share the 09:00 bin with the next leg: three in one bin
    np.testing.assert_allclose(ends[:3], [540 + 10, 540 + 30, 540 + 50])
    assert np.isnan(ends[3])


TRIPS = pd.DataFrame(
    {
        "card_id": ["p2", "p1", "p1", "p1", "p3"],
        "on_time": [
            "2019-11-27T10:20:00",
            "2019-11-27T07:05:00",
            "2019-11-27T08:10:00",
            "2019-11-27T17:45:30",
            "2019-11-27T06:00:00",
        ],
        "on_stop": ["X", "A", "B", "D", "A"],
        "off_stop": ["Y", "B", "C", "E", "A"],
        "fare": [1, 2, 3, 4, 5],
    }
)


def test_trips_chain_with_walk_joins(tmp_path: Path) -> None:
    d = _release(tmp_path, "t", TRIPS, {"generator": "archetypes"}, "trips")
    rel = read_release(d)
    assert rel.bin_width == 0 and rel.columns["origin"] == "on_stop"
    steps = rel.steps
    p1 = steps[steps["person"] == "p1"]
    assert p1["location"].tolist() == ["A", "B", "C", "D", "E"]
    assert p1["mode"].tolist() == ["pt", "pt", "walk", "pt", ""]
    assert rel.n_legs == 5  # the walk join is not a trip
    od = od_matrix(rel)
    assert od["count"].sum() == 5
    assert list(od.itertuples(index=False, name=None))[:2] == [
        ("A", "A", "06:00", 1),
        ("A", "B", "07:00", 1),
    ]
    ends = plan_end_times(rel)[steps["person"].to_numpy() == "p1"] / 60
    # exact times; the walk leaves C when the next trip leaves D
    np.testing.assert_allclose(ends[:4], [425, 490, 1065.5, 1065.5])


def test_trips_chain_through_location_column(tmp_path: Path) -> None:
    trips = pd.DataFrame(
        {"card_id": ["c", "c", "c", "d"], "hour": [9, 7, 7, 23], "line": ["L2", "L1", "L3", "L1"]}
    )
    d = _release(tmp_path, "t", trips, {"generator": "archetypes"}, "trips")
    with pytest.raises(InputError, match="no origin/destination columns"):
        read_release(d)
    rel = read_release(d, location_column="line")
    assert rel.bin_width == 60
    assert rel.steps["location"].tolist() == ["L1", "L3", "L2", "L1"]  # by hour, then row order
    od = od_matrix(rel)
    assert list(od.itertuples(index=False, name=None)) == [
        ("L1", "L3", "07:00", 1),
        ("L3", "L2", "07:00", 1),
    ]
    with pytest.raises(ConfigError, match="only for trip releases"):
        read_release(
            _release(tmp_path, "s", SEQS, {"generator": "prefixtree"}, "sequences"),
            location_column="line",
        )


def test_taxi_shift_and_schema_id(tmp_path: Path) -> None:
    trips = pd.DataFrame(
        {
            "taxi_id": [5, 6],
            "shift": [8, 20],
            "pickup_community_area": [32, -1],
            "dropoff_community_area": [6, 8],
        }
    )
    d = _release(tmp_path, "t", trips, {"generator": "archetypes"}, "trips")
    (d / "schema.json").write_text(json.dumps({"taxi_id": {"kind": "id"}}))
    rel = read_release(d)
    assert rel.columns["person"] == "taxi_id" and rel.bin_width == 480
    od = od_matrix(rel)
    assert list(od.itertuples(index=False, name=None)) == [
        ("-1", "8", "16:00", 1),
        ("32", "6", "16:00", 1),
    ]


def test_read_release_errors(tmp_path: Path, seq_dir: Path) -> None:
    with pytest.raises(InputError, match=r"no manifest\.json"):
        read_release(tmp_path)
    SEQS.to_parquet(seq_dir / "sequences.parquet")
    with pytest.raises(InputError, match="keep one"):
        read_release(seq_dir)
    noon = TRIPS.assign(on_time=TRIPS["on_time"].where(TRIPS.index != 2, "noon"))
    bad = _release(tmp_path, "bad", noon, {"generator": "archetypes"}, "trips")
    with pytest.raises(InputError, match="column 'on_time', row 3: cannot parse 'noon'"):
        read_release(bad)
    nocard = _release(
        tmp_path, "nc", TRIPS.drop(columns="card_id"), {"generator": "archetypes"}, "trips"
    )
    with pytest.raises(InputError, match="no person id column"):
        read_release(nocard)


def test_transverse_mercator_matches_montreal_mtm8() -> None:
    """The embedded network's lat/lon were computed with pyproj from x/y (EPSG:32188)."""
    net = datasets.montreal_network()
    x, y = transverse_mercator(
        net["lat"].to_numpy(),
        net["lon"].to_numpy(),
        lon0=-73.5,
        k0=0.9999,
        false_easting=304800.0,
        false_northing=0.0,
        ellipsoid=GRS80,
    )
    assert np.max(np.abs(x - net["x_mtm8"].to_numpy())) < 0.2  # 6-decimal degrees ~ 0.1 m
    assert np.max(np.abs(y - net["y_mtm8"].to_numpy())) < 0.2


def test_utm_known_points() -> None:
    x, y, epsg = utm(np.array([45.0]), np.array([3.0]))
    assert epsg == "EPSG:32631"
    # central meridian: x = false easting, y = k0 * meridian arc to 45 deg (4,984,944.378 m)
    assert x[0] == pytest.approx(500000.0, abs=1e-6)
    assert y[0] == pytest.approx(0.9996 * 4984944.378, abs=0.01)
    _, ys, south = utm(np.array([-33.9]), np.array([151.2]))
    assert south == "EPSG:32756" and 6_000_000 < ys[0] < 6_300_000


def test_coordinates_sources(tmp_path: Path) -> None:
    mtl = load_coordinates("montreal")
    assert mtl.crs == "EPSG:32188" and len(mtl.table) == 68
    xy = mtl.lookup(["McGill"])
    assert 299_000 < xy["x"].iloc[0] < 300_000
    deg = load_coordinates("montreal", crs="wgs84")
    assert deg.crs == "EPSG:4326"
    assert deg.lookup(["McGill"])["y"].iloc[0] == pytest.approx(45.504, abs=1e-3)
    csv = tmp_path / "stops.csv"
    stops = pd.DataFrame({"stop_id": ["007", "8"], "x": [1.5, 2.0], "y": [3.0, 4.0]})
    stops.to_csv(csv, index=False)
    c = load_coordinates(csv, crs="EPSG:2950")
    assert c.crs == "EPSG:2950" and c.lookup(["007"])["x"].iloc[0] == 1.5
    assert load_coordinates(csv).crs is None
    with pytest.raises(InputError, match=r"no coordinates for location '9' \(and 1 more\)"):
        c.lookup(["8", "9", "z"])
    with pytest.raises(ConfigError, match="needs lat/lon"):
        load_coordinates(csv, crs="wgs84")
    ll = tmp_path / "ll.csv"
    pd.DataFrame({"stop_id": ["a"], "lat": [45.5], "lon": [-73.6]}).to_csv(ll, index=False)
    assert load_coordinates(ll).crs == "EPSG:32618"
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"stop_id": ["a"], "lat": [95.0], "lon": [0.0]}).to_csv(bad, index=False)
    with pytest.raises(InputError, match="row 1: no valid lat/lon for stop 'a'"):
        load_coordinates(bad)


def test_gtfs_coordinates(shared_data: Path) -> None:
    c = load_coordinates(shared_data / "gtfs" / "caltrain-2017-07-24.zip")
    assert c.crs == "EPSG:32610"  # San Francisco - San Jose
    sf = c.lookup(["70011"])
    assert 550_000 < sf["x"].iloc[0] < 555_000 and 4_180_000 < sf["y"].iloc[0] < 4_182_000


def _parse(path: Path) -> ET.Element:
    raw = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    dtd = b'<!DOCTYPE population SYSTEM "http://www.matsim.org/files/dtd/population_v6.dtd">'
    assert dtd in raw
    return ET.fromstring(raw)


def _check_plans(root: ET.Element, coords: pd.DataFrame) -> list[ET.Element]:
    """Population v6 structure: one selected plan per person, activity (leg activity)*."""
    assert root.tag == "population"
    persons = root.findall("person")
    ids = [p.get("id") for p in persons]
    assert len(set(ids)) == len(ids)
    for person in persons:
        (plan,) = person.findall("plan")
        assert plan.get("selected") == "yes"
        kids = list(plan)
        assert [k.tag for k in kids] == ["activity", "leg"] * (len(kids) // 2) + ["activity"]
        ends = [a.get("end_time") for a in kids[::2]]
        assert ends[-1] is None and all(e is not None for e in ends[:-1])
        assert ends[:-1] == sorted(ends[:-1])  # HH:MM:SS sorts as time
        for act in kids[::2]:
            stop = act.find("attributes/attribute[@name='stop_id']").text
            assert float(act.get("x")) == pytest.approx(coords.loc[stop, "x"], abs=1e-3)
            assert float(act.get("y")) == pytest.approx(coords.loc[stop, "y"], abs=1e-3)
    return persons


def test_population_round_trip(tmp_path: Path, seq_dir: Path) -> None:
    rel = read_release(seq_dir)
    coords = pd.DataFrame(
        {"x": [0.0, 1000.0, 2000.5], "y": [5.0, 6.0, 7.25]},
        index=pd.Index(["A", "B", "C"], name="location"),
    )
    csv = tmp_path / "xy.csv"
    coords.rename_axis("stop_id").reset_index().to_csv(csv, index=False)
    c = load_coordinates(csv, crs="EPSG:32188")
    for name in ("population.xml", "population.xml.gz"):
        path = write_population(rel, c, tmp_path / name)
        root = _parse(path)
        persons = _check_plans(root, coords)
        assert [p.get("id") for p in persons] == ["0", "1", "2", "10"]
        crs = root.find("attributes/attribute[@name='coordinateReferenceSystem']")
        assert crs is not None and crs.text == "EPSG:32188"
        legs = root.findall(".//leg")
        assert len(legs) == rel.n_legs == od_matrix(rel)["count"].sum()
        assert {leg.get("mode") for leg in legs} == {"pt"}
        first = persons[0].findall("plan/activity")
        assert [a.get("end_time") for a in first] == ["07:15:00", "07:45:00", None]


def test_population_escapes_and_walks(tmp_path: Path) -> None:
    trips = pd.DataFrame(
        {
            "card_id": ['a&"b<'] * 2,
            "on_time": ["2019-01-01T07:00", "2019-01-01T09:00"],
            "origin": ["S&1", "S<3>"],
            "destination": ['S"2', "S&1"],
        }
    )
    d = _release(tmp_path, "t", trips, {"generator": "archetypes"}, "trips")
    rel = read_release(d)
    coords = pd.DataFrame(
        {"x": [1.0, 2.0, 3.0], "y": [1.0, 2.0, 3.0]}, index=pd.Index(["S&1", 'S"2', "S<3>"])
    )
    csv = tmp_path / "xy.csv"
    coords.rename_axis("stop_id").reset_index().to_csv(csv, index=False)
    root = _parse(write_population(rel, load_coordinates(csv), tmp_path / "p.xml"))
    assert root.find("attributes") is None  # no CRS declared
    (person,) = _check_plans(root, coords)
    assert person.get("id") == 'a&"b<'
    assert [leg.get("mode") for leg in person.iter("leg")] == ["pt", "walk", "pt"]
    assert [a.find("attributes/attribute").text for a in person.iter("activity")] == [
        "S&1",
        'S"2',
        "S<3>",
        "S&1",
    ]


def test_missing_coordinates_write_nothing(tmp_path: Path, seq_dir: Path) -> None:
    csv = tmp_path / "xy.csv"
    pd.DataFrame({"stop_id": ["A", "B"], "x": [0, 1], "y": [0, 1]}).to_csv(csv, index=False)
    out = tmp_path / "out"
    with pytest.raises(InputError, match="no coordinates for location 'C'"):
        export_release(seq_dir, to="matsim", stops=csv, out=out)
    assert not out.exists()


def test_od_written_and_read_back(tmp_path: Path, seq_dir: Path) -> None:
    od = od_matrix(read_release(seq_dir))
    for name in ("od.csv", "od.parquet"):
        back = (
            pd.read_csv(tmp_path / name, dtype={"origin": str, "destination": str, "bin": str})
            if write_od(od, tmp_path / name).suffix == ".csv"
            else pd.read_parquet(tmp_path / name)
        )
        pd.testing.assert_frame_equal(back, od, check_dtype=False)
    info = export_release(seq_dir, to="od", fmt="parquet", bin_minutes=120)
    assert info["legs"] == 4 and info["bin_minutes"] == 120
    assert pd.read_parquet(seq_dir / "od.parquet")["count"].sum() == 4
    assert json.loads((seq_dir / "export-od.json").read_text())["file"] == "od.parquet"
    with pytest.raises(ConfigError, match="only used by the OD export"):
        export_release(seq_dir, to="matsim", stops="montreal", bin_minutes=60)


def test_output_order_is_data_independent(tmp_path: Path) -> None:
    params = {"generator": "prefixtree", "time_bin_minutes": 60}
    a = _release(tmp_path, "a", SEQS, params, "sequences")
    b = _release(tmp_path, "b", SEQS.sample(frac=1.0, random_state=3), params, "sequences")
    coords = tmp_path / "xy.csv"
    xy = pd.DataFrame({"stop_id": list("ABC"), "x": [0, 1, 2], "y": [0, 1, 2]})
    xy.to_csv(coords, index=False)
    for d in (a, b):
        export_release(d, to="od")
        export_release(d, to="matsim", stops=coords)
    assert (a / "od.csv").read_bytes() == (b / "od.csv").read_bytes()
    pa, pb = (a / "population.xml").read_text(), (b / "population.xml").read_text()
    assert pa.replace('release a"', "") == pb.replace('release b"', "")
