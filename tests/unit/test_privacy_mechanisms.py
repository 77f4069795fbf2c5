"""One noisy-threshold mechanism (synth.privacy.ThresholdHistogram): its privacy map as data, and
SBH, the Opal release and the prefix tree all drawing their noise through it."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

import prefixtree.tree
from prefixtree import PrefixTreeSynthesizer
from synth.errors import ConfigError
from synth.marginals import OpalMarginals, calibrate, stability_histogram
from synth.privacy import (
    SecureNoise,
    ThresholdHistogram,
    threshold_delta,
    threshold_release,
)
from synth.privacy import mechanisms as mech
from synth.taxonomy import Taxonomy


class CountingNoise:
    """Noise ``+1`` on every present cell; ``passing`` empty cells pass with value ``threshold``."""

    seeded = True

    def __init__(self, passing: int = 0) -> None:
        self.passing = passing
        self.calls: list[tuple[str, int]] = []

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        self.calls.append(("laplace", size))
        return np.ones(size, dtype=np.int64)

    def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray:
        self.calls.append(("empty", n_empty))
        return np.full(min(self.passing, n_empty), threshold, dtype=np.int64)

    def choice(self, n: int, k: int) -> np.ndarray:
        return np.arange(k, dtype=np.int64)


def test_privacy_map_is_data_before_any_input() -> None:
    rows = ThresholdHistogram.for_rows(1.0, 1e-6)
    assert (rows.unit, rows.l0, rows.l1, rows.linf, rows.pure) == ("row", 2, 2, 1, False)
    assert rows.epsilon == 1 and rows.delta == Fraction(1, 10**6)
    assert rows.threshold == math.ceil(1 + rows.scale * math.log(2 / 1e-6))
    cards = ThresholdHistogram.for_units(1.0, 1e-6, unit="card_id", sensitivity=3)
    assert (cards.unit, cards.l1, cards.scale) == ("card_id", 3, 3.0)
    assert (
        threshold_delta(3.0, cards.threshold, 3)
        <= 1e-6
        < threshold_delta(3.0, cards.threshold - 1, 3)
    )
    pure = ThresholdHistogram.for_units(1.0, 1e-6, unit="card_id", sensitivity=3, pure=True)
    assert pure.delta == 0 and pure.threshold == cards.threshold
    as_data = cards.to_dict()
    assert {"unit", "l1", "epsilon", "delta", "threshold", "scale"} <= set(as_data)
    given = ThresholdHistogram.for_units(1.0, 0, unit="u", sensitivity=1, threshold=30)
    assert float(given.delta) == pytest.approx(threshold_delta(1.0, 30, 1))
    with pytest.raises(ConfigError, match="no privacy"):
        ThresholdHistogram.for_units(1.0, 0, unit="u", sensitivity=2, threshold=2)
    with pytest.raises(ConfigError, match="delta"):
        ThresholdHistogram.for_rows(1.0, 0)


def test_sbh_calibration_is_the_privacy_core_mechanism() -> None:
    cal = calibrate(2.0, 1e-6, privacy_unit="card_id", max_contributions=4)
    assert isinstance(cal, ThresholdHistogram)
    assert cal == ThresholdHistogram.for_units(2.0, 1e-6, unit="card_id", sensitivity=4)
    assert calibrate(2.0, 1e-6) == ThresholdHistogram.for_rows(2.0, 1e-6)


def test_release_thresholds_present_cells_and_draws_empty_ones() -> None:
    hist = ThresholdHistogram.for_rows(1.0, 1e-3, pure=True)
    counts = np.array([hist.threshold - 2, hist.threshold - 1, hist.threshold + 5])
    noise = CountingNoise(passing=2)
    rel = hist.release(counts, noise, n_empty=10)
    assert rel.index.tolist() == [1, 2]  # +1 noise: threshold - 1 passes, threshold - 2 does not
    assert rel.values.tolist() == [hist.threshold, hist.threshold + 6]
    assert rel.empty_values.tolist() == [hist.threshold] * 2 and rel.delta == 0.0
    assert noise.calls == [("laplace", 3), ("empty", 10)]
    with pytest.raises(ConfigError, match="public domain"):
        hist.release(counts, noise)


def test_batched_noise_covers_every_cell() -> None:
    noise = CountingNoise()
    noisy, passed, empty = threshold_release(
        np.arange(10), scale=1.0, threshold=5, noise=noise, batch=4
    )
    assert noisy.tolist() == list(range(1, 11)) and passed.sum() == 6 and empty.size == 0
    assert noise.calls == [("laplace", 4), ("laplace", 4), ("laplace", 2)]


def _spy(monkeypatch: pytest.MonkeyPatch, target: Any, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(target, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, spy)
    return calls


def test_sbh_and_opal_draw_their_noise_through_the_mechanism(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _spy(monkeypatch, mech, "threshold_release")
    frame = pd.DataFrame({"x": list("aaab"), "time": ["08:00"] * 4, "stop_id": list("1112")})
    stability_histogram(frame, ["x"], epsilon=1.0, delta=1e-3, random_state=1)
    assert len(calls) == 1
    OpalMarginals(bin=60, random_state=1).fit(frame)
    assert len(calls) == 1 + 6  # one per noised table


def test_prefix_tree_draws_its_noise_through_the_mechanism(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _spy(monkeypatch, prefixtree.tree, "threshold_release")
    tax = Taxonomy.from_spec("fanout:2", locations=["a", "b", "c", "d"])
    seqs = pd.DataFrame(
        {"seq_id": ["1", "1", "2", "3"], "pos": [0, 1, 0, 0], "location": list("abcd")}
    )
    PrefixTreeSynthesizer(
        epsilon=1.0, height=2, taxonomy=tax, random_state=SecureNoise(seed=1)
    ).fit(seqs)
    assert calls  # every noisy sub-level goes through the mechanism
