"""``transit-synth sequences``: SUBE taps, Montreal simulation, fan-out taxonomies, user errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from synth.cli import main
from synth.simulate import simulate_sequences
from synth.taxonomy import Taxonomy


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def sube(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Wednesday SUBE taps (rows without a card id dropped) and line / branch taxonomies."""
    root = shared_data / "sube-buenos-aires"
    tmp = tmp_path_factory.mktemp("sube")
    taps = pd.read_csv(root / "miercoles_trx.csv", dtype=str)
    taps = taps[taps["id_tarjeta"].notna()]
    taps.to_csv(tmp / "taps.csv", index=False)
    meta = root / "metadata_amba_2019_m1.csv"
    Taxonomy.from_sube_metadata(meta, location="id_linea").to_csv(tmp / "lines.csv")
    Taxonomy.from_sube_metadata(meta, location="id_ramal").to_csv(tmp / "branches.csv")
    return {"taps": tmp / "taps.csv", "lines": tmp / "lines.csv", "branches": tmp / "branches.csv"}


@pytest.mark.parametrize(("column", "taxonomy"), [("id_linea", "lines"), ("id_ramal", "branches")])
def test_sube_taps(
    sube: dict[str, Path],
    tmp_path: Path,
    column: str,
    taxonomy: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "release"
    status = main(
        [
            "sequences",
            str(sube["taps"]),
            "--taxonomy",
            str(sube[taxonomy]),
            "--epsilon",
            "1",
            "--height",
            "4",
            "--out",
            str(out),
            "--location-column",
            column,
            "--on-unknown",
            "drop",
            "--seed",
            "1",
        ]
    )
    assert status == 0
    err = capsys.readouterr().err
    assert "NOT differentially private" in err
    release = pd.read_csv(out / "sequences.csv", dtype={"location": str})
    assert list(release.columns) == ["seq_id", "pos", "location"]
    assert len(release) > 0
    leaves = set(Taxonomy.from_csv(sube[taxonomy]).leaves())
    assert set(release["location"]) <= leaves
    assert release.groupby("seq_id")["pos"].max().max() <= 3
    manifest = _manifest(out)
    assert 0 < manifest["spent"]["epsilon"] <= manifest["cap"]["epsilon"] == 1.0
    spends = [s for s in manifest["composition"] if s.get("type") == "spend"]
    assert spends and all(s["mechanism"] == "discrete_laplace" for s in spends)
    assert all(s["unit"] == "card" for s in spends)
    assert manifest["parameters"]["seeded"] is True


def test_sube_lines_tuned_for_wide_location_sets(sube: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "release"
    args = ["sequences", str(sube["taps"]), "--taxonomy", str(sube["lines"]), "--epsilon", "1"]
    args += ["--height", "3", "--out", str(out), "--location-column", "id_linea"]
    args += ["--on-unknown", "drop", "--seed", "2", "--quiet", "--threshold-rule", "candidates"]
    args += ["--false-children", "0.2", "0.2", "0.01", "--level-weights", "2", "7", "1"]
    args += ["--completion", "markov", "--preset", "kdd12"]
    assert main(args) == 0
    manifest = _manifest(out)
    params = manifest["parameters"]
    assert params["threshold_rule"] == "candidates"
    assert params["false_children"] == [0.2, 0.2, 0.01]
    assert params["completion"] == "markov"
    assert params["level_weights"] == [2.0, 7.0, 1.0]
    spends = [s for s in manifest["composition"] if s.get("type") == "spend"]
    # line -> mode is skipped (one mode holds nearly every line): one spend per level, 2:7:1
    assert [s["epsilon"] for s in spends] == pytest.approx([0.2, 0.7, 0.1])
    assert manifest["spent"]["epsilon"] == pytest.approx(1.0)
    assert "end-of-sequence" in spends[1]["note"] and "end-of-sequence" in spends[2]["note"]
    release = pd.read_csv(out / "sequences.csv", dtype={"location": str})
    assert release["seq_id"].nunique() > 1000
    assert release.groupby("seq_id").size().max() <= 3


def test_montreal_simulation_trajectories_parquet(tmp_path: Path) -> None:
    from synth.datasets import montreal_taxonomy

    seqs = simulate_sequences(3000, with_time=True, seed=4)
    seqs.to_parquet(tmp_path / "sim.parquet", index=False)
    montreal_taxonomy().to_csv(tmp_path / "metro.csv")
    out = tmp_path / "release"
    status = main(
        [
            "sequences",
            str(tmp_path / "sim.parquet"),
            "--taxonomy",
            str(tmp_path / "metro.csv"),
            "--epsilon",
            "2",
            "--height",
            "3",
            "--out",
            str(out),
            "--time-bin",
            "120",
            "--format",
            "parquet",
            "--quiet",
        ]
    )
    assert status == 0
    release = pd.read_parquet(out / "sequences.parquet")
    assert list(release.columns) == ["seq_id", "pos", "location", "time"]
    assert len(release) > 0
    # factorised times (the default): clock times, non-decreasing within each sequence
    assert release["time"].str.fullmatch(r"([01]\d|2[0-3]):[0-5]\d").all()
    ordered = release.sort_values(["seq_id", "pos"])
    assert (ordered.groupby("seq_id")["time"].agg(lambda t: t.is_monotonic_increasing)).all()
    hours = release["time"].str.slice(0, 2).astype(int)
    assert (hours.groupby(release["seq_id"]).diff().fillna(0) >= 0).all()
    assert not (out / "sequences.csv").exists()


def test_montreal_trajectories_with_coarse_time_bins(tmp_path: Path) -> None:
    from synth.datasets import montreal_taxonomy

    simulate_sequences(3000, with_time=True, seed=4).to_csv(tmp_path / "sim.csv", index=False)
    montreal_taxonomy().to_csv(tmp_path / "metro.csv")
    out = tmp_path / "release"
    args = ["sequences", str(tmp_path / "sim.csv"), "--taxonomy", str(tmp_path / "metro.csv")]
    args += ["--epsilon", "2", "--height", "3", "--out", str(out), "--seed", "3", "--quiet"]
    assert main([*args, "--time-bin", "60", "--coarse-time-bin", "240"]) == 0
    params = _manifest(out)["parameters"]
    assert params["coarse_time_bin_minutes"] == 240
    # per level: the line sub-level counts 4-hour bins, the stations 1-hour bins
    assert [r["time_bin_minutes"] for r in params["sub_levels"]] == [240, 60] * 3
    release = pd.read_csv(out / "sequences.csv")
    assert len(release) > 0 and set(release["time"]) <= {f"{h:02d}:00" for h in range(24)}
    hours = release["time"].str.slice(0, 2).astype(int)
    assert (hours.groupby(release["seq_id"]).diff().fillna(0) >= 0).all()


def test_fanout_taxonomy_needs_public_locations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seqs = pd.DataFrame(
        {"seq_id": ["a", "a", "b", "c"], "pos": [0, 1, 0, 0], "location": ["s1", "s2", "s1", "s3"]}
    )
    seqs.to_csv(tmp_path / "seqs.csv", index=False)
    out = tmp_path / "release"
    args = ["sequences", str(tmp_path / "seqs.csv"), "--taxonomy", "fanout:3", "--epsilon", "1"]
    args += ["--height", "2", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "transit-synth sequences: error:" in err[0]
    assert not out.exists()
    (tmp_path / "stations.txt").write_text("\n".join(f"s{i}" for i in range(10)) + "\n")
    assert main([*args, "--locations", str(tmp_path / "stations.txt"), "--quiet"]) == 0
    assert (out / "sequences.csv").is_file() and (out / "manifest.json").is_file()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--epsilon", "0"], "epsilon"),
        (["--height", "0"], "height"),
        (["--threshold-rule", "candidates", "--false-children", "2"], "--false-children"),
        (["--threshold-rule", "candidates", "--false-children", "1", "1", "1"], "--false-children"),
        (["--level-weights", "1", "2", "3"], "--level-weights"),
        (["--coarse-time-bin", "120"], "--coarse-time-bin needs --time-bin and --variant hybrid"),
        (["--variant", "hybrid", "--budget-split", "1=0.3"], "not an inner taxonomy level"),
        (["--variant", "simple", "--budget-split", "1=0.3"], "--budget-split only applies"),
    ],
)
def test_user_errors_exit_2_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    pd.DataFrame({"seq_id": ["a"], "pos": [0], "location": ["x"]}).to_csv(
        tmp_path / "s.csv", index=False
    )
    (tmp_path / "tax.csv").write_text("child,parent\nx,root\ny,root\n")
    args = ["sequences", str(tmp_path / "s.csv"), "--taxonomy", str(tmp_path / "tax.csv")]
    args += ["--epsilon", "1", "--height", "2", "--out", str(tmp_path / "out"), *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_budget_split_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--budget-split`` forces a generalized level (auto skips those that do not pay); a
    malformed value is one argparse line, exit 2."""
    seqs = simulate_sequences(300, seed=3)
    seqs.to_csv(tmp_path / "s.csv", index=False)
    from synth.datasets import montreal_taxonomy

    montreal_taxonomy().to_csv(tmp_path / "tax.csv")
    base = ["sequences", str(tmp_path / "s.csv"), "--taxonomy", str(tmp_path / "tax.csv")]
    base += ["--epsilon", "1", "--height", "3", "--seed", "1"]
    with pytest.raises(SystemExit) as exc:
        main([*base, "--out", str(tmp_path / "bad"), "--budget-split", "1:0.3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--budget-split: expected LEVEL=SHARE" in err[0]
    assert main([*base, "--out", str(tmp_path / "h"), "--variant", "hybrid"]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "pays for itself" in line]
    assert len(warned) == 1 and "--budget-split LEVEL=SHARE" in warned[0]
    skipped = _manifest(tmp_path / "h")["parameters"]
    assert skipped["variant"] == "simple" and skipped["hybrid_skipped"] is True
    forced = ["--variant", "hybrid", "--budget-split", "1=0.3"]
    assert main([*base, "--out", str(tmp_path / "f"), *forced, "--quiet"]) == 0
    params = _manifest(tmp_path / "f")["parameters"]
    assert params["variant"] == "hybrid" and params["budget_split"] == {"1": 0.3}
    assert params["hybrid_skipped"] is False


def test_unknown_location_fails_without_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pd.DataFrame({"seq_id": ["a"], "pos": [0], "location": ["nowhere"]}).to_csv(
        tmp_path / "s.csv", index=False
    )
    (tmp_path / "tax.csv").write_text("child,parent\nx,root\ny,root\n")
    args = ["sequences", str(tmp_path / "s.csv"), "--taxonomy", str(tmp_path / "tax.csv")]
    args += ["--epsilon", "1", "--height", "2", "--out", str(tmp_path / "out")]
    assert main(args) == 2
    assert "nowhere" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
