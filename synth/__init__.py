"""transit-synth: differentially private synthetic public-transport data."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
