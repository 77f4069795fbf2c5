"""Trip marginals: TV distances, the k-marginal score, OD error, trip distributions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synth.errors import InputError
from synth.evaluate import evaluate_trips
from synth.evaluate.marginals import (
    discretise,
    k_marginal_score,
    marginal_tv,
    marginal_tvd,
    od_error,
    time_of_day,
    trips_per_individual,
)


def _trips(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    mode = rng.choice(["bus", "rail", "subway"], n, p=[0.6, 0.3, 0.1])
    hour = np.where(mode == "rail", rng.integers(6, 10, n), rng.integers(0, 24, n))
    return pd.DataFrame(
        {
            "card_id": rng.integers(0, 800, n).astype(str),
            "mode": mode,
            "on_time": (
                pd.Timestamp("2019-11-27")
                + pd.to_timedelta(hour * 60 + rng.integers(0, 60, n), "m")
            ).strftime("%Y-%m-%dT%H:%M:%S"),
            "on_stop": rng.choice(list("ABCD"), n),
            "off_stop": rng.choice(list("ABCD"), n),
            "fare": np.round(rng.gamma(2.0, 20.0, n), 2) + (mode == "rail") * 50,
        }
    )


def _codes(a: list[str], b: list[str]) -> tuple[np.ndarray, np.ndarray]:
    o, s, _ = discretise(pd.DataFrame({"x": a}), pd.DataFrame({"x": b}))
    return o, s


def test_marginal_tv_by_hand() -> None:
    assert marginal_tv(*_codes(list("aabb"), list("abbb"))) == pytest.approx(0.25)
    assert marginal_tv(*_codes(list("aa"), list("ac"))) == pytest.approx(0.5)  # union of cells
    assert marginal_tv(*_codes(list("ab"), list("cd"))) == pytest.approx(1.0)


def test_k_marginal_score_of_self_and_of_a_column_shuffle() -> None:
    trips = _trips()
    o, s, cols = discretise(trips, trips, exclude=["card_id"])
    assert k_marginal_score(o, s, cols)["score"] == 1000.0
    rng = np.random.default_rng(1)
    shuffled = trips.apply(lambda c: rng.permutation(c.to_numpy()))
    o, s, cols = discretise(trips, shuffled, exclude=["card_id"])
    result = k_marginal_score(o, s, cols, n_marginals=50, seed=0)
    assert result["score"] < 990.0
    assert len(result["marginals"]) == 50
    assert all(len(m["columns"]) == 2 for m in result["marginals"])
    tvd = marginal_tvd(o, s, cols)
    assert tvd["mean_one_way"] == 0.0  # a shuffle keeps every one-way marginal
    assert tvd["max_two_way"] > 0.0
    assert result == k_marginal_score(o, s, cols, n_marginals=50, seed=0)  # fixed seed


def test_mismatched_schemas_are_refused() -> None:
    trips = _trips(100)
    with pytest.raises(InputError, match=r"synthetic table lacks column.*fare"):
        discretise(trips, trips.drop(columns=["fare"]))
    with pytest.raises(InputError, match="not in the original"):
        evaluate_trips(trips, {"r": trips.assign(extra=1)})


def test_numeric_columns_share_bins_and_labels() -> None:
    a = pd.DataFrame({"n": np.arange(200), "k": np.arange(200) % 3})
    b = a.astype(float)
    o, s, _ = discretise(a, b, n_bins=10, max_categories=50)
    assert np.array_equal(o, s)
    assert len(np.unique(o[:, 0])) == 10 and len(np.unique(o[:, 1])) == 3


def test_trip_distributions_and_od_by_hand() -> None:
    t = pd.DataFrame(
        {
            "card_id": ["1", "1", "2", "3"],
            "on_time": [f"2019-11-27T{t}" for t in ("08:10", "09:10", "08:50", "18:00")],
            "on_stop": ["a", "b", "a", "c"],
            "off_stop": ["b", "a", "c", "a"],
        }
    )
    s = t.iloc[[0, 1, 2, 2]]
    per = trips_per_individual(t, s)
    assert per["values"] == [1, 2] and per["tv"] == pytest.approx(2 / 3)
    assert time_of_day(t, t)["tv"] == 0.0
    assert time_of_day(t, s)["values"] == [8, 9, 18]
    od = {b["bin_start_hour"]: b for b in od_error(t, s)}
    assert od[8]["original_trips"] == 2 and od[8]["synthetic_trips"] == 3
    assert od[8]["relative_l1"] == pytest.approx(0.5)  # cell a->c: 1 vs 2
    assert od[8]["tv"] == pytest.approx(0.5 * (abs(0.5 - 1 / 3) + abs(0.5 - 2 / 3)))
    assert od[18]["tv"] == 1.0 and od[9]["tv"] == 0.0


def test_evaluate_trips_reports_every_measure() -> None:
    trips = _trips()
    result = evaluate_trips(trips, {"self": trips, "other": _trips(seed=1)})
    assert result["releases"]["self"]["k_marginal"]["score"] == 1000.0
    assert result["releases"]["other"]["k_marginal"]["score"] < 1000.0
    measures = {"marginals", "od", "time_of_day", "trips_per_individual"}
    assert set(result["releases"]["other"]) >= measures
    assert result["skipped"] == []
    assert "card_id" not in result["parameters"]["columns"]


def test_chicago_taxi_against_itself(shared_data) -> None:
    taxi = pd.read_csv(shared_data / "chicago-taxi" / "chicago_taxi_simple.csv")
    result = evaluate_trips(taxi, {"self": taxi})
    assert result["releases"]["self"]["k_marginal"]["score"] == 1000.0
    assert result["skipped"]  # no card id, on_time or stops in this table
