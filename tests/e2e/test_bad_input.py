"""Every bad input gets exit status 2, one line on stderr, no traceback, and nothing written."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from synth.cli import main

TAXONOMY = "child,parent\nA,line:1\nB,line:1\nC,line:2\nD,line:2\nline:1,root\nline:2,root\n"
TAPS = (
    "card_id,time,stop_id\n"
    "c1,2024-05-01T08:00:00,A\n"
    "c1,2024-05-01T09:00:00,C\n"
    "c2,2024-05-01T08:30:00,B\n"
)
TRIPS = (
    "card_id,date,mode,on_time,on_stop,off_time,off_stop\n"
    "c1,2024-05-01,BUS,2024-05-01T08:00:00,A,2024-05-01T08:20:00,C\n"
    "c2,2024-05-01,BUS,2024-05-01T08:30:00,B,2024-05-01T08:50:00,D\n"
)


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run the CLI in this process (fast); returns exit status and captured output."""

    def run(*args: str | Path) -> Result:
        capsys.readouterr()
        code = main([str(arg) for arg in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {
        "taxonomy": tmp_path / "taxonomy.csv",
        "taps": tmp_path / "taps.csv",
        "trips": tmp_path / "trips.csv",
    }
    paths["taxonomy"].write_text(TAXONOMY)
    paths["taps"].write_text(TAPS)
    paths["trips"].write_text(TRIPS)
    return paths


def assert_user_error(result: Result, fragment: str, out: Path) -> None:
    lines = [line for line in result.stderr.splitlines() if not line.startswith("warning:")]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert fragment in lines[0], lines[0]
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())


def sequences(files: dict[str, Path], data: Path, out: Path, *extra: str) -> list[str | Path]:
    return [
        "sequences",
        data,
        "--taxonomy",
        files["taxonomy"],
        "--epsilon",
        "1",
        "--height",
        "4",
        "--out",
        out,
        *extra,
    ]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("card_id,time\nc1,2024-05-01T08:00:00\n", "stop_id"),
        ("card_id,time,stop_id\nc1,2024-05-01T08:00:00,Z\n", "'Z'"),
        ("card_id,time,stop_id\nc1,yesterday,A\n", "time"),
        ("card_id,time,stop_id\n", "empty"),
    ],
    ids=["missing-column", "unknown-station", "unparsable-time", "empty"],
)
def test_sequences_bad_data(
    run_cli: Callable[..., Result],
    files: dict[str, Path],
    tmp_path: Path,
    content: str,
    fragment: str,
) -> None:
    data = tmp_path / "bad.csv"
    data.write_text(content)
    out = tmp_path / "out"
    assert_user_error(run_cli(*sequences(files, data, out)), fragment, out)


@pytest.mark.parametrize("epsilon", ["0", "-1", "nan"])
def test_sequences_bad_epsilon(
    run_cli: Callable[..., Result], files: dict[str, Path], tmp_path: Path, epsilon: str
) -> None:
    out = tmp_path / "out"
    args = sequences(files, files["taps"], out)
    args[args.index("--epsilon") + 1] = epsilon
    assert_user_error(run_cli(*args), "epsilon", out)


def test_sequences_missing_file(
    run_cli: Callable[..., Result], files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = run_cli(*sequences(files, tmp_path / "absent.csv", out))
    assert_user_error(result, "absent.csv", out)


@pytest.mark.parametrize(("epsilon", "delta"), [("1", "1"), ("1", "1.5"), ("0", "1e-6")])
def test_marginals_bad_budget(
    run_cli: Callable[..., Result], files: dict[str, Path], tmp_path: Path, epsilon: str, delta: str
) -> None:
    out = tmp_path / "out"
    result = run_cli(
        "marginals", files["trips"], "--epsilon", epsilon, "--delta", delta, "--out", out
    )
    assert_user_error(result, "epsilon" if epsilon == "0" else "delta", out)


@pytest.mark.parametrize(("epsilon", "delta"), [("1", "1"), ("-2", "1e-6")])
def test_trips_bad_budget(
    run_cli: Callable[..., Result], files: dict[str, Path], tmp_path: Path, epsilon: str, delta: str
) -> None:
    out = tmp_path / "out"
    result = run_cli(
        "trips",
        files["trips"],
        "--public",
        files["trips"],
        "--epsilon",
        epsilon,
        "--delta",
        delta,
        "--id-column",
        "card_id",
        "--key-columns",
        "on_stop,off_stop",
        "--category-column",
        "mode",
        "--out",
        out,
    )
    assert_user_error(result, "epsilon" if epsilon == "-2" else "delta", out)


def test_seed_warns_not_private(
    run_cli: Callable[..., Result], files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = run_cli(*sequences(files, files["taps"], out, "--seed", "3"))
    assert result.returncode == 0, result.stderr
    assert "NOT differentially private" in result.stderr
    assert (out / "manifest.json").is_file()


def test_help_everywhere() -> None:
    """The installed entry point (``python -m synth``) answers --help for every subcommand."""
    top = subprocess.run(
        [sys.executable, "-m", "synth", "--help"], capture_output=True, text=True, timeout=120
    )
    assert top.returncode == 0, top.stderr
    for command in ("demo", "run", "sequences", "trips", "marginals", "evaluate"):
        assert command in top.stdout
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0
