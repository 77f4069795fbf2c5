"""``transit-synth audit``: the report of a release, empirical DP, and user errors (exit 2)."""

from __future__ import annotations

import html
import json
import re
import shlex
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


def _run_remedy(command: str, values: dict[str, str]) -> int:
    """Run a remedy's command line with its placeholders filled in, through the real CLI."""
    argv = shlex.split(command)
    assert argv[0] == "transit-synth"
    return main([values.get(a, a) for a in argv[1:]])


def test_every_remedy_command_runs(release: Path, tmp_path: Path) -> None:
    """Each command a finding names is accepted by the CLI and does what it says."""
    out = tmp_path / "report"
    argv = ["audit", str(release), "--out", str(out), "--quiet"]
    # 45 minutes is not the crossing time: the pairs differ more than the noise explains
    assert main([*argv, "--route", MANLY, QUAY, "45"]) == 0
    report = json.loads((out / "audit.json").read_text())
    commands = {(f["check"], f["severity"]): f["command"] for f in report["findings"]}
    manifest = json.loads((release / "manifest.json").read_text())
    threshold = max(s["threshold"] for s in manifest["spends"] if "time_location" in s["label"])
    assert commands[("scale", "low")].endswith(f"--min-count {int(2 * threshold)}")
    assert "--pure" in commands[("zeros", "low")]
    # differencing finds nothing in this release; its remedy's command comes from the same code
    from synth.audit.findings import marginals_command
    from synth.audit.release import load_release

    consistent = marginals_command(load_release(release), "consistent")
    assert not any(f["title"].startswith("Scale recovery not run") for f in report["findings"])
    taxonomy = tmp_path / "stops.csv"
    taxonomy.write_text(f"child,parent\n{MANLY},wharves\n{QUAY},wharves\n")
    page = html.unescape(re.sub(r"<[^>]+>", "", (out / "audit.html").read_text(encoding="utf-8")))
    ran = set()
    for i, command in enumerate(sorted({c for c in commands.values() if c} | {consistent})):
        new_dir = tmp_path / f"remedy-{i}"
        values = {
            "INPUT": str(release.parent / "trips.csv"),
            "TAX": str(taxonomy),
            "MODES": "ferry",
            "DAYS": "2016-07-25:2016-07-26",
            "NEW_DIR": str(new_dir),
        }
        assert command in page or command == consistent  # shown as typed
        assert _run_remedy(command, {**values, "--quiet": "--quiet"}) == 0, command
        if "--pure" in command or "--consistent" in command:
            # the re-made release has the remedy's property
            mode = json.loads((new_dir / "manifest.json").read_text())["parameters"]["mode"]
            assert mode == ("pure" if "--pure" in command else "consistent")
            ran.add(mode)
        else:
            ran.add(shlex.split(command)[1])
    assert ran == {"pure", "consistent", "audit"}


def test_no_noise_row_when_scale_recovery_is_not_asked(release: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert main(["audit", str(release), "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / "audit.json").read_text())
    assert report["scale"] == {"run": False}
    assert all(f["check"] != "scale" for f in report["findings"])
    page = (out / "audit.html").read_text(encoding="utf-8")
    assert "<code>--route ORIGIN DESTINATION MINUTES</code>" in page
    assert "ORIGIN:DESTINATION" not in page


def test_remedy_keeps_the_release_public_parameters(release: Path, tmp_path: Path) -> None:
    """A per-card release with modes, days and a taxonomy: the --pure remedy repeats them, so
    only the private input and the new directory are left to fill in."""
    taxonomy = tmp_path / "stops.csv"
    taxonomy.write_text(f"child,parent\n{MANLY},wharves\n{QUAY},wharves\n")
    trips = str(release.parent / "trips.csv")
    card = tmp_path / "card"
    argv = ["marginals", trips, "--epsilon", "4", "--delta", "1e-6", "--out", str(card)]
    argv += ["--privacy-unit", "card_id", "--max-contributions", "2", "--bin", "30"]
    argv += ["--modes", "ferry", "--days", "2016-07-25:2016-07-26", "--taxonomy", str(taxonomy)]
    assert main([*argv, "--quiet"]) == 0
    out = tmp_path / "report"
    assert main(["audit", str(card), "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / "audit.json").read_text())
    [command] = {f["command"] for f in report["findings"] if f["check"] == "zeros"}
    words = shlex.split(command)
    assert [w for w in words if w.isupper()] == ["INPUT", "NEW_DIR"]
    for flag, value in [
        ("--privacy-unit", "card_id"),
        ("--max-contributions", "2"),
        ("--bin", "30"),
        ("--days", "2016-07-25,2016-07-26"),
    ]:
        assert words[words.index(flag) + 1] == value
    remade = tmp_path / "remade"
    assert _run_remedy(command, {"INPUT": trips, "NEW_DIR": str(remade)}) == 0
    params = json.loads((remade / "manifest.json").read_text())["parameters"]
    assert params["mode"] == "pure" and params["privacy_unit"] == "card_id"
