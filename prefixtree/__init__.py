"""Hybrid-granularity noisy prefix tree for passenger station sequences (Chen et al., KDD 2012)."""

from prefixtree.consistency import consistent_counts, release_counts
from prefixtree.synthesizer import PrefixTreeSynthesizer

__all__ = ["PrefixTreeSynthesizer", "consistent_counts", "release_counts"]
