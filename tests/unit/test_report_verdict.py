"""The report's verdict section, its new plots and sample rows, and the glossary, parsed as HTML.

Per release: a checklist (the guarantee first), a traffic light per intended use with the limits
stated, a warning for transfer analysts when multi-boarding passengers are under-represented; for
sequences the chain-length and pattern-support figure; the first rows of each released file;
every metric heading linked to a glossary entry that the page holds.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import numpy as np
import pandas as pd
import pytest

from prefixtree import PrefixTreeSynthesizer
from synth.evaluate import evaluate_sequences, evaluate_trips
from synth.report import render_report
from synth.report.formatting import GLOSSARY, link_terms, term_id
from synth.report.sections import SHAPE_FIGURE
from synth.report.verdict import SECTION_ID, USES
from synth.taxonomy import Taxonomy

#: table headings that name no metric (ids, counts of rows, labels)
DESCRIPTIVE = {
    "release",
    "what it is",
    "against the original",
    "intended use",
    "why (the limits applied)",
    "sequences",
    "trips",
    "pattern",
    "sequences containing it",
    "step",
    "transition",
    "compared",
    "table",
    "cells",
    "total in the release",
    "total in the data compared",
    "parameter",
    "value",
}


class Report(HTMLParser):
    """Fitness blocks (checklist items, verdict rows, warnings), images' alt texts, sample
    tables, table headings with their glossary links, glossary ids and term link targets."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.fitness: dict[str, dict[str, Any]] = {}
        self.alts: list[str] = []
        self.samples: list[list[list[str]]] = []
        self.headings: list[tuple[str, list[str], str]] = []  # (text, link targets, table cls)
        self.links: list[str] = []
        self.dts: set[str] = set()
        self._block: str | None = None
        self._item: list[str] | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._th: tuple[list[str], list[str]] | None = None
        self._table: list[str] = []
        self._warning: list[str] | None = None
        self._data_row = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "dt":
            self.dts.add(a.get("id", ""))
        if tag == "div" and a.get("class") == "fitness":
            self._block = a["data-release"]
            self.fitness[self._block] = {"checks": [], "rows": [], "warnings": []}
        elif tag == "li" and self._block:
            self._item = []
        elif tag == "p" and a.get("class") == "warning" and self._block:
            self._warning = []
        elif tag == "table":
            self._table.append(a.get("class", ""))
            if a.get("class") == "sample":
                self.samples.append([])
        elif tag == "tr":
            self._row = []
            self._data_row = False
        elif tag in ("td", "th"):
            self._cell = []
            self._data_row = self._data_row or tag == "td"
            if tag == "th":
                self._th = ([], [])
        elif tag == "img":
            self.alts.append(a.get("alt", ""))
        elif tag == "a" and a.get("class") == "term":
            self.links.append(a["href"].lstrip("#"))
            if self._th is not None:
                self._th[1].append(a["href"].lstrip("#"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._block:
            self._block = None
        elif tag == "li" and self._item is not None and self._block:
            self.fitness[self._block]["checks"].append(" ".join("".join(self._item).split()))
            self._item = None
        elif tag == "p" and self._warning is not None and self._block:
            self.fitness[self._block]["warnings"].append("".join(self._warning))
            self._warning = None
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            text = " ".join("".join(self._cell).split())
            self._row.append(text)
            if tag == "th" and self._th is not None:
                self.headings.append((text, self._th[1], self._table[-1] if self._table else ""))
                self._th = None
            self._cell = None
        elif tag == "tr" and self._row is not None:
            verdict = self._table and self._table[-1] == "verdict"
            if verdict and self._block and self._data_row:
                self.fitness[self._block]["rows"].append(self._row)
            if self._table and self._table[-1] == "sample":
                self.samples[-1].append(self._row)
            self._row = None
        elif tag == "table" and self._table:
            self._table.pop()

    def handle_data(self, data: str) -> None:
        for part in (self._item, self._cell, self._warning):
            if part is not None:
                part.append(data)


LINES = {"L1": "abcd", "L2": "efgh"}
TAXONOMY = Taxonomy.from_edges(
    [(s, line) for line, stops in LINES.items() for s in stops] + [(x, "root") for x in LINES]
)


def _sequences(n: int, seed: int, max_len: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_len, n)
    weights = np.array([8, 6, 5, 4, 3, 2, 1, 1], dtype=float)
    return pd.DataFrame(
        {
            "seq_id": np.repeat(np.arange(n), lengths),
            "pos": np.concatenate([np.arange(k) for k in lengths]),
            "location": rng.choice(list("abcdefgh"), int(lengths.sum()), p=weights / weights.sum()),
        }
    )


@pytest.fixture(scope="module")
def report() -> tuple[Report, dict[str, Any], pd.DataFrame]:
    original = _sequences(600, 0)
    tree = PrefixTreeSynthesizer(
        taxonomy=TAXONOMY, epsilon=1.0, height=4, variant="simple", random_state=3
    ).fit(original)
    single = original[original["pos"] == 0]  # every passenger boards once: transfers lost
    releases = {
        "eps=inf (truncated)": original[original["pos"] < 4],
        "same": original,
        "single": single,
        "tree": tree.sample(),
    }
    results = evaluate_sequences(
        original, releases, universe=list("abcdefgh"), height=4, n_queries=300, ks=(5, 10)
    )
    manifests = {name: tree.manifest() for name in ("same", "single", "tree")}
    return Report(render_report(results, manifests)), results, releases["tree"]


def test_verdict_section_checklist_and_lights(report: tuple[Report, dict, pd.DataFrame]) -> None:
    page, _, _ = report
    assert SECTION_ID in page.ids
    assert sorted(page.fitness) == ["same", "single", "tree"]  # not the non-private ceiling
    for name, block in page.fitness.items():
        checks = block["checks"]
        assert checks[0] == "guarantee: epsilon 1 per card", name
        assert re.fullmatch(r"top-10 patterns kept: \d+ \(ceiling 10\)", checks[1]), checks[1]
        assert re.fullmatch(r"length distribution within 5%: (yes|no) \(TV [\d.]+\)", checks[3])
        assert [r[0] for r in block["rows"]] == list(USES)
        for _, light, why in block["rows"]:
            assert light.split()[-1] in ("green", "amber", "red", "grey")
            assert re.search(r"\(green[: ].*\d+%.*amber.*\d+%", why), why  # limits stated
    same = {r[0]: r[1].split()[-1] for r in page.fitness["same"]["rows"]}
    assert same == {"pattern mining": "green", "OD/flows": "green", "simulation input": "green"}
    assert page.fitness["same"]["checks"][1] == "top-10 patterns kept: 10 (ceiling 10)"
    assert page.fitness["same"]["warnings"] == []
    single = {r[0]: r[1].split()[-1] for r in page.fitness["single"]["rows"]}
    assert single["simulation input"] == "red"


def test_transfer_warning_when_multi_boarding_is_lost(
    report: tuple[Report, dict, pd.DataFrame],
) -> None:
    page, results, _ = report
    [warning] = page.fitness["single"]["warnings"]
    real = results["original"]["multi_share"]
    assert warning.startswith("Transfer analysts: passengers with two or more boardings")
    assert f"0% of synthetic passengers against {real:.0%} of real ones" in warning


def test_sequence_plots_and_sample_rows(report: tuple[Report, dict, pd.DataFrame]) -> None:
    page, results, tree = report
    assert SHAPE_FIGURE in page.alts
    assert "Count-query error and top-k patterns" in page.alts  # count error by query length
    top = results["original"]["top_patterns"]
    assert len(results["releases"]["same"]["original_top_supports"]) == len(top)
    assert results["releases"]["same"]["original_top_supports"] == [s for _, s in top]
    assert len(page.samples) == 3  # same, single, tree; not the non-private ceiling
    header, *rows = page.samples[-1]
    assert header == ["seq_id", "pos", "location"]
    ids = tree["seq_id"].drop_duplicates()
    picked = ids.iloc[np.linspace(0, len(ids) - 1, 4).astype(int)]  # evenly spread
    expected = tree[tree["seq_id"].isin(set(picked))].head(24)
    assert rows == [[str(v) for v in r] for r in expected.itertuples(index=False)]
    assert len({r[0] for r in rows}) == 4  # whole sequences, not the first rows of one


def _uncovered(page: Report) -> list[str]:
    """Metric headings without a glossary link, and links to no entry on the page."""
    bad = [
        text
        for text, targets, cls in page.headings
        if cls not in ("sample", "params") and text not in DESCRIPTIVE and not targets
    ]
    return bad + [f"#{t}" for t in page.links if t not in page.dts]


def test_every_metric_has_a_glossary_entry(report: tuple[Report, dict, pd.DataFrame]) -> None:
    page, _, _ = report
    assert _uncovered(page) == []
    assert "glossary" in page.ids and len(page.dts) >= 10
    # a metric column no entry explains is caught (near miss: "score" alone is no term)
    extra = Report(link_terms("<table><tr><th>stickiness score</th></tr></table>"))
    assert _uncovered(extra) == ["stickiness score"]
    linked = Report(link_terms("<table><tr><th>mean TV, 2 columns</th></tr></table>"))
    assert linked.headings[0][1] == [term_id("TV distance")]


def test_jargon_is_explained() -> None:
    text = " ".join(t for _, t in GLOSSARY.values())
    for jargon in ("eps=inf (truncated)", "true positives", "false drops", "k-marginal"):
        assert jargon in text
    assert "exact rational arithmetic" in text and "Theorem 3.16" in text


def test_trip_report_verdict_and_sample_rows() -> None:
    rng = np.random.default_rng(0)
    trips = pd.DataFrame(
        {
            "card_id": rng.integers(0, 60, 400).astype(str),
            "on_time": pd.Timestamp("2019-11-27")
            + pd.to_timedelta(rng.integers(0, 1440, 400), "m"),
            "on_stop": rng.choice(list("ABC"), 400),
            "off_stop": rng.choice(list("ABC"), 400),
        }
    )
    page = Report(render_report(evaluate_trips(trips, {"self": trips})))
    rows = {r[0]: r[1].split()[-1] for r in page.fitness["self"]["rows"]}
    assert rows == {"pattern mining": "grey", "OD/flows": "green", "simulation input": "green"}
    checks = page.fitness["self"]["checks"]
    assert checks[1] == "k-marginal score: 1000 of 1000"
    assert any(c.startswith("OD matrices within 10%: yes") for c in checks)
    header, *sample = page.samples[0]
    assert header == list(trips.columns) and len(sample) == 8
    assert sample[-1] == [str(v) for v in trips.iloc[-1]]  # spread to the last row
    assert _uncovered(page) == []


def test_trip_simulation_input_holds_every_column_to_the_tv_limit() -> None:
    """A release whose k-marginal score is high but one column is off by TV ~0.08 (the demo's
    ``line``) is not green for simulation input: the furthest column's TV is held to 0.05, and
    the rule is stated beside the light."""
    rng = np.random.default_rng(1)
    n = 2000
    trips = pd.DataFrame(
        {
            "card_id": rng.integers(0, 300, n).astype(str),
            "on_time": pd.Timestamp("2019-11-27") + pd.to_timedelta(rng.integers(0, 1440, n), "m"),
            "on_stop": rng.choice(list("ABC"), n),
            "off_stop": rng.choice(list("ABC"), n),
            "line": rng.choice(["L1", "L2", "L3", "L4"], n, p=[0.4, 0.3, 0.2, 0.1]),
        }
    )
    near = trips.copy()
    near.loc[near.index[:160], "line"] = "L1"  # 8% of the rows moved to L1, the rest as is
    results = evaluate_trips(trips, {"near": near, "same": trips})
    tv = results["releases"]["near"]["marginals"]["one_way"]["line"]
    assert 0.05 < tv < 0.15 and results["releases"]["near"]["k_marginal"]["score"] >= 900
    page = Report(render_report(results))
    rows = {r[0]: (r[1].split()[-1], r[2]) for r in page.fitness["near"]["rows"]}
    light, why = rows["simulation input"]
    assert light == "amber", why
    assert f"furthest line {tv:.3f} (green to 0.05, amber to 0.15)" in why
    assert "k-marginal score" in why and "the worst of" in why
    same = {r[0]: r[1].split()[-1] for r in page.fitness["same"]["rows"]}
    assert same["simulation input"] == "green"  # a near-miss canary: the identical release
