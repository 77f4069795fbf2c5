"""``transit-synth marginals``: files, manifest, modes and user errors (exit 2, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.cli import main
from synth.marginals.grid import TABLES
from synth.outmarker import MARKER


@pytest.fixture
def taps_csv(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    n = 20_000
    time = pd.Timestamp("2019-11-27") + pd.to_timedelta(rng.integers(0, 2 * 1440, n), unit="m")
    taps = pd.DataFrame(
        {
            "card_id": rng.integers(0, 500, n).astype(str),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "stop_id": rng.choice(["1", "2", "3", "4"], n, p=[0.6, 0.2, 0.1, 0.1]),
            "mode": rng.choice(["bus", "rail"], n),
            "tap": rng.choice(["on", "off"], n),
        }
    )
    path = tmp_path / "taps.csv"
    taps.to_csv(path, index=False)
    return path


@pytest.fixture
def taxonomy_csv(tmp_path: Path) -> Path:
    path = tmp_path / "tax.csv"
    path.write_text("child,parent\n1,zoneA\n2,zoneA\n3,zoneB\n4,zoneB\nzoneA,root\nzoneB,root\n")
    return path


def _run(*argv: str | Path) -> int:
    return main([str(a) for a in argv])


def test_default_release_writes_six_tables_and_manifest(taps_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "rel"
    assert (
        _run(
            "marginals",
            taps_csv,
            "--epsilon",
            "8",
            "--delta",
            "7.5e-7",
            "--out",
            out,
            "--bin",
            "60",
            "--seed",
            "1",
            "--quiet",
        )
        == 0
    )
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{t}.csv" for t in TABLES] + ["README.md", "datasheet.json", "manifest.json", MARKER]
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["spent"]["epsilon"] == 8.0
    assert manifest["spent"]["delta_exact"] == "3/4000000"
    assert manifest["parameters"]["bin_minutes"] == 60
    assert manifest["inputs"]["public"] == []  # nothing of the private input is recorded
    assert "sha256" not in json.dumps(manifest) and taps_csv.name not in json.dumps(manifest)
    assert all("NOT private" in s["note"] for s in manifest["spends"])
    table = pd.read_csv(out / "on_time.csv", dtype=str)
    assert list(table.columns) == ["mode", "day", "time", "count"]
    assert len(table) > 0


def test_consistent_and_pure_modes(
    taps_csv: Path, taxonomy_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cons"
    assert (
        _run(
            "marginals",
            taps_csv,
            "--epsilon",
            "8",
            "--delta",
            "1e-6",
            "--out",
            out,
            "--consistent",
            "--bin",
            "120",
            "--format",
            "parquet",
        )
        == 0
    )
    two = pd.read_parquet(out / "on_time_location.parquet")
    one = pd.read_parquet(out / "on_location.parquet")
    sums = two.groupby(["mode", "day", "location"], as_index=False)["count"].sum()
    pd.testing.assert_frame_equal(one, sums, check_dtype=False)
    assert "marginals (consistent)" in capsys.readouterr().err

    out = tmp_path / "pure"
    assert (
        _run(
            "marginals",
            taps_csv,
            "--epsilon",
            "4",
            "--delta",
            "1e-6",
            "--out",
            out,
            "--pure",
            "--taxonomy",
            taxonomy_csv,
            "--level",
            "1",
            "--modes",
            "bus,rail",
            "--days",
            "2019-11-27:2019-11-28",
            "--quiet",
        )
        == 0
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["spent"]["delta"] == 0.0
    assert len(manifest["composition"][0]["branches"]) == 4
    assert set(pd.read_csv(out / "on_location.csv")["location"]) <= {"zoneA", "zoneB"}


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--epsilon", "0", "--delta", "1e-6"], "epsilon"),
        (["--epsilon", "1", "--delta", "2"], "delta"),
        (["--epsilon", "1", "--delta", "1e-6", "--bin", "7"], "--bin must be"),
        (["--epsilon", "1", "--delta", "1e-6", "--pure"], "pure mode"),
    ],
)
def test_user_errors_exit_2_and_write_nothing(
    taps_csv: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    out = tmp_path / "never"
    assert _run("marginals", taps_csv, "--out", out, *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("transit-synth marginals: error:") and message in err
    assert not out.exists()


def test_missing_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        _run(
            "marginals",
            tmp_path / "nope.csv",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--out",
            tmp_path / "o",
        )
        == 2
    )
    assert "file not found" in capsys.readouterr().err


def test_sube_file_as_is(shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "sube"
    sube = shared_data / "sube-buenos-aires" / "martes_trx.csv"
    assert (
        _run(
            "marginals",
            sube,
            "--epsilon",
            "8",
            "--delta",
            "7.5e-7",
            "--out",
            out,
            "--bin",
            "60",
            "--location-column",
            "id_linea",
            "--modes",
            "COL,SUB,TRE",
            "--days",
            "2019-11-27",
            "--quiet",
        )
        == 0
    )
    manifest = json.loads((out / "manifest.json").read_text())
    branches = manifest["composition"][0]["branches"]
    assert [b["name"] for b in branches] == ["COL 2019-11-27", "SUB 2019-11-27", "TRE 2019-11-27"]
    assert {b["epsilon"] for b in branches} == {8.0}
    off = pd.read_csv(out / "off_location.csv", dtype=str)
    assert set(off["mode"]) <= {"TRE"}  # only rail has check-outs
