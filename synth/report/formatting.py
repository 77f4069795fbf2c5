"""The evaluation report: file names, glossary, styles and formatting (:mod:`synth.report`)."""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure

from synth.internal import PRIVATE_PREFIX

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


STYLE = """
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


GENERATORS = {
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
def table_cell(v: Any) -> str:
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


def html_table(header: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{table_cell(v)}</td>" for v in r) + "</tr>" for r in rows)
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}><tr>{head}</tr>{body}</table>"


def png_img(fig: Figure) -> str:
    import matplotlib
    from matplotlib.text import Text

    buf = io.BytesIO()
    for text in fig.findobj(Text):  # user strings (stop, release names) are never mathtext
        text.set_parse_math(False)
    with matplotlib.rc_context({"text.parse_math": False}):  # tick labels made while drawing
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(str(fig.get_label()))}" src="data:image/png;base64,{data}">'


def new_figure(label: str, n_axes: int) -> tuple[Figure, list[Any]]:
    fig = Figure(figsize=(4.3 * n_axes, 3.1), label=label, layout="constrained")
    return fig, [fig.add_subplot(1, n_axes, i + 1) for i in range(n_axes)]


def percent(x: float) -> str:
    return f"{x:.1%}" if x >= 0.001 else f"{x:.2%}"
