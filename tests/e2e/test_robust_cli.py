"""Issue 26: any accepted epsilon releases, every bad value exits 2 in one line, small breaks."""

from __future__ import annotations

from pathlib import Path

import pytest

from synth.cli import main

TAXONOMY = "child,parent\nA,line:1\nB,line:1\nC,line:2\nD,line:2\nline:1,root\nline:2,root\n"
TAPS = "card_id,time,stop_id\n" + "".join(
    f"c{i},2024-05-01T08:{i % 60:02d}:00,{'ABCD'[i % 4]}\n"
    f"c{i},2024-05-01T09:{i % 60:02d}:00,{'DCBA'[i % 4]}\n"
    for i in range(40)
)


@pytest.fixture
def data(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "taxonomy.csv").write_text(TAXONOMY)
    (folder / "taps.csv").write_text(TAPS)
    return {"taxonomy": folder / "taxonomy.csv", "taps": folder / "taps.csv", "folder": folder}


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err
    return lines[0]


@pytest.mark.parametrize("epsilon", ["50", "90", "1000", "1e6"])
def test_large_epsilon_releases_the_data(data, tmp_path, capsys, epsilon) -> None:
    # issue 26: from epsilon ~90 the weighted consistency returned NaN and the release was empty
    out = tmp_path / "out"
    args = ["sequences", str(data["taps"]), "--taxonomy", str(data["taxonomy"])]
    args += ["--epsilon", epsilon, "--height", "3", "--out", str(out), "--seed", "1", "--quiet"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "Warning" not in err and "encountered" not in err, err
    lines = (out / "sequences.csv").read_text().splitlines()
    assert len(lines) == 1 + 80  # header, then the 40 two-tap sequences: noise is below one count
