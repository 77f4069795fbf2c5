"""The audit report: findings, severities, remedies, JSON and HTML."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.audit import audit_release, render_html, second_algorithm, write_report
from synth.errors import ConfigError, InputError


@pytest.fixture
def second(tmp_path: Path) -> Path:
    """A Second-Algorithm release of a point-to-point ferry (pairs) and a time table."""
    rng = np.random.default_rng(4)
    times = [f"{h:02d}:{m:02d}" for h in range(6, 22) for m in (0, 15, 30, 45)]
    raw = rng.integers(25, 120, len(times))
    arrive = [
        f"{(6 * 60 + 15 * i + 30) // 60:02d}:{(15 * i + 30) % 60:02d}" for i in range(len(times))
    ]
    on = pd.DataFrame(
        {"mode": "ferry", "day": "2016-07-25", "time": times, "location": "A", "count": raw}
    )
    off = pd.DataFrame(
        {"mode": "ferry", "day": "2016-07-25", "time": arrive, "location": "B", "count": raw}
    )
    return second_algorithm(
        {"on_time_location": on, "off_time_location": off},
        tmp_path / "second",
        rng=np.random.default_rng(0),
    )


def test_findings_are_sorted_and_explained(second: Path) -> None:
    report = audit_release(second, routes=[("A", "B", 30)])
    severities = [f["severity"] for f in report["findings"]]
    assert severities == sorted(severities, key=["high", "medium", "low", "info"].index)
    assert report["counts"]["high"] == 2  # both tables: delta claimed 0, Theorem 1 says otherwise
    for f in report["findings"]:
        assert f["title"] and f["detail"] and f["remedy"]
    scale = report["scale"]
    assert scale["model"] == "laplace" and scale["pairs"] > 40
    assert scale["estimate"]["lower"] <= 1.4 <= scale["estimate"]["upper"]


def test_report_files(second: Path, tmp_path: Path) -> None:
    report = audit_release(second, routes=[("A", "B", 30)])
    out = write_report(report, tmp_path / "audit")
    loaded = json.loads((out / "audit.json").read_text())
    assert loaded["zeros"]["theorem1_delta"] == pytest.approx(1.9e-6, rel=0.02)
    page = (out / "audit.html").read_text()
    assert "Theorem 1" in page and "data:image/png;base64" in page
    assert page.count('class="high"') == 2


def test_html_lists_flagged_differences(tmp_path: Path) -> None:
    fine = pd.DataFrame({"time": ["08:00", "08:00"], "location": ["a", "b"], "count": [50, 40]})
    coarse = pd.DataFrame({"time": ["08:00", "09:00"], "count": [130, 60]})
    path = second_algorithm(
        {"time_location": fine, "time": coarse}, tmp_path / "r", rng=np.random.default_rng(1)
    )
    report = audit_release(path)
    (pair,) = report["differencing"]["pairs"]
    assert pair["coarse"] == "time" and pair["flagged"] == 2
    assert "Recovered suppressed totals" in render_html(report)


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a release directory"):
        audit_release(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="manifest"):
        audit_release(tmp_path / "empty")
    with pytest.raises(ConfigError, match="confidence"):
        audit_release(tmp_path / "empty", confidence=1.5)
