"""The factorised time model and the length fix (prefixtree.timing, prefixtree.lengths): sampling
rules, table sensitivities, and the synthesizer's ledger lines."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from prefixtree import PrefixTreeSynthesizer
from prefixtree.lengths import consistent_distribution, length_coupling, retarget_lengths
from prefixtree.timing import (
    MAX_GAPS,
    TimeTables,
    first_cells,
    gap_cells,
    sample_minutes,
)
from synth.errors import ConfigError
from tests.conftest import ZeroNoise, flat_taxonomy


def _tables(n_bins: int = 24, width: int = 60) -> TimeTables:
    rng = np.random.default_rng(0)
    first = rng.integers(-5, 50, size=(3, n_bins))
    gap = rng.integers(-5, 50, size=(16, 13))
    return TimeTables(width, n_bins, first, gap)


def test_sampled_times_are_in_order_within_bins_and_the_day() -> None:
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 9, size=5000)
    locs = np.where(np.arange(8)[None, :] < lengths[:, None], rng.integers(0, 3, (5000, 8)), -1)
    minutes = sample_minutes(_tables(), lengths, locs, rng)
    valid = np.arange(8)[None, :] < lengths[:, None]
    assert ((minutes >= 0) == valid).all()
    assert minutes[valid].max() < 1440
    gaps = np.diff(np.where(valid, minutes, 1 << 20), axis=1)
    assert (gaps[valid[:, 1:]] >= 0).all()  # non-decreasing within every sequence
    # minutes spread over their bin (uniform rule): every minute of the hour is used
    assert np.unique(minutes[valid] % 60).size == 60


def test_sampled_first_bins_follow_the_first_table() -> None:
    first = np.zeros((3, 24), dtype=np.int64)
    first[0, 7], first[1, 17] = 100, 100  # one-tap cards at 07, two-tap cards at 17
    gap = np.zeros((16, 13), dtype=np.int64)
    gap[:, 0] = 100  # every next tap in the same bin
    tables = TimeTables(60, 24, first, gap)
    lengths = np.array([1, 2, 2])
    locs = np.array([[0, -1], [0, 1], [1, 1]])
    minutes = sample_minutes(tables, lengths, locs, np.random.default_rng(2))
    assert (minutes[0, 0] // 60, minutes[1, 0] // 60, minutes[1, 1] // 60) == (7, 17, 17)


def test_tables_move_by_their_sensitivity_for_one_card() -> None:
    """Adding one card (of any length, up to h) moves the first table by 1 and the gap table by
    at most MAX_GAPS (L1), whatever the card."""
    rng = np.random.default_rng(3)
    n, h = 200, 8
    lengths = rng.integers(1, h + 1, n)
    bins = np.sort(rng.integers(0, 24, (n, h)), axis=1)
    locs = rng.integers(0, 4, (n, h))
    base_f, base_g = first_cells(lengths, bins, 24), gap_cells(lengths, bins, locs, 24, 60)
    for new_len in range(1, h + 1):
        lp = np.append(lengths, new_len)
        bp = np.vstack([bins, np.arange(h) * 3 % 24])
        bp[-1] = np.sort(bp[-1])
        lc = np.vstack([locs, np.arange(h) % 2])
        diff_f = np.abs(first_cells(lp, bp, 24) - base_f).sum()
        diff_g = np.abs(gap_cells(lp, bp, lc, 24, 60) - base_g).sum()
        assert diff_f == 1
        assert diff_g == min(new_len - 1, MAX_GAPS)


def test_norm_sub_and_coupling() -> None:
    p = consistent_distribution([50, -10, 3, 0, 20])
    assert p.min() >= 0 and p.sum() == pytest.approx(1)
    assert p[1] == 0
    cur, tgt = np.array([56, 20, 12, 12.0]), np.array([27, 33, 20, 20.0])
    coupling = length_coupling(cur, tgt)
    np.testing.assert_allclose(coupling.sum(axis=1), 1)
    np.testing.assert_allclose((cur / cur.sum()) @ coupling, tgt / tgt.sum())
    assert coupling[1, 1] == 1  # a length with too few sequences keeps all of its own


def test_retarget_keeps_prefixes_and_reaches_the_target() -> None:
    tree = pd.DataFrame(
        {
            "parent": [-1, -1, 0, 1],
            "depth": [1, 1, 2, 2],
            "location": pd.Categorical.from_codes([0, 1, 1, 0], categories=["a", "b"]),
            "count": [10, 10, 5, 5],
        }
    )
    from prefixtree.lengths import LocationChain

    chain = LocationChain.from_tree(tree, 2)
    locs = np.full((1000, 4), -1)
    locs[:, 0] = 0
    locs[:500, 1:3] = 1
    lengths = np.where(np.arange(1000) < 500, 3, 1)
    coupling = length_coupling(np.bincount(lengths - 1, minlength=4), [0, 0.5, 0.5, 0])
    out, target = retarget_lengths(locs, lengths, coupling, chain, np.random.default_rng(4))
    assert (out[:, 0] == 0).all()  # prefixes kept
    assert (np.bincount(target, minlength=4)[[2, 3]] == [500, 500]).all()
    assert ((out >= 0).sum(axis=1) == target).all()
    assert (out[target == 2, 1] == 1).all()  # a -> b, the tree's only transition from a


def _cards() -> pd.DataFrame:
    rows = []
    for i in range(60):
        n = 1 + i % 3
        for p in range(n):
            rows.append((f"c{i}", p, f"s{(i + p) % 3}", f"{7 + 5 * p:02d}:{i % 60:02d}"))
    return pd.DataFrame(rows, columns=["seq_id", "pos", "location", "time"])


def test_factorised_fit_ledger_lines_and_release() -> None:
    syn = PrefixTreeSynthesizer(
        epsilon=1.0, height=4, taxonomy=flat_taxonomy(3), time_bin=60, random_state=5
    ).fit(_cards())
    assert syn.parameters()["time_model"] == "factorised"
    spends = {s.label: s for s in syn.ledger_.spends}
    lengths = spends["sequence lengths: cards by truncated length 1..h"]
    first = spends["time: first tap's bin by length class"]
    gap = spends["time: gap to the next tap by repeat and period of the tap before"]
    assert float(lengths.epsilon) == pytest.approx(0.02) and lengths.scale >= 50
    assert float(first.epsilon) == pytest.approx(0.06) and first.scale >= 1 / 0.06
    assert gap.sensitivity == MAX_GAPS and gap.scale >= MAX_GAPS / 0.06
    assert float(sum(s.epsilon for s in syn.ledger_.spends)) <= 1.0 + 1e-12
    assert "time_bin" not in syn.tree_.columns  # the tree counts locations only
    out = syn.sample()
    assert out["time"].str.fullmatch(r"\d\d:\d\d").all()
    again = PrefixTreeSynthesizer(
        epsilon=1.0, height=4, taxonomy=flat_taxonomy(3), time_bin=60, random_state=5
    ).fit(_cards())
    pd.testing.assert_frame_equal(again.sample(), out)  # seeded: reproducible


def test_zero_noise_untimed_lengths_follow_the_histogram() -> None:
    data = _cards().drop(columns="time")
    syn = PrefixTreeSynthesizer(
        epsilon=1.0, height=4, taxonomy=flat_taxonomy(3), random_state=ZeroNoise()
    ).fit(data)
    released = syn.sample().groupby("seq_id").size().value_counts().sort_index()
    real = data.groupby("seq_id").size().value_counts().sort_index()
    np.testing.assert_allclose(
        released.to_numpy() / released.sum(), real.to_numpy() / real.sum(), atol=0.05
    )


def test_time_model_options() -> None:
    common = {"epsilon": 1.0, "height": 3, "taxonomy": flat_taxonomy(3)}
    with pytest.raises(ConfigError, match="needs time_bin"):
        PrefixTreeSynthesizer(**common, time_model="factorised").check_params()
    with pytest.raises(ConfigError, match="time_model"):
        PrefixTreeSynthesizer(**common, time_bin=60, time_model="nope").check_params()
    with pytest.raises(ConfigError, match="length_share needs"):
        PrefixTreeSynthesizer(
            **common, time_bin=60, time_model="tree", length_share=0.1
        ).check_params()
    tree = PrefixTreeSynthesizer(**common, time_bin=60, time_model="tree", random_state=1)
    tree.fit(_cards())
    assert "time_bin" in tree.tree_.columns
    assert tree.parameters()["length_share"] == 0


def test_gap_classes_match_the_tables_repeat_share() -> None:
    """Released sequences with too many repeats: pairs move to the non-repeat rows so that the
    share drawn from the repeat rows is the table's."""
    from prefixtree.timing import PERIODS, gap_classes_of_pairs

    gap = np.zeros((2 * PERIODS, 13), dtype=np.int64)
    gap[:PERIODS, 0], gap[PERIODS:, 9] = 300, 100  # the table: a quarter of the gaps repeat
    tables = TimeTables(60, 24, np.ones((3, 24), dtype=np.int64), gap)
    lengths = np.full(20000, 2)
    locs = np.zeros((20000, 2), dtype=np.int64)
    locs[:5000, 1] = 1  # three quarters of the released pairs repeat
    repeat = gap_classes_of_pairs(tables, lengths, locs, np.random.default_rng(6))
    assert repeat[:, 0].mean() == pytest.approx(0.25, abs=0.02)
    assert not repeat[:5000, 0].any()  # a pair at two locations stays a non-repeat


def test_sequences_made_longer_are_copies_of_released_ones() -> None:
    from prefixtree.lengths import Donors, LocationChain

    tree = pd.DataFrame(
        {
            "parent": [-1],
            "depth": [1],
            "location": pd.Categorical.from_codes([0], categories=["a", "b", "c"]),
            "count": [10],
        }
    )
    chain = LocationChain.from_tree(tree, 3)
    donors = Donors(
        paths=np.array([[0, -1, -1], [1, 2, -1], [2, 2, 1]]),
        lengths=np.array([1, 2, 3]),
        copies=np.array([5, 3, 0]),  # no released sequence of length 3
    )
    locs = np.array([[0, -1, -1]] * 400)
    lengths = np.ones(400, dtype=np.int64)
    coupling = length_coupling([400, 0, 0], [0.5, 0.25, 0.25])
    out, target = retarget_lengths(locs, lengths, coupling, chain, np.random.default_rng(7), donors)
    assert ((out >= 0).sum(axis=1) == target).all()
    assert (out[target == 2] == [1, 2, -1]).all()  # the only released sequence of length 2
    assert (out[target == 3, 0] == 0).all()  # no donor: the sequence is continued (chain)


def test_clock_labels_of_no_minutes() -> None:
    """A chunk with no timed point (every sequence of it dropped) gives no label, not an error."""
    from prefixtree.timing import clock_labels

    assert clock_labels(np.array([], dtype=np.int64)).shape == (0,)
    assert clock_labels(np.array([0, 61, 1439])).tolist() == ["00:00", "01:01", "23:59"]
