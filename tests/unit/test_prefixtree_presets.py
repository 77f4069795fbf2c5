"""Prefix tree presets (auto / kdd12), the size estimate before counting, volume fidelity."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from prefixtree import PrefixTreeSynthesizer
from prefixtree.estimate import estimate_tree, pass_probability
from prefixtree.presets import (
    auto_config,
    auto_false_children,
    auto_weights,
    generalized_split,
    hybrid_split,
)
from synth.datasets import montreal_taxonomy
from synth.errors import ConfigError
from synth.simulate import simulate_sequences
from synth.taxonomy import Taxonomy
from tests.conftest import flat_taxonomy


def grouped(sizes: list[int]) -> Taxonomy:
    edges = [(f"g{k}-{i}", f"g{k}") for k, n in enumerate(sizes) for i in range(n)]
    return Taxonomy.from_edges([*edges, *((f"g{k}", "root") for k in range(len(sizes)))])


def random_sequences(tax: Taxonomy, n: int, seed: int, max_len: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    leaves = np.array(tax.leaves())
    weights = rng.lognormal(0, 1.5, leaves.size)
    weights /= weights.sum()
    lengths = rng.integers(1, max_len + 1, n)
    locs = rng.choice(leaves, size=int(lengths.sum()), p=weights)
    seq = np.repeat(np.arange(n), lengths)
    pos = np.arange(seq.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return pd.DataFrame({"seq_id": seq, "pos": pos, "location": locs})


# ---------------------------------------------------------------------- fail fast
def test_paper_settings_on_a_wide_flat_taxonomy_are_refused_before_the_data() -> None:
    syn = PrefixTreeSynthesizer(preset="kdd12", epsilon=1.0, height=8, taxonomy=flat_taxonomy(5000))
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="--max-nodes"):
        syn.check_params()  # no data needed
    assert time.perf_counter() - start < 10


def test_auto_tightens_its_thresholds_to_fit_max_nodes() -> None:
    tax = flat_taxonomy(400)
    loose = PrefixTreeSynthesizer(epsilon=1.0, height=6, taxonomy=tax, random_state=1)
    loose.check_params()
    real = sum(a - b for a, b in zip(loose.estimate_.nodes, loose.estimate_.empty, strict=True))
    limit = int((real + loose.estimate_.total) / 2)
    tight = PrefixTreeSynthesizer(
        epsilon=1.0, height=6, taxonomy=tax, random_state=1, max_nodes=limit
    )
    tight.check_params()
    assert loose.config_["tightened"] == 0
    assert tight.config_["tightened"] > 0
    assert tight.estimate_.total <= limit < loose.estimate_.total
    assert all(
        a < b
        for a, b in zip(
            tight.config_["false_children"], loose.config_["false_children"], strict=True
        )
    )
    seqs = random_sequences(tax, 2000, seed=3)
    params = tight.fit(seqs).parameters()
    assert params["tightened"] == tight.config_["tightened"]
    assert params["false_children"] == tight.config_["false_children"]


def test_explicit_settings_are_refused_not_tightened() -> None:
    syn = PrefixTreeSynthesizer(
        epsilon=1.0, height=6, taxonomy=flat_taxonomy(400), false_children=1.0, max_nodes=400_000
    )
    with pytest.raises(ConfigError, match="raise --max-nodes"):
        syn.check_params()


@pytest.mark.parametrize("height", [10**9, 1001])
def test_a_huge_height_is_a_parameter_error(height: int) -> None:
    syn = PrefixTreeSynthesizer(epsilon=1.0, height=height, taxonomy=montreal_taxonomy())
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"height must be an integer in \[1, 1000\]"):
        syn.check_params()
    assert time.perf_counter() - start < 5


def test_runtime_guard_stops_a_tree_that_outgrows_max_nodes() -> None:
    class AllPass:  # test noise: every empty cell passes (the estimate does not model it)
        seeded = True

        def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
            return np.zeros(size, dtype=np.int64)

        def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray:
            return np.full(n_empty, threshold, dtype=np.int64)

        def choice(self, n: int, k: int) -> np.ndarray:
            return np.arange(k, dtype=np.int64)

    tax = flat_taxonomy(50)
    syn = PrefixTreeSynthesizer(
        preset="kdd12", epsilon=1.0, height=4, taxonomy=tax, random_state=AllPass(), max_nodes=1000
    )
    with pytest.raises(ConfigError, match=r"would grow past --max-nodes .* at level 2"):
        syn.fit(random_sequences(tax, 100, seed=1))


def test_estimate_counts_empty_children_per_parent() -> None:
    p = pass_probability(2.0, 5)
    assert p == pytest.approx(np.exp(-5 / 2) / (1 + np.exp(-1 / 2)))
    est = estimate_tree([[10.0], [10.0]], [[2.0], [2.0]], [[5.0], [5.0]], 10.0)
    q = 10 * p
    assert est.empty[0] == pytest.approx(q)
    assert est.empty[1] == pytest.approx((10 + q) * q)  # every level-1 node, real or empty
    assert est.nodes[1] == pytest.approx(100 + (10 + q) * q)


# ---------------------------------------------------------------------- auto from public facts
def test_auto_configuration_never_depends_on_the_private_data() -> None:
    tax = montreal_taxonomy()
    plans = []
    for seed, n in ((1, 3000), (2, 800)):
        seqs = simulate_sequences(n, seed=seed)
        syn = PrefixTreeSynthesizer(epsilon=1.0, height=6, taxonomy=tax, random_state=seed)
        params = syn.fit(seqs).parameters()
        params.pop("seeded")
        plans.append(params)
    assert plans[0] == plans[1]
    assert plans[0]["preset"] == "auto"


def test_auto_rules_from_public_facts() -> None:
    w2 = np.log(400) / 2
    assert auto_weights(5, 400) == pytest.approx([1.0, w2, w2 / 4, w2 / 16, w2 / 64])
    assert auto_weights(1, 400) == [1.0]
    assert auto_weights(3, 5) == [1.0, 1.0, 0.25]  # few locations: level 2 no less than level 1
    assert min(auto_weights(12, 400)) == 0.02
    fc = auto_false_children(auto_weights(4, 400))
    assert fc[0] == fc[1] == 0.2 and fc[2] == pytest.approx(0.2 / 16) and fc[3] == 0.001
    # under the candidates thresholds a generalized level never pays for itself (A <= 1) ...
    for sizes in ([10] * 50, [4, 4, 4, 4], [373, 5, 4], [62, 48, 34, 24, 14, 8]):
        assert generalized_split(grouped(sizes), 0.2) == {}
    # ... it would with more false children than G f_max / |locations| (the rule is real)
    assert list(generalized_split(grouped([10] * 50), 1.5)) == [1]
    # a hybrid tree asked for: the group threshold sqrt(f) times the locations', not f times
    split = hybrid_split(grouped([10] * 50), 0.2)
    a, b = np.log(50 / 0.2), np.log(10 / 0.2)
    assert split == {1: pytest.approx(a / (a + np.sqrt(10) * b), abs=1e-6)}
    # asked for under auto, a hybrid tree uses only the levels that pay: none here, so it is
    # the simple tree (with a warning naming budget_split), never worse than simple
    syn = PrefixTreeSynthesizer(
        epsilon=1.0, height=3, taxonomy=grouped([10] * 50), variant="hybrid"
    )
    with pytest.warns(UserWarning, match="pays for itself"):
        syn.check_params()
    assert syn.config_["variant"] == "simple" and syn.config_["hybrid_skipped"]
    assert syn.config_["budget_split"] is None
    # an explicit split or coarse time bins keep the generalized level
    forced = PrefixTreeSynthesizer(
        epsilon=1.0, height=3, taxonomy=grouped([10] * 50), variant="hybrid", budget_split={1: 0.3}
    )
    forced.check_params()
    assert forced.config_["variant"] == "hybrid" and forced.config_["budget_split"] == {1: 0.3}
    timed = PrefixTreeSynthesizer(
        epsilon=1.0,
        height=3,
        taxonomy=grouped([10] * 50),
        time_bin=60,
        coarse_time_bin=240,
    )
    timed.check_params()
    assert timed.config_["variant"] == "hybrid" and timed.config_["budget_split"] == split
    cfg = auto_config(grouped([4, 4, 4, 4]), 12)
    assert cfg["variant"] == "simple" and cfg["completion"] == "markov"
    assert cfg["threshold_rule"] == "candidates"


def test_explicit_parameters_override_the_preset() -> None:
    syn = PrefixTreeSynthesizer(
        epsilon=1.0, height=3, taxonomy=montreal_taxonomy(), completion="none", variant="simple"
    )
    syn.check_params()
    assert syn.config_["completion"] == "none"
    assert syn.config_["root_share"] == 0.0  # the root count serves the completion only
    assert syn.config_["variant"] == "simple" and syn.config_["budget_split"] is None
    assert syn.config_["threshold_rule"] == "candidates"  # still auto's
    with pytest.raises(ConfigError, match="preset"):
        PrefixTreeSynthesizer(
            epsilon=1, height=2, taxonomy=flat_taxonomy(3), preset="x"
        ).check_params()


def test_kdd12_is_the_paper_and_the_old_defaults() -> None:
    tax = montreal_taxonomy()
    seqs = simulate_sequences(2000, seed=5)
    paper = PrefixTreeSynthesizer(
        preset="kdd12", epsilon=1.0, height=4, taxonomy=tax, random_state=3
    )
    spelled = PrefixTreeSynthesizer(
        preset="kdd12",
        epsilon=1.0,
        height=4,
        taxonomy=tax,
        random_state=3,
        variant="hybrid",
        threshold_rule="paper",
        false_children=1.0,
        completion="none",
        root_share=0.0,
        level_weights=[1, 1, 1, 1],
    )
    a, b = paper.fit(seqs).sample(), spelled.fit(seqs).sample()
    assert a.equals(b)
    params = paper.parameters()
    assert params["preset"] == "kdd12" and params["threshold_rule"] == "paper"
    assert not any("root" in s.label for s in paper.ledger_.spends)  # no root count


# ---------------------------------------------------------------------- volume
@pytest.mark.parametrize("sizes", [[10] * 50, [60, 40, 20]])
def test_released_volume_matches_the_number_of_sequences(sizes: list[int]) -> None:
    tax = grouped(sizes)
    seqs = random_sequences(tax, 20_000, seed=2)
    syn = PrefixTreeSynthesizer(epsilon=1.0, height=6, taxonomy=tax, random_state=4).fit(seqs)
    out = syn.sample()
    released = out["seq_id"].nunique()
    assert released == syn.n_sequences()
    assert abs(released - 20_000) <= 0.03 * 20_000
    assert syn.root_count_ is not None and abs(released - syn.root_count_) <= 0.01 * 20_000
    assert out.groupby("seq_id").size().max() <= 6
    spends = [s.label for s in syn.ledger_.spends]
    assert spends[0] == "prefix tree root: number of sequences"
    assert float(sum(s.epsilon for s in syn.ledger_.spends)) <= 1.0


def test_paper_settings_drop_the_pruned_mass() -> None:
    """The canary for the volume test: without the root count and completion, sequences under
    first-level children that were pruned vanish."""
    tax = grouped([10] * 50)
    seqs = random_sequences(tax, 20_000, seed=2)
    syn = PrefixTreeSynthesizer(preset="kdd12", epsilon=1.0, height=6, taxonomy=tax, random_state=4)
    assert syn.fit(seqs).n_sequences() < 0.97 * 20_000
