"""``trips`` and ``run`` without public trips, as a user meets them (issue 28 polish).

- A ``run`` config's ``[trips]`` table without ``public`` runs as ``trips`` does (the joint model,
  the default, stands in for the public trips): whether public trips are needed is the
  estimator's one rule, not a second one in the run config's check; ``public_stand_in = true``
  is still read (``test_trips_sube_metadata``), and with ``joint = false`` and no stand-in both
  commands give the same one-line error.
- SUBE taps without ``--metadata`` nor public trips: the error naming the ``--schema`` entry also
  names ``--metadata``, which gives the SUBE domains.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from synth.cli import main
from tests.e2e.test_trips_sube_metadata import trips_argv, write_inputs

RUN_TABLE = (
    '[trips]\nprivate = "data/taps.csv"\ninput_format = "sube-taps"\n'
    'metadata = "data/metadata.csv"\n[trips.parameters]\nepsilon = 2.0\ndelta = 1e-5\n'
    'id_column = "card_id"\nkey_columns = ["hour", "line", "zone"]\n'
    'category_column = "mode"\narchetypes = 2\ncompletion = [["branch", ["line"]]]\n'
)


def test_run_config_without_public_runs_as_trips_does(tmp_path: Path) -> None:
    """No ``public`` and no ``public_stand_in``: ``run`` writes the release ``trips`` writes
    (it was "missing key 'public'", exit 2)."""
    paths = write_inputs(tmp_path / "data")
    by_flag = tmp_path / "by-flag"
    assert main(trips_argv(paths, by_flag, "--metadata", str(paths["metadata"]))) == 0
    config = tmp_path / "run.toml"
    config.write_text(RUN_TABLE)
    by_run = tmp_path / "by-run"
    assert main(["run", str(config), "--out", str(by_run), "--seed", "3", "--quiet"]) == 0
    release = by_run / "trips"
    assert (release / "schema.json").read_bytes() == (by_flag / "schema.json").read_bytes()
    manifests = [json.loads((r / "manifest.json").read_text()) for r in (release, by_flag)]
    assert manifests[0]["parameters"] == manifests[1]["parameters"]
    assert "joint" in manifests[0]["parameters"]
    assert "public" not in [p["role"] for p in manifests[0]["inputs"]["public"]]
    assert (release / "trips.csv").read_bytes() == (by_flag / "trips.csv").read_bytes()


@pytest.mark.parametrize("command", ["run", "trips"])
def test_without_public_nor_stand_in_both_commands_give_the_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """``joint = false`` without public trips nor a stand-in: one line naming both ways out,
    exit 2, nothing written, from ``run`` as from ``trips``."""
    paths = write_inputs(tmp_path / "data")
    out = tmp_path / "release"
    if command == "run":
        config = tmp_path / "run.toml"
        config.write_text(RUN_TABLE + "joint = false\n")
        argv = ["run", str(config), "--out", str(out), "--quiet"]
    else:
        argv = trips_argv(paths, out, "--metadata", str(paths["metadata"]), "--joint", "false")
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"transit-synth {command}: error: "), err
    assert "no public data" in err and "public_stand_in" in err.replace("-", "_"), err
    assert "joint" in err, err
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if ".stage-" in p.name] == []


def test_sube_without_metadata_nor_public_names_metadata(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SUBE taps, no public trips, no metadata: the one-line error names ``--metadata`` beside
    the ``--schema`` entry (it named ``--schema`` alone); exit 2, nothing written."""
    paths = write_inputs(tmp_path / "data")
    out = tmp_path / "release"
    capsys.readouterr()
    assert main(trips_argv(paths, out)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--schema" in err and "--metadata FILE" in err, err
    assert not out.exists()


def test_plain_trips_without_a_domain_do_not_name_metadata(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The metadata hint is SUBE's: plain trips (``--input-format trips``) get the schema one."""
    trips = tmp_path / "trips.csv"
    rows = [(i // 2, 7 + i % 3, "12", "a", "COL", "60") for i in range(40)]
    columns = ["card_id", "hour", "line", "zone", "mode", "branch"]
    pd.DataFrame(rows, columns=columns).to_csv(trips, index=False)
    out = tmp_path / "release"
    argv = trips_argv({"taps": trips}, out, "--input-format", "trips")
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--schema" in err and "metadata" not in err, err
    assert not out.exists()
