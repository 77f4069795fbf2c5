"""The empirical audit borrows the prefix tree through its registry spec (the foundation never
imports a generator): ``prefixtree`` is a mechanism of ``empirical_epsilon`` with no runner
passed, its hook (:func:`prefixtree.audit.prefixtree_runner`) imported on use."""

from __future__ import annotations

import pandas as pd

from synth import registry
from synth.audit import empirical_epsilon
from synth.audit.empirical import mechanisms

D = pd.DataFrame({"seq_id": ["1", "1", "2"], "pos": [0, 1, 0], "location": ["a", "b", "a"]})
D_PRIME = D.iloc[:2]  # sequence 2 removed


def test_prefixtree_is_a_mechanism_through_its_spec() -> None:
    hook = registry.get("sequences").audit
    assert hook is not None and hook.mechanism == "prefixtree"
    assert registry.load(hook.runner).__module__ == "prefixtree.audit"
    assert "prefixtree" in mechanisms() and "marginals" in mechanisms()


def test_prefixtree_runs_through_the_registered_runner() -> None:
    res = empirical_epsilon(
        "prefixtree", D, D_PRIME, params={"epsilon": 1.0, "height": 2}, trials=40, seed=1
    )
    assert res.mechanism == "prefixtree" and res.audit.trials + res.selection_trials == 40
