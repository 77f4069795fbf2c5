"""DP tests of the per-cell cap of the joint measurements next to public trips (issue 28;
archetypes/measure.py ``capped_counts``/``l2_sensitivity``, archetypes/jointpublic.py).

With public trips each table counts a card at most once per cell (of its ``k`` bounded trips), so
one card adds at most 1 to each of at most ``k`` cells of a table: L2 sensitivity
``sqrt(k sum w^2)`` instead of ``k sqrt(sum w^2)`` (Wilson et al. 2020's per-partition bound).

- Zero noise, on the production path (``_private_trips`` then ``_count`` with the fit's caps):
  over 150 random added cards (1 to 9 trips over few hours and modes) and one of 9 trips in
  9 hours the released vector moves
  by at most the stated sensitivity, and a card with ``k`` trips in ``k`` distinct cells of every
  table moves it by exactly that (the bound is tight). Canaries: the cap off by one (2 per cell
  counted, 1 claimed) and the bound on trips off by one (``k + 1`` kept) both exceed it.
- Clopper-Pearson audit (:func:`synth.privacy.harness.audit_epsilon`): D' adds the tight card;
  the genuine measurement passes, the noise at half its sigma is caught; and with D' adding a
  card whose three trips share one cell, counting it without the cap (the sensitivity still
  capped) is caught.
- An integer cap (``cell_cap = 2``), zero noise: random cards stay within its sensitivity, a card
  with three cells of two trips per table reaches it, a one-cell card counts 2 there (an integer
  cap counted one too high is caught only here: the tests above use cap 1).
- The cap decision (``cell_cap = "auto"``) is public: at epsilon 5 (public noise share 0.40)
  both a tiny and a large private input are capped, at 20 (0.16) neither is (a share over the
  private trips would decide the other way on one of them).
- Post-processing: with the released vector replayed, the joint model is the same on two private
  inputs whose cards fill their cells very differently (the capped tables' ratios back to trips
  are the PUBLIC trips', :func:`archetypes.jointpublic.cap_ratios`; read off the private trips,
  the model would differ).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import archetypes.jointfit
import archetypes.jointtables
import archetypes.measure
from archetypes import ArchetypeSynthesizer, TripSchema
from archetypes.measure import capped_counts, spread_individuals
from synth.privacy import SecureNoise
from synth.privacy.harness import EpsilonAudit, audit_epsilon, tail_events
from tests.conftest import card_synthesizer, scale_noise

EPS, DELTA = 1.0, 0.05
TRIALS = 2000
MODES = ["bus", "rail", "tram", "ferry", "cable", "boat"]
SCHEMA = TripSchema.from_dict(
    {
        "card": {"kind": "id"},
        "hour": {"kind": "categorical", "values": list(range(24))},
        "mode": {"kind": "categorical", "values": MODES},
    }
)


def trips(rows: list[tuple[str, int, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["card", "hour", "mode"])


#: the public cards' hours: six trips each, so k = 6 (90th percentile and median alike)
HOURS = (6, 9, 12, 15, 18, 21)
PUBLIC = trips([(f"p{i}", h, MODES[(i + j) % 6]) for i in range(40) for j, h in enumerate(HOURS)])
D = trips([(f"a{i}", h, MODES[i % 6]) for i in range(12) for h in (8, 17)])
#: k = 6 trips in 6 distinct cells of every table (hour, mode, hour x mode): the tight card
TIGHT = [("z", h, m) for h, m in zip(HOURS, MODES, strict=True)]
#: nine trips in nine hours over the six modes (the bound keeps six of them)
WIDE = [("z", h, MODES[h % 6]) for h in range(9)]
#: six trips in one cell of every table
ONE_CELL = [("z", 22, "ferry")] * 6


def fitted(private: pd.DataFrame = D, epsilon: float = EPS) -> ArchetypeSynthesizer:
    return card_synthesizer(
        schema=SCHEMA, epsilon=epsilon, delta=DELTA, joint={"share": 0.9, "pairs": "tree"}
    ).fit(private, PUBLIC)


@pytest.fixture(scope="module")
def syn() -> ArchetypeSynthesizer:
    return fitted()


def released(
    syn: ArchetypeSynthesizer, data: pd.DataFrame, noise: SecureNoise
) -> tuple[np.ndarray, float]:
    """The fit's measurement on ``data`` (production path): the released vector and the stated
    L2 sensitivity."""
    columns = syn.discretiser_.columns
    sizes = list(syn.discretiser_.sizes)
    m = syn.measurements_[0]
    codes, ids = syn._private_trips(data, columns, m.k)
    syn.ledger_ = syn._new_ledger()
    budget = syn._budgets()[0]
    out = syn._count(codes, sizes, m.tables, m.k, budget, noise, "", m.weights, ids, m.caps)
    return np.concatenate([t.ravel() for t in out.noisy]).astype(float), out.mechanism.sensitivity


def exact_counts(syn: ArchetypeSynthesizer, data: pd.DataFrame) -> np.ndarray:
    """The measurement's exact (noise-free) vector on ``data``: each table's counts capped per
    card and cell, times its weight."""
    m = syn.measurements_[0]
    codes, ids = syn._private_trips(data, syn.discretiser_.columns, m.k)
    parts = []
    for table, shape, w, cap in zip(m.tables, m.shapes, m.weights, m.caps, strict=True):
        cell = np.ravel_multi_index(tuple(codes[:, i] for i in table), shape)
        parts.append(w * capped_counts(cell, int(np.prod(shape)), ids, cap))
    return np.concatenate(parts).astype(float)


def largest_move(syn: ArchetypeSynthesizer, noise: SecureNoise) -> tuple[float, float, float]:
    """Zero noise: the largest L2 move of the released vector over :data:`WIDE` and 150 random
    added cards, the tight card's move, and the stated sensitivity."""
    base, sensitivity = released(syn, D, noise)
    rng = np.random.default_rng(5)
    cards = [WIDE] + [
        [("z", int(rng.choice(HOURS[:4])), str(rng.choice(MODES[:4]))) for _ in range(n)]
        for n in rng.integers(1, 10, size=150)
    ]
    moves = []
    for card in cards:
        moved, _ = released(syn, pd.concat([D, trips(card)], ignore_index=True), noise)
        moves.append(float(np.linalg.norm(moved - base)))
    tight, _ = released(syn, pd.concat([D, trips(TIGHT)], ignore_index=True), noise)
    return max(moves), float(np.linalg.norm(tight - base)), sensitivity


def test_the_fit_caps_every_table_at_one_per_card_and_cell(syn: ArchetypeSynthesizer) -> None:
    m = syn.measurements_[0]
    assert m.k == syn.joint_k_ == 6 and m.caps == [1, 1, 1] and m.weights == [1, 1, 1]
    assert m.mechanism.sensitivity == pytest.approx(np.sqrt(6 * 3))  # sqrt(k sum w^2)
    joint = syn.manifest()["parameters"]["joint"]["measurements"][0]
    assert joint["per_cell_caps"] == [1, 1, 1]
    assert joint["sensitivity_l2"] == pytest.approx(np.sqrt(18))


def test_one_card_moves_the_tables_by_at_most_the_sensitivity_and_reaches_it(
    syn: ArchetypeSynthesizer, zero_noise: SecureNoise
) -> None:
    worst, tight, sensitivity = largest_move(syn, zero_noise)
    assert worst <= sensitivity + 1e-9
    assert tight == pytest.approx(sensitivity)


def test_cap_off_by_one_canary_is_caught(
    syn: ArchetypeSynthesizer, zero_noise: SecureNoise, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = capped_counts
    monkeypatch.setattr(
        archetypes.measure,
        "capped_counts",
        lambda cell, cells, ids, cap: real(cell, cells, ids, None if cap is None else cap + 1),
    )
    worst, _, sensitivity = largest_move(syn, zero_noise)
    assert worst > sensitivity + 1e-9


def test_bound_off_by_one_canary_is_caught(
    syn: ArchetypeSynthesizer, zero_noise: SecureNoise, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        archetypes.jointfit,
        "spread_individuals",
        lambda t, id_column, k, order: spread_individuals(t, id_column, k + 1, order),
    )
    worst, _, sensitivity = largest_move(syn, zero_noise)
    assert worst > sensitivity + 1e-9


def audit(card: list[tuple[str, int, str]], trials: int) -> EpsilonAudit:
    """D against D + ``card``; the event is the sum of the released cells the card's trips fall
    in (its hour, mode and hour x mode cells: the direction of the shift)."""
    syn = fitted()
    sizes = list(syn.discretiser_.sizes)
    coded = syn.discretiser_.encode(trips(card))
    shapes = syn.measurements_[0].shapes
    offsets = np.cumsum([0, *[int(np.prod(s)) for s in shapes]])
    cells = sorted(
        {int(offsets[0] + h) for h, _ in coded}
        | {int(offsets[1] + m) for _, m in coded}
        | {int(offsets[2] + h * sizes[1] + m) for h, m in coded}
    )
    seeds = itertools.count(1)
    m = syn.measurements_[0]
    budget = syn._budgets()[0]

    def run(data: pd.DataFrame, n: int) -> np.ndarray:
        codes, ids = syn._private_trips(data, syn.discretiser_.columns, m.k)
        noise = SecureNoise(seed=next(seeds) * 7919 + n)
        out = np.empty(n)
        for trial in range(n):
            syn.ledger_ = syn._new_ledger()
            got = syn._count(codes, sizes, m.tables, m.k, budget, noise, "", m.weights, ids, m.caps)
            out[trial] = np.concatenate([t.ravel() for t in got.noisy])[cells].sum()
        return out

    exact = float(exact_counts(syn, D)[cells].sum())
    sigma = syn.measurements_[0].mechanism.sigma
    spread = 2 * sigma * np.sqrt(len(cells))
    events = tail_events(
        np.round(np.arange(exact - spread, exact + 3 * len(cells) + spread, spread / 6))
    )
    d_prime = pd.concat([D, trips(card)], ignore_index=True)
    return audit_epsilon(run, D, d_prime, events, trials=trials, delta=DELTA, confidence=0.99)


def test_genuine_capped_measurement_passes() -> None:
    result = audit(TIGHT, TRIALS)
    assert not result.violates(EPS), result


def test_half_noise_canary_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    scale_noise(monkeypatch, 0.5)
    result = audit(TIGHT, TRIALS)
    assert result.violates(EPS), result


def test_cap_ignored_canary_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Near miss: the card's trips counted without the cap while the noise is the capped one."""
    real = capped_counts
    monkeypatch.setattr(
        archetypes.measure,
        "capped_counts",
        lambda cell, cells, ids, cap: real(cell, cells, ids, None),
    )
    result = audit(ONE_CELL, TRIALS)
    assert result.violates(EPS), result


def test_one_cell_card_genuine_passes() -> None:
    result = audit(ONE_CELL, TRIALS)
    assert not result.violates(EPS), result


#: twenty cards riding one cell six times: the private ratio of trips to capped counts there is 6
ONE_CELL_CARDS = trips([(f"o{i}", 12, "bus") for i in range(20) for _ in range(6)])


def test_the_model_reads_the_released_vector_and_public_trips_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same released vector on D and on :data:`ONE_CELL_CARDS` gives the same joint model:
    nothing after the measurement (the cap ratios, their sigmas, the priors, the unbounding)
    reads the private trips."""
    real = archetypes.jointtables.measure
    released: list[list[np.ndarray]] = []

    def replay(*args: object, **kwargs: object) -> archetypes.measure.Measurement:
        out = real(*args, **kwargs)  # type: ignore[arg-type]
        if len(released) < 1:
            released.append([t.copy() for t in out.noisy])
        else:
            out.noisy = [t.copy() for t in released[0]]
        return out

    monkeypatch.setattr(archetypes.jointtables, "measure", replay)
    a = fitted()
    b = ArchetypeSynthesizer(**a.get_params()).fit(ONE_CELL_CARDS, PUBLIC)
    assert b.measurements_[0].caps == a.measurements_[0].caps == [1, 1, 1]
    for x, y in zip(
        a.joint_model_.one + a.joint_model_.two,
        b.joint_model_.one + b.joint_model_.two,
        strict=True,
    ):
        np.testing.assert_allclose(x, y)


#: 300 cards of six trips: 1800 private trips against the 240 public (D: 24)
MANY = trips([(f"b{i}", h, MODES[(i * h) % 6]) for i in range(300) for h in HOURS])


@pytest.mark.parametrize(("epsilon", "cap"), [(5.0, 1), (20.0, None)])
def test_the_cap_decision_is_public(epsilon: float, cap: int | None) -> None:
    """The noise share is over the PUBLIC trips (0.40 at epsilon 5, 0.16 at 20): over the private
    ones it would be 4.0 / 0.05 at 5 (D / MANY) and 1.6 / 0.02 at 20, flipping one of them."""
    small, large = fitted(D, epsilon), fitted(MANY, epsilon)
    assert small.joint_cap_ == large.joint_cap_ == cap
    assert small.measurements_[0].caps == large.measurements_[0].caps == [cap] * 3
    assert small.measurements_[0].mechanism.sensitivity == pytest.approx(
        large.measurements_[0].mechanism.sensitivity
    )


#: three cells of two trips in every table: the tight card at cap 2 (k = 6: 3 x 2^2 per table)
TIGHT_AT_TWO = [("z", h, m) for h, m in zip(HOURS[:3], MODES[:3], strict=True) for _ in range(2)]


def test_an_integer_cap_moves_the_tables_by_at_most_its_sensitivity_and_reaches_it(
    zero_noise: SecureNoise,
) -> None:
    """``cell_cap = 2`` on the production path: L2 sensitivity ``sqrt(sum w^2 (floor(k / 2) 4 +
    (k mod 2)))`` = 6 at k = 6, never exceeded by random cards (up to nine trips in few cells)
    and reached by :data:`TIGHT_AT_TWO`; a card of six trips in one cell counts 2 there."""
    base_syn = fitted()
    joint = {"share": 0.9, "pairs": "tree", "cell_cap": 2}
    syn = ArchetypeSynthesizer(**{**base_syn.get_params(), "joint": joint}).fit(D, PUBLIC)
    assert syn.measurements_[0].caps == [2, 2, 2]
    base, sensitivity = released(syn, D, zero_noise)
    assert sensitivity == pytest.approx(6.0)
    rng = np.random.default_rng(7)
    cards = [ONE_CELL, WIDE] + [
        [("z", int(rng.choice(HOURS[:3])), str(rng.choice(MODES[:3]))) for _ in range(n)]
        for n in rng.integers(1, 10, size=60)
    ]
    for card in cards:
        moved, _ = released(syn, pd.concat([D, trips(card)], ignore_index=True), zero_noise)
        assert np.linalg.norm(moved - base) <= sensitivity + 1e-9, card
    one_cell, _ = released(syn, pd.concat([D, trips(ONE_CELL)], ignore_index=True), zero_noise)
    assert np.abs(one_cell - base).max() == 2
    tight, _ = released(syn, pd.concat([D, trips(TIGHT_AT_TWO)], ignore_index=True), zero_noise)
    assert np.linalg.norm(tight - base) == pytest.approx(sensitivity)
