"""The Opal "Second Algorithm" (paper 001 Appendix B), reproduced to validate the audit against it.

Each count is perturbed with continuous Laplace(p) noise *unless it is zero*, noisy counts below the
threshold are removed and the rest rounded. It is NOT private (Theorem 1: no epsilon holds, and
delta is at least ``exp(-(t-1)/p)/(2p)``); it exists so that an agency can see what the audit says
about the algorithm that was actually published. The manifest states what the algorithm did
(``mechanism = "laplace_threshold_nonzero"``, zero counts not perturbed) and what Data61 claimed
(epsilon = 1/p for sensitivity 1, delta = 0).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.privacy import PrivacyLedger

__all__ = ["second_algorithm"]


def second_algorithm(
    tables: Mapping[str, pd.DataFrame],
    out_dir: str | os.PathLike[str],
    *,
    scale: float = 1.4,
    threshold: int = 18,
    rng: np.random.Generator,
) -> Path:
    """Release the exact ``tables`` (each with a ``count`` column) through the Second Algorithm.

    Zero counts stay zero and are not released; a non-zero count gets ``Lap(scale)`` noise, is kept
    when the noisy value reaches ``threshold`` and is rounded. Writes ``<name>.csv`` per table and
    ``manifest.json`` into ``out_dir`` atomically. ``rng`` is numpy's generator: this reproduction
    of a flawed algorithm is for tests and demonstrations, never for a release.
    """
    if not scale > 0 or threshold < 1:
        raise ConfigError("the Second Algorithm needs scale > 0 and threshold >= 1")
    ledger = PrivacyLedger(
        epsilon=len(tables) / scale,
        delta=0,
        unit="tap",
        neighbouring="replace one tap (as claimed by Data61)",
    )
    noisy = {}
    for name, df in tables.items():
        if "count" not in df:
            raise InputError(f"table '{name}' has no 'count' column")
        counts = df["count"].to_numpy(dtype=float)
        values = np.where(counts > 0, counts + rng.laplace(0.0, scale, counts.size), 0.0)
        keep = (counts > 0) & (values >= threshold)
        noisy[name] = df.loc[keep].assign(count=np.rint(values[keep]).astype(np.int64))
        ledger.spend(
            label=name,
            mechanism="laplace_threshold_nonzero",
            epsilon=1 / scale,
            delta=0,
            sensitivity=1,
            scale=scale,
            threshold=threshold,
            note="Second Algorithm (001 Appendix B): zero counts are not perturbed; noisy counts "
            f"kept when >= {threshold}, then rounded",
        )
    from synth.release import build_manifest, write_release

    manifest = build_manifest(ledger, {"generator": "second-algorithm"})
    with write_release(out_dir) as release:
        for name, df in noisy.items():
            release.table(df, name)
        release.manifest(manifest)
    return Path(out_dir)
