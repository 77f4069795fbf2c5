"""Top-k sequential patterns and TP / FP / FD (paper 004, sections 3.3 and 5.1).

The PyPI ``prefixspan`` package is the oracle: it counts each sequence once per pattern, as here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from prefixspan import PrefixSpan

from synth.errors import ConfigError
from synth.evaluate.patterns import (
    mine_top_k,
    pattern_support,
    pattern_utility,
    top_k_patterns,
    utility_curve,
)
from synth.records import encode_sequences, load_sequences


def _long(seqs: list[list[str]]) -> pd.DataFrame:
    rows = [(f"s{i}", p, loc) for i, seq in enumerate(seqs) for p, loc in enumerate(seq)]
    return pd.DataFrame(rows, columns=["seq_id", "pos", "location"])


def _oracle(db: list[list[int]], k: int, threshold: int) -> list[tuple[tuple[int, ...], int]]:
    ps = PrefixSpan(db)
    ps.minlen = 2
    found = [(tuple(p), s) for s, p in ps.frequent(threshold)]
    return sorted(found, key=lambda x: (-x[1], x[0]))[:k]


def test_hand_computed_top_k_with_tie_break() -> None:
    db = _long([["a", "b", "c"], ["a", "c", "b"], ["b", "a"], ["a", "a"]])
    top = top_k_patterns(db, 5)
    # supports: (a,b)=2 (a,c)=2; then support 1 in lexicographic order: (a,a) (a,b,c) (a,c,b) ...
    assert top == [
        (("a", "b"), 2),
        (("a", "c"), 2),
        (("a", "a"), 1),
        (("a", "b", "c"), 1),
        (("a", "c", "b"), 1),
    ]
    # ab ac bc abc acb cb ba aa: every pattern of length > 1 there is
    assert len(top_k_patterns(db, 100)) == 8


def test_pattern_support_counts_each_sequence_once() -> None:
    codes = np.array([[0, 1, 0, 1], [1, 0, 1, -1], [0, 0, -1, -1]])
    assert pattern_support(codes, [0, 1]) == 2
    assert pattern_support(codes, [0, 0]) == 2
    assert pattern_support(codes, [1, 0, 1]) == 2
    assert pattern_support(codes, [0, 1, 0, 1]) == 1
    assert pattern_support(codes, [1, 1, 1]) == 0


def test_tp_fp_fd_as_defined_in_section_3_3() -> None:
    assert pattern_utility([("x",), ("y",), ("z",)], [("x",), ("y",), ("w",)]) == {
        "tp": 2,
        "fp": 1,
        "fd": 1,
    }
    assert pattern_utility([("x",), ("y",)], [("x",), ("w",), ("v",)]) == {
        "tp": 1,
        "fp": 2,
        "fd": 1,
    }
    original = [(("a", "b"), 9), (("b", "c"), 8), (("c", "d"), 7)]
    release = [(("b", "c"), 9), (("a", "b"), 5), (("d", "e"), 4)]
    assert utility_curve(original, release, [1, 2, 3]) == [
        {"k": 1, "tp": 0, "fp": 1, "fd": 1},
        {"k": 2, "tp": 2, "fp": 0, "fd": 0},
        {"k": 3, "tp": 2, "fp": 1, "fd": 1},
    ]


@pytest.mark.parametrize("seed", range(6))
def test_agrees_with_prefixspan_on_random_data(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, width, n_loc = int(rng.integers(20, 400)), int(rng.integers(2, 9)), int(rng.integers(2, 9))
    codes = rng.integers(0, n_loc, (n, width))
    codes[np.arange(width) >= rng.integers(1, width + 1, n)[:, None]] = -1
    k = int(rng.integers(5, 60))
    mine = mine_top_k(codes, k)
    db = [r[r >= 0].tolist() for r in codes]
    # fewer than k patterns exist only when the oracle finds no more at threshold 1
    assert mine == _oracle(db, k, mine[-1][1] if len(mine) == k else 1)
    assert all(pattern_support(codes, p) == s for p, s in mine)


def test_agrees_with_prefixspan_on_sube_lines(shared_data) -> None:
    seqs = load_sequences(
        shared_data / "sube-buenos-aires" / "martes_trx.csv", location_column="id_linea"
    )
    locations = sorted(seqs["location"].unique())
    codes = encode_sequences(seqs, locations)
    k = 300
    mine = mine_top_k(codes, k)
    assert len(mine) == k
    db = [r[r >= 0].tolist() for r in codes]
    assert mine == _oracle(db, k, mine[-1][1])
    named = top_k_patterns(seqs, k)
    assert [s for _, s in named] == [s for _, s in mine]
    assert named[0] == (("32", "32"), 829)  # line 32 (subway) boarded twice by 829 cards


def test_bad_parameters() -> None:
    with pytest.raises(ConfigError):
        mine_top_k(np.zeros((2, 2), dtype=int), 0)
    assert mine_top_k(np.full((3, 2), -1), 5) == []
