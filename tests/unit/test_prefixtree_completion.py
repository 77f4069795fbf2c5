"""End-of-sequence cells and the Markov completion of pruned continuations (prefixtree)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chisquare

from prefixtree import PrefixTreeSynthesizer, completion
from prefixtree.completion import (
    _Chain,
    _home_share,
    _return_rate,
    _returns,
    _without_returns,
    complete_sequences,
)
from synth.datasets import montreal_taxonomy
from synth.errors import ConfigError
from synth.records import truncate_sequences
from synth.simulate import simulate_sequences
from tests.unit.test_prefixtree_synthesizer import (
    TABLE_1,
    ZeroNoise,
    as_multiset,
    long_format,
    metro_like,
    taxonomy_4,
)


def _fit(rows: list[list[str]], **kwargs: object) -> PrefixTreeSynthesizer:
    params: dict = {
        "epsilon": 1.0,
        "height": 4,
        "taxonomy": taxonomy_4(),
        "variant": "simple",
        "completion": "markov",
        "random_state": ZeroNoise(),
        **kwargs,
    }
    return PrefixTreeSynthesizer(**params).fit(long_format(rows))


def test_end_cells_hold_the_sequences_ending_at_each_node() -> None:
    syn = _fit(TABLE_1, thresholds={2: 1})
    tree = syn.tree_
    paths = {}
    for node, parent, loc in zip(tree["node"], tree["parent"], tree["location"], strict=True):
        paths[node] = (*paths.get(parent, ()), str(loc))
    expected = Counter(tuple(r) for r in TABLE_1)
    for node, path in paths.items():
        end = tree.loc[node, "end_noisy"]
        if len(path) == 4:
            assert pd.isna(end)
        else:
            assert end == expected[path]
            assert tree.loc[node, "ending"] == expected[path]
    # nothing pruned: nothing to complete, and the release is the database
    assert (tree["continued"] == 0).all()
    assert as_multiset(syn.sample()) == Counter(map(tuple, TABLE_1))


def test_pruned_mass_is_completed_not_ended() -> None:
    """Threshold 3 prunes every depth-2 node but L1 -> L2 (4 sequences) and L3 -> L2 (2 < 3,
    pruned). The paper would release 2 sequences ending at L3; with end cells we know none ends
    there, and they are continued instead."""
    paper = PrefixTreeSynthesizer(
        preset="kdd12",
        epsilon=1.0,
        height=4,
        taxonomy=taxonomy_4(),
        variant="simple",
        thresholds={2: 3},
        random_state=ZeroNoise(),
    ).fit(long_format(TABLE_1))
    syn = _fit(TABLE_1, thresholds={2: 3})
    tree = syn.tree_.set_index(syn.tree_["location"].astype(str) + syn.tree_["depth"].astype(str))
    assert tree.loc["L31", "ending"] == 0  # no sequence is just [L3]
    assert tree.loc["L31", "continued"] == 3  # L3 L2 L1, L3 L2, L3 L1: pruned children
    out = as_multiset(syn.sample())
    assert sum(out.values()) == len(TABLE_1)  # every sequence is released once
    assert out[("L3",)] == 0
    assert as_multiset(paper.sample())[("L3",)] == 3
    assert max(len(p) for p in out) <= 4


def test_completion_respects_caps_and_surviving_children() -> None:
    """Many pruned continuations under one node: no completed first step goes to a surviving
    child, and no child receives more than the pass threshold; the rest end at the node."""
    tax = metro_like(n_lines=1, per_line=30)
    rng = np.random.default_rng(3)
    rows = [["s0-0", "s0-1"]] * 50  # survives
    rows += [["s0-0", f"s0-{k}"] for k in rng.integers(2, 30, 200)]  # about 7 each: pruned
    syn = _fit(rows, height=3, taxonomy=tax, thresholds={2: 20}, length_share=0)
    assert syn.tree_["continued"].tolist() == [200, 0]
    out = syn.sample()
    assert out["seq_id"].nunique() == 250
    second = out[out["pos"] == 1]["location"].astype(str).value_counts()
    assert second["s0-1"] == 50  # the surviving child keeps exactly its own count
    # the tree knows no other child: at most the cap (20) goes through s0-0 itself
    assert second.drop("s0-1").to_dict() == {"s0-0": 20}


def test_chain_draws_follow_the_weights() -> None:
    chain = _Chain.build(np.array([7, 7, 7, 2]), np.array([1, 2, -1, 5]), np.array([10, 30, 60, 5]))
    rng = np.random.default_rng(0)
    draws = chain.draw(np.full(20_000, 7), rng)
    counts = [np.sum(draws == v) for v in (1, 2, -1)]
    assert chisquare(counts, f_exp=np.array([0.1, 0.3, 0.6]) * 20_000).pvalue > 1e-3
    assert (chain.draw(np.array([3, 2]), rng) == [-2, 5]).all()  # unknown context: -2
    np.testing.assert_allclose(chain.mass(np.array([7, 2, 0])), [100, 5, 0])


def test_return_rate_picks_nodes_by_their_own_mass() -> None:
    # nodes: A(0) -> X(1) -> A(2); A(0) -> Y(3) -> Z(4); home A; masses in pass thresholds
    state = np.array([0, 1, 0, 2, 3])
    home = np.zeros(5, dtype=np.int64)
    away = state != home
    continued = np.array([0.0, 8.0, 0.0, 4.0, 0.0])
    src, dst = np.array([0, 0, 1, 3]), np.array([1, 2, 0, 3])
    weight = np.array([20.0, 10.0, 12.0, 6.0])
    # X and Y are both wide (20 and 10 thresholds of moves): 12 returns over 30 moves, not the
    # 12 / 20 of X alone, whose return happened to survive
    assert _return_rate(src, dst, weight, home, continued, 4, away) == pytest.approx(0.4)
    assert _return_rate(src, dst, weight, home, continued, 4, ~away) == 0.0
    # net of the chain's own moves home (X: 0.2, Y: 0.1): r + (1 - r) * 1/6 = 0.4
    chain_home = np.array([0.0, 0.2, 0.0, 0.1, 0.0])
    net = _return_rate(src, dst, weight, home, continued, 4, away, chain_home)
    assert net == pytest.approx((0.4 - 1 / 6) / (5 / 6))
    # too little surviving evidence away from home (3 + 1 < SUPPORT): no rate
    thin = np.array([20.0, 10.0, 3.0, 1.0])
    assert _return_rate(src, dst, thin, home, continued, 4, away) is None


def test_return_rate_without_wide_nodes_uses_the_surviving_returns() -> None:
    # A(0) -> X1..X5 (1-5), each with a surviving return (3) and 0.5 completed: narrow (< WIDE);
    # A(0) -> Y(6) -> Z(7, 3): no return. Masses in pass thresholds
    state = np.arange(8)
    home = np.zeros(8, dtype=np.int64)
    away = state != home
    src = np.array([0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6])
    dst = np.array([1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 7])
    weight = np.array([100.0] * 6 + [3.0] * 6)
    continued = np.array([0.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.0, 0.0])
    # the nodes whose return survived: 15 back over their 17.5 moves (Y would dilute it with
    # moves whose returns were pruned among the completed ones)
    rate = _return_rate(src, dst, weight, home, continued, 8, away)
    assert rate == pytest.approx(15 / 17.5)
    # at home: the wide node A has 600 surviving moves, none of them home
    assert _return_rate(src, dst, weight, home, continued, 8, ~away) == 0.0
    # fewer than SUPPORT surviving moves in every set: no rate
    assert _return_rate(src[:8], dst[:8], weight[:8], home, continued, 8, away) is None


def _two_homes() -> dict[str, np.ndarray]:
    # A(0) -> X(1) -> A(2); B(3) -> X(4) -> C(5); A(0) -> A(6); locations A 0, B 1, X 2, C 3
    parent = np.array([-1, 0, 1, -1, 3, 4, 0])
    state = np.array([0, 2, 0, 1, 2, 3, 0])
    counts = np.array([140, 60, 30, 80, 50, 20, 20])
    ends = {0: 60, 1: 30, 3: 30, 4: 30}
    child = np.flatnonzero(parent >= 0)
    home = np.array([0, 0, 0, 1, 1, 1, 0])
    src = np.concatenate([parent[child], list(ends)])
    dst = np.concatenate([state[child], np.full(len(ends), -1)])
    weight = np.concatenate([counts[child], list(ends.values())])
    return {"src": src, "dst": dst, "weight": weight, "home": home, "state": state}


def test_returns_measured_away_are_drawn_per_sequence_not_by_the_chain() -> None:
    t = _two_homes()
    chain, rho = _returns(
        t["src"], t["dst"], t["weight"], t["home"], t["state"], np.zeros(7), np.ones(7), 4
    )
    # away nodes X (home A: 30 back of 30) and X (home B: 0 of 20): rate 30 / 50 = 0.6, and the
    # chain from X no longer sends anyone to A; X -> C takes X's whole move mass (50)
    assert rho == (0.0, pytest.approx(0.6))
    by_edge = dict(zip(zip(t["state"][t["src"]], t["dst"], strict=True), chain, strict=True))
    assert by_edge[(2, 0)] == 0.0 and by_edge[(2, 3)] == pytest.approx(50.0)
    assert by_edge[(0, 2)] == 60 and by_edge[(0, 0)] == 20  # at home: repeats stay in the chain
    assert by_edge[(2, -1)] == 30  # ends untouched


def test_without_evidence_away_the_chain_keeps_every_move() -> None:
    t = _two_homes()
    # pass thresholds of 10: 5 surviving moves away (< SUPPORT), 10 at home
    chain, rho = _returns(
        t["src"], t["dst"], t["weight"], t["home"], t["state"], np.zeros(7), np.full(7, 10), 4
    )
    np.testing.assert_array_equal(chain, t["weight"])
    assert rho == (pytest.approx(2 / 13), pytest.approx(2 / 13))  # A -> A: 20 of 130 from home


def test_without_returns_keeps_each_context_move_mass() -> None:
    context = np.array([0, 0, 0, 1, 1])
    dst = np.array([5, 6, -1, 5, 7])
    weight = np.array([30.0, 10.0, 60.0, 8.0, 2.0])
    back = np.array([True, False, False, True, True])
    out = _without_returns(context, dst, weight, back)
    np.testing.assert_allclose(out, [0.0, 40.0, 60.0, 8.0, 2.0])  # context 1: all returns, kept


def test_home_share_is_the_chain_probability_of_going_home() -> None:
    context, dst = np.array([0, 0, 1]), np.array([1, 2, 0])
    share = _home_share(
        context, dst, np.array([30.0, 10.0, 5.0]), np.array([0, 0, 1]), np.array([1, 2, 2]), 3
    )
    np.testing.assert_allclose(share, [0.75, 0.25, 0.0])


def test_completion_reproduces_the_simulated_return_home_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pruned from depth 2 on, the completed release keeps the simulator's return-home behaviour:
    the share of the moves from away that go back home (0.5 plus gravity moves home). Leaving the
    returns in the chain and drawing the raw rate on top (the canary) returns too often: others'
    returns become moves to the busy stations, where many live."""
    seqs = simulate_sequences(60_000, seed=4, popularity_sigma=1.5)  # busy hubs
    tax = montreal_taxonomy()
    common = {"preset": "kdd12", "epsilon": 1.0, "height": 6, "taxonomy": tax, "variant": "simple"}
    common |= {"completion": "markov", "random_state": ZeroNoise(), "thresholds": {2: 20}}

    def away_return_share(frame: pd.DataFrame) -> float:
        f = frame.sort_values(["seq_id", "pos"])
        first = f.groupby("seq_id")["location"].transform("first")
        nxt = f.groupby("seq_id")["location"].shift(-1)
        moves = nxt.notna() & (f["location"] != first)
        return float((nxt[moves] == first[moves]).mean())

    truth = away_return_share(truncate_sequences(seqs, 6))

    fitted = PrefixTreeSynthesizer(**common).fit(seqs)
    assert int(fitted.tree_["continued"].sum()) > 20_000  # much of it is completed
    release = fitted.sample()
    assert away_return_share(release) == pytest.approx(truth, abs=0.02)

    def chain_keeps_returns(src, dst, weight, home, state, continued, node_cap, n_loc):  # type: ignore[no-untyped-def]
        # the canary: every move stays in the chain and the rates drawn on top are the raw ones
        moves = dst >= 0
        args = (src[moves], dst[moves], weight[moves] / node_cap[src[moves]], home)
        away = state % n_loc != home
        at_home = _return_rate(*args, continued / node_cap, n_loc, ~away) or 0.0
        rate = _return_rate(*args, continued / node_cap, n_loc, away)
        return weight.astype(np.float64), (at_home, at_home if rate is None else rate)

    monkeypatch.setattr(completion, "_returns", chain_keeps_returns)
    broken = PrefixTreeSynthesizer(**common).fit(seqs).sample()
    assert away_return_share(broken) > truth + 0.03


def test_complete_sequences_conserves_mass_and_height() -> None:
    parent = np.array([-1, -1, 0, 0, 1])
    depth = np.array([1, 1, 2, 2, 2])
    state = np.array([0, 1, 1, 2, 0])
    counts = np.array([100, 50, 30, 20, 10])
    end = np.array([10, 5, 0, 0, 0])
    continued = np.array([40, 35, 0, 0, 0])
    origin, steps, copies = complete_sequences(
        parent,
        depth,
        state,
        counts,
        end,
        continued,
        height=3,
        n_states=3,
        n_locations=3,
        child_cap=np.array([0, 100, 100, 0]),
        rng=np.random.default_rng(1),
    )
    assert np.bincount(origin, weights=copies, minlength=5).tolist() == [40, 35, 0, 0, 0]
    assert steps.shape[1] == 3  # height columns (a root completion fills them all)
    taken = {(0, 1), (0, 2), (1, 0)}
    for o, first in zip(origin, steps[:, 0], strict=True):
        assert first == -1 or (int(o), int(first)) not in taken


def test_seeded_completion_is_reproducible_and_streams_identically() -> None:
    rng = np.random.default_rng(2)
    rows = [
        [f"s{rng.integers(4)}-{rng.integers(17)}" for _ in range(rng.integers(1, 6))]
        for _ in range(3000)
    ]
    kwargs = {
        "preset": "kdd12",
        "epsilon": 1.0,
        "height": 5,
        "taxonomy": metro_like(),
        "completion": "markov",
    }
    a = PrefixTreeSynthesizer(**kwargs, random_state=4).fit(long_format(rows))
    b = PrefixTreeSynthesizer(**kwargs, random_state=4).fit(long_format(rows))
    assert a.sample().equals(b.sample())
    chunks = pd.concat(a.iter_sample(chunk_rows=500), ignore_index=True)
    assert chunks.equals(a.sample())
    assert a.tree_["continued"].sum() > 0
    # same budget as without completion
    plain = PrefixTreeSynthesizer(**{**kwargs, "completion": "none"}, random_state=4)
    plain.fit(long_format(rows))
    assert a.ledger_.spent_epsilon == plain.ledger_.spent_epsilon
    assert any("end-of-sequence" in s.note for s in a.ledger_.spends)
    assert a.parameters()["completion"] == "markov"


def test_completed_trajectories_keep_times_non_decreasing() -> None:
    rng = np.random.default_rng(1)
    rows = [[str(x) for x in rng.choice(["L1", "L2", "L3", "L4"], size=4)] for _ in range(800)]
    seqs = long_format(rows)
    seqs["time"] = pd.to_datetime("2019-11-27 06:00") + pd.to_timedelta(
        np.sort(rng.integers(0, 600, len(seqs))), unit="min"
    )
    syn = PrefixTreeSynthesizer(
        preset="kdd12",
        epsilon=2.0,
        height=4,
        taxonomy=taxonomy_4(),
        time_bin=120,
        completion="markov",
        random_state=2,
    ).fit(seqs)
    out = syn.sample()
    assert syn.tree_["continued"].sum() > 0
    minutes = out["time"].astype(str).str.slice(0, 2).astype(int)
    assert (minutes.groupby(out["seq_id"]).diff().fillna(0) >= 0).all()
    assert out.groupby("seq_id").size().max() <= 4


def test_bad_completion_value() -> None:
    with pytest.raises(ConfigError, match="completion"):
        PrefixTreeSynthesizer(
            preset="kdd12", epsilon=1.0, height=2, taxonomy=taxonomy_4(), completion="ngram"
        ).fit(long_format([["L1"]]))


def test_end_cells_are_the_same_from_the_duckdb_engine(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    rows = [
        [f"s{rng.integers(2)}-{rng.integers(5)}" for _ in range(rng.integers(1, 5))]
        for _ in range(400)
    ]
    path = tmp_path / "seqs.parquet"
    long_format(rows).to_parquet(path)
    kwargs: dict = {
        "epsilon": 1.0,
        "height": 4,
        "taxonomy": metro_like(n_lines=2, per_line=5),
        "completion": "markov",
        "thresholds": {2: 8},
    }
    trees = [
        PrefixTreeSynthesizer(**kwargs, engine=engine, random_state=ZeroNoise()).fit(path).tree_
        for engine in ("memory", "duckdb")
    ]
    pd.testing.assert_frame_equal(trees[0], trees[1])
    assert trees[0]["continued"].sum() > 0


def test_smoothing_constant_is_the_threshold_most_mass_met() -> None:
    from prefixtree.completion import _weighted_median

    assert _weighted_median(np.array([10, 133, 3295]), np.array([900, 80, 20])) == 10.0
    assert _weighted_median(np.array([10, 133]), np.array([10, 990])) == 133.0
    assert _weighted_median(np.array([5]), np.array([0])) == 1.0


@pytest.mark.parametrize("n_states", [3, 68, 24_000])
def test_distinct_rows_match_numpy_unique(n_states: int) -> None:
    from prefixtree.completion import _distinct_rows

    rng = np.random.default_rng(n_states)
    rows = rng.integers(-1, min(n_states, 4), (3000, 12))
    rows[:, 0] = rng.integers(0, 5, 3000)
    rows[:, 1:] = np.where(rows[:, 1:] >= 0, rows[:, 1:] * (n_states // 4), -1)
    got, counts = _distinct_rows(rows, n_states)
    want, want_counts = np.unique(rows, axis=0, return_counts=True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(counts, want_counts)
