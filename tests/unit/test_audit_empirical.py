"""Empirical DP through the harness, for mechanisms of the library, with canaries."""

from __future__ import annotations

import pandas as pd
import pytest

from synth.audit import empirical_epsilon
from synth.audit.empirical import cells_of
from synth.errors import ConfigError, InputError

D = pd.DataFrame({"x": ["a", "a", "a", "b"]})
D_PRIME = pd.DataFrame({"x": ["a", "a", "a", "c"]})  # one row replaced


def test_discrete_laplace_passes() -> None:
    res = empirical_epsilon(
        "discrete_laplace",
        D,
        D_PRIME,
        params={"epsilon": 1.0, "sensitivity": 2},
        trials=2000,
        seed=1,
    )
    assert not res.violated and res.claimed_epsilon == 1.0 and res.claimed_delta == 0.0
    assert res.audit.trials + res.selection_trials == 2000


def test_canary_understated_sensitivity_is_refuted() -> None:
    # noise calibrated for sensitivity 0.25 while a replaced row moves two cells by one
    res = empirical_epsilon(
        "discrete_laplace",
        D,
        D_PRIME,
        params={"epsilon": 1.0, "sensitivity": 0.25},
        trials=2000,
        seed=2,
    )
    assert res.violated and res.audit.epsilon_lower_bound > 1.5


def test_pure_stability_histogram_passes() -> None:
    res = empirical_epsilon(
        "sbh",
        D,
        D_PRIME,
        params={"epsilon": 1.0, "delta": 0.1, "pure": True},
        trials=1000,
        seed=3,
    )
    assert not res.violated and res.claimed_delta == 0.0
    assert res.to_dict()["mechanism"] == "sbh"


def test_cells_of_tables_and_sequences() -> None:
    table = pd.DataFrame({"day": ["d1", "d2"], "count": [5, 7]})
    seqs = pd.DataFrame({"seq_id": ["1", "1", "2"], "pos": [0, 1, 0], "location": ["A", "B", "A"]})
    cells = cells_of({"t": table, "s": seqs})
    assert cells == {"t:d1": 5, "t:d2": 7, "s:A > B": 1, "s:A": 1}


def test_bad_requests() -> None:
    with pytest.raises(ConfigError, match="unknown mechanism"):
        empirical_epsilon("magic", D, D_PRIME, params={"epsilon": 1}, trials=100)
    with pytest.raises(ConfigError, match="epsilon"):
        empirical_epsilon("discrete_laplace", D, D_PRIME, params={}, trials=100)
    with pytest.raises(InputError, match="missing column"):
        empirical_epsilon(
            "discrete_laplace", D, D_PRIME, params={"epsilon": 1, "columns": "y"}, trials=100
        )


def test_unknown_parameter_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="bad parameters"):
        empirical_epsilon(
            "discrete_laplace", D, D_PRIME, params={"epsilon": 1, "epsilo": 2}, trials=100
        )
