"""DP tests of the private tree selection of ``trips`` without public data (issue 28;
archetypes/selection.py).

Sensitivity: one trip moves each pair's score (the floor of the L1 distance from the independent
table of its margins) by at most :data:`~archetypes.selection.SCORE_SENSITIVITY` = 4; a data set
with every trip in one cell and one trip added elsewhere moves it by 3 (a 2-per-trip claim fails);
``k`` such trips move it by ``floor(4 n k / (n + k))``, close to ``4 k``.

Clopper-Pearson audit (:func:`synth.privacy.harness.audit_epsilon`) of exactly what ``fit`` runs:
``_private_trips`` (conform, at most ``k`` trips per card) and ``_joint_select`` (the scores, ONE
discrete Gaussian, the spend in the ledger). D: 600 one-trip cards in one cell of every column;
D' adds a card with three trips in another cell of every column, so each of the 3 candidate
scores moves by 11 (the claimed sensitivity ``4 x 3 sqrt(3)`` over ``sqrt(3)``: 12); the event
is the sum of the noisy scores. Canaries: the noise at half its sigma, the sensitivity claimed at
half (``SCORE_SENSITIVITY = 2``), and the contribution bound ignored (a card of 6 trips counted
whole).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import archetypes.jointfit
import archetypes.selection
from archetypes import ArchetypeSynthesizer, TripSchema
from archetypes.selection import SCORE_SENSITIVITY, SELECT_SHARE, dependence_scores
from synth.privacy import SecureNoise
from synth.privacy.harness import EpsilonAudit, audit_epsilon, tail_events
from tests.conftest import scale_noise

EPS, DELTA = 1.0, 0.05
TRIALS = 3000
K = 3

SCHEMA = TripSchema.from_dict(
    {
        "card": {"kind": "id"},
        "hour": {"kind": "categorical", "values": [7, 8]},
        "zone": {"kind": "categorical", "values": ["A", "B"]},
        "mode": {"kind": "categorical", "values": ["bus", "rail"]},
    }
)


def trips(cards: list[tuple[str, int, str, str, int]]) -> pd.DataFrame:
    rows = [(c, h, z, m) for c, h, z, m, n in cards for _ in range(n)]
    return pd.DataFrame(rows, columns=["card", "hour", "zone", "mode"])


D = trips([(f"a{i}", 7, "A", "bus", 1) for i in range(600)])
D_PRIME = pd.concat([D, trips([("z", 8, "B", "rail", 6)])], ignore_index=True)


def fitted() -> ArchetypeSynthesizer:
    return ArchetypeSynthesizer(
        schema=SCHEMA,
        epsilon=EPS,
        delta=DELTA,
        key_columns=["hour", "zone"],
        category_column="mode",
        id_column="card",
        archetypes=1,
        joint={"max_records_per_individual": K},
        random_state=0,
    ).fit(D, None)


def test_one_trip_moves_a_score_by_at_most_the_sensitivity() -> None:
    rng = np.random.default_rng(5)
    pairs = [(0, 1), (0, 2), (1, 2)]
    sizes = [3, 4, 2]
    worst = 0
    for _ in range(200):
        n = int(rng.integers(0, 30))
        codes = np.stack([rng.integers(0, s, n) for s in sizes], axis=1)
        extra = np.array([[int(rng.integers(0, s)) for s in sizes]])
        moved = dependence_scores(np.vstack([codes, extra]), sizes, pairs)
        worst = max(worst, int(np.abs(moved - dependence_scores(codes, sizes, pairs)).max()))
    assert worst <= SCORE_SENSITIVITY
    # every trip in one cell, one trip added in another: 4 n / (n + 1), floored to 3
    codes = np.zeros((500, 3), dtype=np.int64)
    one = np.vstack([codes, [[1, 1, 1]]])
    before = dependence_scores(codes, sizes, pairs)
    assert (dependence_scores(one, sizes, pairs) - before == 3).all()
    three = np.vstack([codes, [[1, 1, 1]] * 3])
    assert (dependence_scores(three, sizes, pairs) == 11).all()  # floor(4 * 500 * 3 / 503)


def test_one_trip_can_move_a_score_by_the_full_sensitivity() -> None:
    """Adversarial: the bound of 4 per trip is reached, so a claim of 3 is a real slip (the
    random search above never finds it). Table ``[[0, 1, 1], [0, 58, 8]]`` scores floor(2.94) =
    2; one trip in the empty cell (0, 0) adds 1 to the table and moves the independent table by
    ``1 + 2 (n - n_a)(n - n_b) / (n (n + 1))``, about 2.9: the score becomes floor(6.26) = 6, a
    real change of 3.32 that the floors turn into 4."""
    table = np.array([[0, 1, 1], [0, 58, 8]])
    rows, cols = np.nonzero(table)
    codes = np.repeat(np.stack([rows, cols], axis=1), table[rows, cols], axis=0)
    added = np.vstack([codes, [[0, 0]]])
    before, after = (dependence_scores(c, [2, 3], [(0, 1)])[0] for c in (codes, added))
    assert (before, after) == (2, 6)
    assert after - before == SCORE_SENSITIVITY


def audit(trials: int) -> EpsilonAudit:
    syn = fitted()
    disc = syn.discretiser_
    columns = disc.columns
    assert disc.model == ["hour", "zone", "mode"] and not disc.views
    tree, pairs = [(0, 1), (1, 2)], [(0, 1), (1, 2)]  # a chain: the third pair unmeasured
    budget = (EPS / SELECT_SHARE, DELTA / SELECT_SHARE)  # the selection's share: (EPS, DELTA)
    seeds = iter(range(1, 1000))

    def run(data: pd.DataFrame, n: int) -> np.ndarray:
        codes = syn._private_trips(data, columns, K)[0]
        noise = SecureNoise(seed=next(seeds) * 7919 + n)
        out = np.empty(n)
        for trial in range(n):
            syn.ledger_ = syn._new_ledger()
            syn._joint_select(codes, tree, pairs, K, budget, noise, True)
            selection = syn.selection_
            assert selection is not None and selection.candidates == [(0, 1), (0, 2), (1, 2)]
            assert selection.mechanism.epsilon == pytest.approx(EPS)
            assert selection.mechanism.delta <= DELTA
            out[trial] = float(selection.noisy.sum())
        return out

    events = tail_events(range(-40, 120, 8))
    return audit_epsilon(run, D, D_PRIME, events, trials=trials, delta=DELTA, confidence=0.99)


def test_selection_sensitivity_is_calibrated() -> None:
    syn = fitted()
    a = syn._private_trips(D, syn.discretiser_.columns, K)[0]
    b = syn._private_trips(D_PRIME, syn.discretiser_.columns, K)[0]
    assert len(b) - len(a) == K
    moved = dependence_scores(b, [2, 2, 2], [(0, 1), (0, 2), (1, 2)])
    assert (moved - dependence_scores(a, [2, 2, 2], [(0, 1), (0, 2), (1, 2)]) == 11).all()


def test_genuine_selection_passes() -> None:
    result = audit(TRIALS)
    assert not result.violates(EPS), result


def test_half_noise_canary_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    scale_noise(monkeypatch, 0.5)
    result = audit(TRIALS)
    assert result.violates(EPS), result


def test_half_sensitivity_canary_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Near miss: the score's sensitivity claimed as 2 per trip (the noise calibrated to it)."""
    monkeypatch.setattr(archetypes.selection, "SCORE_SENSITIVITY", 2)
    result = audit(TRIALS)
    assert result.violates(EPS), result


def test_unbounded_contributions_canary_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Near miss: the added card's six trips all scored (the bound of ``k`` ignored)."""
    monkeypatch.setattr(archetypes.jointfit, "spread_individuals", lambda t, *a: t)
    result = audit(TRIALS)
    assert result.violates(EPS), result
