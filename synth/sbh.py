"""Re-export shim: the SBH marginals live in :mod:`synth.marginals` (this path keeps working).

``_count``, ``_noisy_cells`` and ``_empty_positions`` are the old names of
:func:`synth.engines.kernels.count_keys`, :func:`synth.marginals.cells.noisy_cells` and
:func:`synth.marginals.cells.empty_positions`.
"""

from synth.engines.kernels import count_keys as _count
from synth.marginals import (
    DEFAULT_SPLIT,
    NOISE_METHODS,
    TABLES,
    Mode,
    NoiseSource,
    OpalRelease,
    SBHCalibration,
    calibrate,
    marginal_tables,
    stability_histogram,
)
from synth.marginals.cells import empty_positions as _empty_positions
from synth.marginals.cells import noisy_cells as _noisy_cells

__all__ = [
    "DEFAULT_SPLIT",
    "NOISE_METHODS",
    "TABLES",
    "Mode",
    "NoiseSource",
    "OpalRelease",
    "SBHCalibration",
    "_count",
    "_empty_positions",
    "_noisy_cells",
    "calibrate",
    "marginal_tables",
    "stability_histogram",
]
