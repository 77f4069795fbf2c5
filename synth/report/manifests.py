"""The evaluation report: manifests, the reference check and plain tables (:mod:`synth.report`)."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from synth.evaluate.reference import MAX_ONE_WAY_TVD, MIN_WITHIN
from synth.report.formatting import html_table, table_cell
from synth.report.summary import budget_cap

# --------------------------------------------------------------------------- manifests
_SPEND_COLUMNS = ("mechanism", "unit", "sensitivity", "scale", "threshold", "epsilon", "delta")


def _spend_row(spend: Mapping[str, Any]) -> list[Any]:
    sens = spend.get("sensitivity")
    norm = spend.get("sensitivity_norm")
    sensitivity = f"{table_cell(sens)} ({norm})" if sens is not None and norm else sens
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
            value = ", ".join(table_cell(v) for v in value)
        rows.append([key, value])
    return rows


def manifest_section(name: str, manifest: Mapping[str, Any]) -> str:
    """A release's privacy manifest, collapsed: its spends as a table, then its parameters."""
    spends = list(manifest.get("spends") or [])
    eps, delta, _ = (
        budget_cap(manifest) if manifest.get("cap") or manifest.get("spent") else (0, 0, 0)
    )
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
            html_table(["step", *_SPEND_COLUMNS], [_spend_row(s) for s in spends], cls="spends")
        )
    if manifest.get("accounting"):
        parts.append(f'<p class="note">Accounting: {html.escape(str(manifest["accounting"]))}.</p>')
    params = manifest.get("parameters") or {}
    if params:
        parts.append(html_table(["parameter", "value"], _parameter_rows(params), cls="params"))
    parts.append("</details>")
    return "".join(parts)


# --------------------------------------------------------------------------- reference check
def _share(value: Any) -> str:
    return "-" if value is None or value != value else f"{float(value):.1%}"


def _passes(row: Any) -> str:
    """The table's verdict, and when it fails, the limit it missed (the table's own columns can
    show no cell outside the bound while a one-way table fails on its TV distance)."""
    value = getattr(row, "passes", None)
    if value is None or value != value:
        return "-"
    if value:
        return "yes"
    within = getattr(row, "within_bound", None)
    if within is not None and within == within and within < MIN_WITHIN:
        return f"NO ({float(within):.1%} within < {MIN_WITHIN:.0%})"
    tvd = getattr(row, "tvd", None)
    if tvd is not None and tvd == tvd and tvd > MAX_ONE_WAY_TVD:
        return f"NO (one-way TV {float(tvd):.3g} > {MAX_ONE_WAY_TVD})"
    return "NO"


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
                    _share(getattr(r, "coverage", None)),
                    _passes(r),
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
        "data. Like is compared with like: the data first go through the release's own steps "
        "(its partitions, time bins, location level and, for a card unit, its bound of k taps per "
        "card and side; a synthetic sequence is one card; when the release chose a card's k taps "
        "at random, the data are counted in expectation over that choice and each cell's bound "
        "widens by the spread of the release's own draw). The release suppresses cells below its "
        "threshold (the bound covers them), so the TV distance is that of the shares over the "
        "cells it published, and 'data in published cells' says how much of the data they hold. "
        f"A table passes when at least {MIN_WITHIN:.0%} of its cells are within the bound and, "
        f"for a one-way table, the TV distance is at most {MAX_ONE_WAY_TVD}; the original's own "
        "row shows what a perfect synthetic dataset would score.</p>"
        + html_table(
            [
                "compared",
                "table",
                "cells",
                "TV distance",
                "error bound (count)",
                "cells outside it",
                "data in published cells",
                "passes",
                "total in the release",
                "total in the data compared",
            ],
            rows,
        )
        + (f'<ul class="note">{"".join(notes)}</ul>' if notes else "")
    )


def table_section(title: str, header: list[str], rows: list[list[Any]]) -> str:
    """A titled HTML table."""
    return f"<h2>{html.escape(title)}</h2>" + html_table(header, rows)
