"""The empirical audit borrows the prefix tree from its package (the foundation never imports a
generator): with ``prefixtree.audit.AUDIT_RUNNERS`` it runs, without it it says what to pass."""

from __future__ import annotations

import pandas as pd
import pytest

from prefixtree.audit import AUDIT_RUNNERS
from synth.audit import empirical_epsilon
from synth.errors import ConfigError

D = pd.DataFrame({"seq_id": ["1", "1", "2"], "pos": [0, 1, 0], "location": ["a", "b", "a"]})
D_PRIME = D.iloc[:2]  # sequence 2 removed


def test_prefixtree_needs_its_runner() -> None:
    with pytest.raises(ConfigError, match="AUDIT_RUNNERS"):
        empirical_epsilon("prefixtree", D, D_PRIME, params={"epsilon": 1.0}, trials=20)


def test_prefixtree_runs_through_the_lent_runner() -> None:
    res = empirical_epsilon(
        "prefixtree",
        D,
        D_PRIME,
        params={"epsilon": 1.0, "height": 2},
        trials=40,
        seed=1,
        runners=AUDIT_RUNNERS,
    )
    assert res.mechanism == "prefixtree" and res.audit.trials + res.selection_trials == 40
