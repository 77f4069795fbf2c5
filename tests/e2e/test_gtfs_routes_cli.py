"""``--gtfs-route-rule`` on ``sequences`` and ``marginals`` and ``gtfs_route_rule`` in a run config
(issue 29, GTFS part): the rule and the routes left without stops in the manifest, a warning
naming them, and ``--gtfs-stations`` on a feed without stations an exit-2 error."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.cli import main

#: s1: A 3 trips, X 1; s2: A 3, X 2; s3: A only; s4: B 2 (its only stop), Y 1 (no station).
FEED = {
    "routes.txt": "route_id,route_type\nY,3\nX,3\nA,3\nB,2\n",
    "trips.txt": "route_id,trip_id\nA,a1\nA,a2\nA,a3\nX,x1\nX,x2\nB,b1\nB,b2\nY,y1\n",
    "stop_times.txt": "trip_id,stop_id\n"
    + "".join(f"{t},s1\n{t},s2\n" for t in ("a1", "a2", "a3"))
    + "a1,s3\nx1,s1\nx1,s2\nx2,s2\nb1,s4\nb2,s4\ny1,s4\n",
    "stops.txt": "stop_id,parent_station\ns1,\ns2,\ns3,\ns4,\n",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("gtfs")
    feed = tmp / "feed.zip"
    with zipfile.ZipFile(feed, "w") as zf:
        for name, text in FEED.items():
            zf.writestr(name, text)
    rng = np.random.default_rng(4)
    seqs = tmp / "seqs.csv"
    pd.DataFrame(
        {
            "seq_id": np.repeat(np.arange(400), 2),
            "pos": np.tile([0, 1], 400),
            "location": rng.choice(["s1", "s2", "s3", "s4"], 800),
        }
    ).to_csv(seqs, index=False)
    taps = tmp / "taps.csv"
    minutes = rng.integers(6 * 60, 10 * 60, 800)
    pd.DataFrame(
        {
            "card_id": [f"c{i}" for i in range(800)],
            "time": pd.Timestamp("2024-03-05") + pd.to_timedelta(minutes, unit="min"),
            "stop_id": rng.choice(["s1", "s2", "s3", "s4"], 800),
            "mode": "bus",
        }
    ).to_csv(taps, index=False)
    edges = tmp / "edges.csv"
    edges.write_text("child,parent\ns1,root\ns2,root\ns3,root\ns4,root\n")
    return {"feed": feed, "seqs": seqs, "taps": taps, "edges": edges}


def _sequences(files: dict[str, Path], out: Path, *extra: str) -> list[str]:
    args = ["sequences", str(files["seqs"]), "--taxonomy", str(files["feed"]), "--epsilon", "1"]
    return [*args, "--height", "2", "--out", str(out), "--seed", "1", *extra]


def _parameters(out: Path) -> dict[str, object]:
    return json.loads((out / "manifest.json").read_text())["parameters"]


def _one_error(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"transit-synth {command}: error:"), err
    return err[0]


def test_sequences_route_rule_flag(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_sequences(files, tmp_path / "default")) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "'most-trips'" in err and err.count(": Y\n") == 1
    params = _parameters(tmp_path / "default")
    assert params["gtfs_route_rule"] == "most-trips"
    assert params["gtfs_routes_without_stops"] == ["Y"]
    assert main([*_sequences(files, tmp_path / "first", "--gtfs-route-rule", "first")]) == 0
    assert "'first'" in capsys.readouterr().err
    params = _parameters(tmp_path / "first")
    assert params["gtfs_route_rule"] == "first" and params["gtfs_routes_without_stops"] == ["B"]
    csv = ["sequences", str(files["seqs"]), "--taxonomy", str(files["edges"]), "--epsilon", "1"]
    csv += ["--height", "2", "--out", str(tmp_path / "never"), "--gtfs-route-rule", "first"]
    assert main(csv) == 2
    assert "--gtfs-route-rule" in _one_error(capsys, "sequences")
    assert not (tmp_path / "never").exists()
    with pytest.raises(SystemExit):  # argparse: not a rule
        main(_sequences(files, tmp_path / "never", "--gtfs-route-rule", "busiest"))


def test_run_config_route_rule(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "run.toml"
    config.write_text(
        f'[sequences]\ninput = "{files["seqs"]}"\ntaxonomy = "{files["feed"]}"\n'
        'gtfs_route_rule = "lowest-id"\n[sequences.parameters]\nepsilon = 1.0\nheight = 2\n'
        f'[marginals]\ninput = "{files["taps"]}"\ntaxonomy = "{files["feed"]}"\n'
        'gtfs_route_rule = "most-trips-strict"\n'
        "[marginals.parameters]\nepsilon = 8.0\ndelta = 1e-6\nlevel = 2\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--seed", "1"]) == 0
    assert "'lowest-id'" in capsys.readouterr().err
    assert _parameters(tmp_path / "run" / "sequences")["gtfs_route_rule"] == "lowest-id"
    marg = _parameters(tmp_path / "run" / "marginals")
    assert marg["gtfs_route_rule"] == "most-trips-strict"
    assert marg["gtfs_routes_without_stops"] == ["X", "Y"]
    config.write_text(config.read_text().replace('"lowest-id"', '"busiest"'))
    assert main(["run", str(config), "--out", str(tmp_path / "never")]) == 2
    assert "'gtfs_route_rule'" in _one_error(capsys, "run")


def test_marginals_route_rule_flag(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["marginals", str(files["taps"]), "--epsilon", "8", "--delta", "1e-6", "--seed", "1"]
    out = tmp_path / "m"
    tax = ["--taxonomy", str(files["feed"]), "--level", "2"]
    assert main([*args, "--out", str(out), *tax, "--gtfs-route-rule", "first", "--quiet"]) == 0
    assert _parameters(out)["gtfs_route_rule"] == "first"
    never = ["--out", str(tmp_path / "never"), "--gtfs-route-rule", "first", "--quiet"]
    assert main([*args, *never]) == 2
    assert "--gtfs-route-rule needs a GTFS zip --taxonomy" in _one_error(capsys, "marginals")


@pytest.mark.parametrize("command", ["sequences", "marginals"])
def test_gtfs_stations_without_stations_is_exit_2(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Before: a pandas warning, then a release over the platforms as if nothing was asked."""
    out = tmp_path / "never"
    if command == "sequences":
        args = _sequences(files, out, "--gtfs-stations")
    else:
        args = ["marginals", str(files["taps"]), "--epsilon", "8", "--delta", "1e-6"]
        args += ["--out", str(out), "--taxonomy", str(files["feed"]), "--gtfs-stations"]
    assert main([*args, "--quiet"]) == 2
    assert "no stop a parent_station" in _one_error(capsys, command)
    assert not out.exists()
