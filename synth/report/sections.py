"""The evaluation report: figures and tables per evaluation (:mod:`synth.report`)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from synth.report.decoding import decoding_section
from synth.report.formatting import NO_PRIVACY_PREFIX, html_table, new_figure, percent, png_img
from synth.report.trajectories import trajectory_section


# --------------------------------------------------------------------------- sequences
def _sequence_sections(results: Mapping[str, Any]) -> list[str]:
    releases: Mapping[str, Any] = results["releases"]
    params = results["parameters"]
    workloads = list(next(iter(releases.values()))["count_queries"])
    fig, axes = new_figure("Count-query error and top-k patterns", len(workloads) + 1)
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
                *(percent(cq[w]["mean_relative_error"]) for w in workloads),
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
        png_img(fig),
        *_shape_figure(results),
        html_table(header, rows),
        "<details><summary>Most frequent travel patterns of the original (exact)</summary>"
        + html_table(["pattern", "sequences containing it"], top)
        + "</details>",
    ]


#: alt text of the chain-length and pattern-support figure (the tests find it by it)
SHAPE_FIGURE = "Chain lengths and top-pattern supports"


def _shape_figure(results: Mapping[str, Any]) -> list[str]:
    """Real against synthetic: the length distribution and the supports of the original's top
    patterns (the count error by query length is the first figure)."""
    orig = results["original"]
    releases = {
        n: r
        for n, r in results["releases"].items()
        if not n.startswith(NO_PRIVACY_PREFIX) and "lengths" in r
    }
    if not releases or not orig.get("lengths"):
        return []
    fig, (left, right) = new_figure(SHAPE_FIGURE, 2)
    xs, ys = zip(*orig["lengths"], strict=True)
    left.plot(xs, ys, color="black", lw=2, marker="o", label="original (cut to h)")
    for name, rel in releases.items():
        if rel["lengths"]:
            rx, ry = zip(*rel["lengths"], strict=True)
            left.plot(rx, ry, marker=".", label=name)
    left.set_title("length distribution")
    left.set_xlabel("locations per sequence (longer than h counted as h)")
    left.set_ylabel("share of sequences")
    left.legend(fontsize=8)
    top = orig["top_patterns"]
    ranks = list(range(1, len(top) + 1))
    right.bar(ranks, [s for _, s in top], color="lightgrey", label="original")
    for name, rel in releases.items():
        right.plot(ranks, rel["original_top_supports"], marker="o", ls="", label=name)
    right.set_title(f"supports of the original's top {len(top)} patterns")
    right.set_xlabel("rank of the pattern in the original")
    right.set_ylabel("sequences containing it")
    right.legend(fontsize=8)
    return [png_img(fig)]


def sample_rows_section(results: Mapping[str, Any]) -> list[str]:
    """The first rows of each released table (the non-private ceiling left out)."""
    out = []
    for name, rel in results["releases"].items():
        sample = rel.get("sample_rows")
        if name.startswith(NO_PRIVACY_PREFIX) or not sample:
            continue
        out.append(
            f'<details class="sample" open><summary>Sample rows of {html.escape(name)} '
            f"({html.escape(str(sample.get('what', 'rows of the released file')))}, as "
            "published)</summary>"
            + html_table(sample["columns"], sample["rows"], cls="sample")
            + "</details>"
        )
    return out


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
    fig, axes = new_figure("Trip distributions", len(panels))
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
        html_table(header, rows),
    ]
    panels, notes = _panels(results)
    out.append(png_img(_trip_panels(results, panels)))
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
        timed = trajectory_section(results["trajectories"]) if results.get("trajectories") else []
        return _sequence_sections(results) + timed + sample_rows_section(results)
    return _trip_sections(results) + decoding_section(results) + sample_rows_section(results)
