"""``transit-synth demo --out DIR`` in a subprocess: releases, manifests, report with images.

One run (about 15 s) is shared by the tests of this module.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

RELEASES = {
    "sequences-sube": "sequences.csv",
    "sequences-montreal-simulated": "sequences.csv",
    "marginals": "on_time_location.csv",
    "trips-sube": "trips.csv",
    "trips-taxi": "trips.csv",
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("demo") / "tmp"
    done = subprocess.run(
        [sys.executable, "-m", "synth", "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return out, done


def test_demo_writes_the_release_directories(
    demo: tuple[Path, subprocess.CompletedProcess],
) -> None:
    out, done = demo
    for name, data in RELEASES.items():
        folder = out / name
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["spent"]["epsilon"] > 0 and manifest["privacy_unit"]
        assert len(pd.read_csv(folder / data)) > 0
    assert (out / "evaluation.json").is_file()
    assert [p.name for p in out.parent.iterdir() if ".stage-" in p.name] == []
    assert f"release written to {out}/" in done.stdout


def test_report_has_images_and_manifests(demo: tuple[Path, subprocess.CompletedProcess]) -> None:
    out, _ = demo
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 3
    for name in RELEASES:
        assert f"Privacy manifest: {name}" in html
    assert "privacy_unit" in html and "epsilon" in html


def test_demo_prints_steps_but_no_progress_bars_in_a_pipe(
    demo: tuple[Path, subprocess.CompletedProcess],
) -> None:
    _, done = demo
    assert "sequences-sube: " in done.stderr  # the step lines
    assert "\r" not in done.stderr and "step/s" not in done.stderr  # no bars: not a terminal


def test_demo_does_not_warn_about_its_own_data(
    demo: tuple[Path, subprocess.CompletedProcess],
) -> None:
    """The 60 shipped SUBE boardings on lines missing from the line list are a step note, not a
    warning (it was printed even with --quiet); no dependency warning reaches the user."""
    _, done = demo
    assert "warning" not in done.stderr.lower(), done.stderr
    assert "boardings on lines missing from the published line list left out" in done.stderr
