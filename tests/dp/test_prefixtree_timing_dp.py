"""Clopper-Pearson test of the factorised time model's first-tap table on the production fit path
(:meth:`PrefixTreeSynthesizer.fit` with ``time_model="factorised"``), with a near-miss canary.

One fit holds 3 x 1,440 independent trials: with one-minute bins the first-tap table has a cell
per (length class, minute), and D puts ``K`` cards in each (their taps all at that minute, at one
location); D' adds one card to every cell. A card is in exactly one cell of the table, the cells'
noise is independent, so each cell's noisy count is one draw of the mechanism on D (or D'). The
claim is the table's spend read from the ledger. The canary draws the table with half its
calibrated noise scale (twice the claimed epsilon): the audit must refute it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import prefixtree.factorised
from prefixtree import PrefixTreeSynthesizer
from synth.privacy.harness import audit_epsilon
from tests.conftest import flat_taxonomy

K = 2  # cards of D per cell
TRIALS = 3 * 1440
EPSILON = 17.0  # the first-tap table gets 6% of it: epsilon 1.02
LABEL = "time: first tap's bin by length class"


def _cards(extra: bool) -> pd.DataFrame:
    """Cards by (length class, minute): ``K`` each, plus one each on D'."""
    seq, pos, loc, time = [], [], [], []
    for length in (1, 2, 3):
        for minute in range(1440):
            clock = f"{minute // 60:02d}:{minute % 60:02d}"
            for i in range(K + int(extra)):
                for p in range(length):
                    seq.append(f"{length}/{minute}/{i}")
                    pos.append(p)
                    loc.append("s0")
                    time.append(clock)
    return pd.DataFrame({"seq_id": seq, "pos": pos, "location": loc, "time": time})


D, D_PRIME = _cards(False), _cards(True)


def _run(data: pd.DataFrame, n: int) -> dict[str, Any]:
    assert n == TRIALS
    syn = PrefixTreeSynthesizer(
        epsilon=EPSILON,
        height=3,
        taxonomy=flat_taxonomy(2),
        time_bin=1,
        time_model="factorised",
    ).fit(data)
    spend = next(s for s in syn.ledger_.spends if s.label == LABEL)
    tables = syn.time_tables_
    assert tables is not None
    return {"counts": tables.first_noisy.reshape(-1), "epsilon": float(spend.epsilon)}


def _events() -> dict[str, Any]:
    events: dict[str, Any] = {}
    for t in range(K + 1, K + 4):
        events[f">= {t}"] = lambda out, t=t: out["counts"] >= t
        events[f"<= {t - 2}"] = lambda out, t=t: out["counts"] <= t - 2
    return events


def _audit() -> tuple[float, Any]:
    outputs: dict[int, dict[str, Any]] = {}

    def cached(data: pd.DataFrame, n: int) -> dict[str, Any]:
        if id(data) not in outputs:
            outputs[id(data)] = _run(data, n)
        return outputs[id(data)]

    audit = audit_epsilon(cached, D, D_PRIME, _events(), trials=TRIALS, confidence=0.999)
    return outputs[id(D)]["epsilon"], audit


def test_first_tap_table_meets_its_claim() -> None:
    eps, audit = _audit()
    assert eps == pytest.approx(EPSILON * 0.06)
    assert not audit.violates(eps), audit


def test_half_noise_first_tap_table_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Canary: the table drawn with half its calibrated scale (twice the claimed epsilon)."""
    genuine = prefixtree.factorised.noisy_time_tables

    def half(*args: Any, first_scale: float, **kwargs: Any) -> Any:
        return genuine(*args, first_scale=first_scale / 2, **kwargs)

    monkeypatch.setattr(prefixtree.factorised, "noisy_time_tables", half)
    eps, audit = _audit()
    assert audit.violates(eps), audit
    assert np.isfinite(audit.epsilon_lower_bound)
