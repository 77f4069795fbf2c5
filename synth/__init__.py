"""transit-synth: differentially private synthetic public-transport data.

The public names below are imported on first use, so that ``transit-synth --help`` and light
modules do not pay for pandas, scipy and scikit-learn at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "OpalMarginals": "synth.marginals",
    "stability_histogram": "synth.marginals",
    "Taxonomy": "synth.taxonomy",
    "load_sequences": "synth.records",
    "load_taps": "synth.records",
    "load_trips": "synth.records",
}

if TYPE_CHECKING:
    from synth.marginals import OpalMarginals, stability_histogram
    from synth.records import load_sequences, load_taps, load_trips
    from synth.taxonomy import Taxonomy

__all__ = [
    "OpalMarginals",
    "Taxonomy",
    "__version__",
    "load_sequences",
    "load_taps",
    "load_trips",
    "stability_histogram",
]


#: deprecated old names (CHANGELOG.md, "Deprecations"), looked up in their module at every use so
#: that each use warns (:data:`synth.marginals.RENAMED_CLASSES`)
_RENAMED: dict[str, str] = {"OpalRelease": "synth.marginals"}


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (PEP 562)."""
    if name in _RENAMED:
        return getattr(importlib.import_module(_RENAMED[name]), name)
    if name not in _EXPORTS:
        raise AttributeError(f"module 'synth' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
