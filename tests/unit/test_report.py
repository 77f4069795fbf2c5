"""The HTML report: self-contained, with the paper-style figures and the manifests."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd

from synth.evaluate import evaluate_sequences, evaluate_trips
from synth.report import render_report, write_report


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs)["src"] or "")


def _parse(text: str) -> _Collect:
    parser = _Collect()
    parser.feed(text)
    return parser


def _sequences(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 6, n)
    seq = np.repeat(np.arange(n), lengths)
    pos = np.concatenate([np.arange(k) for k in lengths])
    loc = rng.choice(list("abcdefgh"), len(seq), p=[0.3, 0.2, 0.15, 0.1, 0.1, 0.05, 0.05, 0.05])
    return pd.DataFrame({"seq_id": seq.astype(str), "pos": pos, "location": loc})


def test_sequence_report_side_by_side(tmp_path: Path) -> None:
    original = _sequences(400, 0)
    results = evaluate_sequences(
        original,
        {"hybrid": _sequences(400, 1), "exact": original},
        universe=list("abcdefghij"),
        n_queries=200,
        ks=(5, 10),
    )
    exact = results["releases"]["exact"]
    assert exact["count_queries"]["uniform"]["mean_relative_error"] == 0.0
    assert [p["tp"] for p in exact["patterns"]] == [5, 10]
    assert results["parameters"]["universe_source"] == "given"
    manifest = {"epsilon": 1.0, "spends": [{"label": "level 1"}]}
    path = write_report(results, tmp_path / "report.html", manifests={"hybrid": manifest})
    text = path.read_text(encoding="utf-8")
    parsed = _parse(text)
    assert len(parsed.images) == 2  # count errors and top-k; chain lengths and supports
    for src in parsed.images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "hybrid" in text and "exact" in text and "level 1" in text
    visible = re.sub(r"<[^>]+>", "", text)  # headings carry glossary links
    assert "TP of top-10" in visible and "count-query error (popularity)" in visible


def test_trip_report_has_every_panel() -> None:
    rng = np.random.default_rng(0)
    trips = pd.DataFrame(
        {
            "card_id": rng.integers(0, 50, 300).astype(str),
            "on_time": pd.Timestamp("2019-11-27")
            + pd.to_timedelta(rng.integers(0, 1440, 300), "m"),
            "on_stop": rng.choice(list("ABC"), 300),
            "off_stop": rng.choice(list("ABC"), 300),
        }
    )
    text = render_report(evaluate_trips(trips, {"self": trips}))
    parsed = _parse(text)
    assert len(parsed.images) == 1  # one-way TV, time of day, trips per individual, OD panels
    assert "k-marginal score" in text and "1000" in text
