"""PrefixTreeSynthesizer: budget plan, ledger, release, trajectories, validation (KDD 2012)."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from prefixtree import PrefixTreeSynthesizer
from synth.errors import ConfigError, InputError
from synth.taxonomy import Taxonomy
from tests.conftest import TABLE_1
from tests.conftest import PassingZeroNoise as ZeroNoise


def long_format(rows: list[list[str]], ids: list[str] | None = None) -> pd.DataFrame:
    ids = ids or [f"c{i}" for i in range(len(rows))]
    return pd.DataFrame(
        [(sid, k, loc) for sid, row in zip(ids, rows, strict=True) for k, loc in enumerate(row)],
        columns=["seq_id", "pos", "location"],
    )


def as_multiset(release: pd.DataFrame) -> Counter:
    grouped = release.sort_values(["seq_id", "pos"]).groupby("seq_id")["location"]
    return Counter(tuple(map(str, g)) for _, g in grouped)


def taxonomy_4() -> Taxonomy:
    edges = [("L1", "G12"), ("L2", "G12"), ("L3", "G34"), ("L4", "G34")]
    return Taxonomy.from_edges([*edges, ("G12", "root"), ("G34", "root")])


def metro_like(n_lines: int = 4, per_line: int = 17) -> Taxonomy:
    edges = [(f"s{k}-{i}", f"line{k}") for k in range(n_lines) for i in range(per_line)]
    return Taxonomy.from_edges(edges + [(f"line{k}", "root") for k in range(n_lines)])


@pytest.mark.parametrize("variant", ["hybrid", "simple"])
def test_zero_noise_release_is_the_database(variant: str) -> None:
    syn = PrefixTreeSynthesizer(
        preset="kdd12",
        epsilon=1.0,
        height=4,
        taxonomy=taxonomy_4(),
        variant=variant,
        thresholds={2: 1},
        random_state=ZeroNoise(),
    ).fit(long_format(TABLE_1))
    assert as_multiset(syn.sample()) == Counter(map(tuple, TABLE_1))
    tree = syn.tree_
    assert (tree["count"] == tree["noisy_count"]).all()  # true counts are already consistent
    ends = dict(zip(tree["node"], tree["ending"], strict=True))
    assert sum(ends.values()) == len(TABLE_1)


def test_truncation_to_height() -> None:
    syn = PrefixTreeSynthesizer(
        preset="kdd12",
        epsilon=1.0,
        height=2,
        taxonomy=taxonomy_4(),
        thresholds={2: 1},
        random_state=ZeroNoise(),
    ).fit(long_format(TABLE_1))
    assert as_multiset(syn.sample()) == Counter(tuple(r[:2]) for r in TABLE_1)
    assert syn.tree_["depth"].max() == 2


def test_two_level_budget_split_follows_the_paper() -> None:
    tax = metro_like()  # f = 68 / 4 = 17
    rows = [["s0-1", "s1-2"], ["s0-1"]] * 20
    syn = PrefixTreeSynthesizer(preset="kdd12", epsilon=1.0, height=3, taxonomy=tax, random_state=0)
    syn.fit(long_format(rows))
    plan = syn.sub_levels_[syn.sub_levels_["level"] == 1]
    assert len(syn.sub_levels_) == 2 * 3  # one row per sub-level per tree level
    eps_bar = 1.0 / 3
    assert plan["generalized"].tolist() == [True, False]
    assert plan["fanout"].iloc[0] == pytest.approx(17.0)
    np.testing.assert_allclose(plan["epsilon"], [2 * eps_bar / 17, 15 * eps_bar / 17])
    assert plan["threshold"].tolist() == [
        math.ceil(4 * math.sqrt(2) / (2 * eps_bar / 17)),
        math.ceil(2 * math.sqrt(2) / (15 * eps_bar / 17)),
    ]
    # one spend per sub-level per level built; the total is exactly epsilon when all h levels ran
    spends = syn.ledger_.to_dict()["composition"]
    levels_built = len(spends) // 2
    assert levels_built >= 1
    total = sum(Fraction(s["epsilon_exact"]) for s in spends)
    assert total == Fraction(levels_built, 3)


def test_ledger_total_is_epsilon_when_every_level_is_built() -> None:
    syn = PrefixTreeSynthesizer(
        preset="kdd12",
        epsilon=0.7,
        height=4,
        taxonomy=taxonomy_4(),
        thresholds={2: 1},
        random_state=ZeroNoise(),
    ).fit(long_format(TABLE_1))
    assert syn.ledger_.spent_epsilon == pytest.approx(0.7)
    assert syn.ledger_.remaining_epsilon == pytest.approx(0.0, abs=1e-12)


def test_fanout_at_most_two_falls_back_to_simple() -> None:
    syn = PrefixTreeSynthesizer(
        preset="kdd12", epsilon=1.0, height=2, taxonomy=taxonomy_4(), random_state=0
    )
    syn.fit(long_format(TABLE_1))
    assert syn.sub_levels_["generalized"].tolist() == [False, False]
    assert syn.sub_levels_["epsilon"].iloc[0] == pytest.approx(0.5)


def test_skewed_generalized_level_is_skipped() -> None:
    # 40 locations, 4 groups (f = 10), but one group holds 37: inverse Simpson 1.17 < 2
    edges = [(f"s{i}", "big" if i < 37 else f"small{i}") for i in range(40)]
    edges += [("big", "root")] + [(f"small{i}", "root") for i in range(37, 40)]
    rows = long_format([["s1"], ["s38"]])
    skewed = PrefixTreeSynthesizer(
        preset="kdd12", epsilon=1.0, height=1, taxonomy=Taxonomy.from_edges(edges), random_state=0
    ).fit(rows)
    assert skewed.sub_levels_["generalized"].tolist() == [False]
    # the same sizes spread evenly (10 each) keep the generalized level
    even = [(f"s{i}", f"g{i // 10}") for i in range(40)] + [(f"g{k}", "root") for k in range(4)]
    balanced = PrefixTreeSynthesizer(
        preset="kdd12", epsilon=1.0, height=1, taxonomy=Taxonomy.from_edges(even), random_state=0
    ).fit(rows)
    assert balanced.sub_levels_["generalized"].tolist() == [True, False]


def test_multi_level_taxonomy_split_is_recursive() -> None:
    # 4 modes -> 16 lines -> 160 stations: f(line) = 10, f(mode) = 4
    edges = [(f"s{i}", f"l{i // 10}") for i in range(160)]
    edges += [(f"l{k}", f"m{k // 4}") for k in range(16)] + [(f"m{m}", "root") for m in range(4)]
    tax = Taxonomy.from_edges(edges)
    syn = PrefixTreeSynthesizer(preset="kdd12", epsilon=1.0, height=1, taxonomy=tax, random_state=0)
    syn.fit(long_format([["s1"], ["s2"]]))
    plan = syn.sub_levels_
    assert plan["taxonomy_level"].tolist() == [1, 2, 3]
    shares = (plan["epsilon"] / 1.0).tolist()
    np.testing.assert_allclose(shares, [2 / 4, (1 - 2 / 4) * 2 / 10, (1 - 2 / 4) * (1 - 2 / 10)])


def test_budget_split_and_threshold_overrides() -> None:
    syn = PrefixTreeSynthesizer(
        preset="kdd12",
        epsilon=1.0,
        height=1,
        taxonomy=metro_like(),
        budget_split={1: 0.5},
        thresholds={1: 7, 2: 3},
        random_state=0,
    ).fit(long_format([["s0-1"]]))
    np.testing.assert_allclose(syn.sub_levels_["epsilon"], [0.5, 0.5])
    assert syn.sub_levels_["threshold"].tolist() == [7, 3]


def test_level_weights_split_epsilon_across_levels() -> None:
    syn = PrefixTreeSynthesizer(
        preset="kdd12",
        epsilon=1.0,
        height=3,
        taxonomy=taxonomy_4(),
        variant="simple",
        level_weights=[2, 1, 1],
        thresholds={2: 1},
        random_state=ZeroNoise(),
    ).fit(long_format(TABLE_1))
    plan = syn.sub_levels_
    assert plan["level"].tolist() == [1, 2, 3]
    np.testing.assert_allclose(plan["epsilon"], [0.5, 0.25, 0.25])
    spends = syn.ledger_.to_dict()["composition"]
    assert [Fraction(s["epsilon_exact"]) for s in spends] == [
        Fraction(1, 2),
        Fraction(1, 4),
        Fraction(1, 4),
    ]
    # zero noise: the release is still the database
    assert as_multiset(syn.sample()) == Counter(tuple(r[:3]) for r in TABLE_1)


def test_candidates_threshold_bounds_expected_false_children() -> None:
    tax = metro_like(4, 50)  # 200 locations: 200 candidates under the root (simple variant)
    syn = PrefixTreeSynthesizer(
        preset="kdd12",
        epsilon=1.0,
        height=2,
        taxonomy=tax,
        variant="simple",
        threshold_rule="candidates",
        false_children=0.5,
        random_state=0,
    ).fit(long_format([["s0-1"]]))
    plan = syn.sub_levels_
    scale = plan["scale"].iloc[0]
    p = math.exp(-1 / scale)
    t = int(plan["threshold"].iloc[0])

    def expected_false(threshold: int) -> float:
        return 200 * p**threshold / (1 + p)

    # the smallest integer threshold with at most 0.5 expected empty children passing per parent
    assert expected_false(t) <= 0.5 < expected_false(t - 1)
    # below the paper's 2 sqrt(2) / eps (= 5.66 at eps 0.5) would not bound it here
    assert t > math.ceil(2 * math.sqrt(2) / 0.5)


def test_false_children_per_level_sets_each_level_threshold() -> None:
    tax = metro_like(4, 50)  # 200 locations, simple variant: 200 candidates per parent
    common = {"epsilon": 1.0, "height": 3, "taxonomy": tax, "variant": "simple"}
    common |= {"threshold_rule": "candidates", "level_weights": [3, 7, 1], "random_state": 0}
    rows = long_format([["s0-1", "s0-2", "s0-3"]])
    per_level = PrefixTreeSynthesizer(**common, false_children=[0.5, 0.2, 0.01]).fit(rows)
    plan = per_level.sub_levels_
    for level, fc in zip(plan.itertuples(), [0.5, 0.2, 0.01], strict=True):
        p = math.exp(-1 / level.scale)
        t = int(level.threshold)
        # each level's threshold is the smallest bounding its own expected false children
        assert 200 * p**t / (1 + p) <= fc < 200 * p ** (t - 1) / (1 + p)
    # one number serves every level: the same plan as repeating it
    one = PrefixTreeSynthesizer(**common, false_children=0.2).fit(rows)
    rep = PrefixTreeSynthesizer(**common, false_children=np.full(3, 0.2)).fit(rows)
    assert one.sub_levels_["threshold"].tolist() == rep.sub_levels_["threshold"].tolist()
    assert per_level.sub_levels_["threshold"].iloc[1] == one.sub_levels_["threshold"].iloc[1]
    assert per_level.sub_levels_["threshold"].iloc[2] > one.sub_levels_["threshold"].iloc[2]


def test_candidates_threshold_counts_time_bins_in_the_first_sub_level() -> None:
    common = {"epsilon": 1.0, "height": 1, "taxonomy": taxonomy_4(), "random_state": ZeroNoise()}
    rows = long_format([["L1"]]).assign(time="08:00")
    plain = PrefixTreeSynthesizer(**common, threshold_rule="candidates").fit(rows)
    timed = PrefixTreeSynthesizer(
        **common, threshold_rule="candidates", time_bin=60, time_model="tree"
    ).fit(rows)
    # 4 candidates vs 4 x 24: log(m) grows by log(24) / epsilon
    gap = timed.sub_levels_["threshold"].iloc[0] - plain.sub_levels_["threshold"].iloc[0]
    assert gap == pytest.approx(math.log(24), abs=1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"level_weights": [1.0]},
        {"level_weights": [1.0, 0.0]},
        {"level_weights": [1.0, -1.0]},
        {"threshold_rule": "magic"},
        {"false_children": 0},
        {"false_children": float("inf")},
        {"false_children": 3.0},
        {"false_children": [0.5]},
        {"false_children": [0.5, 0.0]},
        {"false_children": [0.5, "0.1"]},
        {"false_children": "0.5"},
        {"epsilon": -1.0},
        {"epsilon": float("nan")},
        {"height": 0},
        {"variant": "fancy"},
        {"budget_split": {1: 1.0}},
        {"budget_split": {5: 0.1}},
        {"budget_split": {1: 0.2}, "variant": "simple"},
        {"thresholds": {9: 1.0}},
        {"time_bin": 0},
        {"random_state": object()},
        {"max_nodes": 0},
    ],
)
def test_bad_parameters_raise_config_error(kwargs: dict) -> None:
    params = {"epsilon": 1.0, "height": 2, "taxonomy": metro_like(), **kwargs}
    with pytest.raises(ConfigError):
        PrefixTreeSynthesizer(**params).fit(long_format([["s0-1"]]))


def test_unknown_location_is_an_input_error() -> None:
    with pytest.raises(InputError):
        PrefixTreeSynthesizer(
            preset="kdd12", epsilon=1.0, height=2, taxonomy=metro_like(), random_state=0
        ).fit(long_format([["nowhere"]]))


def test_sample_before_fit() -> None:
    with pytest.raises(ConfigError):
        PrefixTreeSynthesizer(preset="kdd12", epsilon=1.0, height=2, taxonomy=metro_like()).sample()


def test_seeded_release_does_not_depend_on_input_order_or_ids() -> None:
    rng = np.random.default_rng(3)
    locs = metro_like().leaves()
    rows = [[str(x) for x in rng.choice(locs[:20], size=rng.integers(1, 6))] for _ in range(400)]
    a = long_format(rows)
    perm = rng.permutation(len(rows))
    b = long_format([rows[i] for i in perm], ids=[f"other{i}" for i in range(len(rows))])
    b = b.sample(frac=1.0, random_state=1).sort_values(["seq_id", "pos"])
    out = []
    for frame in (a, b):
        syn = PrefixTreeSynthesizer(
            preset="kdd12", epsilon=2.0, height=4, taxonomy=metro_like(), random_state=11
        )
        out.append(syn.fit(frame).sample())
    pd.testing.assert_frame_equal(out[0], out[1])
    # rows grouped by sequence, sequences ordered by length
    lengths = out[0].groupby("seq_id").size().to_numpy()
    assert (np.diff(lengths) >= 0).all()


def test_secure_noise_by_default() -> None:
    syn = PrefixTreeSynthesizer(preset="kdd12", epsilon=1.0, height=2, taxonomy=metro_like())
    syn.fit(long_format([["s0-1"]] * 5))
    assert syn.noise_seeded_ is False
    assert (
        PrefixTreeSynthesizer(
            preset="kdd12", epsilon=1.0, height=2, taxonomy=metro_like(), random_state=1
        )
        .fit(long_format([["s0-1"]]))
        .noise_seeded_
    )


def test_consistent_counts_in_tree() -> None:
    rng = np.random.default_rng(0)
    locs = metro_like().leaves()
    rows = [[str(x) for x in rng.choice(locs[:10], size=rng.integers(1, 5))] for _ in range(3000)]
    syn = PrefixTreeSynthesizer(
        preset="kdd12", epsilon=1.0, height=4, taxonomy=metro_like(), random_state=5
    )
    tree = syn.fit(long_format(rows)).tree_
    child_sum = tree[tree.parent >= 0].groupby("parent")["count"].sum()
    assert (child_sum <= tree.set_index("node").loc[child_sum.index, "count"]).all()
    assert (tree["ending"] >= 0).all()
    assert len(syn.sample().groupby("seq_id")) == tree["ending"].sum()


def test_trajectories_zero_noise() -> None:
    rows = [["L1", "L2"], ["L1", "L2"], ["L3"]]
    seqs = long_format(rows)
    seqs["time"] = ["08:10", "09:40", "08:20", "07:05", "18:00"]
    syn = PrefixTreeSynthesizer(
        preset="kdd12",
        epsilon=1.0,
        height=3,
        taxonomy=taxonomy_4(),
        time_bin=60,
        thresholds={2: 1},
        random_state=ZeroNoise(),
    ).fit(seqs)
    out = syn.sample()
    got = Counter(
        tuple(zip(g["location"].astype(str), g["time"].astype(str), strict=True))
        for _, g in out.groupby("seq_id")
    )
    assert got == Counter(
        {
            (("L1", "08:00"), ("L2", "09:00")): 1,
            (("L1", "08:00"), ("L2", "08:00")): 1,
            (("L3", "18:00"),): 1,
        }
    )
    assert "time_bin" in syn.tree_.columns


def _timed(rows: list[list[str]], times: list[str]) -> pd.DataFrame:
    seqs = long_format(rows)
    seqs["time"] = times
    return seqs


def test_coarse_time_bins_zero_noise_release_is_the_database() -> None:
    # 3 lines of 5 stations (generalized); 6-hour bins counted per 12 hours at the line level
    rows = [["s0-1", "s1-2"], ["s0-1", "s1-2"], ["s2-3"], ["s0-1", "s0-1", "s2-4"]]
    times = ["05:10", "11:40", "06:20", "07:05", "18:00", "13:00", "15:00", "23:59"]
    common = {"epsilon": 1.0, "height": 3, "taxonomy": metro_like(3, 5), "time_bin": 360}
    common |= {"thresholds": {1: 1, 2: 1}, "random_state": ZeroNoise()}
    syn = PrefixTreeSynthesizer(**common, coarse_time_bin=720).fit(_timed(rows, times))
    got = Counter(
        tuple(zip(g["location"].astype(str), g["time"].astype(str), strict=True))
        for _, g in syn.sample().groupby("seq_id")
    )
    assert got == Counter(
        {
            (("s0-1", "00:00"), ("s1-2", "06:00")): 1,
            (("s0-1", "06:00"), ("s1-2", "06:00")): 1,
            (("s2-3", "18:00"),): 1,
            (("s0-1", "12:00"), ("s0-1", "12:00"), ("s2-4", "18:00")): 1,
        }
    )
    plan = syn.sub_levels_
    assert plan["time_bin_minutes"].tolist() == [720, 360] * 3
    # the generalized cells are (line, 12-hour bin; its first 6-hour bin): at level 1 line 0 in
    # both halves, line 2 in the second
    level_1 = syn.generalized_[syn.generalized_["depth"] == 1]
    assert sorted(zip(level_1["taxonomy_node"], level_1["time_bin"], strict=True)) == [
        (0, 0),
        (0, 2),
        (2, 2),
    ]
    assert syn.parameters()["coarse_time_bin_minutes"] == 720


def test_coarse_time_bins_keep_every_candidate() -> None:
    """With every empty cell passing, the children of a node are all (station, bin >= its bin):
    the coarse sub-level's candidates and their refinement cover the same cells, once each."""
    common = {
        "preset": "kdd12",
        "epsilon": 1.0,
        "height": 2,
        "taxonomy": metro_like(3, 5),
        "time_bin": 360,
    }
    common |= {"thresholds": {1: 0, 2: 0}, "random_state": ZeroNoise()}
    seqs = _timed([["s0-1", "s1-2"]], ["05:10", "11:40"])
    fine = PrefixTreeSynthesizer(**common).fit(seqs).tree_
    coarse = PrefixTreeSynthesizer(**common, coarse_time_bin=720).fit(seqs).tree_
    assert (fine["depth"] == 1).sum() == 15 * 4
    assert (coarse["depth"] == 2).sum() == (fine["depth"] == 2).sum() == 15 * 15 * (4 + 3 + 2 + 1)
    for tree in (fine, coarse):
        pairs = tree.merge(tree, left_on="parent", right_on="node", suffixes=("", "_parent"))
        assert (pairs["time_bin"] >= pairs["time_bin_parent"]).all()
        assert not pairs.duplicated(["parent", "location", "time_bin"]).any()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"coarse_time_bin": 720},  # no time_bin
        {"coarse_time_bin": 90, "time_bin": 60},  # not a multiple
        {"coarse_time_bin": 30, "time_bin": 60},
        {"coarse_time_bin": 120, "time_bin": 60, "variant": "simple"},
        {"coarse_time_bin": 120, "time_bin": 60, "taxonomy": Taxonomy.from_edges([("a", "r")])},
    ],
)
def test_bad_coarse_time_bins(kwargs: dict) -> None:
    params = {"epsilon": 1.0, "height": 2, "taxonomy": metro_like(3, 5), **kwargs}
    with pytest.raises(ConfigError, match="coarse_time_bin"):
        PrefixTreeSynthesizer(**params).fit(_timed([["s0-1"]], ["08:00"]))


def test_trajectories_times_non_decreasing_with_noise() -> None:
    rng = np.random.default_rng(1)
    rows = [[str(x) for x in rng.choice(["L1", "L2", "L3"], size=3)] for _ in range(500)]
    seqs = long_format(rows)
    seqs["time"] = pd.to_datetime("2019-11-27 06:00") + pd.to_timedelta(
        np.sort(rng.integers(0, 600, len(seqs))), unit="min"
    )
    syn = PrefixTreeSynthesizer(
        preset="kdd12", epsilon=3.0, height=3, taxonomy=taxonomy_4(), time_bin=120, random_state=2
    ).fit(seqs)
    out = syn.sample()
    assert len(out) > 0
    minutes = out["time"].astype(str).str.slice(0, 2).astype(int)
    assert (minutes.groupby(out["seq_id"]).diff().fillna(0) >= 0).all()


def test_bad_time_column() -> None:
    seqs = long_format([["L1"]])
    seqs["time"] = ["not a time"]
    with pytest.raises(InputError):
        PrefixTreeSynthesizer(
            preset="kdd12",
            epsilon=1.0,
            height=2,
            taxonomy=taxonomy_4(),
            time_bin=60,
            random_state=0,
        ).fit(seqs)
