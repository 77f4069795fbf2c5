"""The default (``auto``) prefix tree draws exactly the noise its ledger states, and its completion
hints are exactly the cells of the histogram whose noisy count fell in the hint band.

- Noise drawn = noise recorded: every scale at which :class:`~synth.privacy.SecureNoise` draws
  during a fit is the scale of a spend in the ledger, and every spend's scale is drawn at; the
  ledger itself refuses a scale below sensitivity / epsilon
  (:func:`synth.privacy.ledger.check_noise`). The same holds for the Opal release and the
  archetype synthesizer (the other callers of ``spend``). Canaries (issue 25): the noisy root
  count drawn at the full epsilon's scale but charged epsilon / 100, recorded honestly (the
  ledger refuses it) or recorded at the charged scale (the drawn scale is in no spend).
- Joint pattern of the hints (:mod:`prefixtree.hints`): with explicit noise on every cell (a
  known value per present cell, known values for the empty cells that reach the hint
  threshold), the level-2 nodes are the cells whose count + noise reaches the pass threshold,
  the hints those in ``[hint, threshold)``, each with value count + noise. Canary: exact counts
  clipped into the hint band.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import prefixtree.synthesizer
import prefixtree.tree as tree_module
from archetypes import ArchetypeSynthesizer
from prefixtree import PrefixTreeSynthesizer
from prefixtree.plan import scale_for
from synth.errors import ConfigError
from synth.privacy import PrivacyLedger, SecureNoise, exact
from tests.conftest import flat_taxonomy


def sequences(rows: list[tuple[list[str], int]]) -> pd.DataFrame:
    out, sid = [], 0
    for locations, copies in rows:
        for _ in range(copies):
            out += [(f"c{sid}", pos, loc) for pos, loc in enumerate(locations)]
            sid += 1
    return pd.DataFrame(out, columns=["seq_id", "pos", "location"])


DATA = sequences([(["s0"], 40), (["s0", "s1"], 12), (["s2", "s3", "s1"], 25), (["s4"], 9)])


# ------------------------------------------------------------------ noise drawn = noise recorded
def drawn_scales(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the scale (sigma) of every outermost SecureNoise draw: Laplace, the empty cells,
    the Gaussian (whose sampler proposes from the Laplace: only the outer call counts)."""
    seen: list[float] = []
    depth = [0]
    for name in ("discrete_laplace", "empty_cells_passing", "discrete_gaussian"):
        original = getattr(SecureNoise, name)

        def method(self: SecureNoise, scale: float, *rest: Any, _o: Any = original) -> Any:
            if depth[0] == 0:
                seen.append(float(scale))
            depth[0] += 1
            try:
                return _o(self, scale, *rest)
            finally:
                depth[0] -= 1

        monkeypatch.setattr(SecureNoise, name, method)
    return seen


def assert_noise_is_recorded(ledger: PrivacyLedger | set[float], drawn: list[float]) -> None:
    recorded = ledger if isinstance(ledger, set) else {s.scale for s in ledger.spends}
    assert drawn, "no noise drawn"
    assert set(drawn) <= recorded, f"drawn at {sorted(set(drawn) - recorded)}, recorded nowhere"
    assert recorded <= set(drawn), f"recorded {sorted(recorded - set(drawn))}, never drawn"


def fit_auto() -> PrefixTreeSynthesizer:
    return PrefixTreeSynthesizer(
        epsilon=1.0, height=3, taxonomy=flat_taxonomy(12), random_state=2
    ).fit(DATA)


def test_auto_tree_draws_the_noise_its_ledger_states(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = drawn_scales(monkeypatch)
    syn = fit_auto()
    assert syn.config_["root_share"] > 0  # the premise: a noisy root count is drawn
    root = [s for s in syn.ledger_.spends if "root" in s.label]
    assert len(root) == 1 and root[0].scale in drawn  # (the length histogram may draw first)
    assert_noise_is_recorded(syn.ledger_, drawn)


def test_marginals_and_archetypes_draw_the_noise_their_ledgers_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other callers of ``spend``: the Opal release (card unit, every mode) and the archetype
    synthesizer draw at the scales their manifests state."""
    from synth.marginals.release import release_marginals
    from tests.dp.test_archetypes_dp import fitted
    from tests.dp.test_release_dp import OPAL_CARD, OPAL_NEW, opal_taps

    drawn = drawn_scales(monkeypatch)
    opal_taps(OPAL_NEW, 3).to_csv(tmp_path / "taps.csv", index=False)
    for mode in ("sbh", "consistent"):
        out = tmp_path / mode
        release_marginals(tmp_path / "taps.csv", out, params={**OPAL_CARD, "mode": mode}, seed=1)
        spends = json.loads((out / "manifest.json").read_text())["spends"]
        assert_noise_is_recorded({float(s["scale"]) for s in spends}, drawn)
        drawn.clear()
    syn = fitted(ArchetypeSynthesizer)
    assert_noise_is_recorded(syn.ledger_, drawn)


def _root_at_full_scale(record_honestly: bool) -> Any:
    """The issue's mutant: the root count drawn at the full epsilon's scale, charged
    epsilon * root_share (epsilon / 100 under auto); its spend states the scale drawn
    (``record_honestly``) or the scale the charge would need."""

    def spend_root(self: PrefixTreeSynthesizer, ledger: PrivacyLedger, eps: Fraction) -> float:
        share = exact(self.config_["root_share"], "root_share")
        drawn = scale_for(eps)
        ledger.spend(
            label="prefix tree root: number of sequences",
            mechanism="discrete_laplace",
            epsilon=eps * share,
            sensitivity=1,
            scale=drawn if record_honestly else scale_for(eps * share),
        )
        self._root_scale = drawn
        return drawn

    return spend_root


def test_canary_root_at_full_scale_recorded_is_refused_by_the_ledger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        PrefixTreeSynthesizer, "_spend_root", _root_at_full_scale(record_honestly=True)
    )
    with pytest.raises(ConfigError, match="below sensitivity / epsilon"):
        fit_auto()


def test_canary_root_at_full_scale_misrecorded_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        PrefixTreeSynthesizer, "_spend_root", _root_at_full_scale(record_honestly=False)
    )
    drawn = drawn_scales(monkeypatch)
    syn = fit_auto()
    with pytest.raises(AssertionError, match="recorded nowhere"):
        assert_noise_is_recorded(syn.ledger_, drawn)


# ------------------------------------------------------------------ hints: the joint pattern
#: level-2 children of s0 (exact counts): with :data:`PATTERN` (in taxonomy order s1, s10, s2,
#: ...) and epsilon 0.5 (level 2: hint threshold 3, pass threshold 13) some fall below the hint
#: threshold, some in the band (one only by its noise), some pass (one only by its noise)
PAIRS = {"s1": 1, "s10": 2, "s2": 12, "s3": 10, "s4": 5, "s6": 14, "s7": 20, "s8": 1, "s9": 7}
PATTERN = np.array([2, -1, 1, 3, 0, -2, 2, 1, -3, 0, 1, 2], dtype=np.int64)


class ExplicitNoise:
    """Every draw explicit: ``discrete_laplace`` returns the start of :data:`PATTERN` (a known
    value per cell, in the order the cells are drawn), empty cells pass only on level 2: one at
    the hint threshold and one at the pass threshold; index draws are the first ones."""

    seeded = True

    def __init__(self, level2_scale: float, level2_threshold: int) -> None:
        self.level2 = (level2_scale, level2_threshold)
        self.calls: list[tuple[float, np.ndarray]] = []

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        values = np.resize(PATTERN, int(size))
        self.calls.append((float(scale), values))
        return values

    def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray:
        if float(scale) != self.level2[0]:
            return np.zeros(0, dtype=np.int64)
        return np.array([threshold, self.level2[1]], dtype=np.int64)[: int(n_empty)]

    def choice(self, n: int, k: int) -> np.ndarray:
        return np.arange(int(k), dtype=np.int64)

    def permutation(self, n: int) -> np.ndarray:
        return np.arange(int(n), dtype=np.int64)


def hint_fit(monkeypatch: pytest.MonkeyPatch) -> tuple[PrefixTreeSynthesizer, Any, ExplicitNoise]:
    """The auto tree (h = 2) of s0 (100 cards) and its pairs, under explicit noise; returns the
    model, the built tree (spied on, unchanged) and the noise."""
    tax = flat_taxonomy(12)
    data = sequences([(["s0"], 100), *[(["s0", loc], c) for loc, c in PAIRS.items()]])
    plan = PrefixTreeSynthesizer(epsilon=0.5, height=2, taxonomy=tax)
    plan.check_params()
    level2 = plan._prepared[2][1][-1]
    noise = ExplicitNoise(level2.scale, level2.threshold)
    built: dict[str, Any] = {}
    build = prefixtree.synthesizer.build_noisy_tree_counted

    def spy(*args: Any, **kwargs: Any) -> Any:
        built["tree"] = build(*args, **kwargs)
        return built["tree"]

    monkeypatch.setattr(prefixtree.synthesizer, "build_noisy_tree_counted", spy)
    syn = PrefixTreeSynthesizer(epsilon=0.5, height=2, taxonomy=tax, random_state=noise)
    syn.fit(data)
    return syn, built["tree"], noise


def assert_hint_pattern(syn: PrefixTreeSynthesizer, built: Any, noise: ExplicitNoise) -> None:
    """Nodes, hints and their values at level 2 against count + explicit noise, cell by cell."""
    row = syn.sub_levels_.set_index("level").loc[2]
    threshold, hint, scale = int(row["threshold"]), int(row["hint_threshold"]), row["scale"]
    order = [loc for loc in syn.locations_ if loc in PAIRS]  # cells drawn in taxonomy order
    (z,) = [v for s, v in noise.calls if s == scale and v.size == len(order)]
    noisy = {loc: PAIRS[loc] + int(zi) for loc, zi in zip(order, z, strict=True)}
    absent = [loc for loc in syn.locations_ if loc not in PAIRS]
    tree = syn.tree_
    deep = tree[tree["depth"] == 2]
    nodes = dict(zip(deep["location"].astype(str), deep["noisy_count"].astype(int), strict=True))
    want_nodes = {loc: v for loc, v in noisy.items() if v >= threshold}
    fake_nodes = {loc: v for loc, v in nodes.items() if loc in absent}
    got_nodes = {k: v for k, v in nodes.items() if k not in absent}
    assert got_nodes == want_nodes, f"nodes {got_nodes} != count + noise {want_nodes}"
    assert list(fake_nodes.values()) == [threshold]  # the empty cell drawn at the threshold
    parent, location, _, values = built.hints
    level2 = parent >= 0
    hints = {
        syn.locations_[int(loc)]: int(v)
        for loc, v in zip(location[level2], values[level2], strict=True)
    }
    want_hints = {loc: v for loc, v in noisy.items() if hint <= v < threshold}
    got_hints = {k: v for k, v in hints.items() if k not in absent}
    assert got_hints == want_hints, f"hints {got_hints} != count + noise {want_hints}"
    assert [v for k, v in hints.items() if k in absent] == [hint]  # the empty one at the hint
    # the premises: every kind of cell is there
    assert len(want_hints) >= 3 and want_nodes and len(want_hints) + len(want_nodes) < len(order)
    assert any(v != PAIRS[k] for k, v in want_hints.items())


def test_hints_are_the_noisy_band_of_the_histogram(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_hint_pattern(*hint_fit(monkeypatch))


def test_canary_exact_counts_clipped_into_the_hint_band_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mutant keeps the cells the noisy counts select but gives them their exact counts,
    clipped into [hint, threshold)."""
    original = tree_module._noisy_cells

    def clipped(noise: Any, level: Any, counts: Any, *rest: Any) -> Any:
        noisy_present, passed, fake, hinted = original(noise, level, counts, *rest)
        if hinted is None:
            return noisy_present, passed, fake, hinted
        band = (noisy_present >= level.hint) & (noisy_present < level.threshold)
        values = hinted[2].copy()
        values[: int(band.sum())] = np.clip(counts[band], level.hint, level.threshold - 1)
        return noisy_present, passed, fake, (hinted[0], hinted[1], values)

    monkeypatch.setattr(tree_module, "_noisy_cells", clipped)
    with pytest.raises(AssertionError, match=r"hints .* != count \+ noise"):
        assert_hint_pattern(*hint_fit(monkeypatch))
