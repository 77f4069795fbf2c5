"""Run every check on a release and write the findings as JSON and HTML for a privacy officer.

Each finding has a ``check`` (scale, zeros, differencing, empirical), a ``severity`` (``high``: the
privacy claim is wrong or the data reveal what the agency meant to hide; ``medium``: information is
exposed within the claim, or the manifest is incomplete; ``low``: a documented, accepted risk;
``info``: the check passed), a plain-words ``title`` and ``detail``, and a ``remedy``.

The checks' findings are made in :mod:`synth.audit.findings`, the HTML page in
:mod:`synth.audit.html`.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from synth import __version__, registry
from synth.audit.findings import (
    SEVERITIES,
    differencing_section,
    scale_section,
    zeros_section,
)
from synth.audit.html import render_html
from synth.audit.manifest import consistency_findings, consistency_summary
from synth.audit.release import load_release
from synth.errors import ConfigError
from synth.outdir import release_dir

__all__ = [
    "add_findings",
    "audit_release",
    "base_report",
    "write_report",
]


def audit_release(
    path: str | os.PathLike[str],
    *,
    routes: Sequence[tuple[str, str, int]] = (),
    pairs: pd.DataFrame | None = None,
    model: str = "auto",
    confidence: float = 0.95,
    min_count: int | None = None,
) -> dict[str, Any]:
    """Every check of the audit on the release at ``path``; the report as a JSON-ready dict."""
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence!r}")
    if model not in ("auto", "laplace", "discrete", "gaussian"):
        raise ConfigError(f"model must be auto, laplace, discrete or gaussian, got {model!r}")
    release = load_release(path)
    scale, f1 = scale_section(release, routes, pairs, model, confidence, min_count)
    zeros, f2 = zeros_section(release)
    diff, f3 = differencing_section(release, confidence)
    f4 = consistency_findings(release.manifest)
    report = base_report(str(Path(path)))
    report.update(
        {
            "release_kind": registry.generator_name(release.manifest),
            "privacy_unit": release.manifest.get("privacy_unit"),
            "claimed": release.manifest.get("spent"),
            "scale": scale,
            "zeros": zeros,
            "differencing": diff,
            "consistency": consistency_summary(release.manifest, f4),
        }
    )
    return add_findings(report, f1 + f2 + f3 + f4)


def base_report(release: str | None) -> dict[str, Any]:
    """An empty report: what was audited, by which version, when."""
    return {
        "release": release,
        "audited_by": f"transit-synth {__version__}",
        "generated": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "findings": [],
        "counts": dict.fromkeys(SEVERITIES, 0),
    }


def add_findings(report: dict[str, Any], findings: list[dict]) -> dict[str, Any]:
    """Add ``findings`` to ``report``, most severe first, and recount the severities."""
    merged = sorted(report["findings"] + findings, key=lambda f: SEVERITIES.index(f["severity"]))
    report["findings"] = merged
    report["counts"] = {s: sum(f["severity"] == s for f in merged) for s in SEVERITIES}
    return report


def write_report(report: dict[str, Any], out_dir: str | os.PathLike[str]) -> Path:
    """Write ``audit.json`` and ``audit.html`` into ``out_dir`` atomically."""
    with release_dir(out_dir) as stage:
        (stage / "audit.json").write_text(
            json.dumps(report, indent=2, sort_keys=True, default=_json) + "\n", encoding="utf-8"
        )
        (stage / "audit.html").write_text(render_html(report), encoding="utf-8")
    return Path(out_dir)


def _json(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot write {type(obj).__name__} to the report")
