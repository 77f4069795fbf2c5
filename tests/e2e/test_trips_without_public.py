"""``trips`` and ``run`` without public trips, as a user meets them (issue 28 polish).

- A ``run`` config's ``[trips]`` table without ``public`` runs as ``trips`` does (the joint model,
  the default, stands in for the public trips): whether public trips are needed is the
  estimator's one rule, not a second one in the run config's check; ``public_stand_in = true``
  is still read (``test_trips_sube_metadata``), and with ``joint = false`` and no stand-in both
  commands give the same one-line error.
- SUBE taps without ``--metadata`` nor public trips: the error naming the ``--schema`` entry also
  names ``--metadata``, which gives the SUBE domains.
- The shipped configs with ``--public-stand-in`` warn of nothing the shipped files give: SUBE's
  lat/lon are read off the zones (a public bounding box of the region as their range), so the
  archetypes cluster on them.
"""

from __future__ import annotations

import json
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from archetypes import ArchetypeSynthesizer
from archetypes.release import normalize_params
from archetypes.trip_sources import TripSource
from synth import datasets
from synth.cli import main
from synth.errors import TransitSynthWarning
from tests.conftest import sube_trips_argv, write_sube_inputs

RUN_TABLE = (
    '[trips]\nprivate = "data/taps.csv"\ninput_format = "sube-taps"\n'
    'metadata = "data/metadata.csv"\n[trips.parameters]\nepsilon = 2.0\ndelta = 1e-5\n'
    'id_column = "card_id"\nkey_columns = ["hour", "line", "zone"]\n'
    'category_column = "mode"\narchetypes = 2\ncompletion = [["branch", ["line"]]]\n'
)


def test_run_config_without_public_runs_as_trips_does(tmp_path: Path) -> None:
    """No ``public`` and no ``public_stand_in``: ``run`` writes the release ``trips`` writes
    (it was "missing key 'public'", exit 2)."""
    paths = write_sube_inputs(tmp_path / "data")
    by_flag = tmp_path / "by-flag"
    assert main(sube_trips_argv(paths, by_flag, "--metadata", str(paths["metadata"]))) == 0
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
    paths = write_sube_inputs(tmp_path / "data")
    out = tmp_path / "release"
    if command == "run":
        config = tmp_path / "run.toml"
        config.write_text(RUN_TABLE + "joint = false\n")
        argv = ["run", str(config), "--out", str(out), "--quiet"]
    else:
        argv = sube_trips_argv(paths, out, "--metadata", str(paths["metadata"]), "--joint", "false")
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
    paths = write_sube_inputs(tmp_path / "data")
    out = tmp_path / "release"
    capsys.readouterr()
    assert main(sube_trips_argv(paths, out)) == 2
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
    argv = sube_trips_argv({"taps": trips}, out, "--input-format", "trips")
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--schema" in err and "metadata" not in err, err
    assert not out.exists()


# ------------------------------------------------- the shipped configs without public trips
ROOT = Path(__file__).resolve().parents[2]


def _first_rows(table: dict, folder: Path, n: int = 4000) -> Path:
    """The first ``n`` rows of the embedded private file a shipped config names."""
    private = folder / "private.parquet"
    embedded = str(table["private"]).removeprefix("embedded:")
    pd.read_parquet(datasets.path(embedded)).iloc[:n].to_parquet(private, index=False)
    return private


@pytest.mark.parametrize("name", ["transit-archetypes.toml", "taxi-archetypes.toml"])
def test_shipped_config_without_public_warns_of_nothing_the_files_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """``trips PRIVATE --config C --public-stand-in`` (not quiet): no warning that a feature has
    no public domain (SUBE's lat/lon had none; the shipped files give them one)."""
    config = ROOT / "configs" / name
    private = _first_rows(tomllib.loads(config.read_text())["trips"], tmp_path)
    argv = ["trips", str(private), "--config", str(config), "--public-stand-in"]
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error", TransitSynthWarning)  # a warning fails the release
        assert main([*argv, "--out", str(tmp_path / "release")]) == 0
    err = capsys.readouterr().err
    assert "no public domain" not in err and "warning" not in err.lower(), err


def test_sube_without_public_clusters_on_the_coordinates_of_the_zones(tmp_path: Path) -> None:
    """The shipped SUBE parameters without public trips cluster on hour, lat and lon (lat/lon
    were dropped); the coordinates are read off each trip's zone, so private coordinates moved
    within their zone cells give the same release (a per-record public rule, nothing else of
    them is read)."""
    config = ROOT / "configs" / "transit-archetypes.toml"
    table = tomllib.loads(config.read_text())["trips"]
    params = normalize_params(table["parameters"])
    taps = pd.read_parquet(_first_rows(table, tmp_path, 1500))
    moved = taps.copy()
    for column in ("lat", "lon"):  # within the 0.05-degree cell: the same zone
        value = pd.to_numeric(moved[column], errors="coerce")
        moved[column] = (np.round(value / 0.05) * 0.05 + 0.01).astype(str)
    releases = []
    for frame in (taps, moved):
        source = TripSource(frame, format="sube-taps", metadata=datasets.path("sube_metadata"))
        synthesizer = ArchetypeSynthesizer(**{**params, "random_state": 4}).fit(source)
        assert synthesizer.features_ == ["hour", "lat", "lon"]
        releases.append(synthesizer.sample())
    pd.testing.assert_frame_equal(releases[0], releases[1])
