"""``transit-synth run CONFIG.toml``: every config in configs/ runs; bad configs fail cleanly."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from synth import registry
from synth.cli import main
from synth.cli.run import plan
from synth.config import load_config
from synth.outmarker import MARKER
from synth.simulate import simulate_taps, write_simulated_sequences

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
RUN_CONFIGS = sorted(
    p.name
    for p in CONFIGS.glob("*.toml")
    if set(tomllib.loads(p.read_text())) <= {s.kind for s in registry.SHIPPED}
)
#: the data file each kind writes (besides manifest.json)
DATA_FILE = {"sequences": "sequences.csv", "trips": "trips.csv", "marginals": "on_time.csv"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The configs' relative inputs, SIMULATED on the Montreal metro (small)."""
    folder = tmp_path_factory.mktemp("inputs")
    write_simulated_sequences(folder / "montreal-sequences.csv", 3000, seed=1)
    simulate_taps(2000, seed=2).to_csv(folder / "opal-trips.csv", index=False)
    return folder


def redacted(config: dict) -> dict:
    """``config`` with the private input of every release (``input``, trips' ``private``) replaced
    by the marker the copied config shows instead."""
    for value in config.values():
        for table in [value] if isinstance(value, dict) else value:
            for key in ("input", "private"):
                if key in table:
                    table[key] = "<private input: not published>"
    return config


def _copy(config: str | Path, folder: Path, inputs: Path) -> Path:
    """The config next to the simulated inputs (its relative paths resolve there)."""
    folder.mkdir(parents=True, exist_ok=True)
    for data in inputs.iterdir():
        shutil.copy(data, folder / data.name)
    source = Path(config) if Path(config).is_absolute() else CONFIGS / config
    return Path(shutil.copy(source, folder / source.name))


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".stage-" in p.name]


def test_the_shipped_configs_are_the_papers_and_the_demo() -> None:
    """One dialect: every shipped config is a run config (the `trips --config` files too)."""
    assert RUN_CONFIGS == [
        "demo.toml",
        "kdd12-metro.toml",
        "nist-sprint3.toml",
        "opal.toml",
        "taxi-archetypes.toml",
        "transit-archetypes.toml",
    ]
    assert sorted(p.name for p in CONFIGS.glob("*.toml")) == RUN_CONFIGS


def test_paper_settings() -> None:
    kdd = plan(CONFIGS / "kdd12-metro.toml", check_files=False)
    assert [(r.params["epsilon"], r.params["height"]) for r in kdd] == [
        (0.5, 12),
        (1.0, 12),
        (1.5, 12),
    ]
    assert all(r.io["taxonomy"].endswith("montreal_taxonomy.csv") for r in kdd)
    (opal,) = plan(CONFIGS / "opal.toml", check_files=False)
    assert opal.params["split"] == [1, 1, 1, 1, 2, 2] and opal.params["bin"] == 15
    assert opal.params["delta"] / 6 == pytest.approx(1 / 8e6)
    nist = plan(CONFIGS / "nist-sprint3.toml")
    assert [(r.params["epsilon"], r.params["delta"]) for r in nist] == [(1, 2.5e-5), (10, 2.5e-5)]


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(name, marks=pytest.mark.slow) if name == "demo.toml" else name
        for name in RUN_CONFIGS
    ],
)
def test_each_config_runs(config: str, inputs: Path, tmp_path: Path) -> None:
    copied = _copy(config, tmp_path / "cfg", inputs)
    out = tmp_path / "out"
    assert main(["run", str(copied), "--out", str(out), "--seed", "0", "--quiet"]) == 0
    releases = plan(copied)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [r.name for r in releases] + ["config.toml", "manifest.json", MARKER]
    )
    for release in releases:
        folder = out / release.name
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["cap"]["epsilon"] == pytest.approx(release.params["epsilon"])
        assert 0 < manifest["spent"]["epsilon"] <= release.params["epsilon"]
        data = pd.read_csv(folder / DATA_FILE[release.kind])
        assert len(data) > 0
    copy = tomllib.loads((out / "config.toml").read_text())
    assert copy == redacted(load_config(copied))  # the config, its private inputs redacted
    combined = json.loads((out / "manifest.json").read_text())
    assert sorted(r["name"] for r in combined["releases"]) == sorted(r.name for r in releases)
    assert _leftovers(tmp_path) == []


def test_run_writes_what_the_subcommands_write(inputs: Path, tmp_path: Path) -> None:
    """Same seed, same settings: the run's release equals the subcommand's, file for file."""
    config = tmp_path / "c.toml"
    config.write_text(
        f"""
[sequences]
input = "{inputs / "montreal-sequences.csv"}"
taxonomy = "embedded:montreal_taxonomy"
[sequences.parameters]
epsilon = 1.0
height = 6

[marginals]
input = "{inputs / "opal-trips.csv"}"
[marginals.parameters]
epsilon = 8.0
delta = 7.5e-7
bin_minutes = 15
"""
    )
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--seed", "5", "--quiet"]) == 0
    from synth.datasets import path

    seq = tmp_path / "seq"
    argv = ["sequences", str(inputs / "montreal-sequences.csv"), "--taxonomy"]
    argv += [str(path("montreal_taxonomy")), "--epsilon", "1", "--height", "6"]
    assert main([*argv, "--out", str(seq), "--seed", "5", "--quiet"]) == 0
    marg = tmp_path / "marg"
    argv = ["marginals", str(inputs / "opal-trips.csv"), "--epsilon", "8", "--delta", "7.5e-7"]
    assert main([*argv, "--bin", "15", "--out", str(marg), "--seed", "6", "--quiet"]) == 0
    for mine, theirs in ((out / "sequences", seq), (out / "marginals", marg)):
        assert sorted(p.name for p in mine.iterdir()) == sorted(p.name for p in theirs.iterdir())
        for file in theirs.glob("*.csv"):
            assert (mine / file.name).read_bytes() == file.read_bytes(), file.name
        a, b = (json.loads((d / "manifest.json").read_text()) for d in (mine, theirs))
        assert a["parameters"] == b["parameters"]
        assert a["composition"] == b["composition"]


BAD = [
    ("[sequences]\ninput='x.csv'\ntaxonomy='fanout:4'\ncolour='red'\n", "colour"),
    (
        "[sequences]\ninput='x.csv'\ntaxonomy='fanout:4'\n[sequences.parameters]\n"
        "epsilon=1.0\nheight=3\nhieght=4\n",
        "hieght",
    ),
    (
        "[sequences]\ninput='x.csv'\ntaxonomy='fanout:4'\n[sequences.parameters]\n"
        "epsilon='one'\nheight=3\n",
        "epsilon",
    ),
    (
        "[marginals]\ninput='x.csv'\n[marginals.parameters]\nepsilon=1.0\ndelta=1e-6\n"
        "bin_minutes=15.5\n",
        "bin_minutes",
    ),
    ("[marginals]\ninput=3\n", "input"),
    ("[sequences]\ninput='x.csv'\ntaxonomy='fanout:4'\nformat='xlsx'\n", "format"),
    (
        "[sequences]\ninput='x.csv'\ntaxonomy='fanout:4'\n[sequences.parameters]\nheight=3\n",
        "epsilon",
    ),
    (
        "[[trips]]\nprivate='x.csv'\npublic='x.csv'\n[trips.parameters]\nepsilon=1.0\n",
        "name",
    ),
    ("[sequence]\ninput='x.csv'\n", "sequence"),
    ("[input]\nformat='trips'\n[archetypes]\nn_archetypes=3\n", "input"),
    ("[marginals]\ninput='embedded:nope'\n", "input"),
    ("[marginals]\ninput='missing.csv'\n", "input"),
]


@pytest.mark.parametrize(("text", "key"), BAD)
def test_bad_config_names_the_key_and_the_file(
    text: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "x.csv").write_text("seq_id,pos,location\n1,0,a\n")
    config = tmp_path / "bad.toml"
    config.write_text(text)
    out = tmp_path / "out"
    assert main(["run", str(config), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("transit-synth run: error: ")
    assert f"'{key}'" in err and str(config) in err, err
    assert not out.exists() and _leftovers(tmp_path) == []


def test_failure_in_a_later_release_leaves_nothing(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.csv").write_text("seq_id,pos,location\n1,0,Nowhere\n")
    config = tmp_path / "c.toml"
    config.write_text(
        f"""
[[sequences]]
name = "good"
input = "{inputs / "montreal-sequences.csv"}"
taxonomy = "embedded:montreal_taxonomy"
[sequences.parameters]
epsilon = 1.0
height = 4

[[sequences]]
name = "bad"
input = "broken.csv"
taxonomy = "embedded:montreal_taxonomy"
[sequences.parameters]
epsilon = 1.0
height = 4
"""
    )
    out = tmp_path / "out"
    assert main(["run", str(config), "--out", str(out), "--quiet"]) == 2
    assert "Nowhere" in capsys.readouterr().err
    assert not out.exists() and _leftovers(tmp_path) == []


def test_console_script_is_silent_when_stderr_is_not_a_terminal(
    inputs: Path, tmp_path: Path
) -> None:
    copied = _copy("kdd12-metro.toml", tmp_path / "cfg", inputs)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "synth", "run", str(copied), "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "3 release(s) written to" in done.stdout
    assert "\r" not in done.stderr and "it/s" not in done.stderr  # no progress bars in a pipe
    # the summaries are still printed, each once named (was "epsilon-0.5: sequences: ...")
    assert "epsilon-0.5: " in done.stderr and "synthetic sequences" in done.stderr
    assert "sequences: sequences" not in done.stderr and ": sequences:" not in done.stderr
    for name in ("epsilon-0.5", "epsilon-1", "epsilon-1.5"):
        manifest = json.loads((out / name / "manifest.json").read_text())
        assert manifest["parameters"]["height"] == 12
