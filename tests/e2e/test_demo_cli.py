"""``transit-synth demo --out DIR`` in a subprocess: releases (``DIR/releases/``), manifests, and
the internal report with images (``DIR/evaluation-private/``).

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
    assert sorted(p.name for p in out.iterdir()) == ["evaluation-private", "releases"]
    assert sorted(p.name for p in (out / "releases").iterdir()) == sorted(RELEASES)
    for name, data in RELEASES.items():
        folder = out / "releases" / name
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["spent"]["epsilon"] > 0 and manifest["privacy_unit"]
        # nothing of the private inputs: no hash, no name (only the public Tuesday file)
        assert manifest["inputs"]["private"].startswith("not recorded")
        public = [p["file"] for p in manifest["inputs"]["public"]]
        assert public == (["martes_trx.parquet"] if name == "trips-sube" else [])
        text = (folder / "manifest.json").read_text()
        assert "miercoles" not in text and "chicago_taxi" not in text
        assert len(pd.read_csv(folder / data)) > 0
        # only DP data files and the manifest: no report, no evaluation
        assert all(p.suffix in (".csv", ".json") for p in folder.iterdir())
        assert not [p for p in folder.iterdir() if "report" in p.name or "eval" in p.name]
    internal = out / "evaluation-private"
    assert sorted(p.name for p in internal.iterdir()) == [
        "private-evaluation.json",
        "private-report.html",
    ]
    assert [p.name for p in out.parent.iterdir() if ".stage-" in p.name] == []
    assert f"releases written to {out / 'releases'}/" in done.stdout
    assert "NOT private" in done.stdout


def test_report_has_images_and_manifests(demo: tuple[Path, subprocess.CompletedProcess]) -> None:
    out, _ = demo
    html = (out / "evaluation-private" / "private-report.html").read_text()
    notice = "INTERNAL - NOT PRIVATE: contains exact statistics of the original data"
    assert html.index(notice) < html.index("<h1>")
    text = (out / "evaluation-private" / "private-evaluation.json").read_text()
    assert notice in text.splitlines()[1]
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
