"""Stability-based histograms (SBH) and the Opal-style marginal release.

:func:`stability_histogram` is Algorithm 1 of Asghar, Tyler and Kaafar (2018, section 3): only the
points present in the data are counted, each count gets discrete Laplace noise of scale
``2/epsilon``, a noisy count is kept when it reaches ``2 ln(2/delta)/epsilon + 1``, and the output
is sorted lexicographically (section 3.3.1). With a card as the privacy unit each card is first
bounded to ``k`` rows, and scale and threshold are calibrated for the resulting sensitivities
(:func:`calibrate` proves the guarantee). The noise is drawn by the privacy core's one
noisy-threshold mechanism, :class:`synth.privacy.ThresholdHistogram`.

:class:`OpalMarginals` (the manifest's ``opal-marginals``; ``OpalRelease`` until 0.3.0, a
deprecated alias) is the section 4.1 pipeline (identifiers dropped, 15-minute bins, locations
collapsed to a taxonomy level, mode x day partitions, six marginal tables with epsilons
1,1,1,1,2,2 and ``delta_j = 1/8,000,000``) plus the two fixes of Culnane, Rubinstein and Teague
(2017) as modes ``"consistent"`` and ``"pure"``.

Modules, along the pipeline: :mod:`~synth.marginals.sbh_calibration`, :mod:`~synth.marginals.cells`
(noisy cells), :mod:`~synth.marginals.histogram` (Algorithm 1), :mod:`~synth.marginals.events`
(pipeline inputs), :mod:`~synth.marginals.grid` and :mod:`~synth.marginals.opal` (the pipeline);
:mod:`~synth.marginals.release` fits it on private data and writes the release directory (the
library side of ``transit-synth marginals``).
"""

import warnings
from typing import Any

from synth.errors import RenamedClassWarning
from synth.marginals.events import load_input
from synth.marginals.grid import DEFAULT_SPLIT, TABLES
from synth.marginals.histogram import stability_histogram
from synth.marginals.opal import Mode, OpalMarginals, marginal_tables
from synth.marginals.sbh_calibration import NOISE_METHODS, NoiseSource, SBHCalibration, calibrate
from synth.params import RENAMED_REMOVED_IN

__all__ = [
    "DEFAULT_SPLIT",
    "NOISE_METHODS",
    "TABLES",
    "Mode",
    "NoiseSource",
    "OpalMarginals",
    "SBHCalibration",
    "calibrate",
    "load_input",
    "marginal_tables",
    "stability_histogram",
]

#: old public name -> its new name (CHANGELOG.md, "Deprecations"): still importable, with a
#: :class:`~synth.errors.RenamedClassWarning`, until :data:`~synth.params.RENAMED_REMOVED_IN`
RENAMED_CLASSES = {"OpalRelease": "OpalMarginals"}


def __getattr__(name: str) -> Any:
    """The deprecated old names of :data:`RENAMED_CLASSES` (PEP 562): the new class, with a
    warning at every use."""
    if name in RENAMED_CLASSES:
        new = RENAMED_CLASSES[name]
        warnings.warn(
            f"{name} is renamed {new} (its manifest name, 'opal-marginals'); the old name is "
            f"removed in transit-synth {RENAMED_REMOVED_IN}: import {new} from synth.marginals",
            RenamedClassWarning,
            stacklevel=2,
        )
        return globals()[new]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
