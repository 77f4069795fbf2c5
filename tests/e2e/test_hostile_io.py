"""Issue 18: hostile files in and out: encodings, empty files, zip bombs, XML-invalid ids, formula
cells, mathtext in names, malformed or edited manifests. Each is handled or refused in one line."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.cli import main

TAXONOMY = "child,parent\nA,line:1\nB,line:1\nC,line:2\nD,line:2\nline:1,root\nline:2,root\n"


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err
    return lines[0]


def _taps(stops: list[str], n: int = 60) -> str:
    return "card_id,time,stop_id\n" + "".join(
        f"c{i},2024-05-01T08:{i % 60:02d}:00,{stops[i % len(stops)]}\n"
        f"c{i},2024-05-01T09:{i % 60:02d}:00,{stops[(i + 1) % len(stops)]}\n"
        for i in range(n)
    )


# -- reading --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "empty"),
        (b"card_id,time,stop_id,caf\xe9\nc1,2024-05-01T08:00:00,A,1\n", "line 1"),
        (b"card_id,time,stop_id\nc1,2024-05-01T08:00:00,Caf\xe9\n", "line 2"),
    ],
    ids=["zero-bytes", "latin1-header", "latin1-row"],
)
@pytest.mark.parametrize("command", ["marginals", "sequences"])
def test_unreadable_csv_is_one_line(tmp_path, capsys, content, expected, command) -> None:
    data = tmp_path / "taps.csv"
    data.write_bytes(content)
    (tmp_path / "tax.csv").write_text(TAXONOMY)
    out = tmp_path / "out"
    args = {
        "marginals": ["--epsilon", "1", "--delta", "1e-6"],
        "sequences": ["--taxonomy", str(tmp_path / "tax.csv"), "--epsilon", "1", "--height", "2"],
    }[command]
    assert main([command, str(data), *args, "--out", str(out), "--quiet"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(data) in line and expected in line
    if content:
        assert "UTF-8" in line
    assert not out.exists()


def test_utf8_bom_is_accepted(tmp_path) -> None:
    data = tmp_path / "taps.csv"
    data.write_bytes(b"\xef\xbb\xbf" + _taps(list("ABCD")).encode())
    out = tmp_path / "out"
    assert (
        main(["marginals", str(data), "--epsilon", "1", "--delta", "1e-6", "--out", str(out)]) == 0
    )


def test_run_on_a_bad_config_is_one_line(tmp_path, capsys) -> None:
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'[[sequences]]\nname = "caf\xe9"\n')
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    for config, expected in ((latin, "UTF-8"), (folder, "directory")):
        assert main(["run", str(config), "--out", str(tmp_path / "out")]) == 2
        line = _one_error_line(capsys.readouterr().err)
        assert str(config) in line and expected in line
    assert not (tmp_path / "out").exists()


def _bomb(path: Path, size: int) -> Path:
    """A GTFS zip whose stop_times.txt unpacks to ``size`` bytes of zeros (ratio ~1000:1)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("stops.txt", "stop_id,stop_name,stop_lat,stop_lon\nA,A,0,0\n")
        zf.writestr("routes.txt", "route_id,route_short_name,route_type\nR,R,3\n")
        zf.writestr("trips.txt", "route_id,service_id,trip_id\nR,S,T\n")
        with zf.open("stop_times.txt", "w", force_zip64=True) as fh:
            fh.write(b"trip_id,arrival_time,departure_time,stop_id,stop_sequence\n")
            block = b"0" * (1 << 20)
            for _ in range(size >> 20):
                fh.write(block)
    return path


def test_gtfs_zip_bomb_is_refused_before_reading(tmp_path, capsys) -> None:
    feed = _bomb(tmp_path / "bomb.zip", 64 << 20)  # 64 MiB of zeros in ~64 KiB
    assert feed.stat().st_size < 1 << 20
    data = tmp_path / "taps.csv"
    data.write_text(_taps(["A"]))
    args = ["sequences", str(data), "--taxonomy", str(feed), "--epsilon", "1", "--height", "2"]
    assert main([*args, "--out", str(tmp_path / "out")]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "stop_times.txt" in line and "compression ratio" in line
    assert not (tmp_path / "out").exists()


def test_declared_size_limit(monkeypatch, tmp_path) -> None:
    from synth import gtfs, taxonomy
    from synth.errors import InputError

    feed = _bomb(tmp_path / "big.zip", 2 << 20)
    monkeypatch.setattr(gtfs, "GTFS_MEMBER_LIMIT", 1 << 20)
    with pytest.raises(InputError, match="above the limit"):
        taxonomy.Taxonomy.from_gtfs(feed)


# -- writing --------------------------------------------------------------------------------------
@pytest.fixture
def odd_release(tmp_path: Path) -> Path:
    """A sequences release whose stop ids hold formula starts and XML-invalid characters."""
    stops = ["=SUM(A1)", "+1", "@cmd", "-2+3", "-12", "A\x07", "B\x1b", "C\x0b"]
    release = tmp_path / "release"
    release.mkdir()
    rows = [(s, p, stops[(s + p) % len(stops)]) for s in range(40) for p in range(3)]
    pd.DataFrame(rows, columns=["seq_id", "pos", "location"]).to_csv(
        release / "sequences.csv", index=False
    )
    (release / "manifest.json").write_text(json.dumps({"privacy_unit": "card", "spends": []}))
    coords = tmp_path / "stops.csv"
    pd.DataFrame({"stop_id": stops, "x": np.arange(8.0), "y": np.arange(8.0)}).to_csv(
        coords, index=False
    )
    return release


def test_matsim_export_refuses_xml_invalid_ids(odd_release, tmp_path, capsys) -> None:
    args = ["export", str(odd_release), "--to", "matsim", "--stops", str(tmp_path / "stops.csv")]
    assert main([*args, "--crs", "EPSG:32610", "--quiet"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "U+0007" in line and "XML" in line
    assert not (odd_release / "population.xml").exists()
    # the same release without the control characters exports XML that parses
    seqs = pd.read_csv(odd_release / "sequences.csv", dtype=str, keep_default_na=False)
    seqs["location"] = seqs["location"].str.replace(r"[\x00-\x1f]", "", regex=True)
    seqs.to_csv(odd_release / "sequences.csv", index=False)
    stops = pd.read_csv(tmp_path / "stops.csv", dtype=str, keep_default_na=False)
    stops["stop_id"] = stops["stop_id"].str.replace(r"[\x00-\x1f]", "", regex=True)
    stops.to_csv(tmp_path / "stops.csv", index=False)
    assert main([*args, "--crs", "EPSG:32610", "--quiet"]) == 0
    ids = {a.text for a in ET.parse(odd_release / "population.xml").getroot().iter("attribute")}
    assert {"=SUM(A1)", "@cmd"} <= ids


def test_od_csv_escapes_formula_cells(odd_release, tmp_path) -> None:
    out = tmp_path / "od"
    assert main(["export", str(odd_release), "--to", "od", "--out", str(out), "--quiet"]) == 0
    od = pd.read_csv(out / "od.csv", dtype=str, keep_default_na=False)
    cells = set(od["origin"]) | set(od["destination"])
    assert "'=SUM(A1)" in cells and "'@cmd" in cells and "'-2+3" in cells
    assert "-12" in cells and "+1" in cells  # plain numbers are not formulas
    assert not any(c.startswith(("=", "@")) or (c.startswith("+") and c != "+1") for c in cells)
    raw = tmp_path / "raw"
    argv = ["export", str(odd_release), "--to", "od", "--out", str(raw), "--no-csv-escape"]
    assert main([*argv, "--quiet"]) == 0
    assert "=SUM(A1)" in set(pd.read_csv(raw / "od.csv", dtype=str)["origin"])


def test_mathtext_in_names_does_not_crash_reports(tmp_path, capsys) -> None:
    stops = ["$x$", "$\\frac{$", "a$^b$", "$$"]
    taps = tmp_path / "taps.csv"
    taps.write_text(_taps(stops, 200))
    release = tmp_path / "$\\frac{$ release"
    argv = ["marginals", str(taps), "--epsilon", "5", "--delta", "1e-3", "--out", str(release)]
    assert main([*argv, "--seed", "1", "--quiet"]) == 0
    audit = ["audit", str(release), "--out", str(tmp_path / "audit"), "--quiet"]
    assert main(audit) == 0, capsys.readouterr().err
    seqs = tmp_path / "$x$"
    seqs.mkdir()
    rows = [(s, p, stops[(s * 7 + p) % 4]) for s in range(80) for p in range(3)]
    frame = pd.DataFrame(rows, columns=["seq_id", "pos", "location"])
    frame.to_csv(seqs / "sequences.csv", index=False)
    frame.to_csv(tmp_path / "original.csv", index=False)
    argv = ["evaluate", str(tmp_path / "original.csv"), str(seqs), "--out", str(tmp_path / "ev")]
    assert main([*argv, "--queries", "50", "--top-k", "5", "--quiet"]) == 0, capsys.readouterr().err


# -- audit: schema and consistency ----------------------------------------------------------------
@pytest.fixture(scope="module")
def sbh_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("sbh")
    taps = base / "taps.csv"
    taps.write_text(_taps(list("ABCDEF"), 400))
    out = base / "release"
    argv = ["marginals", str(taps), "--epsilon", "8", "--delta", "1e-6", "--out", str(out)]
    assert main([*argv, "--seed", "2", "--quiet"]) == 0
    return out


def _edited(release: Path, target: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    shutil.copytree(release, target)
    manifest = json.loads((target / "manifest.json").read_text())
    edit(manifest)
    (target / "manifest.json").write_text(json.dumps(manifest))
    return target


@pytest.mark.parametrize(
    ("field", "edit"),
    [
        ("parameters.tables", lambda m: m["parameters"].__setitem__("tables", [1, 2])),
        ("spends[0].scale", lambda m: m["spends"][0].__setitem__("scale", "wide")),
        ("spends", lambda m: m.__setitem__("spends", {"a": 1})),
        ("spends[1].delta", lambda m: m["spends"][1].__setitem__("delta", 7)),
    ],
)
def test_audit_names_the_malformed_field(sbh_release, tmp_path, capsys, field, edit) -> None:
    bad = _edited(sbh_release, tmp_path / "bad", edit)
    assert main(["audit", str(bad), "--quiet"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "malformed manifest" in line and field in line


def test_audit_flags_edited_epsilons(sbh_release, tmp_path, capsys) -> None:
    """Issue 18: epsilons 8 -> 0.01 with the scales untouched reported the same findings."""
    assert main(["audit", str(sbh_release), "--out", str(tmp_path / "a0"), "--quiet"]) == 0
    before = json.loads((tmp_path / "a0" / "audit.json").read_text())
    assert not [f for f in before["findings"] if f["check"] == "consistency"]
    assert before["consistency"]["checked"] == before["consistency"]["spends"] > 0
    assert before["consistency"]["high"] == 0

    def shrink(m: dict) -> None:
        for spend in m["spends"]:
            spend["epsilon"] *= 0.01 / 8
            spend.pop("epsilon_exact", None)
        m["spent"]["epsilon"] = 0.01

    edited = _edited(sbh_release, tmp_path / "edited", shrink)
    assert main(["audit", str(edited), "--out", str(tmp_path / "a1"), "--quiet"]) == 0
    after = json.loads((tmp_path / "a1" / "audit.json").read_text())
    high = [f for f in after["findings"] if f["check"] == "consistency" and f["severity"] == "high"]
    assert len(high) == len(
        after_spends := json.loads((edited / "manifest.json").read_text())["spends"]
    )
    assert after_spends and all("claims epsilon" in f["title"] for f in high)

    def lower_threshold(m: dict) -> None:
        m["spends"][0]["threshold"] = 2

    low = _edited(sbh_release, tmp_path / "low", lower_threshold)
    assert main(["audit", str(low), "--out", str(tmp_path / "a2"), "--quiet"]) == 0
    found = json.loads((tmp_path / "a2" / "audit.json").read_text())["findings"]
    assert any(f["severity"] == "high" and "threshold" in f["title"] for f in found)


def test_na_like_station_ids_are_codes(tmp_path, capsys) -> None:
    """Issue 18 (rule by p15-loaders): station ids NA, None, null are codes, not missing."""
    stops = ["NA", "None", "null", "nan"]
    taxonomy = "child,parent\n" + "".join(f"{s},line:1\n" for s in stops) + "line:1,root\n"
    (tmp_path / "tax.csv").write_text(taxonomy)
    (tmp_path / "taps.csv").write_text(_taps(stops, 80))
    out = tmp_path / "out"
    argv = ["sequences", str(tmp_path / "taps.csv"), "--taxonomy", str(tmp_path / "tax.csv")]
    argv += ["--epsilon", "50", "--height", "2", "--out", str(out), "--seed", "1", "--quiet"]
    assert main(argv) == 0, capsys.readouterr().err
    released = pd.read_csv(out / "sequences.csv", dtype=str, keep_default_na=False)
    assert set(released["location"]) <= set(stops) and len(released)
