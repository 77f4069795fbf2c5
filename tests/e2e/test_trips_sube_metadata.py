"""``trips --input-format sube-taps --metadata M`` without public trips (issue 28: the stand-in
becomes the no-public-data mode of the joint model).

The SUBE network metadata is public configuration: its mode -> line -> branch rows give the line
and branch domains and the group the joint model measures, with public trips or without. Before,
without ``--public`` the metadata was silently dropped (and the release failed for want of any
domain). Here: the release's line domain is the metadata's (never a line of the private taps);
without metadata the previous behaviour (the schema gives every domain, or a clear error naming
``--schema``); metadata for a layout with no use for it is one line on stderr, exit 2, nothing
written; the command line, a ``run`` config and ``ArchetypeSynthesizer.fit`` reach the same
schema (one code path, :func:`archetypes.trip_sources.read_trip_inputs`).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from archetypes import ArchetypeSynthesizer
from archetypes.datasets import sube_published_lists, sube_schema, sube_trips
from archetypes.trip_sources import TripSource
from synth import datasets
from synth.cli import main
from synth.errors import ConfigError
from tests.conftest import SUBE_METADATA, sube_trips_argv, write_sube_inputs


def domain(release: Path, column: str) -> list[str]:
    return json.loads((release / "schema.json").read_text())[column]["values"]


META_LINES = [*sorted({line for _, line, _ in SUBE_METADATA}), "unknown"]
META_BRANCHES = [*sorted({branch for _, _, branch in SUBE_METADATA}), "unknown"]


@pytest.mark.parametrize("stand_in", [True, False], ids=["public-stand-in", "joint-default"])
def test_metadata_gives_the_domains_without_public_trips(tmp_path: Path, stand_in: bool) -> None:
    paths = write_sube_inputs(tmp_path / "data")
    out = tmp_path / "release"
    flags = ["--metadata", str(paths["metadata"])]
    assert (
        main(sube_trips_argv(paths, out, *flags, *(["--public-stand-in"] if stand_in else []))) == 0
    )
    assert domain(out, "line") == META_LINES  # the private line 999 is not in it
    assert domain(out, "branch") == META_BRANCHES
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parameters"]["joint"]["public_groups"] == [["mode", "line", "branch"]]
    assert "mode/line/branch" in manifest["parameters"]["joint"]["model_columns"]
    roles = {p["role"]: p["file"] for p in manifest["inputs"]["public"]}
    assert roles == {"metadata": "metadata.csv", "zones and fare products": "martes_trx.parquet"}
    synthetic = pd.read_csv(out / "trips.csv", dtype={"line": str})
    assert set(synthetic["line"]) <= set(META_LINES)


def test_without_metadata_the_schema_gives_every_domain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The previous behaviour: no domain without a schema (one clear error naming the flag and
    the schema entry), the schema's domains with one."""
    paths = write_sube_inputs(tmp_path / "data")
    out = tmp_path / "release"
    capsys.readouterr()
    assert main(sube_trips_argv(paths, out)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--schema" in err and '"schema"' in err, err
    assert "public domain in the schema" in err and "'line'" in err, err
    assert not out.exists()
    lines = ["12", "16", "999", "unknown"]
    spec = {
        "branch": {"kind": "categorical", "values": ["380", "60", "999"]},
        "hour": {"kind": "categorical", "values": list(range(24))},
        "mode": {"kind": "categorical", "values": ["COL", "SUB", "TRE"]},
        "line": {"kind": "categorical", "values": lines, "other": "unknown"},
        "zone": {"kind": "categorical", "values": ["-34.60,-58.40", "unknown"]},
    }
    (tmp_path / "schema.json").write_text(json.dumps(spec))
    assert main(sube_trips_argv(paths, out, "--schema", str(tmp_path / "schema.json"))) == 0
    assert domain(out, "line") == lines
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parameters"]["joint"]["public_groups"] == []


@pytest.mark.parametrize("how", ["flag", "config"])
def test_metadata_for_another_layout_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    paths = write_sube_inputs(tmp_path / "data")
    out = tmp_path / "release"
    argv = sube_trips_argv(paths, out, "--input-format", "trips", "--public-stand-in")
    if how == "flag":
        argv += ["--metadata", str(paths["metadata"])]
    else:
        config = tmp_path / "trips.toml"
        config.write_text('[trips]\nmetadata = "data/metadata.csv"\n')
        argv += ["--config", str(config)]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "metadata" in err and "'sube-taps'" in err, err
    assert not out.exists()


def test_run_config_and_fit_reach_the_same_domains(tmp_path: Path) -> None:
    """One code path: ``trips --metadata``, a ``run`` config's ``metadata`` key without
    ``public`` and ``fit(TripSource(..., metadata=M))`` give the same schema."""
    paths = write_sube_inputs(tmp_path / "data")
    by_flag = tmp_path / "by-flag"
    flags = ["--metadata", str(paths["metadata"]), "--public-stand-in"]
    assert main(sube_trips_argv(paths, by_flag, *flags)) == 0
    config = tmp_path / "run.toml"
    config.write_text(
        '[trips]\nprivate = "data/taps.csv"\ninput_format = "sube-taps"\n'
        'metadata = "data/metadata.csv"\n[trips.parameters]\nepsilon = 2.0\ndelta = 1e-5\n'
        'id_column = "card_id"\nkey_columns = ["hour", "line", "zone"]\n'
        'category_column = "mode"\narchetypes = 2\ncompletion = [["branch", ["line"]]]\n'
        "public_stand_in = true\n"
    )
    by_run = tmp_path / "by-run"
    assert main(["run", str(config), "--out", str(by_run), "--seed", "3", "--quiet"]) == 0
    run_release = next(p.parent for p in by_run.rglob("schema.json"))
    assert (run_release / "schema.json").read_bytes() == (by_flag / "schema.json").read_bytes()
    manifests = [json.loads((r / "manifest.json").read_text()) for r in (run_release, by_flag)]
    assert manifests[0]["parameters"] == manifests[1]["parameters"]
    assert manifests[0]["inputs"]["public"] == manifests[1]["inputs"]["public"]
    fitted = ArchetypeSynthesizer(
        epsilon=2.0,
        delta=1e-5,
        id_column="card_id",
        key_columns=["hour", "line", "zone"],
        category_column="mode",
        archetypes=2,
        completion=[("branch", ("line",))],
        public_stand_in=True,
        random_state=3,
    ).fit(TripSource(paths["taps"], format="sube-taps", metadata=paths["metadata"]))
    assert fitted.schema_.to_dict() == json.loads((by_flag / "schema.json").read_text())
    assert [g.columns for g in fitted.schema_.groups] == [("mode", "line", "branch")]


def test_private_and_public_naming_different_metadata_is_an_error(tmp_path: Path) -> None:
    paths = write_sube_inputs(tmp_path / "data")
    other = tmp_path / "other.csv"
    other.write_text(paths["metadata"].read_text())
    synthesizer = ArchetypeSynthesizer(
        epsilon=2.0, delta=1e-5, id_column="card_id", key_columns=["hour"], category_column="mode"
    )
    with pytest.raises(ConfigError, match="different metadata"):
        synthesizer.fit(
            TripSource(paths["taps"], format="sube-taps", metadata=paths["metadata"]),
            TripSource(paths["taps"], format="sube-taps", metadata=other),
        )


def test_without_public_trips_the_lists_are_the_embedded_tuesday_ones() -> None:
    """No public trips: zones and fare products are those of the embedded public Tuesday taps,
    so the schema is the one the with-public layout builds from Tuesday (what
    ``benchmarks/bench_archetypes.py`` measures as "joint, no public"), plus the coordinates
    read off the zones (``lat``/``lon``, which public trips carry themselves)."""
    meta = datasets.path("sube_metadata")
    tuesday = sube_trips(datasets.path("sube_tuesday"))
    without = sube_schema(None, meta)
    assert without.coordinates() == ["lat", "lon"]
    assert without.replace() == sube_schema(tuesday, meta).replace(without["lat"], without["lon"])
    lists = sube_published_lists()
    assert set(lists["zone"]) == set(tuesday["zone"])
    assert set(lists["fare_type"]) == set(tuesday["fare_type"])
    lists["zone"] = "tampered"  # the caller's copy: the lists read once stay as published
    assert sube_schema(None, meta) == without


# ------------------------------------------------------------------ the shipped trips configs
ROOT = Path(__file__).resolve().parents[2]
#: the shipped configs `trips --config` reads (one [trips] table)
TRIPS_CONFIGS = sorted(
    p.name
    for p in (ROOT / "configs").glob("*.toml")
    if isinstance(tomllib.loads(p.read_text()).get("trips"), dict)
)


@pytest.mark.parametrize("name", TRIPS_CONFIGS)
def test_every_shipped_trips_config_runs_without_public_trips(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28: "with no public data, every shipped config runs with its defaults": ``trips
    PRIVATE --config C --public-stand-in`` (the private file the config names, its first 4,000
    rows for speed) writes a release whose public inputs hold no public trips; SUBE's lines are
    the metadata's."""
    config = ROOT / "configs" / name
    table = tomllib.loads(config.read_text())["trips"]
    embedded = str(table["private"]).removeprefix("embedded:")
    private = tmp_path / "private.parquet"
    pd.read_parquet(datasets.path(embedded)).iloc[:4000].to_parquet(private, index=False)
    out = tmp_path / "release"
    argv = ["trips", str(private), "--config", str(config), "--public-stand-in"]
    capsys.readouterr()
    assert main([*argv, "--out", str(out), "--quiet"]) == 0, capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    roles = [p["role"] for p in manifest["inputs"]["public"]]
    assert "public" not in roles, roles
    if table.get("input_format") == "sube-taps":
        lines = sube_schema(None, datasets.path("sube_metadata"))["line"].values
        assert domain(out, "line") == list(lines)
        assert manifest["parameters"]["joint"]["public_groups"] == [["mode", "line", "branch"]]


def test_metadata_without_its_columns_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A metadata file without id_linea/id_ramal: one line naming the file, exit 2 (it was an
    internal error, a KeyError)."""
    paths = write_sube_inputs(tmp_path / "data")
    paths["metadata"].write_text("modo,linea\nCOL,12\n")
    out = tmp_path / "release"
    capsys.readouterr()
    assert main(sube_trips_argv(paths, out, "--metadata", str(paths["metadata"]))) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "metadata.csv: missing column(s) 'id_linea', 'id_ramal'" in err
    assert not out.exists()


@pytest.mark.parametrize("key", ["private_years", "public_years"])
def test_years_for_another_layout_are_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    """The Chicago years with SUBE taps were silently dropped: one line, exit 2, nothing
    written."""
    paths = write_sube_inputs(tmp_path / "data")
    config = tmp_path / "trips.toml"
    config.write_text(f'[trips]\n{key} = [2019]\nmetadata = "data/metadata.csv"\n')
    out = tmp_path / "release"
    argv = sube_trips_argv(paths, out, "--config", str(config), "--public", str(paths["taps"]))
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{key} (years" in err and "'chicago-taxi'" in err, err
    assert not out.exists()
