"""The MATSim export of the demo's SUBE sequence releases (issue 29, MATSim part): built here with
the demo's own settings (the ``[[sequences]]`` tables of configs/demo.toml), exported with line
coordinates from the public Tuesday taps; valid against the population DTD, with no leg of
length zero, the sample's scaling factors present, and the lines without coordinates skipped."""

from __future__ import annotations

import itertools
import json
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from synth import datasets
from synth.cli import main

ROOT = Path(__file__).resolve().parents[2]
DTD = ROOT / "tests" / "data" / "population_v6.dtd"


def _toml_value(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)  # strings, numbers and booleans are written alike in TOML


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """The demo's SUBE sequence releases (run directory), Tuesday line coordinates, names."""
    tmp = tmp_path_factory.mktemp("sube")
    tables = tomllib.loads((ROOT / "configs" / "demo.toml").read_text())["sequences"]
    lines = []
    for table in tables:
        lines.append("[[sequences]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in table.items() if k != "parameters"]
        lines.append("[sequences.parameters]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in table["parameters"].items()]
    (tmp / "seq.toml").write_text("\n".join(lines) + "\n")
    assert main(["run", str(tmp / "seq.toml"), "--out", str(tmp / "run"), "--quiet"]) == 0
    # public line coordinates: the median tap position of each line on Tuesday (the public day of
    # the demo's trips release); a few Wednesday lines have none
    taps = datasets.sube_taps("tuesday").dropna(subset=["lat", "lon"])
    xy = taps.groupby("id_linea")[["lat", "lon"]].median().rename_axis("stop_id").reset_index()
    xy.to_csv(tmp / "lines.csv", index=False)
    return tmp / "run", tmp / "lines.csv", [t["name"] for t in tables]


def test_demo_sube_releases_export_to_valid_matsim(
    demo: tuple[Path, Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    etree = pytest.importorskip("lxml.etree")
    run, lines, names = demo
    assert names == ["sequences-sube", "sequences-sube-timed"]
    parser = etree.XMLParser(no_network=True, load_dtd=False, resolve_entities=False)
    dtd = etree.DTD(str(DTD))
    for name in names:
        release, out = run / name, tmp_path / name
        args = ["export", str(release), "--to", "matsim", "--stops", str(lines), "--out", str(out)]
        assert main([*args, "--quiet"]) == 2  # lines without coordinates: refused by default
        assert "--skip-unlocated" in capsys.readouterr().err
        assert main([*args, "--skip-unlocated", "--sample-share", "0.1"]) == 0
        assert "have no coordinates" in capsys.readouterr().err
        doc = etree.parse(str(out / "population.xml"), parser)
        assert dtd.validate(doc), dtd.error_log.filter_from_errors()
        root = ET.parse(out / "population.xml").getroot()
        seqs = pd.read_csv(release / "sequences.csv", dtype=str)
        seqs = seqs.assign(pos=seqs["pos"].astype(int)).sort_values(["seq_id", "pos"])
        again = seqs["location"].eq(seqs.groupby("seq_id")["location"].shift(-1)).sum()
        assert again > 0  # the release taps a line again: each was a leg of length zero before
        for plan in root.iter("plan"):
            acts = plan.findall("activity")
            xy = [(a.get("x"), a.get("y")) for a in acts]
            assert all(a != b for a, b in itertools.pairwise(xy))
            types = [a.get("type") for a in acts]
            assert types[0] == "home" and set(types[1:-1]) <= {"other"}
            if len(acts) > 1:  # the last is home only back at the first activity's place
                assert types[-1] == ("home" if xy[-1] == xy[0] else "other"), (types, xy)
        share = root.find("attributes/attribute[@name='sampleShare']")
        assert share is not None and share.text == "0.1"
        scaling = ET.parse(out / "scaling-config.xml").getroot()
        factors = {p.get("name"): p.get("value") for p in scaling.iter("param")}
        assert factors["flowCapacityFactor"] == factors["storageCapacityFactor"] == "0.1"
        info = json.loads((out / "export-matsim.json").read_text())
        assert info["activities_merged_at_the_same_place"] >= again
        assert 0 < info["locations_without_coordinates"] < 20
        assert info["plan_persons"] == len(root.findall("person"))
