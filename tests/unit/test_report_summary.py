"""The internal report opens with the internal notice and a summary an analyst can read.

The page is parsed with the standard library (not searched as a string): the first heading, the
summary table's cells per release, the manifests as collapsed tables, no ``nan``, no raw JSON, no
"paper 00" citation, no single-point plot.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pandas as pd
import pytest

from prefixtree import PrefixTreeSynthesizer
from synth.datasets import montreal_taxonomy
from synth.evaluate import evaluate_sequences, evaluate_trips
from synth.records import truncate_sequences
from synth.report import privacy_in_words, render_report
from synth.simulate import simulate_sequences

NOTICE = (
    "INTERNAL - NOT PRIVATE: contains exact statistics of the original data; for the data holder "
    "only; do not publish."
)


class Page(HTMLParser):
    """Headings, visible text, the summary table's rows, <details> summaries, <pre> blocks."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.headings: list[tuple[str, str]] = []
        self.text: list[str] = []
        self.summary: list[list[str]] = []
        self.details: list[str] = []
        self.images = 0
        self.pre = 0
        self._stack: list[str] = []
        self._in_summary_table = False
        self._cell: list[str] | None = None
        self._heading: list[str] | None = None
        self._details_summary: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("class") == "summary":
            self._in_summary_table = True
        elif tag == "tr" and self._in_summary_table:
            self.summary.append([])
        elif tag == "td" and self._in_summary_table:
            self._cell = []
        elif tag in ("h1", "h2", "h3"):
            self._heading = []
        elif tag == "summary":
            self._details_summary = []
        elif tag == "img":
            self.images += 1
        elif tag == "pre":
            self.pre += 1
        self._stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_summary_table = False
        elif tag == "td" and self._cell is not None:
            self.summary[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag in ("h1", "h2", "h3") and self._heading is not None:
            self.headings.append((tag, "".join(self._heading).strip()))
            self._heading = None
        elif tag == "summary" and self._details_summary is not None:
            self.details.append("".join(self._details_summary).strip())
            self._details_summary = None

    def handle_data(self, data: str) -> None:
        if self._stack and self._stack[-1] in ("style", "script"):
            return
        self.text.append(data)
        for part in (self._cell, self._heading, self._details_summary):
            if part is not None:
                part.append(data)

    @property
    def visible(self) -> str:
        return " ".join(" ".join(self.text).split())

    def row(self, release: str) -> dict[str, str]:
        rows = [r for r in self.summary if r and r[0] == release]
        assert len(rows) == 1, f"summary rows for {release}: {rows}"
        return dict(zip(("release", "what", "unit", "privacy", "verdict"), rows[0], strict=True))


def assert_clean(page: Page) -> None:
    """No nan, no raw JSON, no file-number citations, no raw internal messages."""
    text = page.visible
    assert not re.search(r"\bnan\b", text, re.IGNORECASE), "a nan reached the page"
    assert page.pre == 0 and '{"' not in text and '": ' not in text, "raw JSON on the page"
    assert not re.search(r"paper 00\d", text, re.IGNORECASE)
    assert "need '" not in text and "None" not in text


@pytest.fixture(scope="module")
def sequences_report() -> tuple[Page, dict]:
    metro = montreal_taxonomy()
    original = simulate_sequences(3000, taxonomy=metro, seed=5)
    tree = PrefixTreeSynthesizer(epsilon=1.0, height=4, taxonomy=metro, random_state=1)
    tree.fit(original)
    manifest = tree.ledger_.to_dict(parameters=tree.parameters())
    results = evaluate_sequences(
        original,
        {"eps=inf (truncated)": truncate_sequences(original, 4), "hybrid": tree.sample()},
        universe=metro.leaves(),
        height=4,
        n_queries=300,
        ks=(20, 100),
    )
    return Page(render_report(results, {"hybrid": manifest})), manifest


def test_first_heading_is_the_internal_notice(sequences_report: tuple[Page, dict]) -> None:
    page, _ = sequences_report
    assert page.headings[0] == ("h1", NOTICE)


def test_summary_states_unit_epsilon_delta_and_a_verdict(
    sequences_report: tuple[Page, dict],
) -> None:
    page, manifest = sequences_report
    row = page.row("hybrid")
    assert row["unit"].startswith(f"{manifest['privacy_unit']}: add or remove one")
    assert "first 4 locations" in row["unit"]  # the height, not the letter h
    assert row["privacy"].startswith(f"epsilon = {manifest['cap']['epsilon']:g}")
    assert "delta = 0 (pure differential privacy)" in row["privacy"]
    assert "Chen et al. 2012" in row["what"] and "height 4" in row["what"]
    found = re.fullmatch(
        r"top-100 travel patterns: (\d+) found, (\d+) possible without privacy; count queries: "
        r"[\d.]+% average relative error \([\d.]+% without privacy\)",
        row["verdict"],
    )
    assert found is not None, row["verdict"]
    assert int(found.group(1)) <= int(found.group(2)) <= 100
    # the non-private baseline is labelled as such, not given a guarantee
    assert page.row("eps=inf (truncated)")["privacy"].startswith("none (epsilon = infinity)")


def test_manifest_once_collapsed_as_a_table_and_glossary(
    sequences_report: tuple[Page, dict],
) -> None:
    page, manifest = sequences_report
    assert [d for d in page.details if d.startswith("Privacy manifest of")] == [
        f"Privacy manifest of hybrid: {len(manifest['spends'])} noisy step(s), epsilon 1, delta 0"
    ]
    for term in ("Truncated ceiling", "TP", "FD", "Count query", "eps=inf (truncated)"):
        assert term in page.visible
    assert "k-marginal score" not in page.visible  # the glossary has this page's terms only
    assert "discrete_laplace" in page.visible  # the spends' mechanisms, as table cells
    assert_clean(page)


def test_privacy_in_words_states_the_cap_and_what_was_spent() -> None:
    manifest = {
        "cap": {"epsilon": 1.0, "delta": 1e-5},
        "spent": {"epsilon": 0.375, "delta": 1e-5},
    }
    words = privacy_in_words(manifest)
    assert words.startswith("epsilon = 1 (the budget asked, which is the guarantee; 0.375 spent)")
    assert "factor of 2.72" in words and "1-in-100,000" in words


def test_trip_report_says_in_words_what_does_not_apply() -> None:
    """Taxi-like data: one trip per id, a numeric shift as time, no destination."""
    rows = 400
    frame = pd.DataFrame(
        {
            "taxi_id": range(rows),
            "shift": [i % 21 for i in range(rows)],
            "pickup": [f"p{i % 7}" for i in range(rows)],
        }
    )
    results = evaluate_trips(
        frame,
        {"archetypes": frame.sample(frac=1.0, random_state=0)},
        id_column="taxi_id",
        time_column="shift",
        origin="pickup",
        destination=None,
    )
    assert results["parameters"]["time_axis"] == {
        "column": "shift",
        "from_timestamps": False,
        "label": "shift",
    }
    assert "trips_per_individual" not in results["releases"]["archetypes"]
    page = Page(render_report(results))
    text = page.visible
    assert (
        "Trips per individual: not applicable: every individual of the original has exactly "
        "one trip" in text
    )
    assert "Origin-destination matrices: not measured: the trips record no destination" in text
    assert re.search(r"k-marginal score 1000 of 1000", page.row("archetypes")["verdict"])
    assert page.images == 1  # one row of panels: distance per column and trips by shift
    assert "1000 x (1 - average TV distance)" in text and "Truncated ceiling" not in text
    assert_clean(page)


def test_a_single_value_is_said_not_plotted() -> None:
    """One shift value only: no one-point time plot, a sentence instead."""
    frame = pd.DataFrame(
        {
            "card": [f"c{i // 2}" for i in range(200)],
            "shift": 7,
            "zone": [f"z{i % 5}" for i in range(200)],
        }
    )
    results = evaluate_trips(
        frame,
        {"release": frame},
        id_column="card",
        time_column="shift",
        origin="zone",
        destination=None,
    )
    assert len(results["releases"]["release"]["time_of_day"]["values"]) == 1
    page = Page(render_report(results))
    assert "Trips by shift: every trip has the same value, nothing to plot." in page.visible
    assert "Trips per individual: every individual has the same number of trips" in page.visible
    assert_clean(page)
