"""Mapped input errors in the user's terms (issue 29): the file, the user's own column, the row
as the user counts it (the file's data row, rows dropped by --drop-missing-ids counted), and a
hint naming the mapping flags when the default columns are missing."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from synth.cli import main

FLAGS = ["--card-column", "card_number", "--time-column", "tap_datetime"]
FLAGS += ["--location-column", "stop_code"]


def _taps(tmp_path: Path, n: int = 30) -> pd.DataFrame:
    (tmp_path / "tax.csv").write_text("child,parent\nA,X\nB,X\nC,Y\n")
    return pd.DataFrame(
        {
            "card_number": [f"c{i % 7}" for i in range(n)],
            "tap_datetime": [f"2024-03-05T08:{i:02d}:00" for i in range(n)],
            "stop_code": ["ABC"[i % 3] for i in range(n)],
        }
    )


def _run(command: str, path: Path, *flags: str) -> int:
    args = [command, str(path), "--taxonomy", str(path.with_name("tax.csv")), "--epsilon", "1"]
    args += ["--height", "3"] if command == "sequences" else ["--delta", "1e-6"]
    return main([*args, "--out", str(path.with_name(f"out-{command}")), *flags])


@pytest.mark.parametrize("command", ["sequences", "marginals"])
def test_bad_time_names_file_user_column_and_row(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    taps = _taps(tmp_path)
    taps.loc[19, "tap_datetime"] = "not a time"  # the file's data row 20
    taps.to_csv(tmp_path / "agency.csv", index=False)
    assert _run(command, tmp_path / "agency.csv", *FLAGS) == 2
    err = capsys.readouterr().err
    assert "agency.csv: column 'tap_datetime', row 20: cannot parse 'not a time'" in err
    assert "input DataFrame" not in err and "column 'time'" not in err
    assert not (tmp_path / f"out-{command}").exists()


def test_row_counts_the_rows_dropped_without_card_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taps = _taps(tmp_path)
    taps.loc[[2, 5, 9], "card_number"] = ""  # dropped before the bad rows
    taps.loc[14, "stop_code"] = "Z"  # data row 15, not in the taxonomy
    taps.to_csv(tmp_path / "agency.csv", index=False)
    flags = [*FLAGS, "--drop-missing-ids", "--log-private", "hide"]
    assert _run("sequences", tmp_path / "agency.csv", *flags) == 2
    err = capsys.readouterr().err
    assert "agency.csv: column 'stop_code', row 15: location 'Z' is not in the taxonomy" in err
    taps.loc[14, "stop_code"] = "A"
    taps.loc[24, "tap_datetime"] = "25:99"  # data row 25
    taps.to_csv(tmp_path / "agency.csv", index=False)
    assert _run("sequences", tmp_path / "agency.csv", *flags) == 2
    assert "agency.csv: column 'tap_datetime', row 25: " in capsys.readouterr().err


def test_date_and_hour_error_row_counts_dropped_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taps = _taps(tmp_path).drop(columns="tap_datetime")
    taps["day"], taps["hr"] = "2024-03-05", "8"
    taps.loc[[1, 3], "card_number"] = None
    taps.loc[9, "hr"] = "31"  # the file's data row 10
    taps.to_csv(tmp_path / "agency.csv", index=False)
    flags = ["--card-column", "card_number", "--location-column", "stop_code"]
    flags += ["--date-column", "day", "--hour-column", "hr", "--drop-missing-ids"]
    assert _run("sequences", tmp_path / "agency.csv", *flags, "--log-private", "hide") == 2
    assert "agency.csv: column 'hr', row 10: " in capsys.readouterr().err


@pytest.mark.parametrize("command", ["sequences", "marginals"])
def test_missing_columns_hint_names_the_flags(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _taps(tmp_path).to_csv(tmp_path / "agency.csv", index=False)
    assert _run(command, tmp_path / "agency.csv") == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "missing column(s) 'card_id', 'stop_id' (found: card_number, " in err
    assert err.endswith(
        "name your own columns with --card-column, --location-column, --time-column "
        "(or --profile generic|sube)"
    )
    _taps(tmp_path).rename(columns={"tap_datetime": "time"}).to_csv(
        tmp_path / "agency.csv", index=False
    )
    assert _run(command, tmp_path / "agency.csv", "--card-column", "card_number") == 2
    err = capsys.readouterr().err  # a time column in the header: no --time-column hint
    assert "missing column(s) 'stop_id'" in err and "with --location-column (or" in err
