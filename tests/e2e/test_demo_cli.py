"""``transit-synth demo --out DIR`` in a subprocess: releases (``DIR/releases/``), manifests, and
the internal report with images (``DIR/evaluation-private/``).

One run (about 15 s) is shared by the slow tests of this module; the default suite runs a quick
smoke test of the command.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from synth.outmarker import MARKER

RELEASES = {
    "sequences-sube": "sequences.csv",
    "sequences-sube-timed": "sequences.csv",
    "sequences-montreal-simulated": "sequences.csv",
    "marginals": "on_time_location.csv",
    "trips-sube": "trips.csv",
    "trips-taxi": "trips.csv",
}


#: the public files each release fingerprints (the shipped taxonomies, the public Tuesday)
PUBLIC_FILES = {
    "sequences-sube": ["sube_line_taxonomy.csv"],
    "sequences-sube-timed": ["sube_line_taxonomy.csv"],
    "sequences-montreal-simulated": ["montreal_taxonomy.csv"],
    "trips-sube": ["martes_trx.parquet"],
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


@pytest.mark.slow
def test_demo_writes_the_release_directories(
    demo: tuple[Path, subprocess.CompletedProcess],
) -> None:
    out, done = demo
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "evaluation-private", "releases"]
    assert sorted(p.name for p in (out / "releases").iterdir()) == sorted(
        [*RELEASES, "manifest.json"]
    )
    combined = json.loads((out / "releases" / "manifest.json").read_text())
    assert sorted(r["name"] for r in combined["releases"]) == sorted(RELEASES)
    assert sum(len(u["releases"]) for u in combined["guarantee_per_unit"].values()) == len(RELEASES)
    for name, data in RELEASES.items():
        folder = out / "releases" / name
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["spent"]["epsilon"] > 0 and manifest["privacy_unit"]
        # nothing of the private inputs: no hash, no name (only the public Tuesday file)
        assert manifest["inputs"]["private"].startswith("not recorded")
        public = [p["file"] for p in manifest["inputs"]["public"]]
        assert public == PUBLIC_FILES.get(name, [])
        text = (folder / "manifest.json").read_text()
        assert "miercoles" not in text and "chicago_taxi" not in text
        assert len(pd.read_csv(folder / data)) > 0
        # only DP data files, the manifest and the datasheet: no report, no evaluation
        assert all(p.suffix in (".csv", ".json") or p.name == "README.md" for p in folder.iterdir())
        assert {"README.md", "datasheet.json"} <= {p.name for p in folder.iterdir()}
        assert not [p for p in folder.iterdir() if "report" in p.name or "eval" in p.name]
    internal = out / "evaluation-private"
    assert sorted(p.name for p in internal.iterdir()) == [
        "private-evaluation.json",
        "private-report.html",
    ]
    assert [p.name for p in out.parent.iterdir() if ".stage-" in p.name] == []
    assert f"releases written to {out / 'releases'}/" in done.stdout
    assert "NOT private" in done.stdout


class _Report(HTMLParser):
    """First heading, summary rows (``<table class="summary">``), <details> titles, text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.rows: list[list[str]] = []
        self.details: list[str] = []
        self.text: list[str] = []
        self.images = 0
        self._capture: list[str] | None = None
        self._summary_table = False
        self._tag = ""
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._tag = tag
        if tag == "table":
            self._summary_table = dict(attrs).get("class") == "summary"
        elif tag == "tr" and self._summary_table:
            self.rows.append([])
        elif tag in ("h1", "summary") or (tag == "td" and self._summary_table):
            self._capture = []
        self.images += tag == "img"

    def handle_endtag(self, tag: str) -> None:
        if self._capture is None or tag not in ("h1", "summary", "td"):
            self._summary_table = self._summary_table and tag != "table"
            return
        text = " ".join("".join(self._capture).split())
        if tag == "h1":
            self.headings.append(text)
        elif tag == "summary":
            self.details.append(text)
        else:
            self.rows[-1].append(text)
        self._capture = None

    def handle_data(self, data: str) -> None:
        if self._tag != "style":
            self.text.append(data)
        if self._capture is not None:
            self._capture.append(data)


@pytest.mark.slow
def test_report_opens_with_notice_and_summary(
    demo: tuple[Path, subprocess.CompletedProcess],
) -> None:
    out, _ = demo
    [path] = list(out.parent.rglob("private-report.html"))
    page = _Report(path.read_text(encoding="utf-8"))
    assert page.headings[0] == (
        "INTERNAL - NOT PRIVATE: contains exact statistics of the original data; for the data "
        "holder only; do not publish."
    )
    rows = {r[0]: r for r in page.rows if r}
    assert sorted(rows) == sorted(RELEASES)
    text = (out / "evaluation-private" / "private-evaluation.json").read_text()
    assert page.headings[0] in text.splitlines()[1]  # the JSON's first key: the notice
    for name in RELEASES:
        [path] = list(out.rglob(f"{name}/manifest.json"))  # wherever the layout puts it
        manifest = json.loads(path.read_text())
        _, what, unit, privacy, verdict = rows[name]
        assert unit.startswith(f"{manifest['privacy_unit']}: add or remove one")
        assert privacy.startswith(f"epsilon = {manifest['cap']['epsilon']:g}")
        assert "delta = " in privacy and what
        assert re.search(r"\d", verdict), verdict
        title = f"Privacy manifest of {name}: {len(manifest['spends'])} noisy step(s)"
        assert sum(d.startswith(title) for d in page.details) == 1
    for name in ("sequences-sube", "sequences-sube-timed", "sequences-montreal-simulated"):
        assert re.match(
            r"top-100 travel patterns: \d+ found, \d+ possible without privacy", rows[name][4]
        )
    for name in ("trips-sube", "trips-taxi"):
        assert re.match(r"k-marginal score \d+ of 1000", rows[name][4])
    assert re.match(r"against the original taps: [\d,]+ of [\d,]+ cells", rows["marginals"][4])
    text = " ".join(" ".join(page.text).split())
    assert not re.search(r"\bnan\b", text, re.IGNORECASE)
    assert '{"' not in text and not re.search(r"paper 00\d", text)
    assert "need '" not in text and "Trips per individual: not applicable" in text
    for term in (
        "Truncated ceiling",
        "TP (true positives)",
        "FD (false drops)",
        "k-marginal score",
    ):
        assert term in text  # the glossary line
    assert (
        page.images == 9
    )  # per evaluated release its panels (sequences: two rows), the time panels
    [report] = list(out.parent.rglob("private-report.html"))
    assert 'id="time"' in report.read_text(encoding="utf-8")  # the timed SUBE release's time


@pytest.mark.slow
def test_demo_prints_steps_but_no_progress_bars_in_a_pipe(
    demo: tuple[Path, subprocess.CompletedProcess],
) -> None:
    _, done = demo
    assert "sequences-sube: " in done.stderr  # the step lines
    assert "\r" not in done.stderr and "step/s" not in done.stderr  # no bars: not a terminal


@pytest.mark.slow
def test_demo_does_not_warn_about_its_own_data(
    demo: tuple[Path, subprocess.CompletedProcess],
) -> None:
    """The 60 shipped SUBE boardings on lines missing from the line list are a step note, not a
    warning (it was printed even with --quiet); no dependency warning reaches the user."""
    _, done = demo
    assert "warning" not in done.stderr.lower(), done.stderr
    assert "boardings on lines missing from the published line list left out" in done.stderr


def test_demo_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Quick check of the demo command in the default suite (the full run is slow): it is
    registered, and a folder of the user's files as --out is refused in one line, untouched."""
    from synth.cli import main

    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    assert main(["demo", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "notes.txt" in err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "my notes"
