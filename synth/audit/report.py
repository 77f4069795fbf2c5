"""Run every check on a release and write the findings as JSON and HTML for a privacy officer.

Each finding has a ``check`` (scale, zeros, differencing, empirical), a ``severity`` (``high``: the
privacy claim is wrong or the data reveal what the agency meant to hide; ``medium``: information is
exposed within the claim, or the manifest is incomplete; ``low``: a documented, accepted risk;
``info``: the check passed), a plain-words ``title`` and ``detail``, and a ``remedy``.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from synth import __version__
from synth.audit.differencing import difference_tables
from synth.audit.manifest import consistency_findings, consistency_summary
from synth.audit.release import AuditedRelease, load_release
from synth.audit.scale import Model, fit_scale, named_pairs, paired_counts, route_pairs
from synth.audit.zeros import check_zeros
from synth.errors import ConfigError
from synth.io import release_dir

__all__ = [
    "PLACEHOLDERS",
    "SEVERITIES",
    "add_findings",
    "audit_release",
    "base_report",
    "marginals_command",
    "render_html",
    "write_report",
]

SEVERITIES: tuple[str, ...] = ("high", "medium", "low", "info")
_MAX_LISTED = 25


def _finding(
    check: str,
    severity: str,
    title: str,
    detail: str,
    remedy: str,
    *,
    command: str | None = None,
    **data: Any,
) -> dict:
    return {
        "check": check,
        "severity": severity,
        "title": title,
        "detail": detail,
        "remedy": remedy,
        "command": command,
        "data": data,
    }


#: Upper-case words of a remedy's command that the audit cannot know, and what to put there.
PLACEHOLDERS = {
    "INPUT": "the private table the release was made from",
    "TAX": "the public location taxonomy (CSV edge list or GTFS zip)",
    "MODES": "the public comma-separated list of modes",
    "DAYS": "the public days (comma-separated ISO dates, or FIRST:LAST)",
    "EPSILON": "the epsilon to spend",
    "DELTA": "the delta to spend",
    "NEW_DIR": "a new release directory",
}


def marginals_command(release: AuditedRelease, kind: str) -> str:
    """A ``transit-synth marginals`` command re-making ``release`` with ``--consistent`` or
    ``--pure``: its public parameters from the manifest, placeholders (:data:`PLACEHOLDERS`) for
    the rest."""
    p = release.parameters
    opal = p.get("release") == "opal-marginals"
    argv = ["transit-synth", "marginals", "INPUT", f"--{kind}"]
    argv += ["--epsilon", _number(p.get("epsilon_per_partition"), "EPSILON") if opal else "EPSILON"]
    argv += ["--delta", _number(p.get("delta_per_partition"), "DELTA") if opal else "DELTA"]
    if opal and p.get("location_column"):
        argv += ["--location-column", str(p["location_column"])]
    if opal and p.get("bin_minutes"):
        argv += ["--bin", str(int(p["bin_minutes"]))]
    if opal and p.get("taxonomy"):
        argv += ["--taxonomy", str(p["taxonomy"])]
        if p.get("level") is not None:
            argv += ["--level", str(int(p["level"]))]
    elif kind == "pure":
        argv += ["--taxonomy", "TAX"]
    modes, days = (p.get("modes"), p.get("days")) if opal else (None, None)
    if modes or kind == "pure":
        argv += ["--modes", ",".join(map(str, modes)) if modes else "MODES"]
    if days or kind == "pure":
        argv += ["--days", ",".join(map(str, days)) if days else "DAYS"]
    if opal and str(p.get("budget_scope", "")).startswith("the whole release"):
        argv += ["--privacy-unit", str(p.get("privacy_unit"))]
        argv += ["--max-contributions", str(int(p.get("max_contributions") or 1))]
    return shlex.join([*argv, "--out", "NEW_DIR"])


def _min_count_hint(release: AuditedRelease, tables: set[str], current: int | None) -> int:
    """A --min-count above the suppression threshold of the paired tables (twice the largest)."""
    thresholds = [
        float(s["threshold"])
        for s in release.spends
        if s.get("label") in tables and s.get("threshold") is not None
    ]
    return max(int(2 * max(thresholds, default=10)), 2 * (current or 0), 1)


def _number(value: Any, placeholder: str) -> str:
    return placeholder if value is None else f"{float(value):g}"


def _audit_command(release: AuditedRelease, routes: Sequence[tuple[str, str, int]], n: int) -> str:
    argv = ["transit-synth", "audit", str(release.path)]
    for origin, destination, minutes in routes:
        argv += ["--route", origin, destination, str(minutes)]
    return shlex.join([*argv, "--min-count", str(n)])


# --------------------------------------------------------------------------- scale
def _scale_section(
    release: AuditedRelease,
    routes: Sequence[tuple[str, str, int]],
    pairs: pd.DataFrame | None,
    model: str,
    confidence: float,
    min_count: int | None,
) -> tuple[dict[str, Any], list[dict]]:
    frames, tables = [], set()
    for origin, destination, minutes in routes:
        frames.append(route_pairs(release, origin, destination, minutes))
        tables |= {"on_time_location", "off_time_location"}
    if pairs is not None:
        frames.append(named_pairs(release, pairs))
        tables |= set(pairs["table_a"].astype(str)) | set(pairs["table_b"].astype(str))
    missing_scale = sorted({str(s.get("label")) for s in release.spends if s.get("scale") is None})
    findings = []
    if missing_scale:
        findings.append(
            _finding(
                "scale",
                "medium",
                "The manifest does not publish every noise scale",
                f"No scale is recorded for: {', '.join(missing_scale)}. The scale can be "
                "recovered from the data anyway (Culnane et al. 2017, section 2); hiding it "
                "only hurts analysts.",
                "Publish the mechanism, its scale and threshold for every table.",
            )
        )
    if not frames:  # not a finding: the page says how to run it
        return {"run": False}, findings
    data = paired_counts(frames, min_count)
    noises = [n for n in (release.noise(t) for t in sorted(tables)) if n is not None]
    if model == "auto":
        model = (
            "gaussian"
            if any(n.gaussian for n in noises)
            else "discrete"
            if noises and all(n.discrete for n in noises)
            else "laplace"
        )
    diffs = (data["a"].astype(float) - data["b"].astype(float)).to_numpy()
    section: dict[str, Any] = {
        "run": True,
        "pairs": len(data),
        "unpaired": int(data.attrs.get("missing", 0)),
        "model": model,
        "differences": diffs.astype(int).tolist() if np.all(diffs == np.round(diffs)) else [],
    }
    if len(data) < 2:
        findings.append(
            _finding(
                "scale",
                "info",
                "Too few released pairs to recover the scale",
                f"{len(data)} pair(s) had both counts released "
                f"({section['unpaired']} had a suppressed side).",
                "Name more pairs, or none is needed: the manifest states the scale.",
            )
        )
        return section, findings
    est = fit_scale(diffs, model=cast(Model, model), confidence=confidence)
    section["estimate"] = est.to_dict()
    stated = sorted({n.scale for n in noises})
    section["manifest_scales"] = stated
    ci = f"{est.scale:.3g} ({confidence:.0%} interval {est.lower:.3g} to {est.upper:.3g})"
    base = (
        f"From {est.n} paired counts ({section['unpaired']} pairs had a suppressed side), the "
        f"noise scale is {ci}, fitted as {model} noise."
    )
    if not stated:
        findings.append(
            _finding(
                "scale",
                "medium",
                f"Noise scale recovered from the data: {est.scale:.3g}",
                base + " The manifest does not state it.",
                "Publish the scale: it is recoverable anyway, and analysts need it.",
                recovered=est.scale,
            )
        )
    elif any(s > est.upper for s in stated):
        findings.append(
            _finding(
                "scale",
                "high",
                "The release carries less noise than its manifest states",
                base + f" The manifest states {', '.join(f'{s:g}' for s in stated)}, above the "
                "interval: the privacy claim may be overstated (or the pairs do not share one "
                "raw value).",
                "Check the noise generation before publishing; re-run the release.",
                recovered=est.scale,
                stated=stated,
            )
        )
    elif any(s < est.lower for s in stated):
        findings.append(
            _finding(
                "scale",
                "low",
                "The paired counts differ more than the stated noise explains",
                base + f" The manifest states {', '.join(f'{s:g}' for s in stated)}, below the "
                "interval: the pairs probably do not share one raw value (people who do not tap "
                "off, trips across bins), or pairs near the threshold were kept.",
                "Check the pairs named; raise --min-count to drop pairs near the threshold.",
                command=_audit_command(
                    release, routes, _min_count_hint(release, tables, min_count)
                ),
                recovered=est.scale,
                stated=stated,
            )
        )
    else:
        findings.append(
            _finding(
                "scale",
                "info",
                "The recovered noise scale matches the manifest",
                base + f" The manifest states {', '.join(f'{s:g}' for s in stated)}. Anyone can "
                "recover it, which is fine: differential privacy does not rely on its secrecy.",
                "None needed; keep publishing the parameters.",
                recovered=est.scale,
                stated=stated,
            )
        )
    return section, findings


# --------------------------------------------------------------------------- zeros
def _zeros_section(release: AuditedRelease) -> tuple[dict[str, Any], list[dict]]:
    checks = check_zeros(release)
    findings = []
    for c in checks:
        where = f"'{c.label}' ({c.mechanism}, applied {c.applications}x)"
        if c.zeros_perturbed is True:
            findings.append(
                _finding(
                    "zeros",
                    "info",
                    f"{c.label}: cells absent from the input can be released",
                    f"{where} perturbs every cell of its public domain, zeros included, so a "
                    "released cell does not prove that anyone was there.",
                    "None needed.",
                    label=c.label,
                )
            )
        elif c.zeros_perturbed is None:
            findings.append(
                _finding(
                    "zeros",
                    "medium",
                    f"{c.label}: the manifest does not say whether zero counts were perturbed",
                    f"{where}: if only non-zero counts were perturbed, a released cell proves "
                    "presence (Culnane et al. 2017, Theorem 1) and the release cannot be pure "
                    "epsilon-DP.",
                    "Record in the manifest whether every cell of the public domain was perturbed.",
                    label=c.label,
                )
            )
        elif c.delta_lower_bound is not None:
            groups = ", ".join(f"{g}: {p:.2g}" for g, p in c.group_delta.items())
            detail = (
                f"{where} perturbs only counts present in the data (threshold {c.threshold:g}, "
                f"scale {c.scale:g}). A released cell can only come from a non-zero count, so it "
                "proves that at least one person was there. The chance that one person alone in "
                f"a cell is revealed is {c.delta_lower_bound:.3g} (Theorem 1 of Culnane et al. "
                f"2017 as published: "
                f"{c.theorem1_delta:.3g}); for groups of {groups}."
            )
            if c.understated:
                findings.append(
                    _finding(
                        "zeros",
                        "high",
                        f"{c.label}: claims delta = {c.claimed_delta:g}, but Theorem 1 proves "
                        f"delta >= {c.delta_lower_bound:.3g}",
                        detail + " No epsilon-DP claim can hold for this table.",
                        "Perturb every cell of the public domain, zeros included (transit-synth "
                        "marginals --pure), or state the delta honestly.",
                        command=marginals_command(release, "pure"),
                        label=c.label,
                        theorem1_delta=c.theorem1_delta,
                        delta_lower_bound=c.delta_lower_bound,
                    )
                )
            else:
                findings.append(
                    _finding(
                        "zeros",
                        "low",
                        f"{c.label}: a released cell proves presence with probability "
                        f"<= {c.delta_lower_bound:.3g} (accounted for in its delta)",
                        detail + f" The manifest's delta {c.claimed_delta:.3g} covers it: the "
                        "release is (epsilon, delta)-DP by design.",
                        "Acceptable if that probability is; for pure epsilon-DP perturb zeros "
                        "too (transit-synth marginals --pure).",
                        command=marginals_command(release, "pure"),
                        label=c.label,
                        theorem1_delta=c.theorem1_delta,
                        delta_lower_bound=c.delta_lower_bound,
                    )
                )
    bounds = [c.theorem1_delta for c in checks if c.theorem1_delta is not None]
    exact = [c.delta_lower_bound for c in checks if c.delta_lower_bound is not None]
    section = {
        "checks": [c.to_dict() for c in checks],
        "theorem1_delta": max(bounds) if bounds else None,
        "delta_lower_bound": max(exact) if exact else None,
    }
    return section, findings


# --------------------------------------------------------------------------- differencing
def _differencing_section(
    release: AuditedRelease, confidence: float
) -> tuple[dict[str, Any], list[dict]]:
    rows = difference_tables(release, confidence=confidence)
    findings = []
    section: dict[str, Any] = {"confidence": confidence, "skipped": rows.attrs["skipped"]}
    pairs = []
    for (fine, coarse), g in rows.groupby(["fine", "coarse"], sort=True):
        flagged = g.loc[g["flagged"]].sort_values("lower", ascending=False)
        info: dict[str, Any] = {
            "fine": fine,
            "coarse": coarse,
            "rows": len(g),
            "flagged": len(flagged),
            "flagged_family": int(g["flagged_family"].sum()),
            "derived": bool(g["derived"].all()),
            "expected_false_flags": len(g) * (1 - confidence) / 2,  # one-sided, no leak
            "flagged_rows": flagged.head(_MAX_LISTED).to_dict(orient="records"),
        }
        pairs.append(info)
        what = f"'{coarse}' against '{fine}'"
        if info["derived"]:
            off = int((g["estimate"] != 0).sum())
            if off:
                findings.append(
                    _finding(
                        "differencing",
                        "medium",
                        f"{coarse}: stated as summed from {fine}, but {off} row(s) do not add up",
                        f"The manifest says {what} is derived, yet {off} of {len(g)} coarse "
                        "counts differ from the sum of the released fine cells.",
                        "Re-derive the coarse table from the released fine table "
                        "(transit-synth marginals --consistent does).",
                        command=marginals_command(release, "consistent"),
                        **{k: v for k, v in info.items() if k != "flagged_rows"},
                    )
                )
            else:
                findings.append(
                    _finding(
                        "differencing",
                        "info",
                        f"{coarse} is the sum of {fine}: nothing to recover",
                        f"Every one of the {len(g)} counts of {what} equals the sum of the "
                        "released fine cells, so differencing reveals nothing about suppressed "
                        "cells (the consistent release that Culnane et al. 2017, section 4, "
                        "recommend).",
                        "None needed.",
                        **{k: v for k, v in info.items() if k != "flagged_rows"},
                    )
                )
            continue
        chance = len(g) * (1 - confidence) / 2
        if info["flagged_family"] or len(flagged) > chance + 2 * chance**0.5:
            top = flagged.iloc[0]
            findings.append(
                _finding(
                    "differencing",
                    "medium" if info["flagged_family"] else "low",
                    f"{len(flagged)} suppressed total(s) of {fine} recovered from {coarse}",
                    f"Differencing {what} ({len(g)} rows) estimates the total of the suppressed "
                    f"cells of a row; in {len(flagged)} rows the {confidence:.0%} interval is "
                    f"above zero ({info['flagged_family']} remain so after a Bonferroni "
                    f"correction over the rows; about {info['expected_false_flags']:.1f} would "
                    f"by chance). Largest: {top['cell']}: {int(top['estimate'])} people "
                    f"(between {top['lower']:g} and {top['upper']:g}) in cells the fine table "
                    "suppressed. This stays within the stated epsilon (the tables' budgets "
                    "add up), but suppression does not hide those cells.",
                    "Release only the fine table with noise and derive the coarse tables by "
                    "summing it (transit-synth marginals --consistent).",
                    command=marginals_command(release, "consistent"),
                    **{k: v for k, v in info.items() if k != "flagged_rows"},
                )
            )
        else:
            findings.append(
                _finding(
                    "differencing",
                    "info",
                    f"{coarse} vs {fine}: no suppressed total recovered",
                    f"{len(flagged)} of the {len(g)} rows of {what} have an interval above zero, "
                    f"no more than chance gives (about {chance:.1f}), and none after a Bonferroni "
                    "correction over the rows.",
                    "None needed.",
                    **{k: v for k, v in info.items() if k != "flagged_rows"},
                )
            )
    section["pairs"] = pairs
    section["flagged"] = int(rows["flagged"].sum()) if len(rows) else 0
    return section, findings


# --------------------------------------------------------------------------- entry point
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
    scale, f1 = _scale_section(release, routes, pairs, model, confidence, min_count)
    zeros, f2 = _zeros_section(release)
    diff, f3 = _differencing_section(release, confidence)
    f4 = consistency_findings(release.manifest)
    report = base_report(str(Path(path)))
    report.update(
        {
            "release_kind": release.parameters.get("release")
            or release.parameters.get("generator"),
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


# --------------------------------------------------------------------------- HTML
_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:.3em .6em}
th{background:#eee}.high{background:#f8d0d0}.medium{background:#fbe8c8}.low{background:#eef3d6}
.info{background:#e4eef8}img{max-width:100%}code{background:#f4f4f4;padding:0 .2em}
code span{white-space:nowrap}td:last-child{min-width:20em}
"""


def _png(fig: Any) -> str:
    import base64
    import io

    import matplotlib
    from matplotlib.text import Text

    buf = io.BytesIO()
    for text in fig.findobj(Text):  # user strings (stop, release names) are never mathtext
        text.set_parse_math(False)
    with matplotlib.rc_context({"text.parse_math": False}):  # tick labels made while drawing
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(str(fig.get_label()))}" src="data:image/png;base64,{data}">'


def _scale_figure(scale: dict[str, Any]) -> str:
    from matplotlib.figure import Figure

    from synth.audit.scale import difference_logpmf

    diffs = np.asarray(scale.get("differences") or [])
    est = scale.get("estimate")
    if diffs.size == 0 or est is None:
        return ""
    fig = Figure(figsize=(6, 3.4), label="Differences of paired counts")
    ax = fig.add_subplot(1, 1, 1)
    m = int(np.abs(diffs).max())
    x = np.arange(-m, m + 1)
    ax.bar(x, [(diffs == v).mean() for v in x], color="#9bb", label="observed")
    model = scale["model"]
    ax.plot(x, np.exp(difference_logpmf(x, est["scale"], model)), "k.-", label=f"{model} fit")
    ax.set_xlabel("difference of paired counts")
    ax.set_ylabel("frequency")
    ax.legend()
    return _png(fig)


def _differencing_figure(diff: dict[str, Any]) -> str:
    from matplotlib.figure import Figure

    rows = [r for p in diff.get("pairs", []) for r in p["flagged_rows"]]
    rows = sorted(rows, key=lambda r: -r["lower"])[:_MAX_LISTED][::-1]
    if not rows:
        return ""
    fig = Figure(figsize=(7, 0.3 * len(rows) + 1.2), label="Recovered suppressed totals")
    ax = fig.add_subplot(1, 1, 1)
    y = np.arange(len(rows))
    est = np.array([r["estimate"] for r in rows], dtype=float)
    lo = np.array([r["lower"] for r in rows], dtype=float)
    hi = np.array([r["upper"] for r in rows], dtype=float)
    ax.errorbar(est, y, xerr=[est - lo, hi - est], fmt="o", color="#a33", label="exact interval")
    t5 = np.array([[r["t5_lower"], r["t5_upper"]] for r in rows], dtype=float)
    ax.plot(t5[:, 0], y, "|", color="#555", label="Theorem 5 (too narrow)")
    ax.plot(t5[:, 1], y, "|", color="#555")
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(y, [f"{r['coarse']}: {r['cell']}" for r in rows], fontsize=7)
    ax.set_xlabel("people in suppressed cells")
    ax.legend(fontsize=7)
    return _png(fig)


def _rows(header: list[str], rows: list[list[Any]], classes: list[str] | None = None) -> str:
    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else html.escape(str(v))

    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        f'<tr class="{classes[i] if classes else ""}">'
        + "".join(f"<td>{cell(v)}</td>" for v in r)
        + "</tr>"
        for i, r in enumerate(rows)
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _findings_table(findings: list[dict[str, Any]]) -> str:
    """Severity-coloured findings; a remedy's command (one the CLI accepts) under its text."""
    e = html.escape
    head = "".join(f"<th>{h}</th>" for h in ("severity", "check", "finding", "detail", "remedy"))
    rows = []
    for f in findings:
        remedy = e(str(f["remedy"]))
        if f.get("command"):  # one unbreakable span per word: wraps between words only
            words = shlex.split(str(f["command"]))
            spans = " ".join(f"<span>{e(shlex.quote(w))}</span>" for w in words)
            remedy += f"<br><code>{spans}</code>"
        cells = [e(str(f[k])) for k in ("severity", "check", "title", "detail")] + [remedy]
        tds = "".join(f"<td>{c}</td>" for c in cells)
        rows.append(f'<tr class="{e(str(f["severity"]))}">{tds}</tr>')
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def render_html(report: dict[str, Any]) -> str:
    """The report as one self-contained HTML page (figures embedded)."""
    e = html.escape
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>Privacy audit</title>"
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Privacy audit of {e(report.get('release') or 'a mechanism')}</h1>",
        f"<p>{e(str(report.get('audited_by')))}, {e(str(report.get('generated')))}. Findings: "
        + ", ".join(f"{n} {s}" for s, n in report["counts"].items())
        + ".</p>",
        "<h2>Findings</h2>",
        _findings_table(report["findings"]),
    ]
    commands = " ".join(f.get("command") or "" for f in report["findings"])
    used = [k for k in PLACEHOLDERS if re.search(rf"\b{k}\b", commands)]
    if used:
        parts.append(
            "<p>In the commands: "
            + "; ".join(f"<code>{k}</code> is {e(PLACEHOLDERS[k])}" for k in used)
            + ".</p>"
        )
    if (report.get("scale") or {}).get("run") is False:
        parts.append(
            "<p>Noise-scale recovery was not run: it needs counts that share one raw value, "
            "such as the tap-ons and tap-offs of a point-to-point service "
            "(<code>--route ORIGIN DESTINATION MINUTES</code>, repeatable) or pairs listed in a "
            "file (<code>--pairs FILE</code>).</p>"
        )
    scale = report.get("scale") or {}
    if scale.get("estimate"):
        parts.append("<h2>Noise scale from paired counts (Culnane et al. 2017, section 2)</h2>")
        parts.append(_scale_figure(scale))
    zeros = report.get("zeros") or {}
    if zeros.get("checks"):
        parts.append("<h2>Zero counts (Culnane et al. 2017, section 3, Theorem 1)</h2>")
        parts.append(
            _rows(
                [
                    "spend",
                    "zeros perturbed",
                    "threshold",
                    "scale",
                    "claimed delta",
                    "Theorem 1 delta",
                    "exact bound",
                ],
                [
                    [
                        c["label"],
                        c["zeros_perturbed"],
                        c["threshold"],
                        c["scale"],
                        c["claimed_delta"],
                        c["theorem1_delta"],
                        c["delta_lower_bound"],
                    ]
                    for c in zeros["checks"]
                ],
            )
        )
    diff = report.get("differencing") or {}
    if diff.get("pairs"):
        parts.append(
            "<h2>Differencing across tables (Culnane et al. 2017, section 4, Appendix E)</h2>"
        )
        parts.append(
            _rows(
                ["coarse", "fine", "rows", "flagged", "Bonferroni", "derived"],
                [
                    [
                        p["coarse"],
                        p["fine"],
                        p["rows"],
                        p["flagged"],
                        p["flagged_family"],
                        p["derived"],
                    ]
                    for p in diff["pairs"]
                ],
            )
        )
        parts.append(_differencing_figure(diff))
    emp = report.get("empirical")
    if emp:
        parts.append("<h2>Empirical differential privacy</h2>")
        parts.append(_rows(list(emp)[:9], [[emp[k] for k in list(emp)[:9]]]))
    parts.append("</body></html>")
    return "\n".join(parts)


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
