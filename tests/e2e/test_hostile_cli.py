"""Issues 16 and 18: the CLI's error contract and its output folders under hostile use.

Every command either works or says why in one line (exit 2; exit 1 with a --debug hint for a bug);
output folders are created or replaced whole, a user's files are never deleted or replaced, and
SIGTERM/SIGHUP/SIGKILL leave no staging folder behind (SIGKILL's is removed by the next run).
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from synth.cli import main
from synth.outmarker import MARKER

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def data(forty_cards: dict[str, Path]) -> dict[str, Path]:
    return forty_cards


def _sequences(data: dict[str, Path], out: Path | str, *extra: str) -> list[str]:
    return [
        "sequences",
        str(data["taps"]),
        "--taxonomy",
        str(data["taxonomy"]),
        "--epsilon",
        "2",
        "--height",
        "3",
        "--out",
        str(out),
        "--seed",
        "1",
        "--quiet",
        *extra,
    ]


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _no_stage(parent: Path) -> None:
    assert [p.name for p in parent.iterdir() if ".stage-" in p.name or ".old-" in p.name] == []


# -- the guard: exit 2 for the user's faults, exit 1 + --debug for bugs ------------------------
def test_internal_error_exits_1_with_debug_hint(data, tmp_path, monkeypatch, capsys) -> None:
    import synth.cli.sequences

    def boom(*args: object, **kwargs: object) -> str:
        raise ZeroDivisionError("division by zero in a kernel")

    monkeypatch.setattr(synth.cli.sequences, "release_sequences", boom)
    assert main(_sequences(data, tmp_path / "out")) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "internal error: ZeroDivisionError" in line and "--debug" in line
    assert main([*_sequences(data, tmp_path / "out"), "--debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "boom" in err and "--debug" in err.splitlines()[-1]
    assert not (tmp_path / "out").exists()


def test_known_error_exits_2_in_one_line(data, tmp_path, capsys) -> None:
    assert main(_sequences(data, tmp_path / "out", "--height", "0")) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("transit-synth sequences: error:") and "height" in line


def test_argparse_errors_are_one_line(data, tmp_path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "synth", "sequences", str(data["taps"]), "--epsilon", "x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert run.returncode == 2
    line = _one_error_line(run.stderr)
    assert "--epsilon" in line and "see transit-synth sequences --help" in line
    assert "usage:" not in run.stderr


@pytest.mark.parametrize("epsilon", ["1000", "1e308", "1e-300"])
def test_extreme_epsilons_work_or_name_the_flag(data, tmp_path, capsys, epsilon) -> None:
    """Issue 18: 1000 and 1e-300 ended in ArithmeticError (the second after 60 s, 2.3 GB), 1e308
    in OverflowError. Now: an exact release, or one line naming --epsilon."""
    out = tmp_path / "out"
    started = time.perf_counter()
    code = main(_sequences(data, out, "--epsilon", epsilon))
    err = capsys.readouterr().err
    assert time.perf_counter() - started < 60
    if code == 0:
        assert (out / "manifest.json").is_file()
    else:
        assert code == 2
        assert "epsilon" in _one_error_line(err)
        assert not out.exists()
    for command in (["marginals", str(data["taps"]), "--delta", "1e-6"],):
        code = main([*command, "--epsilon", epsilon, "--out", str(tmp_path / "m"), "--quiet"])
        err = capsys.readouterr().err
        assert code in (0, 2)
        if code == 2:
            assert "epsilon" in _one_error_line(err)


def test_negative_memory_limit_is_refused(data, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    args = _sequences(data, out, "--engine", "duckdb", "--engine-memory-limit=-1GB")
    assert main(args) == 2
    assert "memory" in _one_error_line(capsys.readouterr().err)
    assert not out.exists()


# -- output folders (issue 16) ----------------------------------------------------------------
def test_out_is_the_inputs_folder(data, capsys) -> None:
    before = _snapshot(data["folder"])
    assert main(_sequences(data, data["folder"])) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "--force" in line and "taps.csv" in line
    assert _snapshot(data["folder"]) == before
    _no_stage(data["folder"].parent)
    # --force adds the release beside the input; nothing of the user's is changed
    assert main(_sequences(data, data["folder"], "--force")) == 0
    after = _snapshot(data["folder"])
    assert {k: after[k] for k in before} == before
    assert "manifest.json" in after and "sequences.csv" in after
    # a second --force run (another format) replaces the tool's files only
    assert main(_sequences(data, data["folder"], "--force", "--format", "parquet")) == 0
    again = _snapshot(data["folder"])
    assert {k: again[k] for k in before} == before
    assert "sequences.parquet" in again and "sequences.csv" not in again


def test_folder_with_user_files_is_refused(data, tmp_path, capsys) -> None:
    out = tmp_path / "notes"
    out.mkdir()
    (out / "notes.md").write_text("my notes")
    (out / "manifest.json").write_text("not json: the user's own")
    before = _snapshot(out)
    assert main(_sequences(data, out)) == 2
    _one_error_line(capsys.readouterr().err)
    assert _snapshot(out) == before
    # --force refuses a clash with the user's manifest.json rather than replacing it
    assert main(_sequences(data, out, "--force")) == 2
    assert "manifest.json" in _one_error_line(capsys.readouterr().err)
    assert _snapshot(out) == before
    _no_stage(tmp_path)


def test_out_is_a_file(data, tmp_path, capsys) -> None:
    target = tmp_path / "file.txt"
    target.write_text("mine")
    for extra in ((), ("--force",)):
        assert main(_sequences(data, target, *extra)) == 2
        _one_error_line(capsys.readouterr().err)
        assert target.read_text() == "mine"


def test_rerun_with_another_format_leaves_no_stale_file(data, tmp_path) -> None:
    out = tmp_path / "release"
    assert main(_sequences(data, out)) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        MARKER,
        "README.md",
        "datasheet.json",
        "manifest.json",
        "sequences.csv",
    ]
    assert main(_sequences(data, out, "--format", "parquet")) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        MARKER,
        "README.md",
        "datasheet.json",
        "manifest.json",
        "sequences.parquet",
    ]
    assert main(["export", str(out), "--to", "od", "--quiet"]) == 0  # readable, one data file
    _no_stage(tmp_path)


def test_empty_out_is_an_error(data, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(_sequences(data, ""))
    assert info.value.code == 2
    assert "--out" in _one_error_line(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_run_into_a_folder_with_user_files(data, tmp_path, capsys) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [[sequences]]
            name = "sequences"
            input = "{data["taps"]}"
            taxonomy = "{data["taxonomy"]}"
            [sequences.parameters]
            epsilon = 1.0
            height = 2
            """
        )
    )
    out = tmp_path / "out"
    (out / "sequences").mkdir(parents=True)
    (out / "sequences" / "mine.txt").write_text("keep")
    (out / "config.toml").write_text("# my own config")
    before = _snapshot(out)
    assert main(["run", str(config), "--out", str(out), "--seed", "1", "--quiet"]) == 2
    _one_error_line(capsys.readouterr().err)
    assert _snapshot(out) == before
    assert main(["run", str(config), "--out", str(out), "--seed", "1", "--quiet", "--force"]) == 2
    assert "config.toml" in _one_error_line(capsys.readouterr().err)
    assert _snapshot(out) == before
    fresh = tmp_path / "fresh"
    assert main(["run", str(config), "--out", str(fresh), "--seed", "1", "--quiet"]) == 0
    assert main(["run", str(config), "--out", str(fresh), "--seed", "2", "--quiet"]) == 0
    assert (fresh / "sequences" / "manifest.json").is_file()
    _no_stage(tmp_path)


def test_unwritable_parent_is_one_line(data, tmp_path, capsys, monkeypatch) -> None:
    """A read-only parent (PermissionError) or a full disk (ENOSPC) mid-write: exit 2, one line,
    nothing left. Root ignores permission bits, so the OS errors are injected."""
    import tempfile

    def denied(*args: object, **kwargs: object) -> str:
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "ro"))

    with monkeypatch.context() as m:
        m.setattr(tempfile, "mkdtemp", denied)
        assert main(_sequences(data, tmp_path / "ro" / "out")) == 2
    assert "Permission denied" in _one_error_line(capsys.readouterr().err)

    import prefixtree.output

    def full(frames: object, path: Path) -> int:
        path.write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    with monkeypatch.context() as m:
        m.setattr(prefixtree.output, "write_sequences", full)
        assert main(_sequences(data, tmp_path / "out")) == 2
    assert "No space left on device" in _one_error_line(capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")
def test_read_only_parent_for_real(data, tmp_path, capsys) -> None:
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        assert main(_sequences(data, parent / "out")) == 2
        assert "ermission" in _one_error_line(capsys.readouterr().err)
    finally:
        parent.chmod(0o755)


# -- signals ---------------------------------------------------------------------------------
SLOW_WRITER = """
import signal, sys, time
signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as from a terminal, even when run under nohup
import prefixtree.output as cli
real = cli.write_sequences
def slow(frames, path):
    n = real(frames, path)
    (path.parent / "started").write_text("x")
    time.sleep(60)
    return n
cli.write_sequences = slow
from synth.cli import main
from synth.outmarker import MARKER
sys.exit(main(sys.argv[1:]))
"""


def _start_slow(data: dict[str, Path], out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, *_sequences(data, out)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def _wait_for_stage(parent: Path, proc: subprocess.Popen[str]) -> Path:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        stages = [p for p in parent.glob(".out.stage-*") if (p / "started").exists()]
        if stages:
            return stages[0]
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the release was never staged")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_during_sequences_cleans_up(data, tmp_path, signum) -> None:
    out = tmp_path / "out"
    proc = _start_slow(data, out)
    _wait_for_stage(tmp_path, proc)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert "stopped by" in err and "Traceback" not in err
    assert not out.exists()
    _no_stage(tmp_path)


def test_sigkill_stage_is_removed_by_the_next_run(data, tmp_path) -> None:
    out = tmp_path / "out"
    proc = _start_slow(data, out)
    stage = _wait_for_stage(tmp_path, proc)
    proc.kill()
    proc.communicate(timeout=60)
    assert stage.exists()  # SIGKILL cannot be caught
    assert main(_sequences(data, out)) == 0
    assert not stage.exists()
    _no_stage(tmp_path)
    assert json.loads((out / "manifest.json").read_text())
