"""DP tests of the joint measurements of ``trips`` (issue 28; archetypes/measure.py, jointfit.py).

Clopper-Pearson audit (:func:`synth.privacy.harness.audit_epsilon`) of exactly what ``fit`` runs on
the private trips in the joint mode: ``_private_trips`` (conform, at most ``k`` trips per card
spread over its day, public-domain codes) and ``_count`` (the one- and two-way tables, ONE discrete
Gaussian, the spend recorded in the ledger). D' adds a card with three trips in one cell of every
table; ``k = 1`` of them counts, so it moves each of the ``m = 3`` tables by 1 in one cell: L2
norm ``sqrt(3)``, the calibrated sensitivity. The event is the sum of the three cells (the
direction of the shift). Canaries: the noise at half its sigma (a near miss), and the contribution
bound ignored (all three trips counted). At ``K = 1`` the per-cell cap the fit applies with
public trips changes nothing (one trip per card), so the uncapped count audited here is the
release's; the capped path is audited in ``tests/dp/test_trips_cell_cap_dp.py``.

Neighbour tests through the command line (``transit-synth trips``, with and without public data):
byte-equal manifests and schema on D and D' with the same seed, and with zero noise every measured
table moves by exactly the added card's counted trips (at most ``k``) in one cell, and (without
public trips) the private tree selection's scores by at most 4 per counted trip, the same tree.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import archetypes.jointfit
import archetypes.jointtables
import archetypes.measure
import archetypes.selection
from archetypes import ArchetypeSynthesizer, TripSchema
from archetypes.measure import Measurement, cell_square_bound, measure
from archetypes.selection import SCORE_SENSITIVITY, Selection
from synth.cli import main
from synth.privacy import SecureNoise
from synth.privacy.harness import EpsilonAudit, audit_epsilon, tail_events
from tests.conftest import card_synthesizer, card_trips, scale_noise
from tests.dp.test_release_neighbours import assert_public_bytes_equal

EPS, DELTA = 1.0, 0.05
TRIALS = 2000
K = 1


PUBLIC = card_trips(
    [(f"m{i}", [6, 7, 8], "bus") for i in range(20)]
    + [(f"n{i}", [21, 22, 23], "rail") for i in range(20)]
)
D = card_trips(
    [(f"a{i}", [7, 8], "bus") for i in range(4)] + [(f"b{i}", [22], "rail") for i in range(3)]
)
D_PRIME = pd.concat([D, card_trips([("z", [22, 22, 22], "rail")])], ignore_index=True)


#: mode over 600 public values (``_joint_weight``'s size rule: weight round(cbrt(600 / 32)) = 3)
WIDE = TripSchema.from_dict(
    {
        "card": {"kind": "id"},
        "hour": {"kind": "categorical", "values": list(range(24))},
        "mode": {"kind": "categorical", "values": ["bus", "rail", *(f"m{i}" for i in range(598))]},
    }
)


def fitted(schema: TripSchema | None = None) -> ArchetypeSynthesizer:
    return card_synthesizer(
        schema=schema,
        epsilon=EPS,
        delta=DELTA,
        # the tree's pair as stated ("auto" would leave it to the 120 public trips: with them
        # it would be mostly noise, archetypes.jointpublic.informative_pairs)
        joint={
            "share": 0.9,
            "max_records_per_individual": K,
            "prior_cells": 20_000,
            "pairs": "tree",
        },
    ).fit(D, PUBLIC)


def audit(trials: int, weights: list[int] | None = None, wide: bool = False) -> EpsilonAudit:
    """``weights``: the tables released as weight x counts (noise / weight on the estimates); the
    event is then the weight-weighted sum of the released cells (shift ``sum(w^2)``, the
    direction of the shift), the sensitivity ``sqrt(sum w^2)``. ``wide``: the one-way tables
    of hour and of mode over :data:`WIDE`'s 600 values, with the weights the fit's size rule
    gives them (``_joint_weight``, the production path)."""
    syn = fitted(WIDE if wide else None)
    columns = syn.discretiser_.columns
    sizes = [syn.discretiser_.size(c) for c in columns]
    tables = syn.measurements_[0].tables
    assert [[columns[i] for i in t] for t in tables] == [["hour"], ["mode"], ["hour", "mode"]]
    if wide:
        tables = tables[:2]
        weights = [syn._joint_weight(t) for t in tables]
        assert weights == syn.measurements_[0].weights[:2] == [1, 3]
    w = [1] * len(tables) if weights is None else weights
    budget = syn._budgets()[0]
    seeds = iter(range(1, 1000))
    # the cells the added card moves: hour 22, rail, (22, rail)
    hour, rail = syn.discretiser_.encode(pd.DataFrame({"hour": [22], "mode": ["rail"]}))[0]
    offsets = np.cumsum([0, *[int(np.prod([sizes[i] for i in t])) for t in tables]])[:-1]
    cells = [offsets[0] + hour, offsets[1] + rail, offsets[-1] + hour * sizes[1] + rail]
    cells = cells[: len(tables)]

    def run(data: pd.DataFrame, n: int) -> np.ndarray:
        codes = syn._private_trips(data, columns, K)[0]
        noise = SecureNoise(seed=next(seeds) * 7919 + n)
        out = np.empty(n)
        for trial in range(n):
            syn.ledger_ = syn._new_ledger()
            released = syn._count(codes, sizes, tables, K, budget, noise, "", weights)
            out[trial] = np.concatenate([t.ravel() for t in released.noisy])[cells] @ w
        return out

    shift = sum(x * x for x in w)
    exact = 3 * shift  # on D the three cells hold the 3 "b" cards' trips
    events = tail_events(range(exact - 2 * shift, exact + 6 * shift + 2, max(2 * shift // 3, 2)))
    return audit_epsilon(run, D, D_PRIME, events, trials=trials, delta=DELTA, confidence=0.99)


def test_neighbour_moves_each_table_by_k_in_one_cell() -> None:
    syn = fitted()
    columns = syn.discretiser_.columns
    a = syn._private_trips(D, columns, K)[0]
    b = syn._private_trips(D_PRIME, columns, K)[0]
    assert len(b) - len(a) == K
    assert syn.measurements_[0].mechanism.sensitivity == pytest.approx(K * np.sqrt(3))


def test_genuine_measurement_passes() -> None:
    result = audit(TRIALS)
    assert not result.violates(EPS), result


def test_half_noise_canary_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    scale_noise(monkeypatch, 0.5)
    result = audit(TRIALS)
    assert result.violates(EPS), result


def test_weighted_measurement_passes() -> None:
    """The weighted release (a schema group's one-way tables, ``_joint_weight``): one card moves
    the tables by (3, 1, 1) x its trip, L2 ``sqrt(11)``, the calibrated sensitivity."""
    result = audit(TRIALS, [3, 1, 1])
    assert not result.violates(EPS), result


def test_weights_left_out_of_the_sensitivity_canary_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Near miss: sigma calibrated for ``sqrt(m)`` tables, as if the weights were all 1."""
    real = archetypes.measure.calibrated_gaussian
    monkeypatch.setattr(
        archetypes.measure,
        "calibrated_gaussian",
        lambda e, d, s: real(e, d, s * np.sqrt(3) / np.sqrt(11)),
    )
    result = audit(TRIALS, [3, 1, 1])
    assert result.violates(EPS), result


def test_size_rule_weights_pass() -> None:
    """The size rule's weights (hour 1, a 600-value mode 3): one card moves the two one-way
    tables by (1, 3) x its trip, L2 ``sqrt(10)``, the calibrated sensitivity."""
    result = audit(TRIALS, wide=True)
    assert not result.violates(EPS), result


def test_size_rule_weights_left_out_canary_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Near miss: the size rule's weights released, sigma calibrated as if they were all 1."""
    real = archetypes.measure.calibrated_gaussian
    monkeypatch.setattr(
        archetypes.measure,
        "calibrated_gaussian",
        lambda e, d, s: real(e, d, s * np.sqrt(2) / np.sqrt(10)),
    )
    result = audit(TRIALS, wide=True)
    assert result.violates(EPS), result


def test_unbounded_contributions_canary_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Near miss: the card's third trip counted too (the bound ignored in the measurement)."""
    monkeypatch.setattr(archetypes.jointfit, "spread_individuals", lambda t, *a: t)
    result = audit(TRIALS)
    assert result.violates(EPS), result


# ----------------------------------------------------------------------- through the command line
SCHEMA = {
    "card": {"kind": "id"},
    "hour": {"kind": "categorical", "values": list(range(24))},
    "zone": {"kind": "categorical", "values": ["A", "B"]},
    "mode": {"kind": "categorical", "values": ["bus", "rail"]},
}


def cli_trips(added: bool) -> pd.DataFrame:
    rows = [
        (f"k{i}", hour, "B" if i % 3 == 0 else "A", "rail" if i % 3 == 0 else "bus")
        for i in range(90)
        for hour in ((21, 22) if i % 3 == 0 else (7, 8, 9))
    ]
    if added:
        rows += [("new", 21, "B", "rail"), ("new", 22, "B", "rail"), ("new", 23, "B", "rail")]
    return pd.DataFrame(rows, columns=["card", "hour", "zone", "mode"])


#: the same columns, with (mode, zone) a public group: one model column over its combinations,
#: views of mode and zone, weighted one-way tables (archetypes/measure.py, jointfit.py)
GROUPED = {
    "schema": {**SCHEMA, "zone": {"kind": "categorical", "values": ["A", "B"], "other": "B"}},
    "groups": [{"columns": ["mode", "zone"], "values": [["bus", "A"], ["rail", "B"]]}],
}


#: zone over 120 public values: weight 2 on its one-way table by the size rule (``_joint_weight``),
#: with public coarse labels (13): without public trips a view ``zone:coarse`` is measured too
WIDE_ZONE = {
    **SCHEMA,
    "zone": {
        "kind": "categorical",
        "values": [*"AB", *map(str, range(118))],
        "coarse": ["west", "west", *(f"c{i // 10}" for i in range(118))],
    },
}


def release(
    root: Path, added: bool, with_public: bool, grouped: bool | str = False
) -> tuple[Path, list[Measurement]]:
    data = root / ("d-prime" if added else "d")
    data.mkdir(parents=True)
    cli_trips(added).to_csv(data / "trips.csv", index=False)
    cli_trips(False).assign(card=lambda t: "p" + t["card"]).to_csv(data / "pub.csv", index=False)
    layout = WIDE_ZONE if grouped == "wide" else GROUPED if grouped else SCHEMA
    (data / "schema.json").write_text(json.dumps(layout))
    out = data / "release"
    argv = ["trips", str(data / "trips.csv"), "--delta", "1e-5", "--out", str(out)]
    argv += ["--id-column", "card", "--key-columns", "hour,zone", "--category-column", "mode"]
    argv += ["--archetypes", "2", "--quiet", "--epsilon", "2", "--seed", "11"]
    argv += ["--schema", str(data / "schema.json")]
    if with_public:
        argv += ["--public", str(data / "pub.csv")]
    seen: list[Measurement] = []

    def spy(*args: object, **kwargs: object) -> Measurement:
        result = measure(*args, **kwargs)  # type: ignore[arg-type]
        seen.append(result)
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(archetypes.jointtables, "measure", spy)
        assert main(argv) == 0
    return out, seen


CASES = pytest.mark.parametrize(
    ("with_public", "grouped"),
    [(True, False), (False, False), (False, True), (True, "wide"), (False, "wide")],
    ids=["public", "no-public", "no-public-grouped", "public-wide", "no-public-wide"],
)


@CASES
def test_manifests_byte_equal_on_neighbours(
    tmp_path: Path, with_public: bool, grouped: bool | str
) -> None:
    d, _ = release(tmp_path, False, with_public, grouped)
    d_prime, _ = release(tmp_path, True, with_public, grouped)
    for name in ("manifest.json", "schema.json"):
        assert (d / name).read_bytes() == (d_prime / name).read_bytes(), name
    assert_public_bytes_equal(d, d_prime)  # every other published file too (datasheet, ...)
    manifest = json.loads((d / "manifest.json").read_text())
    measured = manifest["parameters"]["joint"]["measurements"]
    assert measured and all(m["sigma"] > 0 and m["rho"] > 0 for m in measured)
    labels = [s["label"] for s in manifest["spends"]]
    # without public trips the trips-per-card histogram comes first (its median sets k), then
    # on a schema without public groups the private tree selection (selection.py)
    selected = not with_public and grouped is not True
    assert labels[int(not with_public) + selected].startswith("joint trip marginals"), labels
    assert ("selection" in manifest["parameters"]["joint"]) == selected
    if selected:
        assert labels[1].startswith("joint tree selection"), labels
    if grouped:  # the group's columns, or the size rule on the wide zone: weight 2
        groups = manifest["parameters"]["joint"]["public_groups"]
        assert groups == ([] if grouped == "wide" else [["mode", "zone"]])
        assert max(measured[0]["weights"]) == 2
    model = manifest["parameters"]["joint"]["model_columns"]
    assert ("zone:coarse" in model) == (grouped == "wide" and not with_public)


@CASES
def test_zero_noise_measurements_move_by_one_card(
    tmp_path: Path, with_public: bool, grouped: bool | str, zero_noise: object
) -> None:
    _, a = release(tmp_path, False, with_public, grouped)
    _, b = release(tmp_path, True, with_public, grouped)
    assert len(a) == len(b) == 1
    k = a[0].k
    assert a[0].weights == b[0].weights and (max(a[0].weights) > 1) == bool(grouped)
    # with public trips every table counts a card at most once per cell; without, no cap
    assert a[0].caps == b[0].caps == [1 if with_public else None] * len(a[0].noisy)
    squares, reached = 0.0, []
    for x, y, w, cap in zip(a[0].noisy, b[0].noisy, a[0].weights, a[0].caps, strict=True):
        diff = (y - x).ravel()
        assert x.sum() > 0, "empty table: nothing compared"
        # the added card's 3 trips (hours 21-23, one zone, one mode): within the bound k, at
        # most ``cap`` of them in any one cell (its zone and mode cells: min(3, k, cap))
        assert w <= np.abs(diff).sum() <= w * min(3, k), diff[diff != 0]
        assert np.abs(diff).max() <= w * min(3, k, cap or k), diff[diff != 0]
        reached.append(np.abs(diff).max() == w * min(3, k, cap or k))
        assert np.sqrt((diff**2).sum()) <= w * np.sqrt(cell_square_bound(k, cap))
        squares += float((diff**2).sum())
    assert any(reached)  # the mode table: the card's trips in one cell, counted up to the cap
    # the whole released vector moves by at most the stated L2 sensitivity
    assert np.sqrt(squares) <= a[0].mechanism.sensitivity + 1e-9


@pytest.mark.parametrize("grouped", [False, "wide"], ids=["no-public", "no-public-wide"])
def test_zero_noise_selection_scores_move_by_one_card(
    tmp_path: Path, grouped: bool | str, zero_noise: object
) -> None:
    """The release's selection (archetypes/selection.py) on D and D' with zero noise: the same
    public candidates and mechanism, each score moved by at most ``SCORE_SENSITIVITY`` per
    counted trip of the added card, the whole vector within the stated L2 sensitivity."""
    selections: list[Selection] = []
    real = archetypes.selection.select_tree

    def spy(*args: object, **kwargs: object) -> Selection:
        selection = real(*args, **kwargs)  # type: ignore[arg-type]
        selections.append(selection)
        return selection

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(archetypes.selection, "select_tree", spy)
        release(tmp_path, False, False, grouped)
        release(tmp_path, True, False, grouped)
    a, b = selections
    assert a.candidates == b.candidates and a.k == b.k and a.chosen == b.chosen
    assert a.mechanism.sensitivity == b.mechanism.sensitivity
    assert a.mechanism.sensitivity == pytest.approx(
        SCORE_SENSITIVITY * a.k * np.sqrt(len(a.candidates))
    )
    moved = b.noisy - a.noisy  # zero noise: the exact scores
    assert np.abs(moved).max() > 0, "nothing moved: nothing compared"
    assert (np.abs(moved) <= SCORE_SENSITIVITY * min(3, a.k)).all(), moved
    assert np.sqrt(float((moved**2).sum())) <= a.mechanism.sensitivity
