"""Privacy core: exact secure noise, mechanisms, calibration and the budget ledger.

See :mod:`synth.privacy.noise` (exact samplers), :mod:`synth.privacy.calibration` (Balle and Wang
2018; Canonne, Kamath and Steinke 2020), :mod:`synth.privacy.mechanisms` and
:mod:`synth.privacy.ledger`.
"""

from synth.privacy.calibration import (
    analytic_gaussian_sigma,
    discrete_gaussian_privacy,
    discrete_gaussian_vector_privacy,
)
from synth.privacy.ledger import (
    LedgerBranch,
    ParallelGroup,
    PrivacyLedger,
    Spend,
    check_budget,
    exact,
)
from synth.privacy.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    ThresholdHistogram,
    ThresholdRelease,
    least_threshold,
    threshold_delta,
    threshold_histogram,
    threshold_release,
)
from synth.privacy.noise import SecureNoise, noise_source

__all__ = [
    "DiscreteGaussian",
    "DiscreteLaplace",
    "LedgerBranch",
    "ParallelGroup",
    "PrivacyLedger",
    "SecureNoise",
    "Spend",
    "ThresholdHistogram",
    "ThresholdRelease",
    "analytic_gaussian_sigma",
    "check_budget",
    "discrete_gaussian_privacy",
    "discrete_gaussian_vector_privacy",
    "exact",
    "least_threshold",
    "noise_source",
    "threshold_delta",
    "threshold_histogram",
    "threshold_release",
]
