"""GMM-archetype trip synthesizer (GooseDP, NIST Differential Privacy Temporal Map Challenge)."""
