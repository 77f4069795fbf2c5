"""Completion hints of the prefix tree (issue 17): the pruned cells whose noisy count reached a
lower threshold guide the Markov completion; they come from the same histogram (post-processing),
so the tree's nodes must be distributed exactly as without them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import prefixtree.tree as tree_module
from prefixtree import PrefixTreeSynthesizer
from prefixtree.hints import split_hints
from synth.errors import ConfigError
from tests.conftest import ZeroNoise, flat_taxonomy


def sequences(rows: list[tuple[list[str], int]]) -> pd.DataFrame:
    """Long-format sequences: each (locations, copies) pair repeated."""
    out, sid = [], 0
    for locations, copies in rows:
        for _ in range(copies):
            out += [(f"c{sid}", pos, loc) for pos, loc in enumerate(locations)]
            sid += 1
    return pd.DataFrame(out, columns=["seq_id", "pos", "location"])


def test_hints_only_on_the_heavy_levels_and_below_the_threshold() -> None:
    syn = PrefixTreeSynthesizer(epsilon=1.0, height=4, taxonomy=flat_taxonomy(400), random_state=1)
    syn.fit(sequences([(["s0", "s1"], 50), (["s2"], 30)]))
    plan = syn.sub_levels_.set_index("level")
    # weights 1, ln(400) / 2 = 3.0, 0.75, 0.19: only level 2 has at least half the largest
    assert plan["hint_threshold"].isna().tolist() == [True, False, True, True]
    assert 1 <= plan.loc[2, "hint_threshold"] < plan.loc[2, "threshold"]
    params = syn.parameters()
    assert params["completion_hints"] == 3.0
    assert [row["hint_threshold"] for row in params["sub_levels"]][1] == plan.loc[
        2, "hint_threshold"
    ]
    notes = [s.note for s in syn.ledger_.spends if "level 2" in s.label]
    assert len(notes) == 1 and "completion hints (post-processing)" in notes[0]


def test_hints_off_by_preset_option_and_rules() -> None:
    tax = flat_taxonomy(400)
    for kwargs in ({"completion_hints": 0}, {"preset": "kdd12"}, {"completion": "none"}):
        syn = PrefixTreeSynthesizer(epsilon=1.0, height=3, taxonomy=tax, **kwargs)
        syn.check_params()
        assert syn.config_["completion_hints"] == 0
    with pytest.raises(ConfigError, match="completion_hints needs"):
        PrefixTreeSynthesizer(
            epsilon=1.0, height=3, taxonomy=tax, completion="none", completion_hints=3
        ).check_params()
    with pytest.raises(ConfigError, match="completion_hints must be"):
        PrefixTreeSynthesizer(
            epsilon=1.0, height=3, taxonomy=tax, completion_hints=-1
        ).check_params()


def test_completion_follows_a_hint() -> None:
    """Exact counts: (s0, s1) is pruned at level 2 but reaches the hint threshold, and it is all
    that went on below s0, so every continued sequence of s0 goes there."""
    data = sequences([(["s0"], 60), (["s0", "s1"], 6)])
    kwargs: dict[str, Any] = {"epsilon": 1.0, "height": 2, "taxonomy": flat_taxonomy(30)}
    syn = PrefixTreeSynthesizer(random_state=ZeroNoise(), **kwargs).fit(data)
    level2 = syn.sub_levels_.set_index("level").loc[2]
    assert level2["hint_threshold"] <= 6 < level2["threshold"]  # the premise
    assert syn.tree_["depth"].max() == 1  # the pair is no node

    def pairs(model: PrefixTreeSynthesizer) -> int:
        out = model.sample()
        seqs = out.groupby("seq_id")["location"].agg(tuple)
        return int((seqs == ("s0", "s1")).sum())

    assert pairs(syn) == 6
    off = PrefixTreeSynthesizer(random_state=ZeroNoise(), completion_hints=0, **kwargs).fit(data)
    assert pairs(off) == 0  # without hints the chain knows nothing of s0 -> s1


def _node_stats(n_seeds: int) -> tuple[np.ndarray, np.ndarray]:
    """Per noise seed: the number of depth-2 nodes and their summed noisy count, with and without
    hints (auto's default and completion_hints=0)."""
    tax = flat_taxonomy(40)
    rng = np.random.default_rng(0)
    rows = [([f"s{a}", f"s{b}"], 1) for a, b in rng.integers(0, 8, (600, 2))]
    data = sequences(rows)
    stats = np.zeros((2, n_seeds, 2))
    for k, hints in enumerate((3.0, 0.0)):
        for seed in range(n_seeds):
            syn = PrefixTreeSynthesizer(
                epsilon=1.0, height=2, taxonomy=tax, random_state=seed, completion_hints=hints
            ).fit(data)
            deep = syn.tree_[syn.tree_["depth"] == 2]
            stats[k, seed] = (len(deep), deep["noisy_count"].sum())
    return stats[0], stats[1]


def _same_distribution(with_hints: np.ndarray, without: np.ndarray) -> bool:
    """Means of both statistics agree within 4 standard errors."""
    diff = with_hints.mean(axis=0) - without.mean(axis=0)
    se = np.sqrt(with_hints.var(axis=0) / len(with_hints) + without.var(axis=0) / len(without))
    return bool(np.all(np.abs(diff) <= 4 * se + 1e-9))


def test_hints_leave_the_nodes_distribution_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The empty cells drawn at the hint threshold and kept above the pass threshold are
    distributed as if drawn there; a split that keeps every cell reaching the hint threshold as
    a node (the canary) is caught by the same comparison."""
    assert _same_distribution(*_node_stats(120))

    def leaky(present: Any, fake: Any, threshold: int) -> Any:
        hinted, _, _ = split_hints(present, fake, threshold)
        return hinted, present[3], fake  # every cell at the hint threshold passes

    monkeypatch.setattr(tree_module, "split_hints", leaky)
    assert not _same_distribution(*_node_stats(40))
