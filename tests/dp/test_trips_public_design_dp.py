"""DP tests of the joint measurements' design next to public trips (issue 28,
archetypes/jointpublic.py): ``k`` and the measured tables are chosen from the public trips and
the budget only, and the measurement bounds each card to that ``k``.

- The design is the same on two private inputs that share nothing (a choice read off the private
  trips would differ), and the manifest states it.
- ``fit`` counts each card at most ``k`` times, the ``k`` of the sensitivity: the public rule
  switches ``k`` from the public 90th percentile (6) to the median (1) here, and the counted
  trips follow the switch.
- Clopper-Pearson audit (:func:`synth.privacy.harness.audit_epsilon`) of ``_private_trips`` and
  ``_count`` at the switched ``k``: D' adds a card with three trips in one cell of each of the
  ``m = 2`` one-way tables (hour, mode; the pair is left to the public trips), L2 ``sqrt(2)``.
  Canaries: the noise at half its sigma, and (a near miss of the wiring) the trips bounded at
  the 90th percentile while the sensitivity is the median's (the switch applied to the noise
  only). At ``k = 1`` the fit's per-cell cap counts exactly these trips, so the uncapped count
  audited here is the release's; the capped path (``_private_trips``, the caps) is audited in
  ``tests/dp/test_trips_cell_cap_dp.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import archetypes.jointfit
import archetypes.jointtables
from archetypes import ArchetypeSynthesizer, TripSchema
from synth.privacy import SecureNoise
from synth.privacy.harness import EpsilonAudit, audit_epsilon, tail_events
from tests.conftest import card_synthesizer, card_trips, scale_noise

EPS, DELTA = 1.0, 0.05
TRIALS = 2000
SCHEMA = TripSchema.from_dict(
    {
        "card": {"kind": "id"},
        "hour": {"kind": "categorical", "values": list(range(24))},
        "mode": {"kind": "categorical", "values": ["bus", "rail"]},
    }
)


#: 30 one-trip cards and 10 six-trip cards: median 1, 90th percentile 6
PUBLIC = card_trips(
    [(f"p{i}", [8], "bus") for i in range(30)]
    + [(f"q{i}", [6, 8, 10, 14, 17, 19], "rail") for i in range(10)]
)
D = card_trips(
    [(f"a{i}", [7, 8], "bus") for i in range(4)] + [(f"b{i}", [22], "rail") for i in range(3)]
)
D_PRIME = pd.concat([D, card_trips([("z", [22, 22, 22], "rail")])], ignore_index=True)
OTHER = card_trips([(f"c{i}", list(range(5, 23, 2)), "rail") for i in range(30)])


def fitted(private: pd.DataFrame = D, epsilon: float = EPS) -> ArchetypeSynthesizer:
    return card_synthesizer(schema=SCHEMA, epsilon=epsilon, delta=DELTA).fit(private, PUBLIC)


def design(syn: ArchetypeSynthesizer) -> tuple[int, list[list[str]], float]:
    (measured,) = syn.manifest()["parameters"]["joint"]["measurements"]
    return measured["max_records_per_individual"], measured["tables"], measured["sensitivity_l2"]


def test_the_design_is_public() -> None:
    a, b = fitted(D), fitted(OTHER)
    assert design(a) == design(b) == (1, [["hour"], ["mode"]], pytest.approx(np.sqrt(2)))
    assert a.joint_k_ == b.joint_k_ == 1


def test_the_design_is_public_without_the_switch() -> None:
    """At epsilon 10 the one-way tables are informative at the public 90th percentile, so ``k``
    stays 6 with no switch to hide it: a ``k`` read off the private trips' 90th percentile (2
    on D, 9 on OTHER) fails here, while the switched case above passes it. The tables count
    each card at most once per cell (public trips): L2 sensitivity ``sqrt(6 x 3)``, and at
    that noise the tree's pair carries more signal than noise (``informative_pairs``)."""
    a, b = fitted(D, 10.0), fitted(OTHER, 10.0)
    assert a.joint_k_ == b.joint_k_ == 6
    tables = [["hour"], ["mode"], ["hour", "mode"]]
    assert design(a) == design(b) == (6, tables, pytest.approx(np.sqrt(6 * 3)))


def test_fit_counts_each_card_at_most_the_switched_k(monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[tuple[int, int]] = []
    real = archetypes.jointtables.measure

    def spy(codes: np.ndarray, *args: object, **kwargs: object) -> object:
        counted.append((len(codes), int(kwargs["k"])))  # type: ignore[call-overload]
        return real(codes, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(archetypes.jointtables, "measure", spy)
    fitted(D_PRIME)
    assert counted == [(D_PRIME["card"].nunique(), 1)]  # one trip per card, k = 1


def audit(trials: int) -> EpsilonAudit:
    syn = fitted()
    columns = syn.discretiser_.columns
    sizes = [syn.discretiser_.size(c) for c in columns]
    measurement = syn.measurements_[0]
    tables, k = measurement.tables, measurement.k
    budget = syn._budgets()[0]
    seeds = iter(range(1, 1000))
    hour, rail = syn.discretiser_.encode(pd.DataFrame({"hour": [22], "mode": ["rail"]}))[0]
    cells = [hour, sizes[0] + rail]  # the cells the added card moves: hour 22, rail

    def run(data: pd.DataFrame, n: int) -> np.ndarray:
        codes = syn._private_trips(data, columns, syn.joint_k_)[0]
        noise = SecureNoise(seed=next(seeds) * 7919 + n)
        out = np.empty(n)
        for trial in range(n):
            syn.ledger_ = syn._new_ledger()
            released = syn._count(codes, sizes, tables, k, budget, noise, "")
            out[trial] = np.concatenate([t.ravel() for t in released.noisy])[cells].sum()
        return out

    exact = 3 + 3  # on D the two cells hold the 3 "b" cards' trips
    events = tail_events(range(exact - 4, exact + 14, 2))
    return audit_epsilon(run, D, D_PRIME, events, trials=trials, delta=DELTA, confidence=0.99)


def test_genuine_measurement_at_the_switched_k_passes() -> None:
    result = audit(TRIALS)
    assert not result.violates(EPS), result


def test_bound_at_the_90th_percentile_canary_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Near miss: the switch to the median applied to the sensitivity, not to the bound."""
    real = archetypes.jointfit.JointSampling._private_trips
    monkeypatch.setattr(
        archetypes.jointfit.JointSampling,
        "_private_trips",
        lambda self, private, columns, k: real(self, private, columns, 6),
    )
    result = audit(TRIALS)
    assert result.violates(EPS), result


def test_half_noise_canary_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    scale_noise(monkeypatch, 0.5)
    result = audit(TRIALS)
    assert result.violates(EPS), result
