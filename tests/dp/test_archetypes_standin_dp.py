"""Statistical DP tests of the public stand-in (the SBH release of the private trips).

The mechanism under test is what ``ArchetypeSynthesizer.fit`` runs on the private data before the
two counts when there is no public data: :meth:`StandIn._prepare` (schema, contribution bound,
encoding; deterministic, evaluated once per dataset) then :meth:`StandIn._tables` (the stability
histograms, fresh noise every trial). Neighbours differ by one whole card: D' adds a card with three
night trips; with the stand-in's bound of one trip it moves one cell by 1. A large budget (epsilon
1, delta 0.05 on one table) keeps the threshold low, so the busy night cell is always released and
its noisy count is observable. Canary: the contribution bound forgotten (each trip its own unit),
which moves the cell by 3 while the calibration assumes 1 -- it must be flagged, the genuine
release not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from archetypes.standin import StandIn, stand_in_spec
from synth.privacy import PrivacyLedger, SecureNoise
from synth.privacy.harness import EpsilonAudit, audit_epsilon, tail_events
from tests.conftest import riders_schema

SCHEMA = riders_schema()

EPS, DELTA = 1.0, 0.05
TRIALS = 1000
#: the quick versions in the default suite: the canary still found far above epsilon (1.9 at 300)
QUICK_TRIALS = 300


def trips(cards: list[tuple[str, list[int]]]) -> pd.DataFrame:
    return pd.DataFrame([{"card": c, "hour": h} for c, hours in cards for h in hours])


D = trips([(f"a{i}", [7, 8]) for i in range(12)] + [(f"b{i}", [22]) for i in range(10)])
D_PRIME = pd.concat([D, trips([("z", [22, 22, 22])])], ignore_index=True)


class PerTripUnit(StandIn):
    """Canary: every trip counted as its own card, so the bound of one trip per card is void."""

    def _prepare(self, private: pd.DataFrame) -> pd.DataFrame:
        out = super()._prepare(private.assign(card=np.arange(len(private))))
        return out


def releaser(cls: type[StandIn]) -> StandIn:
    spec = stand_in_spec(
        {"tables": [["hour"]]},
        key_columns=["hour"],
        category_column="hour",
        features=["hour"],
        completion=(),
        needed=["hour"],
    )
    return cls(spec, schema=SCHEMA, id_column="card", order_column="hour")


def audit(cls: type[StandIn], trials: int) -> EpsilonAudit:
    rel = releaser(cls)
    seeds = iter(range(1, 1000))

    def night(tables: list[pd.DataFrame]) -> int:
        table = tables[0]
        hit = table.loc[table["hour"] == 22, "count"]
        return int(hit.iloc[0]) if len(hit) else 0

    def run(data: pd.DataFrame, n: int) -> np.ndarray:
        coded = rel._prepare(data)
        noise = SecureNoise(seed=next(seeds) * 7919 + n)
        out = []
        for _ in range(n):
            ledger = PrivacyLedger(epsilon=EPS, delta=DELTA, unit="card")
            out.append(
                night(rel._tables(coded, epsilon=EPS, delta=DELTA, noise=noise, ledger=ledger))
            )
        return np.array(out)

    events = tail_events(range(8, 15))
    return audit_epsilon(run, D, D_PRIME, events, trials=trials, delta=DELTA, confidence=0.99)


def test_neighbours_differ_by_one_in_one_cell() -> None:
    a, b = releaser(StandIn)._prepare(D), releaser(StandIn)._prepare(D_PRIME)
    assert len(b) - len(a) == 1  # the bound keeps one of the new card's three trips
    a, b = releaser(PerTripUnit)._prepare(D), releaser(PerTripUnit)._prepare(D_PRIME)
    assert len(b) - len(a) == 3


def test_genuine_stand_in_passes_quick() -> None:
    result = audit(StandIn, trials=QUICK_TRIALS)
    assert not result.violates(EPS), result


def test_unbounded_canary_is_caught_quick() -> None:
    result = audit(PerTripUnit, trials=QUICK_TRIALS)
    assert result.violates(EPS), result


@pytest.mark.slow
def test_genuine_stand_in_passes() -> None:
    result = audit(StandIn, trials=TRIALS)
    assert not result.violates(EPS), result


@pytest.mark.slow
def test_unbounded_canary_is_caught() -> None:
    result = audit(PerTripUnit, trials=TRIALS)
    assert result.violates(EPS), result


@pytest.mark.slow
def test_genuine_stand_in_passes_long() -> None:
    result = audit(StandIn, trials=30_000)
    assert not result.violates(EPS), result
