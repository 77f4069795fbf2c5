"""transit-synth: differentially private synthetic public-transport data."""

from __future__ import annotations

__version__ = "0.1.0"

from synth.records import load_sequences, load_taps, load_trips
from synth.sbh import OpalRelease, stability_histogram
from synth.taxonomy import Taxonomy

__all__ = [
    "OpalRelease",
    "Taxonomy",
    "__version__",
    "load_sequences",
    "load_taps",
    "load_trips",
    "stability_histogram",
]
