"""``transit-synth export`` of a real timed prefix-tree release: the MATSim end times keep the
release's hour-of-day profile, the XML is valid MATSim, the per-period OD sums to the trips; in
today's format (bin starts) and in the clock-time format (``HH:MM`` inside the bins)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth import datasets
from synth.cli import main
from synth.simulate import simulate_sequences

DTD = Path(__file__).resolve().parents[1] / "data" / "population_v6.dtd"


@pytest.fixture(scope="module", params=["bin starts", "clock times"])
def timed_release(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("timed")
    simulate_sequences(4000, with_time=True, seed=3).to_csv(tmp / "seqs.csv", index=False)
    datasets.montreal_taxonomy().to_csv(tmp / "tax.csv")
    out = tmp / "release"
    args = ["sequences", str(tmp / "seqs.csv"), "--taxonomy", str(tmp / "tax.csv")]
    args += ["--epsilon", "10", "--height", "5", "--time-bin", "60", "--out", str(out)]
    assert main([*args, "--seed", "1", "--quiet"]) == 0
    if request.param == "clock times":  # the HH:MM contract: a minute inside each bin
        clock = tmp / "clock"
        shutil.copytree(out, clock)
        seqs = pd.read_csv(clock / "sequences.csv", dtype={"time": str})
        seqs = seqs.sort_values(["seq_id", "pos"]).reset_index(drop=True)
        rng = np.random.default_rng(0)
        hour = seqs["time"].str.slice(0, 2).astype(int)
        minutes = pd.Series(hour.to_numpy() * 60 + rng.integers(0, 60, len(seqs)))
        minutes = minutes.groupby(seqs["seq_id"]).cummax()  # non-decreasing, hours kept
        seqs["time"] = (
            (minutes // 60).map("{:02d}".format) + ":" + (minutes % 60).map("{:02d}".format)
        )
        seqs.to_csv(clock / "sequences.csv", index=False)
        manifest = json.loads((clock / "manifest.json").read_text())
        manifest["parameters"]["time_model"] = "auto"
        (clock / "manifest.json").write_text(json.dumps(manifest))
        return clock
    return out


def test_matsim_end_times_keep_the_hour_profile(timed_release: Path, tmp_path: Path) -> None:
    out = tmp_path / "sim"
    args = [
        "export",
        str(timed_release),
        "--to",
        "matsim",
        "--stops",
        "montreal",
        "--out",
        str(out),
    ]
    assert main([*args, "--quiet"]) == 0
    seqs = pd.read_csv(timed_release / "sequences.csv", dtype=str)
    seqs = seqs.assign(pos=seqs["pos"].astype(int)).sort_values(["seq_id", "pos"])
    nxt = seqs.groupby("seq_id")["location"].shift(-1)
    # every tap with a next one elsewhere (a place tapped again is one activity)
    departs = seqs[nxt.notna() & (nxt != seqs["location"])]
    assert len(departs) < seqs["seq_id"].duplicated(keep="last").sum()  # repeats were merged
    want = departs["time"].str.slice(0, 2).astype(int).value_counts().sort_index()
    root = ET.parse(out / "population.xml").getroot()
    ends = [a.get("end_time") for a in root.iter("activity") if a.get("end_time")]
    got = pd.Series([int(e[:2]) for e in ends]).value_counts().sort_index()
    assert len(want) > 10
    pd.testing.assert_series_equal(got, want, check_names=False)
    info = json.loads((out / "export-matsim.json").read_text())
    clock = "time_model" in json.loads((timed_release / "manifest.json").read_text())["parameters"]
    assert info["times"] == (
        "released clock times" if clock else "binned departures spread inside bins"
    )
    if clock:  # exactly the released times
        assert sorted(e[:5] for e in ends) == sorted(departs["time"])
    etree = pytest.importorskip("lxml.etree")
    parser = etree.XMLParser(no_network=True, load_dtd=False, resolve_entities=False)
    dtd = etree.DTD(str(DTD))
    assert dtd.validate(etree.parse(str(out / "population.xml"), parser)), dtd.error_log


def test_od_per_period_sums_to_the_trips(timed_release: Path, tmp_path: Path) -> None:
    out = tmp_path / "od"
    spec = "night=19:00-07:00,day=07:00-19:00"
    args = ["export", str(timed_release), "--to", "od", "--out", str(out), "--periods", spec]
    assert main([*args, "--quiet"]) == 0
    info = json.loads((out / "export-od.json").read_text())
    periods = pd.read_csv(out / "od-periods.csv", dtype={"origin": str, "destination": str})
    assert periods["count"].sum() == info["legs"] == pd.read_csv(out / "od.csv")["count"].sum()
    assert set(periods["period"]) == {"night", "day"}
    seqs = pd.read_csv(timed_release / "sequences.csv", dtype=str)
    seqs = seqs.assign(pos=seqs["pos"].astype(int)).sort_values(["seq_id", "pos"])
    departs = seqs[seqs["seq_id"].duplicated(keep="last")]
    hours = departs["time"].str.slice(0, 2).astype(int)
    day = int(((hours >= 7) & (hours < 19)).sum())
    assert periods.groupby("period")["count"].sum().to_dict() == {
        "day": day,
        "night": len(departs) - day,
    }
