"""``engine="auto"`` (the default): memory for frames and small files, DuckDB for large files, Spark
only when asked; the choice is never written into the release."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from prefixtree.synthesizer import PrefixTreeSynthesizer
from synth import datasets
from synth.cli import main
from synth.engines import auto, check_engine, choose_engine, get_engine, resolve_engine
from synth.errors import ConfigError
from synth.marginals.opal import OpalMarginals
from synth.simulate import simulate_sequences

GIB = 1 << 30


def _file(tmp_path: Path, name: str, size: int) -> Path:
    path = tmp_path / name
    with path.open("wb") as handle:
        handle.truncate(size)  # sparse: the size on disk is all auto looks at
    return path


def test_auto_is_the_default() -> None:
    tax = datasets.montreal_taxonomy()
    assert PrefixTreeSynthesizer(epsilon=1, height=2, taxonomy=tax).engine == "auto"
    assert OpalMarginals().engine == "auto"
    from synth.cli import build_parser

    argv = ["sequences", "x.csv", "--taxonomy", "t.csv", "--epsilon", "1", "--height", "2"]
    from prefixtree.params import PARAMS
    from synth.cli.params import params_from_args

    args = build_parser("sequences").parse_args([*argv, "--out", "o"])
    assert "engine" not in params_from_args(args, PARAMS)  # not given: the constructor's auto
    assert PARAMS["engine"].default == "auto"


def test_auto_threshold_from_size_format_and_machine_memory(tmp_path: Path) -> None:
    small = _file(tmp_path, "small.parquet", 1 << 20)
    big = _file(tmp_path, "big.parquet", 200 << 20)
    csv = _file(tmp_path, "big.csv", 200 << 20)
    assert choose_engine(small, memory=16 * GIB) == "memory"
    assert choose_engine(big, memory=16 * GIB) == "duckdb"
    # CSV text expands less than compressed Parquet in memory
    assert auto.memory_estimate(csv) < auto.memory_estimate(big)  # type: ignore[operator]
    # a machine with little memory moves the threshold down
    mid = _file(tmp_path, "mid.csv", 40 << 20)
    assert choose_engine(mid, memory=32 * GIB) == "memory"
    assert choose_engine(mid, memory=1 * GIB) == "duckdb"
    # the cap holds on a big machine: the memory engine stays under ~1 GiB
    assert choose_engine(big, memory=1024 * GIB) == "duckdb"
    assert choose_engine(str(big), memory=16 * GIB) == "duckdb"  # str paths too


def test_auto_frames_and_missing_files_use_memory(tmp_path: Path) -> None:
    assert choose_engine(pd.DataFrame({"a": [1]})) == "memory"
    assert choose_engine(tmp_path / "missing.csv") == "memory"  # the loader reports it
    assert choose_engine(tmp_path) == "memory"  # a directory: not a file


def test_auto_options_go_to_duckdb_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options = {"memory_limit": "1GB", "threads": 1}
    check_engine("auto", options)
    with pytest.raises(ConfigError, match="master"):
        check_engine("auto", {"master": "local[2]"})  # Spark is only used when asked for
    small = _file(tmp_path, "s.csv", 100)
    assert resolve_engine("auto", options, small) == ("memory", None)
    monkeypatch.setattr(auto, "AUTO_MEMORY_CAP", 10)
    assert resolve_engine("auto", options, small) == ("duckdb", options)
    with get_engine("auto", options, small) as engine:
        assert engine.name == "duckdb"
    assert resolve_engine("spark", {"master": "x"}, small) == ("spark", {"master": "x"})


def test_machine_memory_is_positive() -> None:
    assert auto.machine_memory() > 0


@pytest.mark.parametrize("cap", [1 << 40, 0])  # auto -> memory, auto -> duckdb
def test_cli_default_engine_release_and_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cap: int
) -> None:
    """The default (auto) gives the memory engine's release whichever engine it picks, and the
    manifest says nothing of the choice nor of the input's size."""
    monkeypatch.setattr(auto, "AUTO_MEMORY_CAP", cap)
    seqs = simulate_sequences(300, seed=3)
    seqs.to_parquet(tmp_path / "s.parquet", index=False)
    base = ["sequences", str(tmp_path / "s.parquet"), "--taxonomy"]
    base += [str(datasets.path("montreal_taxonomy")), "--epsilon", "1", "--height", "3"]
    base += ["--seed", "2", "--quiet"]
    assert main([*base, "--out", str(tmp_path / "auto")]) == 0
    assert main([*base, "--out", str(tmp_path / "mem"), "--engine", "memory"]) == 0
    for name in ("sequences.csv", "manifest.json"):
        assert (tmp_path / "auto" / name).read_bytes() == (tmp_path / "mem" / name).read_bytes()
    manifest = (tmp_path / "auto" / "manifest.json").read_text()
    assert "engine" not in manifest and "duckdb" not in manifest
    assert json.loads(manifest)  # valid
