"""The audit report as one self-contained HTML page (see :mod:`synth.audit.report`)."""

from __future__ import annotations

import html
import re
import shlex
from typing import Any

import numpy as np

from synth.audit.findings import MAX_LISTED, PLACEHOLDERS

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
    rows = sorted(rows, key=lambda r: -r["lower"])[:MAX_LISTED][::-1]
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


def _zeros_table(checks: list[dict[str, Any]]) -> str:
    return _rows(
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
            for c in checks
        ],
    )


def _pairs_table(pairs: list[dict[str, Any]]) -> str:
    return _rows(
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
            for p in pairs
        ],
    )


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
        parts.append(_zeros_table(zeros["checks"]))
    diff = report.get("differencing") or {}
    if diff.get("pairs"):
        parts.append(
            "<h2>Differencing across tables (Culnane et al. 2017, section 4, Appendix E)</h2>"
        )
        parts.append(_pairs_table(diff["pairs"]))
        parts.append(_differencing_figure(diff))
    emp = report.get("empirical")
    if emp:
        parts.append("<h2>Empirical differential privacy</h2>")
        parts.append(_rows(list(emp)[:9], [[emp[k] for k in list(emp)[:9]]]))
    parts.append("</body></html>")
    return "\n".join(parts)
