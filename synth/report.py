"""Self-contained HTML report of an evaluation (design.md section 6).

Everything is embedded: matplotlib figures as PNG data URIs, tables as HTML, each release's privacy
manifest as JSON. For sequences the figures follow the KDD 2012 paper (004): average relative error
vs the maximum query length per subset (Figure 3), error vs query length, and TP vs k with the TP /
FP(FD) table (Table 3). For trips: the k-marginal score, one-way TV distances, time of day, trips
per individual and the OD error per time bin. Several releases appear side by side.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from synth import __version__
from synth.io import atomic_path

__all__ = [
    "evaluation_sections",
    "manifest_section",
    "render_page",
    "render_report",
    "table_section",
    "write_html",
    "write_report",
]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222}
table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #bbb;padding:.25em .6em;text-align:right}
th{background:#eee}td:first-child,th:first-child{text-align:left}img{max-width:100%}
pre{background:#f6f6f6;padding:1em;overflow:auto;font-size:.85em}
"""


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(str(fig.get_label()))}" src="data:image/png;base64,{data}">'


def _figure(label: str, n_axes: int = 1) -> tuple[Figure, list[Any]]:
    fig = Figure(figsize=(5.2 * n_axes, 3.6), label=label)
    axes = [fig.add_subplot(1, n_axes, i + 1) for i in range(n_axes)]
    return fig, axes


def _table(header: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else html.escape(str(v))

    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _sequence_sections(results: dict[str, Any]) -> list[str]:
    releases: dict[str, Any] = results["releases"]
    out: list[str] = []
    workloads = list(next(iter(releases.values()))["count_queries"])
    fig, axes = _figure("Average relative error vs max query length", len(workloads))
    fig_len, axes_len = _figure("Average relative error vs query length", len(workloads))
    rows = []
    for ax, ax_len, w in zip(axes, axes_len, workloads, strict=True):
        for name, rel in releases.items():
            cq = rel["count_queries"][w]
            xs = [s["max_length"] for s in cq["by_subset"]]
            ys = [s["mean_relative_error"] for s in cq["by_subset"]]
            ax.plot(range(len(xs)), ys, marker="o", label=name)
            ax.set_xticks(range(len(xs)), [str(x) for x in xs])
            lengths = sorted(cq["by_length"], key=int)
            ax_len.plot(
                [int(k) for k in lengths],
                [cq["by_length"][k] for k in lengths],
                marker=".",
                label=name,
            )
            rows.append([name, w, *ys, cq["mean_relative_error"], cq["fraction_empty_queries"]])
        for a, xl in ((ax, "max |Q| of the subset"), (ax_len, "query length |Q|")):
            a.set_title(f"{w} workload")
            a.set_xlabel(xl)
            a.set_ylabel("average relative error")
            a.legend()
    subset_hdr = [
        f"max|Q|={s['max_length']}"
        for s in releases[next(iter(releases))]["count_queries"][workloads[0]]["by_subset"]
    ]
    out.append("<h2>Count queries (paper 004, Definition 3.4, section 5.1)</h2>")
    params = results["parameters"]
    out.append(
        f"<p>{params['n_queries']} queries per workload, h = {params['height']}, sanity bound "
        f"{params['sanity_fraction']:.2%} of |D|, universe of {params['universe_size']} locations "
        f"({html.escape(params['universe_source'])}), seed {params['seed']}.</p>"
    )
    out.append(_png(fig) + _png(fig_len))
    out.append(_table(["release", "workload", *subset_hdr, "all", "share of empty queries"], rows))
    fig, axes = _figure("True positives vs k")
    ax = axes[0]
    rows = []
    for name, rel in releases.items():
        ks = [p["k"] for p in rel["patterns"]]
        ax.plot(ks, [p["tp"] for p in rel["patterns"]], marker="o", label=name)
        rows.extend([name, p["k"], p["tp"], p["fp"], p["fd"]] for p in rel["patterns"])
    ax.plot(ks, ks, linestyle=":", color="grey", label="ideal (TP = k)")
    ax.set_xlabel("k")
    ax.set_ylabel("true positives")
    ax.legend()
    out.append("<h2>Top-k frequent sequential patterns (section 3.3, Table 3)</h2>")
    out.append(_png(fig))
    out.append(_table(["release", "k", "TP", "FP", "FD"], rows))
    top = [[" → ".join(p), s] for p, s in results["original"]["top_patterns"]]
    out.append(
        "<h3>Most frequent patterns of the original</h3>" + _table(["pattern", "support"], top)
    )
    return out


def _trip_sections(results: dict[str, Any]) -> list[str]:
    releases: dict[str, Any] = results["releases"]
    names = list(releases)
    out = ["<h2>Marginals (NIST temporal map challenge k-marginal score)</h2>"]
    rows = [
        [
            n,
            r["n_trips"],
            r["k_marginal"]["score"],
            r["marginals"]["mean_one_way"],
            r["marginals"]["mean_two_way"] if r["marginals"]["mean_two_way"] is not None else "-",
            r["marginals"]["max_two_way"] if r["marginals"]["max_two_way"] is not None else "-",
        ]
        for n, r in releases.items()
    ]
    out.append(
        _table(
            [
                "release",
                "trips",
                "k-marginal score (max 1000)",
                "mean 1-way TV",
                "mean 2-way TV",
                "max 2-way TV",
            ],
            rows,
        )
    )
    fig, axes = _figure("One-way TV distance per column")
    ax = axes[0]
    columns = results["parameters"]["columns"]
    width = 0.8 / len(names)
    for i, (n, r) in enumerate(releases.items()):
        ax.bar(
            [j + i * width for j in range(len(columns))],
            [r["marginals"]["one_way"][c] for c in columns],
            width,
            label=n,
        )
    ax.set_xticks(
        [j + 0.4 - width / 2 for j in range(len(columns))], columns, rotation=60, ha="right"
    )
    ax.set_ylabel("TV distance")
    ax.legend()
    out.append(_png(fig))
    panels = [
        ("time_of_day", "Time of day", "hour of day"),
        ("trips_per_individual", "Trips per individual", "trips"),
    ]
    for key, title, xlabel in panels:
        if key not in releases[names[0]]:
            continue
        fig, axes = _figure(title)
        ax = axes[0]
        first = releases[names[0]][key]
        ax.plot(first["values"], first["original"], color="black", linewidth=2, label="original")
        for n, r in releases.items():
            ax.plot(
                r[key]["values"],
                r[key]["synthetic"],
                marker=".",
                label=f"{n} (TV {r[key]['tv']:.3f})",
            )
        ax.set_xlabel(xlabel)
        ax.set_ylabel("share")
        ax.legend()
        out.append(f"<h2>{title}</h2>" + _png(fig))
    if "od" in releases[names[0]]:
        fig, axes = _figure("OD matrix TV distance per hour")
        ax = axes[0]
        for n, r in releases.items():
            ax.plot(
                [b["bin_start_hour"] for b in r["od"]],
                [b["tv"] for b in r["od"]],
                marker=".",
                label=n,
            )
        ax.set_xlabel("hour of day")
        ax.set_ylabel("TV distance of the OD matrix")
        ax.legend()
        out.append("<h2>Origin-destination matrices</h2>" + _png(fig))
    if results.get("skipped"):
        out.append("<p>Not computed: " + html.escape("; ".join(results["skipped"])) + "</p>")
    return out


def evaluation_sections(results: dict[str, Any]) -> list[str]:
    """HTML sections (figures and tables) of ``evaluate_sequences`` / ``evaluate_trips`` results."""
    kind = results["kind"]
    names = ", ".join(html.escape(n) for n in results["releases"])
    head = f"<p>Releases compared ({html.escape(kind)}): {names}.</p>"
    body = _sequence_sections(results) if kind == "sequences" else _trip_sections(results)
    return [head, *body]


def manifest_section(name: str, manifest: dict[str, Any]) -> str:
    """A release's privacy manifest, shown as JSON."""
    return (
        f"<h2>Privacy manifest: {html.escape(name)}</h2><pre>"
        + html.escape(json.dumps(manifest, indent=2, default=str), quote=False)
        + "</pre>"
    )


def table_section(title: str, header: list[str], rows: list[list[Any]]) -> str:
    """A titled HTML table."""
    return f"<h2>{html.escape(title)}</h2>" + _table(header, rows)


def render_page(title: str, sections: list[str], *, notice: str | None = None) -> str:
    """A self-contained HTML page from sections of HTML; ``notice`` (e.g. the internal-only
    sentence) is the first line of the body, above the title."""
    banner = "" if notice is None else f"<p><strong>{html.escape(notice)}</strong></p>"
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>{banner}<h1>{html.escape(title)}</h1>"
        f"<p>transit-synth {__version__}.</p>" + "\n".join(sections) + "</body></html>\n"
    )


def render_report(
    results: dict[str, Any],
    manifests: Mapping[str, dict[str, Any]] | None = None,
    *,
    notice: str | None = None,
) -> str:
    """HTML text of the report of ``evaluate_sequences`` / ``evaluate_trips`` results."""
    sections = evaluation_sections(results)
    sections.extend(manifest_section(name, m) for name, m in (manifests or {}).items())
    return render_page(f"transit-synth evaluation ({results['kind']})", sections, notice=notice)


def write_html(text: str, path: str | os.PathLike[str]) -> Path:
    """Write an HTML page atomically to ``path``."""
    target = Path(path)
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return target


def write_report(
    results: dict[str, Any],
    path: str | os.PathLike[str],
    *,
    manifests: Mapping[str, dict[str, Any]] | None = None,
    notice: str | None = None,
) -> Path:
    """Write the report atomically to ``path`` (``notice``: a banner above the title)."""
    return write_html(render_report(results, manifests, notice=notice), path)
