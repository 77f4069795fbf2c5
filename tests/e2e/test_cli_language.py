"""The command line speaks its users' language (issue 19, CLI part): one test per defect.

--help shows defaults and cites papers by author and year; errors name flags as typed; --quiet
prints errors only; marginals has --on-unknown and says when most locations are suppressed;
summaries count what was written; a release that spends less than asked says so (stderr and
manifest); MATSim exports warn about made-up times; GTFS parent stations are reachable; several
roots get an implicit root; the shipped configs are listed and copied; no dependency warning
reaches the user.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth import datasets
from synth.cli import build_parser, commands, main
from synth.simulate import write_simulated_sequences

ROOT = Path(__file__).resolve().parents[2]


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser(command)
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


def _error_line(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"transit-synth {command}: error:"), err
    return err[0]


@pytest.fixture(scope="module")
def montreal(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """3,000 simulated (untimed) Montreal metro sequences and the station -> line taxonomy."""
    folder = tmp_path_factory.mktemp("montreal")
    seqs = write_simulated_sequences(folder / "seqs.csv", 3000, seed=7)
    return seqs, datasets.path("montreal_taxonomy")


def _sequences(data: Path, taxonomy: Path | str, out: Path, *extra: str) -> list[str]:
    args = ["sequences", str(data), "--taxonomy", str(taxonomy), "--epsilon", "1"]
    return [*args, "--height", "4", "--out", str(out), *extra]


# ------------------------------------------------------------------ --help
@pytest.mark.parametrize("command", list(commands()))
def test_help_shows_every_default_and_cites_authors(command: str) -> None:
    sub = _subparser(command)
    formatter = sub._get_formatter()
    for action in sub._actions:
        default = action.default
        if not action.option_strings or default is None or default is False or default == []:
            continue
        if default is argparse.SUPPRESS:
            continue
        text = formatter._expand_help(action) if action.help else ""
        assert "default" in text, (command, action.option_strings, text)
    text = sub.format_help()
    assert not re.search(r"papers? 00\d", text), command
    assert "(default: None)" not in text


def test_help_cites_the_papers_by_author() -> None:
    assert "Chen et al. 2012" in _subparser("sequences").format_help()
    assert "Asghar et al. 2018" in _subparser("marginals").format_help()
    assert "Culnane et al. 2017" in _subparser("audit").format_help()
    assert "--false-children" in _subparser("sequences").format_help()
    text = " ".join(_subparser("sequences").format_help().split())
    assert "--variant {hybrid,simple} tree variant (default: the preset" in text


def test_audit_seed_help_says_what_it_means() -> None:
    text = " ".join(_subparser("audit").format_help().split())
    assert "then NOT private" not in text
    assert "seed the mechanism runs of --empirical" in text


# ------------------------------------------------------------------ messages name flags
def test_errors_name_flags_as_typed(
    montreal: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seqs, _ = montreal
    small = tmp_path / "tax.csv"  # a taxonomy without most of the stations
    small.write_text("child,parent\nBerri-UQAM,green\nLionel-Groulx,green\ngreen,root\n")
    assert main(_sequences(seqs, small, tmp_path / "never")) == 2
    line = _error_line(capsys, "sequences")
    assert "--on-unknown drop" in line and "on_unknown" not in line
    release = tmp_path / "trips-release"
    release.mkdir()
    (release / "manifest.json").write_text('{"privacy_unit": "card"}')
    (release / "trips.csv").write_text("card_id,a,b,hour\n1,x,y,8\n")
    export = ["export", str(release), "--to", "od", "--origin-column", "a"]
    assert main(export) == 2
    line = _error_line(capsys, "export")
    assert "--origin-column and --destination-column" in line and "origin_column" not in line
    assert not (tmp_path / "never").exists()


def test_messages_name_parameters_as_written_not_rewritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No pattern rewrites messages (issue 27): a message names its parameter under the command's
    naming (synth.params.spell), so a path or a word that looks like a name stays as written."""
    import synth.cli
    from synth.params import naming, spell

    assert not hasattr(synth.cli, "flag_names") and not hasattr(synth.cli, "FLAG_ALIASES")
    assert spell("on_unknown", "drop") == "on_unknown='drop'"
    with naming("flag"):
        assert spell("on_unknown", "drop") == "--on-unknown drop"
        assert f"{spell('time_bin')} needs {spell('coarse_time_bin')}" == (
            "--time-bin needs --coarse-time-bin"
        )
    with naming("key"):
        assert spell("on_unknown", "drop") == 'on_unknown = "drop"'
    folder = tmp_path / "on_unknown"  # a path holding a parameter's name is left alone
    folder.mkdir()
    data = folder / "seqs.csv"
    data.write_text("seq_id,pos,location\n1,0,a\n")
    tax = folder / "tax.csv"
    tax.write_text("child,parent\na,L\nb,L\nL,root\n")
    argv = ["sequences", str(data), "--taxonomy", str(tax), "--epsilon", "1", "--height", "2"]
    assert main([*argv, "--out", str(tmp_path / "o"), "--coarse-time-bin", "60"]) == 2
    line = _error_line(capsys, "sequences")
    assert "--coarse-time-bin needs --time-bin" in line and "coarse_time_bin" not in line


# ------------------------------------------------------------------ --quiet
def test_quiet_prints_errors_only(
    montreal: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seqs, _ = montreal
    small = tmp_path / "tax.csv"
    small.write_text("child,parent\nBerri-UQAM,green\nLionel-Groulx,green\ngreen,root\n")
    args = _sequences(seqs, small, tmp_path / "loud", "--on-unknown", "drop", "--seed", "1")
    assert main(args) == 0
    loud = capsys.readouterr().err
    assert "dropped" in loud and "NOT differentially private" in loud
    quiet = [*_sequences(seqs, small, tmp_path / "quiet", "--on-unknown", "drop", "--seed", "1")]
    assert main([*quiet, "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_no_dependency_warning_reaches_the_user(
    montreal: tuple[Path, Path], tmp_path: Path
) -> None:
    """Even with every warning enabled, only our own `warning: ...` lines reach stderr."""
    seqs, taxonomy = montreal
    out = tmp_path / "release"
    argv = [sys.executable, "-W", "always", "-m", "synth", *_sequences(seqs, taxonomy, out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for name in ("DeprecationWarning", "FutureWarning", "Pandas4Warning", "copy keyword"):
        assert name not in done.stderr
    export = [sys.executable, "-W", "always", "-m", "synth", "export", str(out), "--to", "od"]
    done = subprocess.run(export, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Warning" not in done.stderr, done.stderr


# ------------------------------------------------------------------ summaries and budgets
def test_sequences_summary_counts_what_was_written(
    montreal: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --completion markov the summary counted the tree's end cells (2378 printed for a
    file of 5,886 sequences); it counts the file now."""
    seqs, taxonomy = montreal
    out = tmp_path / "markov"
    extra = ["--completion", "markov", "--threshold-rule", "candidates", "--false-children", "0.5"]
    assert main([*_sequences(seqs, taxonomy, out, *extra), "--seed", "3"]) == 0
    summary = next(line for line in capsys.readouterr().err.splitlines() if "synthetic" in line)
    n_seq, n_rows = map(
        int, re.search(r"(\d+) synthetic sequences \((\d+) rows\)", summary).groups()
    )
    written = pd.read_csv(out / "sequences.csv")
    assert (n_seq, n_rows) == (written["seq_id"].nunique(), len(written))


def test_a_release_that_spends_less_than_asked_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sequences of one station under a tree of height 6: the tree stops after its first levels
    and spends part of epsilon; stderr and the manifest say so, the guarantee stays the cap."""
    data = tmp_path / "short.csv"
    pd.DataFrame({"seq_id": np.arange(400), "pos": 0, "location": ["Berri-UQAM"] * 400}).to_csv(
        data, index=False
    )
    out = tmp_path / "short"
    args = ["sequences", str(data), "--taxonomy", str(datasets.path("montreal_taxonomy"))]
    assert main([*args, "--epsilon", "1", "--height", "6", "--out", str(out), "--seed", "1"]) == 0
    err = capsys.readouterr().err
    assert "spent epsilon" in err and "of the 1 asked" in err and "guarantee" in err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["spent_below_budget"] is True
    assert manifest["spent"]["epsilon"] < 1 and manifest["guarantee"]["epsilon"] == 1
    assert manifest["guarantee"] == manifest["cap"]


def test_a_release_that_spends_its_budget_does_not_warn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taps = tmp_path / "taps.csv"
    _taps(tmp_path, n_locations=4, per_location=400).to_csv(taps, index=False)
    out = tmp_path / "marg"
    args = ["marginals", str(taps), "--epsilon", "8", "--delta", "1e-6", "--out", str(out)]
    assert main([*args, "--seed", "1"]) == 0
    assert "spent" not in capsys.readouterr().err
    assert json.loads((out / "manifest.json").read_text())["spent_below_budget"] is False


# ------------------------------------------------------------------ marginals
def _taps(tmp_path: Path, *, n_locations: int, per_location: int, extra: str = "") -> pd.DataFrame:
    """Taps at stops s0..s{n-1} (plus ``extra`` stop if given), one card each."""
    rng = np.random.default_rng(5)
    stops = [f"s{i}" for i in range(n_locations)] + ([extra] if extra else [])
    stop = np.repeat(stops, per_location)
    minutes = rng.integers(6 * 60, 10 * 60, stop.size)
    return pd.DataFrame(
        {
            "card_id": [f"c{i}" for i in range(stop.size)],
            "time": pd.Timestamp("2024-03-05") + pd.to_timedelta(minutes, unit="min"),
            "stop_id": stop,
            "mode": "bus",
        }
    )


def test_marginals_on_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taps = tmp_path / "taps.csv"
    _taps(tmp_path, n_locations=3, per_location=300, extra="zz").to_csv(taps, index=False)
    tax = tmp_path / "tax.csv"
    tax.write_text("child,parent\ns0,bus\ns1,bus\ns2,bus\nbus,root\n")
    args = ["marginals", str(taps), "--epsilon", "8", "--delta", "1e-6", "--taxonomy", str(tax)]
    assert main([*args, "--out", str(tmp_path / "never")]) == 2
    line = _error_line(capsys, "marginals")
    assert "'zz' is not a leaf" in line and "--on-unknown drop" in line
    assert not (tmp_path / "never").exists()
    out = tmp_path / "dropped"
    assert main([*args, "--on-unknown", "drop", "--out", str(out), "--seed", "2"]) == 0
    assert "distinct locations not in the taxonomy" in capsys.readouterr().err
    on = pd.read_csv(out / "on_location.csv", dtype={"location": str})
    assert set(on["location"]) <= {"s0", "s1", "s2"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parameters"]["on_unknown"] == "drop"


def test_marginals_warns_when_most_locations_are_suppressed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At epsilon 1 the SUBE lines release kept 6 of about 380 lines without a word."""
    taps = tmp_path / "taps.csv"
    _taps(tmp_path, n_locations=40, per_location=3).to_csv(taps, index=False)
    out = tmp_path / "sparse"
    args = ["marginals", str(taps), "--epsilon", "1", "--delta", "1e-6", "--out", str(out)]
    assert main([*args, "--seed", "1"]) == 0
    err = capsys.readouterr().err
    match = re.search(r"keeps (\d+) of 40 locations", err)
    assert match and int(match.group(1)) < 20
    assert "--epsilon" in err and "--level" in err


# ------------------------------------------------------------------ export
def test_matsim_warns_when_times_are_made_up(
    montreal: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seqs, taxonomy = montreal
    release = tmp_path / "untimed"
    assert main([*_sequences(seqs, taxonomy, release), "--seed", "1", "--quiet"]) == 0
    args = ["export", str(release), "--to", "matsim", "--stops", "montreal"]
    assert main([*args, "--out", str(tmp_path / "sim")]) == 0
    err = capsys.readouterr().err
    assert "has no times" in err and "08:00" in err and "artificial peak" in err
    info = json.loads((tmp_path / "sim" / "export-matsim.json").read_text())
    assert info["synthetic_times"] is True
    timed_data = tmp_path / "timed.csv"
    write_simulated_sequences(timed_data, 2000, with_time=True, seed=3)
    timed = tmp_path / "timed"
    extra = ["--time-bin", "60", "--seed", "1", "--quiet"]
    assert main([*_sequences(timed_data, taxonomy, timed, *extra)]) == 0
    capsys.readouterr()
    assert main(["export", str(timed), "--to", "matsim", "--stops", "montreal", "--quiet"]) == 0
    assert main(["export", str(timed), "--to", "od", "--out", str(tmp_path / "od")]) == 0
    assert "has no times" not in capsys.readouterr().err


# ------------------------------------------------------------------ taxonomies
def _gtfs(path: Path) -> Path:
    files = {
        "routes.txt": "route_id,route_type\nR1,3\nT,1\n",
        "trips.txt": "route_id,trip_id\nR1,t1\nT,t2\nT,t3\n",
        "stop_times.txt": "trip_id,stop_id\nt1,s1\nt1,s2\nt2,p1\nt3,p2\nt2,q1\n",
        "stops.txt": "stop_id,parent_station\ns1,\ns2,\np1,S\np2,S\nq1,Q\nS,\nQ,\n",
    }
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def test_gtfs_parent_stations_from_the_command_line_and_a_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = _gtfs(tmp_path / "feed.zip")
    rng = np.random.default_rng(1)
    stations = rng.choice(["S", "Q", "s1", "s2"], size=(500, 2))
    data = tmp_path / "stations.csv"
    pd.DataFrame(
        {
            "seq_id": np.repeat(np.arange(500), 2),
            "pos": np.tile([0, 1], 500),
            "location": stations.ravel(),
        }
    ).to_csv(data, index=False)
    out = tmp_path / "plain"
    assert main(_sequences(data, feed, out)) == 2  # the platforms are the leaves by default
    assert "is not in the taxonomy" in _error_line(capsys, "sequences")
    out = tmp_path / "stations"
    assert main([*_sequences(data, feed, out, "--gtfs-stations"), "--quiet"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parameters"]["gtfs_stations"] is True
    assert set(pd.read_csv(out / "sequences.csv")["location"]) <= {"S", "Q", "s1", "s2"}
    config = tmp_path / "run.toml"
    config.write_text(
        f'[sequences]\ninput = "{data}"\ntaxonomy = "{feed}"\ngtfs_stations = true\n'
        "[sequences.parameters]\nepsilon = 1.0\nheight = 2\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    csv_taxonomy = datasets.path("montreal_taxonomy")
    assert main(_sequences(data, csv_taxonomy, tmp_path / "never", "--gtfs-stations")) == 2
    assert "--gtfs-stations" in _error_line(capsys, "sequences")
    config.write_text(config.read_text().replace("true", '"yes"'))
    assert main(["run", str(config), "--out", str(tmp_path / "never")]) == 2
    assert "'gtfs_stations'" in _error_line(capsys, "run")


def test_several_roots_get_an_implicit_root_named_in_the_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three modes, each its own top: refused before ("3 roots; need one")."""
    forest = tmp_path / "modes.csv"
    forest.write_text("child,parent\na,bus\nb,bus\nc,rail\nd,ferry\n")
    rng = np.random.default_rng(2)
    data = tmp_path / "seqs.csv"
    pd.DataFrame({"seq_id": np.repeat(np.arange(300), 2), "pos": np.tile([0, 1], 300)}).assign(
        location=rng.choice(list("abcd"), 600)
    ).to_csv(data, index=False)
    out = tmp_path / "forest"
    assert main([*_sequences(data, forest, out), "--quiet"]) == 0
    note = json.loads((out / "manifest.json").read_text())["parameters"]["taxonomy_root"]
    assert "implicit root 'root'" in note and "3 tops" in note and "bus, ferry, rail" in note
    taps = tmp_path / "taps.csv"
    frame = pd.concat(
        [_taps(tmp_path, n_locations=1, per_location=200).assign(stop_id=s) for s in "abcd"]
    )
    frame.to_csv(taps, index=False)
    marg = tmp_path / "marg"
    args = ["marginals", str(taps), "--epsilon", "8", "--delta", "1e-6", "--taxonomy", str(forest)]
    assert main([*args, "--level", "1", "--out", str(marg), "--quiet"]) == 0
    manifest = json.loads((marg / "manifest.json").read_text())
    assert "implicit root 'root'" in manifest["parameters"]["taxonomy_root"]
    assert set(pd.read_csv(marg / "on_location.csv")["location"]) <= {"bus", "rail", "ferry"}


# ------------------------------------------------------------------ shipped configs
def test_configs_lists_prints_and_copies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["configs"]) == 0
    listed = capsys.readouterr().out
    shipped = sorted(p.stem for p in (ROOT / "configs").glob("*.toml"))
    assert [line.split()[0] for line in listed.strip().splitlines()] == shipped
    assert "transit-archetypes" in shipped and "paper 00" not in listed
    assert main(["configs", "opal"]) == 0
    assert capsys.readouterr().out == (ROOT / "configs" / "opal.toml").read_text()
    copy = tmp_path / "mine.toml"
    assert main(["configs", "transit-archetypes.toml", "--out", str(copy)]) == 0
    assert copy.read_text() == (ROOT / "configs" / "transit-archetypes.toml").read_text()
    capsys.readouterr()
    copy.write_text("# my edits\n")
    assert main(["configs", "opal", "--out", str(copy)]) == 2  # a user's file is never replaced
    assert "exists" in _error_line(capsys, "configs")
    assert copy.read_text() == "# my edits\n"
    assert main(["configs", "nope"]) == 2
    assert "transit-archetypes" in _error_line(capsys, "configs")


def test_the_shipped_configs_are_package_data() -> None:
    """configs/ is reached as synth/configs (a link), which package-data puts in the wheel."""
    import tomllib
    from importlib import resources

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "configs/*.toml" in pyproject["tool"]["setuptools"]["package-data"]["synth"]
    assert (ROOT / "synth" / "configs").resolve() == (ROOT / "configs").resolve()
    folder = resources.files("synth") / "configs"
    assert sorted(f.name for f in folder.iterdir() if f.name.endswith(".toml")) == sorted(
        p.name for p in (ROOT / "configs").glob("*.toml")
    )


def test_runtime_dependencies_are_what_the_commands_import() -> None:
    """Every runtime dependency is imported by the package; opendp (tests only) is not one."""
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    names = [re.split(r"[<>=!~\[ ]", d)[0].lower() for d in pyproject["project"]["dependencies"]]
    assert "opendp" not in names
    assert any(
        d.startswith("opendp") for d in pyproject["project"]["optional-dependencies"]["test"]
    )
    modules = {"scikit-learn": "sklearn"}
    source = "\n".join(
        p.read_text()
        for pkg in ("synth", "prefixtree", "archetypes")
        for p in (ROOT / pkg).rglob("*.py")
    )
    for name in names:
        module = modules.get(name, name.replace("-", "_"))
        assert re.search(rf"^\s*(import|from) {module}\b", source, re.M), name
    assert not re.search(r"^\s*(import|from) opendp\b", source, re.M)
