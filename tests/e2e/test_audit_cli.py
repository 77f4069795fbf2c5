"""``transit-synth audit``: the report of a release, empirical DP, and user errors (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.cli import main

MANLY, QUAY = "Manly Wharf", "Circular Quay No. 3 Wharf"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``transit-synth marginals`` on two days of a point-to-point ferry."""
    base = tmp_path_factory.mktemp("audit")
    rng = np.random.default_rng(0)
    departures = np.arange(6 * 60, 22 * 60, 15)
    rows = []
    for day in ("2016-07-25", "2016-07-26"):
        for a, b in ((MANLY, QUAY), (QUAY, MANLY)):
            n = rng.integers(30, 150, departures.size)
            start = np.repeat(departures, n) + rng.integers(0, 15, n.sum())
            on = pd.Timestamp(day) + pd.to_timedelta(start, unit="m")
            rows.append(
                pd.DataFrame(
                    {
                        "card_id": [f"{day}-{a}-{i}" for i in range(n.sum())],
                        "mode": "ferry",
                        "on_time": on.strftime("%Y-%m-%dT%H:%M"),
                        "on_stop": a,
                        "off_time": (on + pd.Timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M"),
                        "off_stop": b,
                    }
                )
            )
    trips = base / "trips.csv"
    pd.concat(rows).to_csv(trips, index=False)
    out = base / "release"
    argv = ["marginals", str(trips), "--epsilon", "6", "--delta", "1e-6", "--out", str(out)]
    assert main([*argv, "--seed", "1", "--quiet"]) == 0
    return out


def test_audit_writes_json_and_html(
    release: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    argv = ["audit", str(release), "--out", str(out), "--route", MANLY, QUAY, "30"]
    assert main([*argv, "--route", QUAY, MANLY, "30"]) == 0
    printed = capsys.readouterr().out
    assert "[info] scale: The recovered noise scale matches the manifest" in printed
    report = json.loads((out / "audit.json").read_text())
    assert report["scale"]["pairs"] > 200 and report["scale"]["model"] == "discrete"
    assert report["zeros"]["theorem1_delta"] is not None  # SBH mode: zeros unperturbed
    assert {f["check"] for f in report["findings"]} == {"scale", "zeros", "differencing"}
    assert (out / "audit.html").read_text().startswith("<!doctype html>")


def test_audit_without_out_only_prints(release: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", str(release), "--quiet"]) == 0
    assert capsys.readouterr().out == ""


def test_empirical_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d, d_prime = tmp_path / "d.csv", tmp_path / "d_prime.csv"
    d.write_text("stop\na\na\nb\n")
    d_prime.write_text("stop\na\na\nc\n")
    argv = ["audit", "--empirical", "discrete_laplace", "--neighbours", str(d), str(d_prime)]
    argv += ["--param", "epsilon=1", "--param", "sensitivity=2", "--trials", "500", "--seed", "3"]
    assert main([*argv, "--out", str(tmp_path / "emp")]) == 0
    printed = capsys.readouterr().out
    assert "epsilon >= " in printed and "with confidence 0.95" in printed
    assert "not refuted" in printed
    report = json.loads((tmp_path / "emp" / "audit.json").read_text())
    assert report["empirical"]["trials"] + report["empirical"]["selection_trials"] == 500


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["audit"], "give a RELEASE_DIR"),
        (["audit", "nowhere"], "not a release directory"),
        (["audit", "--empirical", "discrete_laplace"], "--neighbours"),
        (["audit", "{release}", "--route", "a", "b", "ten"], "MINUTES must be an integer"),
        (["audit", "{release}", "--route", MANLY, QUAY, "20"], "whole number"),
        (["audit", "{release}", "--confidence", "2"], "confidence"),
    ],
)
def test_user_errors_exit_2_with_one_line(
    release: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    out = tmp_path / "never"
    args = [a.replace("{release}", str(release)) for a in argv]
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and err.startswith("transit-synth audit")
    assert not out.exists()


def test_pairs_file(release: Path, tmp_path: Path) -> None:
    on = pd.read_csv(release / "on_time_location.csv", dtype=str)
    on = on.loc[on["location"] == MANLY].head(40)
    arrive = pd.to_datetime(on["time"], format="%H:%M") + pd.Timedelta(minutes=30)
    pairs = pd.DataFrame(
        {
            "table_a": "on_time_location",
            "mode_a": on["mode"],
            "day_a": on["day"],
            "time_a": on["time"],
            "location_a": MANLY,
            "table_b": "off_time_location",
            "mode_b": on["mode"],
            "day_b": on["day"],
            "time_b": arrive.dt.strftime("%H:%M"),
            "location_b": QUAY,
        }
    )
    path = tmp_path / "pairs.csv"
    pairs.to_csv(path, index=False)
    out = tmp_path / "report"
    assert main(["audit", str(release), "--pairs", str(path), "--out", str(out), "--quiet"]) == 0
    scale = json.loads((out / "audit.json").read_text())["scale"]
    assert scale["pairs"] + scale["unpaired"] == 40 and scale["pairs"] >= 35
