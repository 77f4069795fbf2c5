"""Privacy audit of releases: the attacks of the Opal assessment (paper 001) and empirical DP.

- :mod:`synth.audit.scale`: noise-scale recovery from paired counts (section 2, Appendix D);
- :mod:`synth.audit.zeros`: the unperturbed-zero check and Theorem 1's delta bound (section 3);
- :mod:`synth.audit.differencing`: suppressed totals recovered across tables (section 4, App. E);
- :mod:`synth.audit.empirical`: the statistical harness on any mechanism of the library;
- :mod:`synth.audit.report`: every check on a release directory, as JSON and HTML findings;
- :mod:`synth.audit.emulate`: the flawed "Second Algorithm", to validate the audit against it.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> defining module (imported on first use, so ``transit-synth --help`` stays fast).
_EXPORTS: dict[str, str] = {
    "difference_tables": "differencing",
    "table_pairs": "differencing",
    "theorem5_halfwidth": "differencing",
    "EmpiricalResult": "empirical",
    "empirical_epsilon": "empirical",
    "second_algorithm": "emulate",
    "AuditedRelease": "release",
    "TableNoise": "release",
    "load_release": "release",
    "audit_release": "report",
    "render_html": "html",
    "write_report": "report",
    "ScaleEstimate": "scale",
    "fit_scale": "scale",
    "named_pairs": "scale",
    "route_pairs": "scale",
    "ZeroCheck": "zeros",
    "check_zeros": "zeros",
    "presence_probability": "zeros",
    "theorem1_delta": "zeros",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"synth.audit.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'synth.audit' has no attribute {name!r}")
