"""Column completion from public k-way marginals with coarser fallback (write-up Table 1)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from archetypes.column_completion import ColumnCompleter
from synth.errors import ConfigError, InputError


def public_trips() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    zone = rng.choice(["A", "B", "C"], size=600)
    hour = rng.integers(0, 24, size=600)
    fare = np.where(zone == "A", 2, np.where(zone == "B", 5, 9)) + (hour >= 12)
    tip = np.where(fare >= 9, 1, 0)
    return pd.DataFrame({"zone": zone, "hour": hour, "fare": fare, "tip": tip})


def test_completion_follows_the_public_conditionals_in_order() -> None:
    completer = ColumnCompleter(plan=[("fare", ["zone", "hour"]), ("tip", ["fare"])])
    completer.fit(public_trips())
    synthetic = pd.DataFrame({"zone": ["A", "B", "C", "C"] * 50, "hour": [3, 15, 11, 20] * 50})
    out, fallbacks = completer.complete(synthetic, np.random.default_rng(0))
    expected = np.where(out["zone"] == "A", 2, np.where(out["zone"] == "B", 5, 9))
    assert (out["fare"] == expected + (out["hour"] >= 12)).all()
    assert (out["tip"] == (out["fare"] >= 9)).all()
    assert fallbacks == {"fare": [200, 0, 0], "tip": [200, 0]}


def test_unseen_combinations_fall_back_to_coarser_conditioning() -> None:
    public = public_trips()
    public = public[~((public["zone"] == "A") & (public["hour"] == 5))]
    completer = ColumnCompleter(plan=[("fare", ["zone", "hour"])]).fit(public)
    synthetic = pd.DataFrame({"zone": ["A", "Z"], "hour": [5, 5]})
    out, fallbacks = completer.complete(synthetic, np.random.default_rng(0))
    assert fallbacks == {"fare": [0, 1, 1]}  # A@5 unseen -> zone A; zone Z unseen -> one-way
    assert out["fare"].iloc[0] in (2, 3)
    assert out["fare"].iloc[1] in set(public["fare"])


def test_completion_errors() -> None:
    public = public_trips()
    with pytest.raises(ConfigError, match="itself"):
        ColumnCompleter(plan=[("fare", ["fare"])]).fit(public)
    with pytest.raises(ConfigError, match="twice"):
        ColumnCompleter(plan=[("fare", []), ("fare", ["zone"])]).fit(public)
    with pytest.raises(InputError, match="missing column"):
        ColumnCompleter(plan=[("fare", ["weather"])]).fit(public)
    completer = ColumnCompleter(plan=[("tip", ["fare"])]).fit(public)
    with pytest.raises(ConfigError, match="not yet synthesised"):
        completer.complete(pd.DataFrame({"zone": ["A"]}), np.random.default_rng(0))
