"""Hybrid-granularity noisy prefix tree for passenger station sequences (Chen et al., KDD 2012)."""
