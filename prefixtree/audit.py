"""The noisy prefix tree as a mechanism of the empirical privacy audit (synth.audit.empirical).

The audit lives in the foundation and never imports a generator: the prefix tree's spec
(:data:`synth.registry.SHIPPED`, ``sequences``) names :func:`prefixtree_runner` as its audit hook
(mechanism ``prefixtree``), imported when that mechanism is tested.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from prefixtree.synthesizer import PrefixTreeSynthesizer
from synth.audit.empirical import Runner, loop_runner
from synth.errors import InputError
from synth.taxonomy import Taxonomy

__all__ = ["prefixtree_runner"]


def prefixtree_runner(
    params: dict[str, Any], d: pd.DataFrame, d_prime: pd.DataFrame, noise: Any
) -> Runner:
    """Synthetic sequences of a :class:`PrefixTreeSynthesizer` fitted on D or D' (long format);
    the taxonomy's locations are those of D and D' together (the public domain of the test)."""
    for df in (d, d_prime):
        if "location" not in df:
            raise InputError("prefixtree needs long-format sequences (seq_id, pos, location)")
    domain = sorted(set(d["location"].astype(str)) | set(d_prime["location"].astype(str)))
    spec = str(params.pop("taxonomy", "fanout:4"))
    tax = Taxonomy.from_spec(spec, locations=domain)

    def fit(data: pd.DataFrame) -> pd.DataFrame:
        return PrefixTreeSynthesizer(taxonomy=tax, random_state=noise, **params).fit(data).sample()

    return loop_runner(fit)
