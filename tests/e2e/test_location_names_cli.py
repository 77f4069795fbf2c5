"""Public location names in the released files (issue 29): ``--location-names`` adds a
``location_name`` column from ``--names`` (or a GTFS taxonomy), and ``run`` configs take the
``names`` and ``location_names`` keys."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from synth.cli import main
from synth.evaluate import against_reference

TAPS = pd.DataFrame(
    [
        (f"c{i}", f"2024-03-05T0{7 + i % 2}:{10 + i % 40}:00", stop, "on" if j == 0 else "off")
        for i in range(120)
        for j, stop in enumerate(("A", "B") if i % 2 else ("B", "C"))
    ],
    columns=["card_id", "time", "stop_id", "tap"],
)
NAMES = "location,name\nA,Alameda\nB,Bolívar\nC,Constitución\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "tax.csv").write_text("child,parent\nA,X\nB,X\nC,Y\n")
    (tmp_path / "names.csv").write_text(NAMES, encoding="utf-8")
    TAPS.to_csv(tmp_path / "taps.csv", index=False)
    return {p.stem: p for p in tmp_path.glob("*.csv")}


def _sequences(files: dict[str, Path], out: Path, *flags: str) -> int:
    args = ["sequences", str(files["taps"]), "--taxonomy", str(files["tax"]), "--epsilon", "4"]
    return main([*args, "--height", "3", "--out", str(out), "--seed", "2", "--quiet", *flags])


def test_sequences_location_name_column(files: dict[str, Path], tmp_path: Path) -> None:
    assert _sequences(files, tmp_path / "plain", "--names", str(files["names"])) == 0
    plain = pd.read_csv(tmp_path / "plain" / "sequences.csv", dtype=str)
    assert "location_name" not in plain  # opt-in: --names alone names them in the datasheet
    flags = ("--names", str(files["names"]), "--location-names")
    assert _sequences(files, tmp_path / "named", *flags) == 0
    named = pd.read_csv(tmp_path / "named" / "sequences.csv", dtype=str, keep_default_na=False)
    assert list(named.columns[:4]) == ["seq_id", "pos", "location", "location_name"]
    lookup = {"A": "Alameda", "B": "Bolívar", "C": "Constitución"}
    assert (named["location_name"] == named["location"].map(lookup)).all()
    pd.testing.assert_frame_equal(named.drop(columns="location_name"), plain)  # same release
    sheet = json.loads((tmp_path / "named" / "datasheet.json").read_text())
    columns = {c["name"]: c["meaning"] for f in sheet["files"] for c in f["columns"]}
    assert "public name" in columns["location_name"]
    readme = (tmp_path / "named" / "README.md").read_text()
    assert "carry them in their `location_name` column" in readme
    plain_readme = (tmp_path / "plain" / "README.md").read_text()
    assert "Bolívar" in plain_readme and "`location_name` column" not in plain_readme


def test_location_names_need_public_names(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No public names: one line, exit 2, nothing written (checked before the data is read)."""
    assert _sequences(files, tmp_path / "o", "--location-names") == 2
    err = capsys.readouterr().err
    assert "--location-names needs public names" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
    args = ["marginals", str(files["taps"]), "--out", str(tmp_path / "m"), "--location-names"]
    args += ["--epsilon", "1", "--delta", "1e-6"]
    assert main(args) == 2
    assert not (tmp_path / "m").exists()


def test_marginals_location_names_and_reference_check(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """The tables carry location_name; the reference check reads them as before."""
    many = pd.concat([TAPS.assign(card_id=TAPS["card_id"] + f"-{i}") for i in range(20)])
    many.to_csv(tmp_path / "many.csv", index=False)
    base = ["marginals", str(tmp_path / "many.csv"), "--epsilon", "4", "--delta", "1e-4"]
    base += ["--bin", "60", "--seed", "3", "--quiet", "--privacy-unit", "card_id"]
    named = [*base, "--out", str(tmp_path / "m"), "--names", str(files["names"])]
    assert main([*named, "--location-names"]) == 0
    table = pd.read_csv(tmp_path / "m" / "on_location.csv", dtype=str)
    assert list(table.columns) == ["mode", "day", "location", "location_name", "count"]
    assert set(table["location_name"]) <= {"Alameda", "Bolívar", "Constitución"}
    report = against_reference(many, tmp_path / "m").set_index("table")
    assert report["compared"].any() and report.loc["on_location", "passes"]


def test_run_config_names_keys(files: dict[str, Path], tmp_path: Path) -> None:
    """``names`` (as --names) and ``location_names`` (as --location-names) in a run config."""
    body = f'input = "{files["taps"]}"\ntaxonomy = "{files["tax"]}"\nnames = "names.csv"\n'
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f"[sequences]\n{body}location_names = true\n"
        "[sequences.parameters]\nepsilon = 4.0\nheight = 3\n"
    )
    assert main(["run", str(cfg), "--out", str(tmp_path / "r"), "--seed", "2", "--quiet"]) == 0
    release = tmp_path / "r" / "sequences"
    assert "location_name" in pd.read_csv(release / "sequences.csv", nrows=1).columns
    sheet = json.loads((release / "datasheet.json").read_text())
    assert sheet["location_names"]["names"]["C"] == "Constitución"
    manifest = json.loads((release / "manifest.json").read_text())
    assert "names" in json.dumps(manifest)  # the public names file is a recorded input
    cfg.write_text(cfg.read_text().replace("location_names = true", 'location_names = "yes"'))
    assert main(["run", str(cfg), "--out", str(tmp_path / "r2")]) == 2
