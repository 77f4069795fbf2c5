"""The evaluation report: one self-contained HTML page for the data holder (design.md section 6).

The page compares synthetic releases with the ORIGINAL data, so it is an internal file: its first
heading says so (:data:`INTERNAL_NOTICE`) and its file name starts with ``private-``. It opens with
a summary, one row per release: what it is, its privacy unit, epsilon and delta in words, and a
one-line verdict against the original with the figure behind it. Then, per evaluation, small
figures (labels computed from the data) and tables: for sequences the measures of Chen et al.
2012 (count-query error per query-length subset, their Figure 3; top-k sequential patterns, TP and
FD, their Table 3); for trips the k-marginal score of the NIST temporal map challenge, one-way
distances, the time distribution, trips per individual and the origin-destination error. Each
release's privacy manifest appears once, collapsed, as a table of its spends.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from synth import __version__
from synth.internal import INTERNAL_NOTICE, PRIVATE_PREFIX
from synth.io import atomic_path

__all__ = [
    "GLOSSARY",
    "INTERNAL_NOTICE",
    "REPORT_FILE",
    "RESULTS_FILE",
    "ReleaseEntry",
    "evaluation_sections",
    "glossary",
    "manifest_section",
    "privacy_in_words",
    "reference_section",
    "reference_verdict",
    "release_description",
    "render_demo",
    "render_page",
    "render_report",
    "summary_section",
    "table_section",
    "verdict",
    "write_html",
    "write_report",
]

#: File names of the internal report and results (``private-`` prefix; their first heading / first
#: JSON key is :data:`synth.internal.INTERNAL_NOTICE`).
REPORT_FILE = f"{PRIVATE_PREFIX}report.html"
RESULTS_FILE = f"{PRIVATE_PREFIX}evaluation.json"
#: Name the demo gives the non-private baseline of a prefix-tree release.
NO_PRIVACY_PREFIX = "eps=inf"

#: The glossary line's terms: (kinds of evaluation they belong to, HTML text).
GLOSSARY: dict[str, tuple[frozenset[str], str]] = {
    "Truncated ceiling": (
        frozenset({"sequences"}),
        "(the line <i>eps=inf (truncated)</i>): the original cut to the first h locations of "
        "each sequence with no noise, i.e. epsilon = infinity; the best any release of height h "
        "can score, so the gap to it is the price of privacy.",
    ),
    "TP": (
        frozenset({"sequences"}),
        "(true positives): of the k most frequent travel patterns of the original, how many are "
        "also among the k most frequent of the release.",
    ),
    "FD": (frozenset({"sequences"}), "(false drops): those missing (k - TP)."),
    "Count query": (
        frozenset({"sequences"}),
        ": how many passengers' sequences contain a given set of locations; the error is "
        "relative to the true count.",
    ),
    "k-marginal score": (
        frozenset({"trips"}),
        ": 1000 x (1 - average TV distance) over random 2-column distributions (NIST temporal "
        "map challenge); 1000 means identical distributions.",
    ),
    "TV distance": (
        frozenset({"trips", "marginals"}),
        "(total variation): half the summed absolute difference of two distributions; "
        "0 = identical, 1 = disjoint.",
    ),
    "Epsilon, delta": (
        frozenset({"sequences", "trips", "marginals"}),
        ": adding or removing one privacy unit changes the probability of any output by at most "
        "a factor e<sup>epsilon</sup>, except with probability delta.",
    ),
}


def glossary(kinds: set[str]) -> str:
    """The glossary line: the terms of the evaluations of ``kinds`` (sequences, trips,
    marginals)."""
    return " ".join(
        f"<b>{term}</b> {text}".replace("</b> :", "</b>:")
        for term, (used, text) in GLOSSARY.items()
        if used & kinds
    )


_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:84em;color:#222;line-height:1.35}
h1.internal{background:#b00020;color:#fff;padding:.5em .8em;font-size:1.15em;border-radius:4px}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:2px solid #ddd;padding-bottom:.15em}
table{border-collapse:collapse;margin:.6em 0}
td,th{border:1px solid #bbb;padding:.25em .6em;text-align:right;vertical-align:top}
th{background:#eee}td:first-child,th:first-child{text-align:left}td.text,th.text{text-align:left}
table.summary td,table.summary th,table.params td{text-align:left}img{max-width:100%}
details{margin:.5em 0;background:#f7f7f7;padding:.3em .8em;border-radius:4px}
summary{cursor:pointer;font-weight:600}p.note{color:#444;font-size:.92em}
p.glossary{font-size:.88em;color:#333;background:#f4f7fb;padding:.6em .8em;border-radius:4px}
"""

_GENERATORS = {
    "prefixtree": "passenger sequences from a noisy prefix tree (Chen et al. 2012)",
    "archetypes": "trips from GMM archetypes (NIST temporal map challenge, GooseDP team)",
    "opal-marginals": "six marginal tables of tap-ons and tap-offs, stability-based histograms "
    "(Asghar et al. 2018, the Opal release)",
}


@dataclass
class ReleaseEntry:
    """One release in the report's summary.

    ``results``: the ``evaluate_sequences`` / ``evaluate_trips`` dict in which the release is
    ``key``; ``verdict`` overrides the verdict computed from it (e.g. a marginal release judged by
    the reference check).
    """

    name: str
    title: str
    manifest: Mapping[str, Any] | None = None
    results: Mapping[str, Any] | None = None
    key: str | None = None
    verdict: str | None = None


# --------------------------------------------------------------------------- formatting
def _fmt(v: Any) -> str:
    """A table cell: numbers short and readable, never ``nan`` (shown as a dash)."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if v.is_integer() and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return html.escape(str(v))


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(v)}</td>" for v in r) + "</tr>" for r in rows)
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><tr>{head}</tr>{body}</table>"


def _png(fig: Figure) -> str:
    import matplotlib
    from matplotlib.text import Text

    buf = io.BytesIO()
    for text in fig.findobj(Text):  # user strings (stop, release names) are never mathtext
        text.set_parse_math(False)
    with matplotlib.rc_context({"text.parse_math": False}):  # tick labels made while drawing
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(str(fig.get_label()))}" src="data:image/png;base64,{data}">'


def _figure(label: str, n_axes: int) -> tuple[Figure, list[Any]]:
    fig = Figure(figsize=(4.3 * n_axes, 3.1), label=label, layout="constrained")
    return fig, [fig.add_subplot(1, n_axes, i + 1) for i in range(n_axes)]


def _share(x: float) -> str:
    return f"{x:.1%}" if x >= 0.001 else f"{x:.2%}"


# --------------------------------------------------------------------------- summary
def _cap(manifest: Mapping[str, Any]) -> tuple[float, float, float]:
    """(epsilon, delta) guaranteed (the cap) and the epsilon actually spent."""
    spent = manifest.get("spent") or {}
    cap = manifest.get("guarantee") or manifest.get("cap") or spent
    return (
        float(cap.get("epsilon", math.nan)),
        float(cap.get("delta", 0.0)),
        float(spent.get("epsilon", math.nan)),
    )


def privacy_in_words(manifest: Mapping[str, Any] | None) -> str:
    """Epsilon and delta of a manifest in a sentence an analyst can read."""
    if not manifest or not (manifest.get("cap") or manifest.get("spent")):
        return "unknown: the release has no privacy manifest"
    eps, delta, spent = _cap(manifest)
    factor = math.exp(eps)
    text = f"epsilon = {eps:g}"
    if spent < eps * (1 - 1e-9):
        text += f" (the budget asked, which is the guarantee; {spent:.3g} spent)"
    shown = f"{factor:.2f}" if factor < 10 else f"{factor:,.0f}"
    unit = str(manifest.get("privacy_unit") or "unit")
    text += f": adding or removing one {unit} changes the chance of any output by at most a "
    text += f"factor of {shown}; "
    if delta == 0:
        text += "delta = 0 (pure differential privacy)"
    else:
        text += f"delta = {delta:.2g} (a 1-in-{round(1 / delta):,} chance that this bound fails)"
    return text


def _unit(manifest: Mapping[str, Any] | None) -> str:
    if not manifest:
        return "unknown"
    unit = str(manifest.get("privacy_unit") or "unknown")
    neighbouring = manifest.get("neighbouring")
    height = (manifest.get("parameters") or {}).get("height")
    if neighbouring and height is not None:  # the prefix tree's "first h locations"
        neighbouring = str(neighbouring).replace(" first h ", f" first {height} ")
    return f"{unit}: {neighbouring}" if neighbouring else unit


def release_description(manifest: Mapping[str, Any] | None) -> str:
    """What a release is, from its manifest's parameters (generator, variant, height)."""
    params = (manifest or {}).get("parameters") or {}
    kind = params.get("generator") or params.get("release")
    text = _GENERATORS.get(str(kind), "a synthetic table")
    if kind == "prefixtree":
        text += f", {params.get('variant')} variant, height {params.get('height')}"
    elif kind == "archetypes":
        text += f", {params.get('n_archetypes')} archetypes"
    elif kind == "opal-marginals":
        text += f", {params.get('mode')} mode, {params.get('bin_minutes')}-minute bins"
    return text


def _baseline(results: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    for name, rel in results["releases"].items():
        if name != key and name.startswith(NO_PRIVACY_PREFIX):
            return rel
    return None


def _sequence_verdict(results: Mapping[str, Any], key: str) -> str:
    rel = results["releases"][key]
    ks = [p["k"] for p in rel["patterns"]]
    k = 100 if 100 in ks else max(ks)
    tp = next(p["tp"] for p in rel["patterns"] if p["k"] == k)
    base = _baseline(results, key)
    error = rel["count_queries"]["popularity"]["mean_relative_error"]
    if base is None:
        return (
            f"top-{k} travel patterns: {tp} of {k} found; count queries: "
            f"{_share(error)} average relative error"
        )
    best = next(p["tp"] for p in base["patterns"] if p["k"] == k)
    best_error = base["count_queries"]["popularity"]["mean_relative_error"]
    return (
        f"top-{k} travel patterns: {tp} found, {best} possible without privacy; count queries: "
        f"{_share(error)} average relative error ({_share(best_error)} without privacy)"
    )


def _trip_verdict(results: Mapping[str, Any], key: str) -> str:
    rel = results["releases"][key]
    one_way = rel["marginals"]["one_way"]
    worst = max(one_way, key=one_way.get) if one_way else None
    text = f"k-marginal score {rel['k_marginal']['score']:.0f} of 1000"
    if worst is not None:
        text += f"; column furthest from the original: {worst} (TV {one_way[worst]:.2f})"
    return text


def verdict(results: Mapping[str, Any], key: str) -> str:
    """One line judging release ``key`` of ``results`` against the original, with its figure."""
    if results["kind"] == "sequences":
        return _sequence_verdict(results, key)
    return _trip_verdict(results, key)


def reference_verdict(table: Any, beta: float = 0.05) -> str:
    """One line from an ``against_reference`` table: cells outside the SBH error bound."""
    rows = table[table["compared"]] if "compared" in table else table
    cells = int(rows["cells"].sum())
    outside = int(rows["outside_bound"].sum())
    if cells == 0:
        return "no table could be compared"
    return (
        f"{outside:,} of {cells:,} cells ({outside / cells:.1%}) outside the "
        f"{1 - beta:.0%} error bound (at most {beta:.0%} expected)"
    )


def summary_section(entries: Sequence[ReleaseEntry]) -> str:
    """The opening table: per release, what it is, unit, epsilon/delta in words, verdict."""
    rows = []
    kinds = {str(e.results["kind"]) if e.results else "marginals" for e in entries}
    for e in entries:
        line = e.verdict
        if line is None and e.results is not None and e.key is not None:
            line = verdict(e.results, e.key)
        what = f"<b>{html.escape(e.title)}</b><br>{html.escape(release_description(e.manifest))}"
        unit, privacy = _unit(e.manifest), privacy_in_words(e.manifest)
        if e.manifest is None and e.name.startswith(NO_PRIVACY_PREFIX):
            what = "<b>the original, truncated</b><br>for comparison: not a release"
            unit, privacy = "-", "none (epsilon = infinity): the truncated ceiling, see below"
        rows.append(
            f"<tr><td><b>{html.escape(e.name)}</b></td><td>{what}</td>"
            f"<td>{html.escape(unit)}</td><td>{html.escape(privacy)}</td>"
            f'<td class="verdict">{html.escape(line or "not evaluated")}</td></tr>'
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("release", "what it is", "privacy unit", "privacy", "against the original")
    )
    return (
        "<h2>Summary</h2>"
        f'<table class="summary"><tr>{head}</tr>{"".join(rows)}</table>'
        f'<p class="glossary">{glossary(kinds)}</p>'
    )


# --------------------------------------------------------------------------- sequences
def _sequence_sections(results: Mapping[str, Any]) -> list[str]:
    releases: Mapping[str, Any] = results["releases"]
    params = results["parameters"]
    workloads = list(next(iter(releases.values()))["count_queries"])
    fig, axes = _figure("Count-query error and top-k patterns", len(workloads) + 1)
    for ax, w in zip(axes, workloads, strict=False):
        for name, rel in releases.items():
            subsets = rel["count_queries"][w]["by_subset"]
            xs = [str(s["max_length"]) for s in subsets]
            ax.plot(xs, [s["mean_relative_error"] for s in subsets], marker="o", label=name)
        ax.set_title(f"count queries, {w} workload")
        ax.set_xlabel("longest query in the subset (locations)")
        ax.set_ylabel("average relative error")
        ax.legend(fontsize=8)
    ax = axes[-1]
    ks: list[int] = []
    for name, rel in releases.items():
        ks = [p["k"] for p in rel["patterns"]]
        ax.plot(ks, [p["tp"] for p in rel["patterns"]], marker="o", label=name)
    ax.plot(ks, ks, linestyle=":", color="grey", label="all found (TP = k)")
    ax.set_title("top-k travel patterns")
    ax.set_xlabel("k (patterns compared)")
    ax.set_ylabel("true positives (TP)")
    ax.legend(fontsize=8)
    ks = list(params["ks"])
    rows = []
    for name, rel in releases.items():
        cq = rel["count_queries"]
        tp = {p["k"]: p for p in rel["patterns"]}
        rows.append(
            [
                name,
                rel["n_sequences"],
                *(_share(cq[w]["mean_relative_error"]) for w in workloads),
                *(f"{tp[k]['tp']} (FD {tp[k]['fd']})" for k in ks if k in tp),
            ]
        )
    header = [
        "release",
        "sequences",
        *(f"count-query error ({w})" for w in workloads),
        *(f"TP of top-{k}" for k in ks),
    ]
    top = [[" → ".join(p), s] for p, s in results["original"]["top_patterns"]]
    universe = {
        "given": "the public taxonomy's leaves",
        "original data": "the locations of the original",
    }.get(str(params["universe_source"]), str(params["universe_source"]))
    intro = (
        f"<p>{params['n_queries']:,} random count queries per workload over a universe of "
        f"{params['universe_size']:,} locations ({html.escape(universe)}), "
        f"queries up to h = {params['height']} locations; errors below a sanity bound of "
        f"{params['sanity_fraction']:.1%} of the original's sequences are measured against that "
        f"bound (Chen et al. 2012, section 5.1). The original has "
        f"{results['original']['n_sequences']:,} sequences.</p>"
    )
    return [
        intro,
        _png(fig),
        _table(header, rows),
        "<details><summary>Most frequent travel patterns of the original (exact)</summary>"
        + _table(["pattern", "sequences containing it"], top)
        + "</details>",
    ]


# --------------------------------------------------------------------------- trips
def _panels(results: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The trip panels worth a plot, and a sentence for each one that would be a single point."""
    first = next(iter(results["releases"].values()))
    label = (results["parameters"].get("time_axis") or {}).get("label", "time")
    panels, notes = ["one_way"], []
    sizes = {
        "time_of_day": len(first["time_of_day"]["values"]) if "time_of_day" in first else 0,
        "trips_per_individual": len(first["trips_per_individual"]["values"])
        if "trips_per_individual" in first
        else 0,
        "od": len(first.get("od") or []),
    }
    what = {
        "time_of_day": f"Trips by {label}: every trip has the same value, nothing to plot.",
        "trips_per_individual": "Trips per individual: every individual has the same number of "
        "trips in both tables, nothing to plot.",
        "od": f"Origin-destination matrix: a single {label} value, so one figure: TV distance "
        f"{(first.get('od') or [{'tv': 0.0}])[0]['tv']:.3f}.",
    }
    for panel, size in sizes.items():
        if size > 1:
            panels.append(panel)
        elif size == 1:
            notes.append(what[panel])
    return panels, notes


def _trip_panels(results: Mapping[str, Any], panels: Sequence[str]) -> Figure:
    releases: Mapping[str, Any] = results["releases"]
    first = releases[next(iter(releases))]
    names = list(releases)
    axis = results["parameters"].get("time_axis") or {}
    fig, axes = _figure("Trip distributions", len(panels))
    for ax, panel in zip(axes, panels, strict=True):
        if panel == "one_way":
            columns = list(first["marginals"]["one_way"])
            width = 0.8 / len(names)
            for i, (n, r) in enumerate(releases.items()):
                xs = [j + i * width for j in range(len(columns))]
                ax.bar(xs, [r["marginals"]["one_way"][c] for c in columns], width, label=n)
            ax.set_xticks(
                [j + 0.4 - width / 2 for j in range(len(columns))],
                columns,
                rotation=50,
                ha="right",
                fontsize=8,
            )
            ax.set_title("distance per column")
            ax.set_ylabel("TV distance to the original")
        elif panel == "od":
            for n, r in releases.items():
                xs = [b["bin_start_hour"] for b in r["od"]]
                ax.plot(xs, [b["tv"] for b in r["od"]], marker=".", label=n)
            ax.set_title("origin-destination matrix")
            ax.set_xlabel(axis.get("label", "time"))
            ax.set_ylabel("TV distance to the original")
        else:
            values = first[panel]["values"]
            ax.plot(values, first[panel]["original"], color="black", lw=2, label="original")
            for n, r in releases.items():
                ax.plot(r[panel]["values"], r[panel]["synthetic"], marker=".", label=n)
            if panel == "time_of_day":
                ax.set_title(f"trips by {axis.get('label', 'time')}")
                ax.set_xlabel(axis.get("label", "time"))
            else:
                ax.set_title("trips per individual")
                ax.set_xlabel(f"trips per {results['parameters']['id_column']}")
            ax.set_ylabel("share of trips" if panel == "time_of_day" else "share of individuals")
        ax.legend(fontsize=8)
    return fig


def _trip_sections(results: Mapping[str, Any]) -> list[str]:
    releases: Mapping[str, Any] = results["releases"]
    rows = []
    for n, r in releases.items():
        m = r["marginals"]
        row = [n, r["n_trips"], r["k_marginal"]["score"], m["mean_one_way"], m["mean_two_way"]]
        row += [r["time_of_day"]["tv"] if "time_of_day" in r else None]
        rows.append(row)
    header = [
        "release",
        "trips",
        "k-marginal score (of 1000)",
        "mean TV, 1 column",
        "mean TV, 2 columns",
        "TV of the time distribution",
    ]
    out = [
        f"<p>The original has {results['original']['n_trips']:,} trips; compared columns: "
        f"{html.escape(', '.join(results['parameters']['columns']))}.</p>",
        _table(header, rows),
    ]
    panels, notes = _panels(results)
    out.append(_png(_trip_panels(results, panels)))
    skipped = [*(results.get("skipped") or []), *notes]
    if skipped:
        out.append(
            '<ul class="note">'
            + "".join(f"<li>{html.escape(str(s))}</li>" for s in skipped)
            + "</ul>"
        )
    return out


def evaluation_sections(results: Mapping[str, Any]) -> list[str]:
    """HTML (figures and tables) of ``evaluate_sequences`` / ``evaluate_trips`` results."""
    if results["kind"] == "sequences":
        return _sequence_sections(results)
    return _trip_sections(results)


# --------------------------------------------------------------------------- manifests
_SPEND_COLUMNS = ("mechanism", "unit", "sensitivity", "scale", "threshold", "epsilon", "delta")


def _spend_row(spend: Mapping[str, Any]) -> list[Any]:
    sens = spend.get("sensitivity")
    norm = spend.get("sensitivity_norm")
    sensitivity = f"{_fmt(sens)} ({norm})" if sens is not None and norm else sens
    label = str(spend.get("label", ""))
    if spend.get("group"):
        label += f" [parallel group {spend['group']}]"
    return [label, *(spend.get(c) if c != "sensitivity" else sensitivity for c in _SPEND_COLUMNS)]


def _parameter_rows(params: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for key, value in sorted(params.items()):
        if isinstance(value, Mapping) or (
            isinstance(value, list) and any(isinstance(v, Mapping | list) for v in value)
        ):
            continue  # nested detail stays in manifest.json
        if isinstance(value, list):
            value = ", ".join(_fmt(v) for v in value)
        rows.append([key, value])
    return rows


def manifest_section(name: str, manifest: Mapping[str, Any]) -> str:
    """A release's privacy manifest, collapsed: its spends as a table, then its parameters."""
    spends = list(manifest.get("spends") or [])
    eps, delta, _ = _cap(manifest) if manifest.get("cap") or manifest.get("spent") else (0, 0, 0)
    summary = (
        f"Privacy manifest of {html.escape(name)}: {len(spends)} noisy step(s), "
        f"epsilon {eps:g}, delta {delta:.2g}"
    )
    parts = [f"<details><summary>{summary}</summary>"]
    if manifest.get("neighbouring"):
        parts.append(
            f"<p>Privacy unit <b>{html.escape(str(manifest.get('privacy_unit')))}</b>: "
            f"neighbouring datasets {html.escape(str(manifest['neighbouring']))}.</p>"
        )
    if spends:
        parts.append(
            _table(["step", *_SPEND_COLUMNS], [_spend_row(s) for s in spends], cls="spends")
        )
    if manifest.get("accounting"):
        parts.append(f'<p class="note">Accounting: {html.escape(str(manifest["accounting"]))}.</p>')
    params = manifest.get("parameters") or {}
    if params:
        parts.append(_table(["parameter", "value"], _parameter_rows(params), cls="params"))
    parts.append("</details>")
    return "".join(parts)


# --------------------------------------------------------------------------- reference check
def reference_section(tables: Mapping[str, Any], beta: float = 0.05) -> str:
    """The reference check: per compared table, TV distance and cells outside the SBH bound.

    ``tables`` maps a label to an ``against_reference`` result; tables that could not be compared
    (the microdata has no times, no tap-offs) are named in a sentence, not shown as empty rows.
    """
    rows: list[list[Any]] = []
    notes = []
    for label, frame in tables.items():
        compared = frame[frame["compared"]] if "compared" in frame else frame
        for r in compared.itertuples(index=False):
            share = r.outside_bound / r.cells if r.cells else 0.0
            rows.append(
                [
                    label,
                    r.table,
                    r.cells,
                    r.tvd,
                    r.error_bound,
                    f"{int(r.outside_bound):,} ({share:.1%})",
                    getattr(r, "release_total", None),
                    getattr(r, "microdata_total", None),
                ]
            )
        missing = sorted(set(frame["table"]) - set(compared["table"]))
        if missing:
            notes.append(
                f"<li>{html.escape(label)}: {', '.join(missing)} not compared (the data has no "
                "times or no tap-offs for them).</li>"
            )
    return (
        "<p>Each synthetic table is recounted into the marginal release's tables and compared "
        f"cell by cell; a cell of the release is within its error bound of the truth with "
        f"probability {1 - beta:.0%} (Asghar et al. 2018, Theorem 6), so more than about "
        f"{beta:.0%} of cells outside it means the synthetic data disagree with the private "
        "data. The release suppresses cells below its threshold, so its totals can be far below "
        "the data's, and distances (TV) are large even where the cells agree.</p>"
        + _table(
            [
                "compared",
                "table",
                "cells",
                "TV distance",
                "error bound (count)",
                "cells outside it",
                "total in the release",
                "total in the data compared",
            ],
            rows,
        )
        + (f'<ul class="note">{"".join(notes)}</ul>' if notes else "")
    )


def table_section(title: str, header: list[str], rows: list[list[Any]]) -> str:
    """A titled HTML table."""
    return f"<h2>{html.escape(title)}</h2>" + _table(header, rows)


# --------------------------------------------------------------------------- pages
def render_page(title: str, sections: Sequence[str], *, notice: str | None = None) -> str:
    """A self-contained HTML page; ``notice`` (for an internal page :data:`INTERNAL_NOTICE`) is its
    first heading, above the title."""
    banner = "" if notice is None else f'<h1 class="internal">{html.escape(notice)}</h1>'
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>{banner}<h1>{html.escape(title)}</h1>"
        f'<p class="note">transit-synth {__version__}.</p>'
        + "\n".join(sections)
        + "</body></html>\n"
    )


def render_demo(
    entries: Sequence[ReleaseEntry],
    details: Sequence[tuple[str, Sequence[str]]],
    *,
    title: str = "transit-synth demo",
    intro: str = "",
) -> str:
    """The demo's page: summary, then each (heading, sections) of ``details``, then manifests."""
    sections = [intro, summary_section(entries)] if intro else [summary_section(entries)]
    for heading, body in details:
        sections.append(f"<h2>{html.escape(heading)}</h2>")
        sections.extend(body)
    return render_page(title, sections, notice=INTERNAL_NOTICE)


def render_report(
    results: Mapping[str, Any],
    manifests: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    notice: str = INTERNAL_NOTICE,
) -> str:
    """HTML text of the report of ``evaluate_sequences`` / ``evaluate_trips`` results (internal:
    it compares with the original, so ``notice`` heads it)."""
    manifests = manifests or {}
    entries = [
        ReleaseEntry(
            name=name,
            title=f"synthetic {results['kind']}"
            + ("" if name in manifests else " (no manifest.json beside the table)"),
            manifest=manifests.get(name),
            results=results,
            key=name,
        )
        for name in results["releases"]
    ]
    kind = "passenger sequences" if results["kind"] == "sequences" else "trips"
    sections = [
        summary_section(entries),
        f"<h2>Details: {kind} against the original</h2>",
        *evaluation_sections(results),
        *(manifest_section(n, m) for n, m in manifests.items()),
    ]
    return render_page(f"transit-synth evaluation ({kind})", sections, notice=notice)


def write_html(text: str, path: str | os.PathLike[str]) -> Path:
    """Write an HTML page atomically to ``path``."""
    target = Path(path)
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return target


def write_report(
    results: Mapping[str, Any],
    path: str | os.PathLike[str],
    *,
    manifests: Mapping[str, Mapping[str, Any]] | None = None,
    notice: str = INTERNAL_NOTICE,
) -> Path:
    """Write the report atomically to ``path`` (``notice``: its first heading)."""
    return write_html(render_report(results, manifests, notice=notice), path)
