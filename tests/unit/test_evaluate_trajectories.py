"""synth.evaluate.trajectories: the time statistics equal the shared scorer's (trajmetrics.py),
and the report shows them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from synth.evaluate import evaluate_sequences, evaluate_trajectories
from synth.report import render_report
from tests.conftest import timed_sequences

#: the shared scorer beside the repository (as conftest.py finds ../shared/data), or $TRAJMETRICS
SCORER = Path(
    os.environ.get(
        "TRAJMETRICS",
        Path(__file__).resolve().parents[2].parent / "shared" / "tools" / "trajmetrics.py",
    )
)


# --- the scorer's definitions, transcribed (tools/trajmetrics.py: load, tv, shared, stats) ---
def _load(d: pd.DataFrame, h: int, bin_minutes: int) -> list[list[tuple[str, int, int]]]:
    d = d.astype({"seq_id": str, "location": str, "time": str}).copy()
    d["pos"] = d["pos"].astype(int)
    hm = d["time"].str.extract(r"(\d{1,2}):(\d{2})")
    minutes = hm[0].astype(int) * 60 + hm[1].astype(int)
    d["bin"] = (minutes // bin_minutes).astype(int)
    d["hour"] = (minutes // 60).astype(int)
    d = d.sort_values(["seq_id", "pos"])
    d = d[d.groupby("seq_id").cumcount() < h]
    return [
        list(zip(g["location"], g["bin"], g["hour"], strict=True))
        for _, g in d.groupby("seq_id", sort=False)
    ]


def _tv(a: Counter, b: Counter) -> float:
    sa, sb = sum(a.values()) or 1, sum(b.values()) or 1
    return 0.5 * sum(abs(a.get(k, 0) / sa - b.get(k, 0) / sb) for k in set(a) | set(b))


def _shared(a: Counter, b: Counter, k: int = 50) -> int:
    return len({x for x, _ in a.most_common(k)} & {x for x, _ in b.most_common(k)})


def _stats(seqs: list[list[tuple[str, int, int]]]) -> dict[str, Counter]:
    s: dict[str, Counter] = {
        n: Counter() for n in ("len", "hour", "first", "gap", "tok", "trans", "ttrans")
    }
    for q in seqs:
        s["len"][len(q)] += 1
        s["first"][q[0][2]] += 1
        for loc, b, hr in q:
            s["hour"][hr] += 1
            s["tok"][(loc, b)] += 1
        for (l1, b1, _), (l2, b2, _) in zip(q, q[1:], strict=False):  # noqa: RUF007 (the scorer's own words)
            s["gap"][min(max(b2 - b1, 0), 12)] += 1
            s["trans"][(l1, l2)] += 1
            s["ttrans"][((l1, b1), (l2, b2))] += 1
    return s


def _reference(orig: pd.DataFrame, syn: pd.DataFrame, h: int, bin_minutes: int) -> dict[str, Any]:
    so, ss = _stats(_load(orig, h, bin_minutes)), _stats(_load(syn, h, bin_minutes))
    return {
        "tv_length": _tv(so["len"], ss["len"]),
        "tv_hour": _tv(so["hour"], ss["hour"]),
        "tv_first_hour": _tv(so["first"], ss["first"]),
        "tv_gap": _tv(so["gap"], ss["gap"]),
        "tokens_kept": _shared(so["tok"], ss["tok"]),
        "transitions_kept": _shared(so["trans"], ss["trans"]),
        "timed_transitions_kept": _shared(so["ttrans"], ss["ttrans"]),
    }


FIELDS = ("tv_length", "tv_hour", "tv_first_hour", "tv_gap")
COUNTS = ("tokens_kept", "transitions_kept", "timed_transitions_kept")


@pytest.mark.parametrize(("h", "bin_minutes", "seed"), [(8, 60, 1), (4, 30, 2), (12, 120, 3)])
def test_statistics_equal_the_scorer(h: int, bin_minutes: int, seed: int) -> None:
    orig, syn = timed_sequences(600, 0), timed_sequences(500, seed)
    got = evaluate_trajectories(orig, {"s": syn}, height=h, bin_minutes=bin_minutes)["releases"][
        "s"
    ]
    want = _reference(orig, syn, h, bin_minutes)
    for f in FIELDS:
        assert got[f] == pytest.approx(want[f], abs=1e-12), f
    for f in COUNTS:
        assert got[f] == want[f], f
    assert 0 < got["timed_transitions_kept"] < 50  # the fixture is not trivially equal or disjoint


def test_identical_release_scores_perfectly() -> None:
    orig = timed_sequences(300, 4)
    r = evaluate_trajectories(
        orig, {"same": orig.sample(frac=1.0, random_state=1)}, height=8, bin_minutes=60
    )
    same = r["releases"]["same"]
    assert [same[f] for f in FIELDS] == [0.0] * 4
    q = orig.sort_values(["seq_id", "pos"])
    nxt = q.groupby("seq_id")["location"].shift(-1)
    pairs = set(zip(q["location"][nxt.notna()], nxt.dropna(), strict=True))
    assert same["transitions_kept"] == min(50, len(pairs)) > 0
    assert (
        same["timed_transitions_kept"] == 50 and same["mean_length"] == r["original"]["mean_length"]
    )


@pytest.mark.skipif(not SCORER.is_file(), reason=f"the shared scorer is not at {SCORER}")
def test_statistics_equal_the_scorer_script(tmp_path: Path) -> None:
    orig, syn = timed_sequences(400, 5), timed_sequences(300, 6)
    orig.to_csv(tmp_path / "o.csv", index=False)
    syn.to_csv(tmp_path / "s.csv", index=False)
    run = subprocess.run(
        [
            sys.executable,
            str(SCORER),
            str(tmp_path / "o.csv"),
            str(tmp_path / "s.csv"),
            "--bin",
            "60",
            "--height",
            "8",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    want = json.loads(run.stdout)
    got = evaluate_trajectories(orig, {"s": syn}, height=8, bin_minutes=60)["releases"]["s"]
    names = {
        "tv_length": "tv_len",
        "tv_hour": "tv_hour",
        "tv_first_hour": "tv_first_hour",
        "tv_gap": "tv_gap",
        "tokens_kept": "tok50",
        "transitions_kept": "trans50",
        "timed_transitions_kept": "ttrans50",
    }
    for ours, theirs in names.items():
        assert round(got[ours], 4) == want[theirs], ours
    assert (
        got["n_sequences"] == want["n_synthetic"]
        and round(got["mean_length"], 3) == want["mean_len_synthetic"]
    )


class _Sections(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.images = 0
        self.headers: list[str] = []
        self._in_th = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids += [v for k, v in attrs if k == "id" and v]
        self.images += tag == "img"
        if tag == "th":  # a heading's whole text (its glossary link included)
            self._in_th = True
            self.headers.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "th":
            self._in_th = False

    def handle_data(self, data: str) -> None:
        if self._in_th:
            self.headers[-1] += data


def test_report_has_the_time_section() -> None:
    orig = timed_sequences(300, 7)
    synthetic = {
        "timed": timed_sequences(300, 8),
        "untimed": timed_sequences(300, 9).drop(columns="time"),
    }
    results = evaluate_sequences(orig, synthetic, n_queries=100, ks=(5,), height=8)
    plain = _Sections()
    plain.feed(render_report(results))
    assert "time" not in plain.ids
    results["trajectories"] = evaluate_trajectories(orig, synthetic, height=8, bin_minutes=60)
    assert results["trajectories"]["untimed"] == ["untimed"]
    timed = _Sections()
    text = render_report(results)
    timed.feed(text)
    assert "time" in timed.ids and timed.images == plain.images + 1
    for h in ("TV hour of day", "TV length", "TV gap", "top-50 timed transitions kept"):
        assert h in timed.headers
    tv = results["trajectories"]["releases"]["timed"]["tv_hour"]
    assert f"<td>{round(tv, 4):.4g}</td>" in text
    assert "Without times (not in this section): untimed." in text


def test_evaluate_cli_reports_time(tmp_path: Path) -> None:
    from synth.cli import main

    orig = timed_sequences(200, 10)
    orig.to_csv(tmp_path / "orig.csv", index=False)
    rel = tmp_path / "rel"
    rel.mkdir()
    timed_sequences(200, 11).to_csv(rel / "sequences.csv", index=False)
    params = {"generator": "prefixtree", "height": 6, "time_bin_minutes": 30}
    (rel / "manifest.json").write_text(json.dumps({"parameters": params}))
    out = tmp_path / "ev"
    args = ["evaluate", str(tmp_path / "orig.csv"), str(rel), "--out", str(out), "--queries", "50"]
    assert main([*args, "--quiet"]) == 0
    results = json.loads((out / "private-evaluation.json").read_text())
    traj = results["trajectories"]
    assert traj["parameters"] == {"height": 6, "bin_minutes": 30, "top": 50, "gap_cap": 12}
    assert set(traj["releases"]) == {"eps=inf (truncated)", "rel"}
    assert traj["releases"]["eps=inf (truncated)"]["tv_hour"] == 0.0
    assert 'id="time"' in (out / "private-report.html").read_text()
    assert main([*args[:-4], "--out", str(tmp_path / "e2"), "--time-bin", "0"]) == 2
    assert not (tmp_path / "e2").exists()
