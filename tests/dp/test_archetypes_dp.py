"""Statistical DP tests of the archetype synthesizer's private releases (synth.privacy.harness).

The mechanism under test is exactly what ``fit`` runs on the private data: ``_query`` (contribution
bound, one archetype and one category per individual, histograms) then ``_release`` (discrete
Gaussian noise, ledger). Neighbours differ by one whole individual (all their trips, up to the cap).
The individuals here have clear majorities, so ``_query`` is deterministic and is evaluated once per
dataset; ``_release`` draws fresh noise in every trial. A large budget (epsilon 1, delta 0.05, most
of it on the archetype histogram) makes the noise small enough for violations to be observable with
a few thousand trials. Canaries: counting every trip instead of every individual, and counting an
individual in two archetypes -- both add 2 to one cell for the neighbour, i.e. sensitivity 2 -- must
be flagged; the genuine mechanism must not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from archetypes import ArchetypeSynthesizer
from archetypes.model import majority
from synth.privacy import SecureNoise
from synth.privacy.harness import EpsilonAudit, audit_epsilon, tail_events
from tests.conftest import card_trips, scale_noise

EPS, DELTA = 1.0, 0.05
SPLIT = (0.9, 0.1)
TRIALS = 2000


PUBLIC = card_trips(
    [(f"m{i}", [6, 7, 8], "bus") for i in range(20)]
    + [(f"n{i}", [21, 22, 23], "rail") for i in range(20)]
)
D = card_trips(
    [(f"a{i}", [7, 8], "bus") for i in range(4)] + [(f"b{i}", [22], "rail") for i in range(3)]
)
# the neighbour: one more card, two night trips (the cap is 2, so both count towards its majority)
D_PRIME = pd.concat([D, card_trips([("z", [21, 23, 22], "rail")])], ignore_index=True)


class PerTripCounts(ArchetypeSynthesizer):
    """Canary: the archetype histogram counts trips, so one card moves a cell by its trip count."""

    def _query(self, private: pd.DataFrame) -> list[np.ndarray]:
        out = super()._query(private)
        bounded = private.groupby("card").head(self.max_records_per_individual)
        out[0] = np.bincount(self.model_.predict(bounded), minlength=self.archetypes)
        return out


class TwoArchetypes(ArchetypeSynthesizer):
    """Canary: each card is counted in its two most frequent archetypes (the same one twice when
    all its trips fall in one) -- L1 sensitivity 2."""

    def _query(self, private: pd.DataFrame) -> list[np.ndarray]:
        out = super()._query(private)
        codes, ids = pd.factorize(private["card"])
        labels = self.model_.predict(private)
        first = majority(codes, labels, self.archetypes, self.tie_breaks_, len(ids))
        rest = np.where(labels == first[codes], -1, labels)
        second = majority(codes, rest, self.archetypes, self.tie_breaks_, len(ids))
        second = np.where(second < 0, first, second)
        out[0] = np.bincount(np.concatenate([first, second]), minlength=self.archetypes)
        return out


def fitted(cls: type[ArchetypeSynthesizer]) -> ArchetypeSynthesizer:
    return cls(
        epsilon=EPS,
        delta=DELTA,
        key_columns=["hour"],
        category_column="mode",
        id_column="card",
        archetypes=2,
        budget_split=SPLIT,
        max_records_per_individual=2,
        order_column="hour",
        random_state=0,
        joint=False,  # the two noisy histograms alone (the joint measurement: test_release_dp.py)
    ).fit(D, PUBLIC)


def audit(cls: type[ArchetypeSynthesizer], trials: int) -> EpsilonAudit:
    syn = fitted(cls)
    night = int(syn.model_.predict(pd.DataFrame({"hour": [22]}))[0])
    seeds = iter(range(1, 1000))

    def run(data: pd.DataFrame, n: int) -> np.ndarray:
        histograms = syn._query(data)
        noise = SecureNoise(seed=next(seeds) * 7919 + n)  # distinct streams per dataset
        return np.array([np.concatenate(syn._release(histograms, noise)[:2]) for _ in range(n)])

    base = syn._query(D)
    night_cell = tail_events(range(base[0][night] - 2, base[0][night] + 6), column=night)
    rail_cell = tail_events(range(base[1][1] - 2, base[1][1] + 5), column=syn.archetypes + 1)
    events = {
        **{f"night archetype {k}": e for k, e in night_cell.items()},
        **{f"rail category {k}": e for k, e in rail_cell.items()},
    }
    return audit_epsilon(run, D, D_PRIME, events, trials=trials, delta=DELTA, confidence=0.99)


def test_neighbours_differ_by_one_in_one_cell() -> None:
    syn = fitted(ArchetypeSynthesizer)
    a, b = syn._query(D), syn._query(D_PRIME)
    for x, y in zip(a, b, strict=True):
        assert np.abs(y - x).sum() == 1
    canary = fitted(PerTripCounts)
    assert np.abs(canary._query(D_PRIME)[0] - canary._query(D)[0]).max() == 2
    canary = fitted(TwoArchetypes)
    assert np.abs(canary._query(D_PRIME)[0] - canary._query(D)[0]).max() == 2


def test_genuine_release_passes() -> None:
    result = audit(ArchetypeSynthesizer, trials=TRIALS)
    assert not result.violates(EPS), result


@pytest.mark.parametrize("canary", [PerTripCounts, TwoArchetypes])
def test_sensitivity_canaries_are_caught(canary: type[ArchetypeSynthesizer]) -> None:
    result = audit(canary, trials=TRIALS)
    assert result.violates(EPS), result


@pytest.mark.slow
def test_genuine_release_passes_long() -> None:
    result = audit(ArchetypeSynthesizer, trials=30_000)
    assert not result.violates(EPS), result


@pytest.mark.parametrize(
    ("factor", "trials"),
    [
        (2.0, TRIALS),
        pytest.param(2.0, 30_000, marks=pytest.mark.slow),
        pytest.param(1.5, 30_000, marks=pytest.mark.slow),  # the slow suite's power
        pytest.param(1 / 0.7, 30_000, marks=pytest.mark.slow),  # issue 25's mutant
    ],
    ids=["half-quick", "half-slow", "two-thirds-slow", "0.7x-slow"],
)
def test_half_noise_canary_is_caught(
    factor: float, trials: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Near miss: the discrete Gaussian drawn at half its calibrated sigma (and, slow, at 2/3 and
    at 0.7, issue 25's mutant: the smallest factor caught at 30,000 trials is 1.3, lower bound /
    claim 0.68 for the genuine release, see tests/dp/test_release_dp.py; 0.7x is factor 1.43)."""
    scale_noise(monkeypatch, 1 / factor)
    result = audit(ArchetypeSynthesizer, trials=trials)
    assert result.violates(EPS), result
