"""The evaluation report: file names, glossary, styles and formatting (:mod:`synth.report`)."""

from __future__ import annotations

import base64
import html
import io
import math
import re
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


#: The report's sections: the evaluations of ``evaluate`` (sequences, trips) and noisy counts
#: shown without one (marginals); each generator's spec names its ``report_section``.
_ALL = frozenset({"sequences", "trips", "marginals"})
_SEQ = frozenset({"sequences"})
_TRIPS = frozenset({"trips"})

#: The glossary: term -> (kinds of evaluation it belongs to, HTML text). Every metric the report
#: names has an entry; :func:`link_terms` links a table heading to its entry (:data:`TERMS`).
GLOSSARY: dict[str, tuple[frozenset[str], str]] = {
    "Truncated ceiling": (
        _SEQ,
        "(the line <i>eps=inf (truncated)</i>): the original cut to the first h locations of "
        "each sequence with no noise, i.e. epsilon = infinity; the best any release of height h "
        "can score, so the gap to it is the price of privacy. It is not a release.",
    ),
    "TP": (
        _SEQ,
        "(true positives): of the k most frequent travel patterns of the original, how many are "
        "also among the k most frequent of the release; the ceiling is the truncated "
        "original's TP.",
    ),
    "FD": (_SEQ, "(false drops): those missing (k - TP)."),
    "Travel pattern": (
        _SEQ,
        ": an ordered list of locations that a passenger's sequence passes through in that "
        "order (other locations may come between); its support is how many sequences contain it.",
    ),
    "Count query": (
        _SEQ,
        ": how many passengers' sequences contain a given set of locations; the error is "
        "relative to the true count (small counts measured against a floor). The popularity "
        "workload asks about busy locations (flows planners look at), the uniform one about any.",
    ),
    "Query length": (
        _SEQ,
        ": how many locations a count query names; longer queries ask about longer journeys "
        "and are rarer, so their error is larger.",
    ),
    "Length distribution": (
        _SEQ,
        ": the share of sequences with 1, 2, ... locations (longer than h counted as h).",
    ),
    "Multi-boarding share": (
        _SEQ,
        ": the share of passengers with two or more boardings in the day (the chains transfer "
        "analyses use).",
    ),
    "Hour profile": (
        _SEQ,
        ": the share of taps in each hour of the day (timed releases).",
    ),
    "Transitions kept": (
        _SEQ,
        ": of the original's most frequent moves from one location (and time bin) to the next, "
        "how many are among the release's most frequent.",
    ),
    "Gap": (_SEQ, ": the number of time bins between two consecutive taps of a passenger."),
    "k-marginal score": (
        _TRIPS,
        ": 1000 x (1 - average TV distance) over random 2-column distributions (NIST temporal "
        "map challenge); 1000 means identical distributions. A <i>k-marginal</i> is the joint "
        "distribution of k columns.",
    ),
    "OD matrix": (
        _TRIPS,
        ": origin-destination matrix, trips from each origin to each destination per time "
        "bin; compared by TV distance.",
    ),
    "TV distance": (
        _ALL,
        "(total variation): half the summed absolute difference of two distributions, i.e. the "
        "share of the mass in the wrong place; 0 = identical, 1 = disjoint. Within 5% means "
        "TV at most 0.05.",
    ),
    "Error bound": (
        frozenset({"marginals"}),
        ": for a cell of a marginal release, a count the noise exceeds only with probability "
        "beta (here 5%).",
    ),
    "Privacy unit": (
        _ALL,
        ": who is protected: the guarantee holds for adding or removing one such unit (a card "
        "with all its taps, a taxi trip ...) from the data.",
    ),
    "Epsilon, delta": (
        _ALL,
        ": adding or removing one privacy unit changes the probability of any output by at most "
        "a factor e<sup>epsilon</sup>, except with probability delta. The guarantee is the "
        "budget asked (the cap), whatever was spent.",
    ),
    "Sensitivity": (
        _ALL,
        ": how much one privacy unit can change a noisy step's counts; noise is scaled to it.",
    ),
    "Mechanism": (
        _ALL,
        ": the noisy step used (discrete Laplace or Gaussian noise on counts, a noisy "
        "threshold ...), drawn from exact secure samplers.",
    ),
    "Noise scale": (
        _ALL,
        ": the spread of the noise added to each count (Laplace scale b, Gaussian sigma); "
        "larger means noisier.",
    ),
    "Threshold": (
        _ALL,
        ": counts whose noisy value falls below it are dropped (a node of the tree, a cell of "
        "a table), so rare paths and small cells are absent.",
    ),
    "Basic composition": (
        _ALL,
        ": the epsilons (and deltas) of several noisy steps on the same data add up (Dwork and "
        "Roth 2014, Theorem 3.16); <i>exact rational arithmetic</i> means the sums are kept as "
        "exact fractions, so rounding never understates the total.",
    ),
    "Traffic light": (
        _ALL,
        ": green = fit for the use at the stated threshold; amber = usable with care (read "
        "the figure); red = not fit; grey = does not apply.",
    ),
}

#: heading words -> glossary term (longest first when linking)
TERMS: dict[str, str] = {
    "eps=inf (truncated)": "Truncated ceiling",
    "ceiling": "Truncated ceiling",
    "TP": "TP",
    "FD": "FD",
    "travel patterns": "Travel pattern",
    "patterns": "Travel pattern",
    "count-query error": "Count query",
    "count queries": "Count query",
    "query length": "Query length",
    "length distribution": "Length distribution",
    "mean length": "Length distribution",
    "multi-boarding": "Multi-boarding share",
    "hour profile": "Hour profile",
    "TV hour of day": "Hour profile",
    "TV first hour": "Hour profile",
    "TV length": "Length distribution",
    "TV gap": "Gap",
    "transitions kept": "Transitions kept",
    "k-marginal score": "k-marginal score",
    "origin-destination": "OD matrix",
    "OD": "OD matrix",
    "TV": "TV distance",
    "error bound": "Error bound",
    "privacy unit": "Privacy unit",
    "unit": "Privacy unit",
    "epsilon": "Epsilon, delta",
    "delta": "Epsilon, delta",
    "privacy": "Epsilon, delta",
    "sensitivity": "Sensitivity",
    "mechanism": "Mechanism",
    "scale": "Noise scale",
    "threshold": "Threshold",
    "cells outside": "Error bound",
    "verdict": "Traffic light",
}


def term_id(term: str) -> str:
    """The HTML id of a glossary term's entry."""
    return "g-" + re.sub(r"[^a-z0-9]+", "-", term.lower()).strip("-")


def term_link(label: str, term: str) -> str:
    """``label`` (plain text) linked to the glossary entry of ``term``."""
    if term not in GLOSSARY:
        raise KeyError(f"no glossary entry {term!r}")
    return f'<a class="term" href="#{term_id(term)}">{html.escape(label)}</a>'


_TERM_RE = re.compile(
    "|".join(
        rf"(?<![\w-]){re.escape(html.escape(k))}(?![\w-])"
        for k in sorted(TERMS, key=len, reverse=True)
    ),
    re.IGNORECASE,
)
_TERMS_LOWER = {k.lower(): v for k, v in TERMS.items()}


def link_terms(page: str) -> str:
    """Every table heading (``<th>``) of ``page`` with its first glossary word linked to the
    glossary (:data:`TERMS`); headings with no such word are left as they are."""

    def heading(match: re.Match[str]) -> str:
        text = match.group(2)
        if 'class="term"' in text:
            return match.group(0)
        found = _TERM_RE.search(text)
        if found is None:
            return match.group(0)
        word = html.unescape(found.group(0))
        term = _TERMS_LOWER[word.lower()]
        linked = text[: found.start()] + term_link(word, term) + text[found.end() :]
        return f"{match.group(1)}{linked}</th>"

    return re.sub(r"(<th[^>]*>)(.*?)</th>", heading, page, flags=re.S)


def glossary(kinds: set[str]) -> str:
    """The glossary section: the terms of the evaluations of ``kinds`` (sequences, trips,
    marginals), each with its id (:func:`term_id`) for the links."""
    entries = "".join(
        f'<dt id="{term_id(term)}">{term}</dt><dd>{text.lstrip(": ")}</dd>'
        for term, (used, text) in GLOSSARY.items()
        if used & kinds
    )
    return f'<h2 id="glossary">Glossary</h2><dl class="glossary">{entries}</dl>'


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
dl.glossary{font-size:.9em;background:#f4f7fb;padding:.6em .8em;border-radius:4px}
dl.glossary dt{font-weight:600;margin-top:.4em}dl.glossary dd{margin-left:1.2em}
a.term{color:inherit;text-decoration:underline dotted}
td.light{white-space:nowrap;font-weight:600;text-align:left}td.light span{font-size:1.3em}
td.green span{color:#1b7f3a}td.amber span{color:#d08a00}td.red span{color:#c0132c}
td.grey span{color:#999}table.verdict td,table.verdict th{text-align:left}
table.verdict{width:100%}table.verdict td:first-child{white-space:nowrap;width:10em}
ul.checklist{margin:.3em 0 .6em}ul.checklist li{margin:.15em 0}
p.warning{background:#fff4d6;border-left:4px solid #d08a00;padding:.5em .8em}
table.sample td{font-family:ui-monospace,monospace;font-size:.85em;text-align:left}
"""


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
