"""Archetypes: private tie-breaks come from the secure source; the sampling generator is seeded
after the private queries and never continues a stream that touched private data (issue 15)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from archetypes import ArchetypeSynthesizer
from archetypes.model import majority
from synth.privacy import SecureNoise


def _trips(individuals: list[tuple[str, list[int], list[str]]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"card": card, "hour": hour, "mode": mode}
            for card, hours, modes in individuals
            for hour, mode in zip(hours, modes, strict=True)
        ]
    )


PUBLIC = _trips(
    [(f"m{i}", [6, 7, 8], ["bus"] * 3) for i in range(30)]
    + [(f"n{i}", [21, 22, 23], ["rail"] * 3) for i in range(30)]
)
#: clear majorities: nothing to break
CLEAR = _trips([(f"a{i}", [7, 8], ["bus", "bus"]) for i in range(10)])
#: many individuals with tied archetypes (one morning, one night trip) and tied modes
TIED = _trips([(f"t{i}", [7, 22], ["bus", "rail"]) for i in range(40)])


def _synthesizer(seed: int | None) -> ArchetypeSynthesizer:
    return ArchetypeSynthesizer(
        epsilon=1.0,
        delta=1e-5,
        key_columns=["hour"],
        category_column="mode",
        id_column="card",
        archetypes=2,
        random_state=seed,
        joint=False,
    )


def test_sampling_generator_is_fresh_after_the_private_queries() -> None:
    """Same seed, private data of other sizes and ties: the same sampler state after fit (the old
    generator went on from the private tie-breaks, so its state depended on the private data)."""
    states = [_synthesizer(5).fit(d, PUBLIC).rng_.bit_generator.state for d in (CLEAR, TIED)]
    assert states[0] == states[1]
    fresh = [_synthesizer(None).fit(CLEAR, PUBLIC).rng_.bit_generator.state for _ in range(2)]
    assert fresh[0] != fresh[1]  # unseeded: OS entropy


def test_private_ties_are_broken_by_the_secure_source(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    original = SecureNoise.permutation

    def spy(self: SecureNoise, n: int) -> np.ndarray:
        calls.append(n)
        return original(self, n)

    monkeypatch.setattr(SecureNoise, "permutation", spy)
    syn = _synthesizer(None).fit(TIED, PUBLIC)
    assert isinstance(syn.tie_breaks_, SecureNoise) and not syn.tie_breaks_.seeded
    assert len(calls) == 2 and all(n >= 80 for n in calls)  # archetype and mode: 2 per card


def test_sample_depends_on_private_data_only_through_the_noisy_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the released counts fixed, the synthetic trips are the same whatever the private
    data's ties (the old sampler continued the stream the private tie-breaks had consumed)."""
    fixed = [np.array([6, 4]), np.array([5, 5])]

    def release(self: Any, histograms: list[np.ndarray], noise: Any, ledger: Any = None) -> Any:
        return [f.copy() for f in fixed]

    monkeypatch.setattr(ArchetypeSynthesizer, "_release", release)
    samples = [_synthesizer(11).fit(d, PUBLIC).sample() for d in (CLEAR, TIED)]
    pd.testing.assert_frame_equal(samples[0], samples[1])
    assert len(samples[0]) > 0


def test_secure_majority_breaks_ties_uniformly() -> None:
    noise = SecureNoise(seed=3)
    n = 3000
    groups = np.repeat(np.arange(n), 3)
    values = np.tile([0, 1, 2], n)  # a three-way tie in every group
    won = np.bincount(majority(groups, values, 3, noise), minlength=3)
    assert np.all(np.abs(won - n / 3) < 5 * np.sqrt(n * (1 / 3) * (2 / 3)))
    clear = majority(np.array([0, 0, 0, 1]), np.array([2, 2, 1, 0]), 3, noise)
    assert clear.tolist() == [2, 0]
