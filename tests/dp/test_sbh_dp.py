"""Statistical DP tests of the stability histogram (synth.privacy.harness), with canaries.

Each run of the mechanism is one ``trial`` value of a leading column: the histogram over
``(trial, x)`` is ``n`` independent histograms (disjoint cells, independent noise),
so ``n`` runs cost one call through the production code. Large deltas (0.1) make the bad events of
the proofs observable. The canaries are the broken mechanisms the harness must flag: no threshold,
zeros left unperturbed in pure mode, and no contribution bounding for the card unit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from synth.engines.kernels import count_keys
from synth.marginals.cells import noisy_cells
from synth.marginals.histogram import stability_histogram
from synth.marginals.sbh_calibration import SBHCalibration, calibrate
from synth.privacy import SecureNoise
from synth.privacy.harness import Event, audit_epsilon

EPS, DELTA = 1.0, 0.1
DOMAIN = ["a", "b", "c", "z"]


def _replicate(rows: pd.DataFrame, n: int) -> pd.DataFrame:
    out = pd.concat([rows] * n, ignore_index=True)
    out["trial"] = np.repeat(np.arange(n), len(rows))
    if "card" in out:  # the same card in two trials is two units
        codes = np.tile(pd.factorize(rows["card"])[0], n)
        out["card"] = out["trial"].to_numpy() * len(rows) + codes
    return out


def genuine(
    privacy_unit: str | None = None, k: int = 1, pure: bool = False, epsilon: float = EPS
) -> Callable:
    """``stability_histogram`` itself, ``n`` trials in one call; with ``epsilon=2 * EPS`` it is
    the near-miss canary of noise (and threshold) calibrated for twice the claimed epsilon."""

    def run(rows: pd.DataFrame, n: int) -> pd.DataFrame:
        out = stability_histogram(
            _replicate(rows, n),
            ["trial", "x"],
            epsilon=epsilon,
            delta=0.0 if pure else DELTA,
            privacy_unit=privacy_unit,
            max_contributions=k,
            domain={"trial": range(n), "x": DOMAIN} if pure else None,
            random_state=SecureNoise(seed=int(rows.shape[0] * 7919 + n)),
        )
        out.attrs["trials"] = n
        return out

    return run


def broken(cal: SBHCalibration, *, pure_domain: bool) -> Callable:
    """A mechanism using the production noisy-cell step with a (broken) calibration."""

    def run(rows: pd.DataFrame, n: int) -> pd.DataFrame:
        x = pd.Index(DOMAIN).get_indexer(rows["x"])
        keys = (np.repeat(np.arange(n), len(rows)) * len(DOMAIN) + np.tile(x, n)).astype(np.int64)
        present, counts = count_keys(keys, n * len(DOMAIN))
        domain = n * len(DOMAIN) if pure_domain else None
        kept, values = noisy_cells(present, counts, cal, SecureNoise(seed=len(rows) + n), domain)
        trial, code = np.divmod(kept, len(DOMAIN))
        out = pd.DataFrame({"trial": trial, "x": np.asarray(DOMAIN)[code], "count": values})
        out.attrs["trials"] = n
        return out

    return run


def released(cell: str, at_least: int | None = None) -> Event:
    """Per trial: the cell is in the output (with a count >= ``at_least``)."""

    def event(out: pd.DataFrame) -> np.ndarray:
        n = int(out.attrs["trials"])
        hit = out["x"] == cell
        if at_least is not None:
            hit &= out["count"] >= at_least
        flags = np.zeros(n, dtype=bool)
        flags[out.loc[hit, "trial"].to_numpy(dtype=np.int64)] = True
        return flags

    return event


TRIALS = 20_000


def _events(cells: list[str], counts: list[int]) -> dict[str, Event]:
    events = {f"{c} released": released(c) for c in cells}
    events.update({f"a >= {t}": released("a", t) for t in counts})
    return events


ROW_D = pd.DataFrame({"x": ["a"] * 8 + ["b"]})
ROW_D_PRIME = pd.DataFrame({"x": ["a"] * 8 + ["c"]})  # one row replaced (000 Theorem 5)
ROW_EVENTS = _events(["b", "c"], [6, 9, 12])


def joint(first: str, at_least: int | None, second: str, below: int | None) -> Event:
    """Per trial: ``first`` released (with a count >= ``at_least``) and ``second`` not (or with a
    count < ``below``) -- a joint event, which sees the whole L1 change of a row swap."""

    def event(out: pd.DataFrame) -> np.ndarray:
        return released(first, at_least)(out) & ~released(second, below)(out)

    return event


# one row moved between two busy cells: both counts move, in opposite directions
ROW_BUSY_D = pd.DataFrame({"x": ["a"] * 8 + ["b"] * 12 + ["c"] * 12})
ROW_BUSY_D_PRIME = pd.DataFrame({"x": ["a"] * 8 + ["b"] * 11 + ["c"] * 13})
ROW_BUSY_EVENTS = {
    f"{x} >= {t}, {y} < {u}": joint(x, t, y, u)
    for x, y in (("b", "c"), ("c", "b"))
    for t in (11, 12, 13)
    for u in (12, 13, 14)
}
ROW_CASES = {
    "new cell": (ROW_D, ROW_D_PRIME, ROW_EVENTS),
    "busy cells": (ROW_BUSY_D, ROW_BUSY_D_PRIME, ROW_BUSY_EVENTS),
}


@pytest.mark.parametrize("case", list(ROW_CASES))
def test_row_unit_algorithm_1_passes(case: str) -> None:
    d, d_prime, events = ROW_CASES[case]
    audit = audit_epsilon(genuine(), d, d_prime, events, trials=TRIALS, delta=DELTA)
    if case == "new cell":
        assert audit.rates["b released"][0] > 0  # the bad event happens, at rate <= delta/2
    else:
        assert audit.epsilon_lower_bound > 0.4 * EPS  # the joint events have power
    assert not audit.violates(EPS), audit


def test_canary_no_threshold_is_flagged() -> None:
    cal = dataclasses.replace(calibrate(EPS, DELTA), threshold=-(10**9))
    audit = audit_epsilon(
        broken(cal, pure_domain=False), ROW_D, ROW_D_PRIME, ROW_EVENTS, trials=TRIALS, delta=DELTA
    )
    assert audit.violates(EPS) and audit.event in ("b released", "c released")


PURE_D = pd.DataFrame({"x": ["a", "b"]})
PURE_D_PRIME = pd.DataFrame({"x": ["a", "c"]})
PURE_EVENTS = {f"{c} released": released(c) for c in DOMAIN} | {
    "b >= 3": released("b", 3),
    "c >= 3": released("c", 3),
    "b released, c not": joint("b", None, "c", None),
    "c released, b not": joint("c", None, "b", None),
}


def test_pure_mode_is_pure() -> None:
    audit = audit_epsilon(
        genuine(pure=True), PURE_D, PURE_D_PRIME, PURE_EVENTS, trials=TRIALS, delta=0.0
    )
    assert audit.rates["z released"][0] > 0.2  # empty domain cells do appear
    assert not audit.violates(EPS), audit


def test_canary_zeros_unperturbed_in_pure_mode_is_flagged() -> None:
    cal = calibrate(EPS, 0.0, pure=True)  # claims delta = 0 ...
    audit = audit_epsilon(  # ... but perturbs only the present cells
        broken(dataclasses.replace(cal, pure=False), pure_domain=False),
        PURE_D,
        PURE_D_PRIME,
        PURE_EVENTS,
        trials=TRIALS,
        delta=0.0,
    )
    assert audit.violates(EPS) and audit.event in ("b released", "c released")


K = 3
CARD_D = pd.DataFrame({"card": ["c1"] * 6 + ["c2"] * 6, "x": ["a"] * 12})
# one card added with 10 rows, bounded to K: in a new cell it may show only with probability delta
# (the worst case of the proof, all K rows in one new cell); in an existing cell it shifts the count
# by K (the L1 part, e^epsilon)
CARD_D_PRIME = pd.concat(
    [CARD_D, pd.DataFrame({"card": ["new"] * 10, "x": ["z"] * 10})], ignore_index=True
)
CARD_D_SHIFT = pd.concat(
    [CARD_D, pd.DataFrame({"card": ["new"] * 10, "x": ["a"] * 10})], ignore_index=True
)
CARD_EVENTS = {"z released": released("z"), "z >= 12": released("z", 12)} | {
    f"a >= {t}": released("a", t) for t in (6, 9, 12)
}


# a new cell where the card also rides a busy cell: bounded to a, a, z it moves a by 2 (the L1
# part) and may show z (the delta part)
CARD_BUSY_D = pd.DataFrame({"card": [f"c{i}" for i in range(6) for _ in range(K)], "x": ["a"] * 18})
CARD_NEW_CELL = pd.concat(
    [CARD_BUSY_D, pd.DataFrame({"card": ["new"] * 10, "x": ["a"] * 2 + ["z"] * 8})],
    ignore_index=True,
)
CARD_NEW_CELL_EVENTS = (
    {"z released": released("z"), "z >= 6": released("z", 6)}
    | {f"a >= {t}": released("a", t) for t in (18, 20, 22, 24)}
    | {f"a >= {t}, z not": joint("a", t, "z", None) for t in (20, 22)}
)
CARD_CASES = {
    "new cell": (CARD_BUSY_D, CARD_NEW_CELL, CARD_NEW_CELL_EVENTS),
    "new cell only": (CARD_D, CARD_D_PRIME, CARD_EVENTS),
    "shift": (CARD_D, CARD_D_SHIFT, CARD_EVENTS),
}


@pytest.mark.parametrize("case", list(CARD_CASES))
def test_card_unit_passes(case: str) -> None:
    d, d_prime, events = CARD_CASES[case]
    audit = audit_epsilon(genuine("card", K), d, d_prime, events, trials=TRIALS, delta=DELTA)
    if case.startswith("new cell"):
        assert 0 < audit.rates["z released"][1] <= DELTA
    else:
        assert audit.rates["a >= 9"][1] > 2 * audit.rates["a >= 9"][0]
    assert not audit.violates(EPS), audit


#: noise and threshold calibrated for twice the claimed epsilon (the production histogram with
#: epsilon 2 audited against the claim 1): each case must refute it
TWICE_EPSILON = {
    "row unit": (genuine(epsilon=2 * EPS), ROW_BUSY_D, ROW_BUSY_D_PRIME, ROW_BUSY_EVENTS, DELTA),
    "card unit new cell": (
        genuine("card", K, epsilon=2 * EPS),
        CARD_BUSY_D,
        CARD_NEW_CELL,
        CARD_NEW_CELL_EVENTS,
        DELTA,
    ),
    "pure": (genuine(pure=True, epsilon=2 * EPS), PURE_D, PURE_D_PRIME, PURE_EVENTS, 0.0),
}


@pytest.mark.parametrize("case", list(TWICE_EPSILON))
def test_canary_twice_epsilon_is_flagged(case: str) -> None:
    run, d, d_prime, events, delta = TWICE_EPSILON[case]
    trials = 2 * TRIALS if case.startswith("card") else TRIALS
    audit = audit_epsilon(run, d, d_prime, events, trials=trials, delta=delta)
    assert audit.violates(EPS), audit


def test_canary_no_contribution_bound_is_flagged() -> None:
    cal = calibrate(EPS, DELTA, privacy_unit="card", max_contributions=K)
    audit = audit_epsilon(  # calibrated for K rows per card, but all 10 rows counted
        broken(cal, pure_domain=False),
        CARD_D,
        CARD_D_PRIME,
        CARD_EVENTS,
        trials=TRIALS,
        delta=DELTA,
    )
    assert audit.violates(EPS) and audit.event.startswith("z")


@pytest.mark.slow
@pytest.mark.parametrize("unit", [None, "card"])
def test_many_trials(unit: str | None) -> None:
    if unit is None:
        run, d, d_prime, events = genuine(), ROW_D, ROW_D_PRIME, ROW_EVENTS
    else:
        run, d, d_prime, events = genuine("card", K), CARD_D, CARD_D_PRIME, CARD_EVENTS
    audit = audit_epsilon(run, d, d_prime, events, trials=200_000, delta=DELTA)
    assert not audit.violates(EPS), audit
