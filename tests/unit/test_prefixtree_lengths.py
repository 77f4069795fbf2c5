"""The length fix's moves (prefixtree.lengths): which released sequences move (the completions,
never the tree's endings) and how a lengthened one is built (released sequences of at most
``LONGEST_PIECE`` locations, concatenated)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from prefixtree.lengths import (
    LONGEST_PIECE,
    Donors,
    LocationChain,
    kind_couplings,
    pieces,
    retarget_lengths,
)


def _chain(n_locations: int) -> LocationChain:
    tree = pd.DataFrame(
        {
            "parent": [-1],
            "depth": [1],
            "location": pd.Categorical.from_codes([0], categories=list("abcdefgh")[:n_locations]),
            "count": [10],
        }
    )
    return LocationChain.from_tree(tree, n_locations)


@pytest.mark.parametrize("length", range(1, 13))
def test_pieces_add_up_without_single_locations(length: int) -> None:
    parts = pieces(length)
    assert sum(parts) == length
    assert max(parts) <= LONGEST_PIECE
    assert length == 1 or min(parts) >= 2
    assert pieces(4) == [2, 2] and pieces(8) == [3, 3, 2] and pieces(3) == [3]


def test_longer_sequences_are_concatenations_of_short_released_ones() -> None:
    donors = Donors(
        paths=np.array([[0, -1, -1, -1, -1, -1], [1, 2, -1, -1, -1, -1], [3, 3, 4, -1, -1, -1]]),
        lengths=np.array([1, 2, 3]),
        copies=np.array([5, 3, 2]),
    )
    coupling = np.zeros((6, 6))
    coupling[0] = [0, 0.2, 0.2, 0.2, 0.2, 0.2]
    coupling[1:] = np.eye(6)[1:]
    locs = np.full((1000, 6), -1)
    locs[:, 0] = 5  # a location no donor holds
    lengths = np.ones(1000, dtype=np.int64)
    out, target = retarget_lengths(
        locs, lengths, coupling, _chain(6), np.random.default_rng(3), donors
    )
    assert ((out >= 0).sum(axis=1) == target).all()
    assert set(np.unique(target)) == {2, 3, 4, 5, 6}
    pair, triple = [1, 2], [3, 3, 4]
    for row, n in zip(out, target, strict=True):
        at = 0
        for piece in pieces(int(n)):
            assert list(row[at : at + piece]) == (pair if piece == 2 else triple)
            at += piece
    assert not (out == 5).any()  # replaced, not continued


def test_a_large_pool_of_a_length_is_copied_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    import prefixtree.lengths as lengths_module

    monkeypatch.setattr(lengths_module, "WHOLE_POOL", 3)
    paths = np.full((6, 4), -1)
    paths[:2, :2] = [[1, 2], [2, 1]]  # two distinct pairs
    paths[2:5] = [[3, 3, 3, 3], [3, 1, 3, 1], [1, 1, 1, 1]]  # three distinct fours: a pool of 3
    paths[5, :3] = [0, 0, 0]
    donors = Donors(paths, np.array([2, 2, 4, 4, 4, 3]), np.array([4, 4, 1, 1, 1, 0]))
    locs = np.full((600, 4), -1)
    locs[:, 0] = 0
    coupling = np.eye(4)
    coupling[0] = [0, 0, 0.5, 0.5]
    out, target = retarget_lengths(
        locs, np.ones(600, dtype=np.int64), coupling, _chain(4), np.random.default_rng(9), donors
    )
    fours = {tuple(p) for p in paths[2:5]}
    assert {tuple(r) for r in out[target == 4]} == fours  # whole copies of the pool
    # no released sequence of length 3: the chain continues (home, its only move here)
    assert (out[target == 3] == [0, 0, 0, -1]).all()


def test_tree_endings_stay_and_completions_carry_the_move() -> None:
    depth = np.array([1, 1, 2])
    ending = np.array([300, 500, 200])
    kind = np.array([0, 2, 1], dtype=np.int8)  # tree ending, root completion, completion
    couplings = kind_couplings(depth, ending, kind, np.array([0.3, 0.5, 0.2]), 3)
    np.testing.assert_allclose(couplings[0], np.eye(3))
    np.testing.assert_allclose(couplings[1], couplings[2])
    np.testing.assert_allclose(couplings[2][0], [0, 0.6, 0.4])  # 300 to 2, 200 to 3
    np.testing.assert_allclose(couplings[2][1], [0, 1, 0])
    # the release: entry rows repeated by copies; the tree's single locations are untouched
    locs = np.full((1000, 3), -1)
    locs[:300, 0] = 0
    locs[300:800, 0] = 1
    locs[800:, :2] = [2, 2]
    lengths = np.repeat(depth, ending)
    kinds = np.repeat(kind, ending)
    donors = Donors(np.array([[0, -1, -1], [1, -1, -1], [2, 2, -1]]), depth, ending)
    out, target = retarget_lengths(
        locs, lengths, couplings, _chain(3), np.random.default_rng(5), donors, kinds
    )
    assert (out[:300] == [0, -1, -1]).all()
    assert (target[:300] == 1).all()
    assert np.bincount(target, minlength=4)[1:].tolist() == pytest.approx([300, 500, 200], abs=60)


def test_without_completions_every_entry_moves() -> None:
    couplings = kind_couplings(
        np.array([1, 2]), np.array([800, 200]), np.zeros(2, dtype=np.int8), np.array([0.5, 0.5]), 2
    )
    np.testing.assert_allclose(couplings[0], [[0.625, 0.375], [0, 1]])


def test_the_parameters_name_the_length_rule() -> None:
    from prefixtree import PrefixTreeSynthesizer
    from tests.conftest import flat_taxonomy

    cards = pd.DataFrame(
        {
            "seq_id": [0, 0, 1, 2, 2, 2],
            "pos": [0, 1, 0, 0, 1, 2],
            "location": ["s0", "s1", "s0", "s0", "s1", "s2"],
        }
    )
    common = {"epsilon": 1.0, "height": 3, "taxonomy": flat_taxonomy(3), "random_state": 1}
    fixed = PrefixTreeSynthesizer(**common).fit(cards).parameters()
    assert "concatenation of released sequences of at most 3" in fixed["length_rule"]
    assert "at least 2000 distinct" in fixed["length_rule"]
    assert "completions" in fixed["length_rule"]
    plain = PrefixTreeSynthesizer(**common, length_share=0).fit(cards).parameters()
    assert "length_rule" not in plain
