"""Noisy cells: the noisy-threshold step of SBH on counted cells, with the pure-mode empty cells."""

from __future__ import annotations

import numpy as np

from synth.errors import ConfigError
from synth.marginals.sbh_calibration import NoiseSource, SBHCalibration

__all__ = ["empty_positions", "noisy_cells"]


def empty_positions(present: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Linear index of the ``ranks``-th empty cells, given the sorted present cells' indices."""
    gaps = present - np.arange(present.size, dtype=np.int64)  # empty cells before each present one
    return ranks + np.searchsorted(gaps, ranks, side="right")


def noisy_cells(
    keys: np.ndarray,
    counts: np.ndarray,
    cal: SBHCalibration,
    noise: NoiseSource,
    domain_size: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1 on present cells; in pure mode also the empty domain cells (shortcut, exact).

    The noise is drawn by the privacy core's mechanism (:meth:`SBHCalibration.release`). Returns
    the kept keys (sorted, so the output order never depends on the data) and noisy counts.
    """
    n_empty = None
    if cal.pure:
        if domain_size is None:
            raise ConfigError("pure mode needs the public domain of every table")
        n_empty = int(domain_size) - int(keys.size)
    rel = cal.release(counts, noise, n_empty=n_empty)
    out_keys, out_vals = keys[rel.index], rel.values
    if n_empty is not None and rel.empty_values.size:
        ranks = np.sort(np.asarray(noise.choice(n_empty, int(rel.empty_values.size)), np.int64))
        out_keys = np.concatenate([out_keys, empty_positions(keys, ranks)])
        out_vals = np.concatenate([out_vals, rel.empty_values])
        order = np.argsort(out_keys, kind="stable")
        out_keys, out_vals = out_keys[order], out_vals[order]
    return out_keys, out_vals
