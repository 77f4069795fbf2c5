"""MATSim plans ready for a simulation (issue 29, MATSim part): places without coordinates left
out with ``skip_unlocated``, a place tapped again one activity (no leg of length zero), activity
types by the public rule, the sample share's scaling factors; the file valid MATSim."""

from __future__ import annotations

import itertools
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from synth.cli import main
from synth.errors import ConfigError, InputError
from synth.export import export_release, read_release, write_population
from synth.export.coordinates import load_coordinates
from synth.export.plans import ACTIVITY_RULE, parse_activity_types

DTD = Path(__file__).resolve().parents[1] / "data" / "population_v6.dtd"

#: clock times inside hourly bins; X has no coordinates, P and Q share one point
SEQS = pd.DataFrame(
    {
        "seq_id": [0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 4, 4],
        "pos": [0, 1, 2, 3, 0, 1, 2, 0, 1, 0, 1, 2, 0, 1],
        "location": ["A", "A", "B", "C", "A", "X", "B", "X", "X", "B", "C", "X", "P", "Q"],
        "time": [
            "07:10",
            "07:50",
            "08:05",
            "09:00",
            "06:00",
            "06:30",
            "07:00",
            "10:00",
            "11:00",
            "12:00",
            "12:40",
            "13:00",
            "14:00",
            "15:00",
        ],
    }
)


def _release(tmp: Path) -> Path:
    d = tmp / "rel"
    d.mkdir()
    SEQS.to_csv(d / "sequences.csv", index=False)
    params = {"generator": "prefixtree", "time_bin_minutes": 60, "time_model": "auto"}
    manifest = {"parameters": params, "privacy_unit": "card", "spent": {"epsilon": 1.0}}
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


def _stops(tmp: Path) -> Path:
    path = tmp / "xy.csv"
    pd.DataFrame(
        {
            "stop_id": ["A", "B", "C", "P", "Q"],
            "x": [0.0, 100.0, 200.0, 50.0, 50.0],
            "y": [0.0, 10.0, 20.0, 5.0, 5.0],
        }
    ).to_csv(path, index=False)
    return path


def _plans(path: Path) -> dict[str, list[tuple[str, str | None, str, str | None]]]:
    """person -> [(stop_id, end_time, type, mode of the leg after)]."""
    out = {}
    for person in ET.parse(path).getroot().iter("person"):
        kids = list(person.find("plan"))
        acts = []
        for i, act in enumerate(kids):
            if act.tag == "activity":
                leg = kids[i + 1].get("mode") if i + 1 < len(kids) else None
                stop = act.find("attributes/attribute").text
                acts.append((stop, act.get("end_time"), act.get("type"), leg))
        out[person.get("id")] = acts
    return out


def test_unlocated_places_fail_unless_skipped(tmp_path: Path) -> None:
    d, stops = _release(tmp_path), _stops(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"no coordinates for location 'X'.*--skip-unlocated"):
        export_release(d, to="matsim", stops=stops, out=out)
    assert not out.exists()
    with pytest.warns(UserWarning, match=r"1 location\(s\) .*'X'.*: 4 of 14 places .* 1 of 5 pers"):
        info = export_release(d, to="matsim", stops=stops, out=out, skip_unlocated=True)
    plans = _plans(out / "population.xml")
    assert "2" not in plans  # only X: no place left
    # X goes: the plan goes on from A (its end time, its leg) to B
    assert plans["1"] == [("A", "06:00:00", "home", "pt"), ("B", None, "other", None)]
    # the last place goes: the plan ends at C, without an end time
    assert plans["3"] == [("B", "12:00:00", "home", "pt"), ("C", None, "other", None)]
    assert info["locations_without_coordinates"] == 1
    assert info["locations_without_coordinates_skipped"] == ["X"]
    assert info["activities_dropped_without_coordinates"] == 4
    assert info["persons_dropped_without_coordinates"] == 1
    assert info["plan_persons"] == 4 == len(plans)


def test_a_place_tapped_again_is_one_activity(tmp_path: Path) -> None:
    d, stops = _release(tmp_path), _stops(tmp_path)
    with pytest.warns(UserWarning, match="no coordinates"):
        info = export_release(d, to="matsim", stops=stops, skip_unlocated=True)
    plans = _plans(d / "population.xml")
    # A, A, B, C: one activity at A, left at the second tap (07:50); types home, other, other
    # (C is not A: the plan does not end at home)
    assert plans["0"] == [
        ("A", "07:50:00", "home", "pt"),
        ("B", "08:05:00", "other", "pt"),
        ("C", None, "other", None),
    ]
    # P and Q are two ids at one point: one activity (the first id), no leg
    assert plans["4"] == [("P", None, "home", None)]
    assert info["activities_merged_at_the_same_place"] == 2
    assert info["plan_legs"] == 4 and info["legs"] == 9  # the release's legs are unchanged
    root = ET.parse(d / "population.xml").getroot()
    for plan in root.iter("plan"):
        xy = [(a.get("x"), a.get("y")) for a in plan.iter("activity")]
        assert all(a != b for a, b in itertools.pairwise(xy))


def test_activity_types_rule() -> None:
    assert parse_activity_types(None) == ("home", "other", "home")
    assert parse_activity_types("home,work") == ("home", "work", "home")
    assert parse_activity_types(" h , w , s ") == ("h", "w", "s")
    assert parse_activity_types("other") == ("other", "other", "other")
    assert parse_activity_types(["a", "b"]) == ("a", "b", "a")
    for bad in ("", "a,,b", "a,b,c,d"):
        with pytest.raises(ConfigError, match="activity types"):
            parse_activity_types(bad)


def test_activity_types_and_sample_share_in_the_file(tmp_path: Path) -> None:
    etree = pytest.importorskip("lxml.etree")
    d, stops = _release(tmp_path), _stops(tmp_path)
    with pytest.warns(UserWarning, match="no coordinates"):
        info = export_release(
            d,
            to="matsim",
            stops=stops,
            skip_unlocated=True,
            activity_types="dwell,transfer,dwell",
            sample_share=0.25,
        )
    assert info["activity_types"] == {"first": "dwell", "middle": "transfer", "last": "dwell"}
    types = [t for _, _, t, _ in _plans(d / "population.xml")["0"]]
    assert types == ["dwell", "transfer", "transfer"]  # ends at C, not back at A
    root = ET.parse(d / "population.xml").getroot()
    share = root.find("attributes/attribute[@name='sampleShare']")
    assert share is not None and share.get("class") == "java.lang.Double" and share.text == "0.25"
    config = ET.parse(d / "scaling-config.xml").getroot()
    # config_v2.dtd: config (module*), module (param|parameterset)*, param EMPTY with name, value
    assert config.tag == "config" and {m.tag for m in config} == {"module"}
    assert all(p.tag == "param" and not list(p) for m in config for p in m)
    params = {
        (m.get("name"), p.get("name")): p.get("value")
        for m in config.iter("module")
        for p in m.iter("param")
    }
    assert params == {
        ("qsim", "flowCapacityFactor"): "0.25",
        ("qsim", "storageCapacityFactor"): "0.25",
        ("counts", "countsScaleFactor"): "4.0",
    }
    assert info["sample_share"] == 0.25 and info["scaling_file"] == "scaling-config.xml"
    parser = etree.XMLParser(no_network=True, load_dtd=False, resolve_entities=False)
    dtd = etree.DTD(str(DTD))
    assert dtd.validate(etree.parse(str(d / "population.xml"), parser)), dtd.error_log
    # without a share: no scaling file, no attribute (nothing made up)
    out = tmp_path / "plain"
    with pytest.warns(UserWarning, match="no coordinates"):
        export_release(d, to="matsim", stops=stops, skip_unlocated=True, out=out)
    assert not (out / "scaling-config.xml").exists()
    assert "sampleShare" not in (out / "population.xml").read_text()


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5, float("nan")])
def test_bad_sample_share_writes_nothing(tmp_path: Path, share: float) -> None:
    d, out = _release(tmp_path), tmp_path / "out"
    with pytest.raises(ConfigError, match=r"sample share must be a number in \(0, 1\]"):
        export_release(d, to="matsim", stops=_stops(tmp_path), out=out, sample_share=share)
    assert not out.exists()


def test_write_population_defaults(tmp_path: Path) -> None:
    """The library call: home/other by default, unlocated places refused unless skipped."""
    rel = read_release(_release(tmp_path))
    coords = load_coordinates(_stops(tmp_path))
    with pytest.raises(InputError, match="no coordinates for location 'X'"):
        write_population(rel, coords, tmp_path / "p.xml")
    assert not (tmp_path / "p.xml").exists()
    path = write_population(rel, coords, tmp_path / "p.xml", skip_unlocated=True)  # no warning
    assert [t for _, _, t, _ in _plans(path)["0"]] == ["home", "other", "other"]


def test_cli_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, stops = _release(tmp_path), _stops(tmp_path)
    base = ["export", str(d), "--to", "matsim", "--stops", str(stops)]
    assert main([*base, "--out", str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--skip-unlocated" in err[0]
    out = tmp_path / "sim"
    args = [*base, "--out", str(out), "--skip-unlocated", "--sample-share", "0.1"]
    assert main([*args, "--activity-types", "home,other"]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "1 location(s) have no coordinates" in err
    assert "export: 4 legs of 4 persons" in err
    assert (out / "scaling-config.xml").is_file()
    for bad in (["--sample-share", "2"], ["--activity-types", "a,b,c,d"]):
        assert main([*base, "--out", str(tmp_path / "never"), "--skip-unlocated", *bad]) == 2
        assert "error:" in capsys.readouterr().err
    od = ["export", str(d), "--to", "od", "--out", str(tmp_path / "never")]
    assert main([*od, "--sample-share", "0.1"]) == 2
    assert "--sample-share: only used by the MATSim export" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


def test_last_activity_is_home_only_back_at_the_first_place(tmp_path: Path) -> None:
    """The public rule (issue 29): a plan's last activity takes the LAST type only when it is at
    the first activity's coordinates (a round trip), else the MIDDLE type; the file stays valid
    MATSim; ``export-matsim.json`` states the rule and explains legs against plan_legs."""
    etree = pytest.importorskip("lxml.etree")
    d = tmp_path / "rel"
    d.mkdir()
    seqs = pd.DataFrame(
        {
            "seq_id": [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3],
            "pos": [0, 1, 2] * 4,
            # 0: back at A; 1: ends at C; 2: ends at Q, another id at P's point; 3: B, B, A
            "location": ["A", "B", "A", "A", "B", "C", "P", "B", "Q", "B", "B", "A"],
            "time": ["07:00", "08:00", "17:00"] * 4,
        }
    )
    seqs.to_csv(d / "sequences.csv", index=False)
    params = {"generator": "prefixtree", "time_bin_minutes": 60, "time_model": "auto"}
    manifest = {"parameters": params, "privacy_unit": "card", "spent": {"epsilon": 1.0}}
    (d / "manifest.json").write_text(json.dumps(manifest))
    info = export_release(d, to="matsim", stops=_stops(tmp_path), out=tmp_path / "m")
    plans = _plans(tmp_path / "m" / "population.xml")
    types = {p: [t for _, _, t, _ in acts] for p, acts in plans.items()}
    assert types == {
        "0": ["home", "other", "home"],
        "1": ["home", "other", "other"],
        "2": ["home", "other", "home"],  # Q is at P's coordinates: the same place
        "3": ["home", "other"],  # B, B merged: one activity, then A (not B): other
    }
    written = json.loads((tmp_path / "m" / "export-matsim.json").read_text())
    assert written["activity_rule"] == ACTIVITY_RULE and "back at the first" in ACTIVITY_RULE
    assert written["legs"] == 8 and written["plan_legs"] == 7  # one zero-length leg merged
    assert (
        "plan_legs <= legs" in written["legs_note"] and "same coordinates" in written["legs_note"]
    )
    assert info["legs_note"] == written["legs_note"]
    out = tmp_path / "three"
    export_release(d, to="matsim", stops=_stops(tmp_path), out=out, activity_types="h,o,back")
    three = {p: [t for _, _, t, _ in acts] for p, acts in _plans(out / "population.xml").items()}
    assert three["0"] == ["h", "o", "back"] and three["1"] == ["h", "o", "o"]
    parser = etree.XMLParser(no_network=True, load_dtd=False, resolve_entities=False)
    dtd = etree.DTD(str(DTD))
    for path in (tmp_path / "m" / "population.xml", out / "population.xml"):
        assert dtd.validate(etree.parse(str(path), parser)), dtd.error_log
