"""Count queries (paper 004, Definition 3.4 and section 5.1): index answers, workload, errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synth.errors import ConfigError, InputError
from synth.evaluate.counts import CountIndex, count_query_errors, paper_workload, relative_errors

UNIVERSE = ["a", "b", "c", "d", "e"]


def _long(seqs: list[list[str]]) -> pd.DataFrame:
    rows = [(f"s{i}", p, loc) for i, seq in enumerate(seqs) for p, loc in enumerate(seq)]
    return pd.DataFrame(rows, columns=["seq_id", "pos", "location"])


def _queries(qs: list[list[str]]) -> np.ndarray:
    width = max(len(q) for q in qs)
    out = np.full((len(qs), width), -1)
    for i, q in enumerate(qs):
        out[i, : len(q)] = [UNIVERSE.index(x) for x in q]
    return out


@pytest.mark.parametrize("batch_words", [1024, 0])
def test_hand_computed_answers(monkeypatch: pytest.MonkeyPatch, batch_words: int) -> None:
    monkeypatch.setattr(CountIndex, "batch_words", batch_words)
    db = _long([["a", "b", "c"], ["a", "c"], ["b"], ["a", "a", "d"], ["x", "c"]])
    index = CountIndex.from_sequences(db, UNIVERSE)
    qs = [["a"], ["a", "c"], ["c", "a"], ["b", "c"], ["e"], ["a", "b", "c"], ["a", "d"], ["d", "e"]]
    assert index.count(_queries(qs)).tolist() == [3, 2, 2, 1, 0, 1, 1, 0]
    assert index.support_.tolist() == [3, 2, 3, 1, 0]
    assert index.n_sequences_ == 5
    assert index.n_outside_ == 1  # "x" is not in the universe


@pytest.mark.parametrize("batch_words", [1024, 0])
def test_index_matches_brute_force(monkeypatch: pytest.MonkeyPatch, batch_words: int) -> None:
    monkeypatch.setattr(CountIndex, "batch_words", batch_words)
    rng = np.random.default_rng(5)
    n, width, n_loc = 700, 6, 15
    codes = rng.integers(0, n_loc, (n, width))
    codes[np.arange(width) >= rng.integers(1, width + 1, n)[:, None]] = -1
    workload = paper_workload(n_loc, 8, n_queries=400, weights=np.arange(n_loc) + 1.0, seed=2)
    got = CountIndex.from_codes(codes, n_loc).count(workload.queries)
    sets = [set(r[r >= 0].tolist()) for r in codes]
    want = [sum(set(q[q >= 0].tolist()) <= s for s in sets) for q in workload.queries]
    assert got.tolist() == want
    assert (got > 0).any()


def test_workload_follows_the_paper_and_is_deterministic() -> None:
    w = paper_workload(50, 12, n_queries=4003, seed=7)
    assert w.max_lengths == (3, 6, 9, 12)
    assert np.bincount(w.subsets).tolist() == [1001, 1001, 1001, 1000]
    for j, top in enumerate(w.max_lengths):
        lengths = w.lengths[w.subsets == j]
        assert lengths.min() == 1 and lengths.max() == top
    for q, n in zip(w.queries, w.lengths, strict=True):
        present = q[q >= 0]
        assert len(present) == n == len(set(present.tolist()))
        assert (q[n:] == -1).all()
    again = paper_workload(50, 12, n_queries=4003, seed=7)
    assert np.array_equal(w.queries, again.queries)
    assert not np.array_equal(w.queries, paper_workload(50, 12, n_queries=4003, seed=8).queries)


def test_popularity_workload_follows_the_weights() -> None:
    weights = np.array([100.0, 10.0, 1.0, 0.0, 0.0])
    w = paper_workload(5, 4, n_queries=2000, weights=weights, seed=1)
    used = np.bincount(w.queries[w.queries >= 0], minlength=5)
    assert used[3] == used[4] == 0  # zero weight: never drawn
    assert used[0] > used[1] > used[2] > 0
    assert w.lengths.max() == 3  # capped at the number of drawable locations


def test_relative_error_uses_the_sanity_bound() -> None:
    err = relative_errors(np.array([0, 10, 1]), np.array([3, 8, 1]), n_sequences=2000)
    # s = 0.1% of 2000 = 2
    assert err.tolist() == pytest.approx([1.5, 0.2, 0.0])


def test_error_summary_by_subset_and_length() -> None:
    w = paper_workload(10, 4, n_queries=8, seed=0)
    true = np.full(8, 100)
    est = np.where(w.subsets == 0, 110, 100)
    summary = count_query_errors(true, est, w, n_sequences=1000)
    assert [s["mean_relative_error"] for s in summary["by_subset"]] == pytest.approx([0.1, 0, 0, 0])
    assert summary["mean_relative_error"] == pytest.approx(0.025)
    assert summary["sanity_bound"] == 1.0


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ConfigError):
        paper_workload(0, 12)
    with pytest.raises(ConfigError):
        paper_workload(3, 12, weights=np.zeros(3))
    index = CountIndex.from_codes(np.array([[0, 1]]), 2)
    with pytest.raises(ConfigError):
        index.count(np.array([[5]]))
    with pytest.raises(InputError):
        CountIndex.from_sequences(pd.DataFrame({"seq_id": ["1"]}), ["a"])
    with pytest.raises(InputError):
        relative_errors(np.array([1]), np.array([1]), n_sequences=0)
