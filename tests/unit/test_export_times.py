"""synth.export with released times: MATSim end times, leg modes, OD per period, the MATSim DTD."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.cli import main
from synth.errors import ConfigError
from synth.export import export_release, plan_end_times, read_release, write_population
from synth.export.coordinates import load_coordinates
from synth.export.matsim import leg_modes
from synth.export.periods import DEFAULT_PERIODS, od_by_period, parse_periods

DTD = Path(__file__).resolve().parents[1] / "data" / "population_v6.dtd"

#: a timed release in the HH:MM clock-time contract (times inside their hourly bins)
CLOCK = pd.DataFrame(
    {
        "seq_id": [0, 0, 0, 1, 1, 2, 3, 3, 3],
        "pos": [0, 1, 2, 0, 1, 0, 0, 1, 2],
        "location": ["A", "B", "A", "B", "C", "A", "C", "A", "B"],
        "time": ["07:12", "07:40", "17:05", "05:59", "06:00", "12:00", "22:30", "23:10", "23:55"],
    }
)


def _release(tmp: Path, name: str, frame: pd.DataFrame, params: dict) -> Path:
    d = tmp / name
    d.mkdir()
    frame.to_csv(d / "sequences.csv", index=False)
    manifest = {"parameters": params, "privacy_unit": "card", "spent": {"epsilon": 1.0}}
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


def _coords(tmp: Path) -> Path:
    path = tmp / "xy.csv"
    pd.DataFrame({"stop_id": list("ABC"), "x": [0.0, 1.0, 2.0], "y": [0.0, 1.0, 2.0]}).to_csv(
        path, index=False
    )
    return path


def _taxonomy(tmp: Path) -> Path:
    path = tmp / "tax.csv"
    edges = [("mode:bus", "root"), ("mode:subway", "root"), ("A", "mode:bus")]
    edges += [("line:1", "mode:subway"), ("B", "line:1"), ("C", "root")]
    pd.DataFrame(edges, columns=["child", "parent"]).to_csv(path, index=False)
    return path


def _departure_hours(frame: pd.DataFrame) -> pd.Series:
    """Hour of each tap that starts a leg (every tap but a sequence's last)."""
    f = frame.sort_values(["seq_id", "pos"])
    leaves = f["seq_id"].duplicated(keep="last")
    return f.loc[leaves, "time"].str.slice(0, 2).astype(int).value_counts().sort_index()


def test_clock_times_are_the_activity_end_times(tmp_path: Path) -> None:
    params = {"generator": "prefixtree", "time_bin_minutes": 60, "time_model": "factorised"}
    rel = read_release(_release(tmp_path, "r", CLOCK, params))
    assert rel.clock_times
    ends = plan_end_times(rel)
    timed = ends[~np.isnan(ends)] / 60
    want = [7 * 60 + 12, 7 * 60 + 40, 5 * 60 + 59, 22 * 60 + 30, 23 * 60 + 10]
    assert sorted(timed.tolist()) == sorted(want)  # as released, not moved inside their bins
    hours = pd.Series(timed // 60).astype(int).value_counts().sort_index()
    pd.testing.assert_series_equal(hours, _departure_hours(CLOCK), check_names=False)


def test_bin_start_times_keep_the_hour_profile(tmp_path: Path) -> None:
    """Today's format (bin starts, no time_model in the manifest): spread inside their bins."""
    binned = CLOCK.assign(time=CLOCK["time"].str.slice(0, 3) + "00")
    rel = read_release(_release(tmp_path, "r", binned, {"time_bin_minutes": 60}))
    assert not rel.clock_times
    ends = plan_end_times(rel)
    timed = ends[~np.isnan(ends)]
    assert (timed % 3600 != 0).all()  # placed inside the bin, not on its start
    hours = pd.Series(timed // 3600).astype(int).value_counts().sort_index()
    pd.testing.assert_series_equal(hours, _departure_hours(binned), check_names=False)


def test_leg_modes_from_the_taxonomy(tmp_path: Path) -> None:
    d = _release(tmp_path, "r", CLOCK, {"time_bin_minutes": 60, "time_model": "tree"})
    rel = read_release(d)
    assert leg_modes(rel)[0] is None  # no taxonomy: pt everywhere
    modes, source = leg_modes(rel, str(_taxonomy(tmp_path)))
    assert modes == {"A": "bus", "B": "subway", "C": "pt"} and "mode:NAME" in source
    info = export_release(
        d, to="matsim", stops=_coords(tmp_path), taxonomy=str(_taxonomy(tmp_path))
    )
    assert info["times"] == "released clock times"
    xml = (d / "population.xml").read_text()
    assert xml.count('<leg mode="bus"/>') == 2 and xml.count('<leg mode="subway"/>') == 2
    assert xml.count('<leg mode="pt"/>') == 1  # C has no mode level


def test_leg_modes_from_the_manifest_taxonomy(tmp_path: Path) -> None:
    params = {"time_bin_minutes": 60, "taxonomy": str(_taxonomy(tmp_path))}
    rel = read_release(_release(tmp_path, "r", CLOCK, params))
    assert leg_modes(rel)[0] == {"A": "bus", "B": "subway", "C": "pt"}


def test_population_validates_against_the_matsim_dtd(tmp_path: Path) -> None:
    etree = pytest.importorskip("lxml.etree")
    d = _release(tmp_path, "r", CLOCK, {"time_bin_minutes": 60, "time_model": "auto"})
    rel = read_release(d)
    modes, _ = leg_modes(rel, str(_taxonomy(tmp_path)))
    path = write_population(
        rel, load_coordinates(_coords(tmp_path)), tmp_path / "p.xml", modes=modes
    )
    dtd = etree.DTD(str(DTD))
    parser = etree.XMLParser(no_network=True, load_dtd=False, resolve_entities=False)
    assert dtd.validate(etree.parse(str(path), parser)), dtd.error_log.filter_from_errors()
    broken = path.read_text().replace('<leg mode="bus"/>', "<leg/>", 1)  # near miss: no mode
    assert not dtd.validate(etree.fromstring(broken.split("\n", 2)[2].encode(), parser))


def test_od_per_period_sums_to_the_trips(tmp_path: Path) -> None:
    d = _release(tmp_path, "r", CLOCK, {"time_bin_minutes": 60, "time_model": "auto"})
    rel = read_release(d)
    od = od_by_period(rel)
    assert od["count"].sum() == rel.n_legs == 5
    got = {(o, de, p): c for o, de, p, _, _, c in od.itertuples(index=False, name=None)}
    assert got == {
        ("A", "B", "am_peak"): 1,
        ("B", "A", "am_peak"): 1,
        ("B", "C", "early"): 1,  # 05:59 is early, 06:00 starts the AM peak
        ("C", "A", "evening"): 1,
        ("A", "B", "evening"): 1,
    }
    night = parse_periods("day=05:00-22:00,night=22:00-05:00")
    by_night = od_by_period(rel, night)
    assert by_night.groupby("period")["count"].sum().to_dict() == {"day": 3, "night": 2}
    info = export_release(d, to="od", periods="day=05:00-22:00,night=22:00-05:00")
    written = pd.read_csv(d / info["periods_file"])
    assert written["count"].sum() == rel.n_legs and set(written["period"]) == {"day", "night"}
    assert info["periods"] == {"day": "05:00-22:00", "night": "22:00-05:00"}
    assert (d / "od.csv").is_file()  # the per-bin matrix stays


def test_default_periods_tile_the_day() -> None:
    assert parse_periods(None) == DEFAULT_PERIODS == parse_periods("default")
    assert [n for n, _, _ in DEFAULT_PERIODS] == [
        "early",
        "am_peak",
        "midday",
        "pm_peak",
        "evening",
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("am=06:00-09:00", "00:00 is in no period"),
        ("a=00:00-13:00,b=12:00-24:00", "12:00 is in two periods"),
        ("a=00:00-12:00,a=12:00-24:00", "given twice"),
        ("a=00:00-25:00", "00:00..24:00"),
        ("a=00:00-12:00;b=12:00-24:00", "not name=HH:MM-HH:MM"),
        ("a=06:00-06:00", "empty"),
    ],
)
def test_bad_periods(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_periods(spec)


def test_periods_need_a_timed_od_export(tmp_path: Path) -> None:
    untimed = _release(tmp_path, "u", CLOCK.drop(columns="time"), {})
    with pytest.raises(ConfigError, match="no times"):
        export_release(untimed, to="od", periods="a=00:00-24:00", out=tmp_path / "o1")
    assert not (tmp_path / "o1").exists()
    timed = _release(tmp_path, "t", CLOCK, {"time_bin_minutes": 60})
    with pytest.raises(ConfigError, match="only used by the OD export"):
        export_release(timed, to="matsim", stops=_coords(tmp_path), periods="a=00:00-24:00")
    assert main(["export", str(timed), "--to", "od", "--periods", "x=01:00-02:00"]) == 2
