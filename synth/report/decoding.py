"""The report's "Reading the columns back" section: the public inverse of a trips release's
encoding (``private-evaluation.json``'s ``decoding``, :mod:`archetypes.decoding`), so a reader
of the scores knows which of their own columns and values each encoded one stands for."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from synth.report.formatting import html_table

__all__ = ["decoding_section"]


def decoding_section(results: Mapping[str, Any]) -> list[str]:
    """The section (empty when the trips were read in the user's own columns already)."""
    spec = results.get("decoding") or {}
    columns, values = spec.get("columns") or {}, spec.get("values") or {}
    if not columns and not values:
        return []
    rows: list[list[Any]] = []
    for encoded in sorted(set(columns) | set(values)):
        target = columns.get(encoded, encoded)
        shown = ", ".join(target) if isinstance(target, list) else str(target)
        codes = values.get(encoded) or {}
        sample = "; ".join(f"{k} = {v}" for k, v in list(codes.items())[:4])
        more = f" ... ({len(codes)} codes)" if len(codes) > 4 else ""
        rows.append([encoded, shown, (sample + more) or "as read"])
    notes = "".join(f"<li>{html.escape(str(n))}</li>" for n in spec.get("notes") or [])
    return [
        "<h3>Reading the columns back</h3>",
        f"<p>The trips were read as <code>{html.escape(str(spec.get('format')))}</code> and are "
        "scored in its public encoding. Each encoded column stands for your own column(s) below; "
        "<code>evaluate --decode</code> writes the synthetic trips in them.</p>",
        html_table(["encoded column", "your column(s)", "values"], rows, cls="decoding"),
        f"<ul>{notes}</ul>" if notes else "",
    ]
