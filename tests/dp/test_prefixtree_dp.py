"""Statistical DP tests of the noisy prefix tree (synth.privacy.harness), with a canary.

Neighbours: D and D' = D plus one card's whole sequence through a location absent from D. One fit
runs ``n`` independent trials: every trial gets its own first location ``T<t>`` (a public location
of the taxonomy), carried by enough padding cards that it always survives, followed by the sequences
of D (or D'). Trial subtrees are disjoint cells with independent noise (the empty-cell shortcut over
the union of all parents is the same distribution as per-parent draws), so the level-2 nodes under
``T<t>`` are one draw of the level-1 mechanism on D. The claimed epsilon is the whole tree's.

With ``completion="markov"`` each trial node also gets an end-of-sequence cell (drawn with level
2); the neighbour then adds one card whose sequence is the trial location alone, which changes only
that end cell, and the events read its noisy value.

The canary is the production synthesizer with a noise source whose empty cells never pass (what an
implementation that only expands non-empty children does): the absent location then never appears
under D, and the harness must refute the claimed epsilon.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from prefixtree import PrefixTreeSynthesizer
from synth.privacy import SecureNoise
from synth.privacy.harness import Event, audit_epsilon
from synth.taxonomy import Taxonomy

EPS = 2.0  # whole tree (h = 2): eps_bar = 1 per level
TRIALS = 2000
PADDING = 40
REAL = ["A", "B", "C", "X"]
D = [["A"], ["A", "B"], ["B"]]
D_PRIME = [*D, ["X", "A"]]
D_END = [*D, []]  # one more card whose sequence ends at the trial location


def _taxonomy(n: int, hybrid: bool) -> Taxonomy:
    trials = [f"T{t:05d}" for t in range(n)]
    if not hybrid:
        return Taxonomy.from_edges([(loc, "root") for loc in trials + REAL])
    edges = [(loc, f"g{t // 8}") for t, loc in enumerate(trials)]
    edges += [(loc, "real") for loc in REAL]
    edges += [(f"g{g}", "root") for g in range((n + 7) // 8)] + [("real", "root")]
    return Taxonomy.from_edges(edges)


def _replicate(rows: list[list[str]], n: int, timed: bool = False) -> pd.DataFrame:
    """Trial t: PADDING cards at ``T<t>``, then ``T<t>`` followed by each row; with ``timed``, the
    trial location at 06:00 and the rest at 13:00."""
    records = []
    for t in range(n):
        trial = f"T{t:05d}"
        for k in range(PADDING):
            records.append((f"{trial}/pad{k}", 0, trial, "06:00"))
        for i, row in enumerate(rows):
            for pos, loc in enumerate([trial, *row]):
                records.append((f"{trial}/{i}", pos, loc, "06:00" if pos == 0 else "13:00"))
    frame = pd.DataFrame(records, columns=["seq_id", "pos", "location", "time"])
    return frame if timed else frame.drop(columns="time")


class NoEmptyCells:
    """Canary noise: secure noise, but empty cells never pass (absent children never appear)."""

    def __init__(self, seed: int) -> None:
        self._noise = SecureNoise(seed=seed)
        self.seeded = True

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        return self._noise.discrete_laplace(scale, size)

    def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray:
        return np.zeros(0, dtype=np.int64)

    def choice(self, n: int, k: int) -> np.ndarray:
        return self._noise.choice(n, k)


def runner(
    *,
    hybrid: bool,
    canary: bool = False,
    tuned: bool = False,
    scale: float = 1.0,
    completion: str = "none",
    coarse: bool = False,
) -> Callable[[Any, int], pd.DataFrame]:
    """``tuned``: the simple tree with level_weights 1:3 (level 2 gets 3/4 of epsilon) and a pass
    threshold of 1; ``scale`` multiplies the epsilon actually used (a canary when > 1); with
    ``completion="markov"`` the trial nodes' end cells are rows with location ``<end>``; ``coarse``
    (hybrid): trajectories in 6-hour bins, the group sub-level counting 12-hour bins."""

    def run(rows: list[list[str]], n: int) -> pd.DataFrame:
        seed = 7919 * len(rows) + n + (1 if hybrid else 0)
        noise = NoEmptyCells(seed) if canary else SecureNoise(seed=seed)
        syn = PrefixTreeSynthesizer(
            preset="kdd12",
            epsilon=EPS * scale,
            height=2,
            taxonomy=_taxonomy(n, hybrid),
            variant="hybrid" if hybrid else "simple",
            budget_split={1: 0.5} if hybrid else None,
            thresholds={1: 2, 2: 2} if hybrid else ({1: 1} if tuned else None),
            level_weights=[1, 3] if tuned else None,
            completion=completion,
            time_bin=360 if coarse else None,
            coarse_time_bin=720 if coarse else None,
            random_state=noise,
        ).fit(_replicate(rows, n, timed=coarse))
        tree = syn.tree_
        top = tree[tree["depth"] == 1].set_index("node")["location"].astype(str)
        below = tree[tree["depth"] == 2]
        trial = below["parent"].map(top)
        out = pd.DataFrame(
            {
                "trial": trial.to_numpy(),
                "location": below["location"].astype(str).to_numpy(),
                "noisy": below["noisy_count"].to_numpy(),
            }
        )
        if completion != "none":
            first = tree[tree["depth"] == 1]
            ends = pd.DataFrame(
                {
                    "trial": first["location"].astype(str).to_numpy(),
                    "location": "<end>",
                    "noisy": first["end_noisy"].to_numpy(dtype=np.int64),
                }
            )
            out = pd.concat([out, ends], ignore_index=True)
        out = out[out["trial"].str.startswith("T")]
        out.attrs["trials"] = n
        return out

    return run


def appears(location: str, at_least: int | None = None) -> Event:
    """Per trial: ``location`` is a first step of the tree (with noisy count >= ``at_least``)."""

    def event(out: pd.DataFrame) -> np.ndarray:
        n = int(out.attrs["trials"])
        hit = out["location"] == location
        if at_least is not None:
            hit &= out["noisy"] >= at_least
        flags = np.zeros(n, dtype=bool)
        flags[out.loc[hit, "trial"].str.slice(1).astype(int).to_numpy()] = True
        return flags

    return event


EVENTS = {"X appears": appears("X"), "X >= 4": appears("X", 4), "A appears": appears("A")}


@pytest.mark.parametrize("hybrid", [False, True])
def test_prefix_tree_epsilon_lower_bound_within_claim(hybrid: bool) -> None:
    audit = audit_epsilon(runner(hybrid=hybrid), D, D_PRIME, EVENTS, trials=TRIALS)
    assert not audit.violates(EPS), audit
    # the absent location does appear under D (empty cells are candidates too)
    assert audit.rates["X appears"][0] > 0


def test_level_weights_lower_bound_within_claim_and_canary_caught() -> None:
    """Level 2 gets 3/4 of epsilon (1.5 of 2): its lower bound stays within the tree's claim; the
    same tree calibrated for twice the claimed epsilon (level 2 at 3) is refuted."""
    audit = audit_epsilon(runner(hybrid=False, tuned=True), D, D_PRIME, EVENTS, trials=TRIALS)
    assert not audit.violates(EPS), audit
    assert audit.epsilon_lower_bound > 0.8  # the events see level 2's epsilon (1.5)
    broken = runner(hybrid=False, tuned=True, scale=2.0)
    assert audit_epsilon(broken, D, D_PRIME, EVENTS, trials=TRIALS).violates(EPS)


def test_end_cells_lower_bound_within_claim_and_canary_caught() -> None:
    """End-of-sequence cells (completion="markov") are drawn with level 2's noise (1.5 of the
    claimed 2 under level_weights 1:3): one more card ending at a trial node stays within the
    claim; the same tree calibrated for twice the claim is refuted through its end cells."""
    events = {f"end >= {PADDING + k}": appears("<end>", PADDING + k) for k in (1, 2)}
    run = runner(hybrid=False, tuned=True, completion="markov")
    audit = audit_epsilon(run, D, D_END, events, trials=TRIALS)
    assert not audit.violates(EPS), audit
    assert audit.epsilon_lower_bound > 0.8  # the events see the end cells' epsilon (1.5)
    broken = runner(hybrid=False, tuned=True, scale=2.0, completion="markov")
    assert audit_epsilon(broken, D, D_END, events, trials=TRIALS).violates(EPS)


def test_coarse_time_bins_lower_bound_within_claim_and_canary_caught() -> None:
    """Trajectories whose group sub-level counts coarse (12-hour) bins: one more card through the
    absent X stays within the claim, X (at any of its candidate bins) appears under D too, and the
    canary whose empty cells never pass is refuted."""
    audit = audit_epsilon(runner(hybrid=True, coarse=True), D, D_PRIME, EVENTS, trials=TRIALS)
    assert not audit.violates(EPS), audit
    assert audit.rates["X appears"][0] > 0
    broken = runner(hybrid=True, coarse=True, canary=True)
    assert audit_epsilon(broken, D, D_PRIME, EVENTS, trials=TRIALS).violates(EPS)


def test_canary_without_empty_cells_is_caught() -> None:
    audit = audit_epsilon(runner(hybrid=False, canary=True), D, D_PRIME, EVENTS, trials=TRIALS)
    assert audit.rates["X appears"][0] == 0
    assert audit.violates(EPS), audit


@pytest.mark.parametrize("hint", [None, 0])
def test_empty_cell_shortcut_matches_brute_force_enumeration(hint: int | None) -> None:
    """Per parent, which of 6 candidate cells pass (and the passing empty values) have the same
    distribution with the shortcut (binomial + tail + choice over the union of parents) as with
    explicit noise on every cell (Theorem 4.1); also when the cells are drawn at a lower hint
    threshold and those below the pass threshold split off as completion hints."""
    from scipy.stats import chi2_contingency, ks_2samp

    from prefixtree.tree import SubLevel, TaxonomyIndex, _Cells, _sub_level

    n_par, scale, threshold = 20_000, 1.5, 2
    index = TaxonomyIndex.build(Taxonomy.from_edges([(f"L{i}", "root") for i in range(6)]), [])
    zeros = np.zeros(n_par, dtype=np.int64)
    parents = _Cells(np.arange(n_par, dtype=np.int64), zeros, zeros, zeros + 1, zeros)
    present, weight = np.array([1, 4]), np.array([2, 5])
    cells, _, hints = _sub_level(
        SecureNoise(seed=5),
        SubLevel(j=0, scale=scale, threshold=threshold, hint=hint),
        index,
        parents,
        1,
        np.repeat(np.arange(n_par, dtype=np.int64), 2),
        np.tile(present, n_par),
        np.zeros(2 * n_par, dtype=np.int64),
        np.tile(weight, n_par),
    )
    assert (hints is None) == (hint is None)
    if hints is not None:  # every hint is below the pass threshold, at or above the hint one
        assert hints[3].size and hints[3].min() >= hint and hints[3].max() < threshold
    shortcut = np.zeros(n_par, dtype=np.int64)
    np.add.at(shortcut, cells.tree_node, 1 << cells.node)
    empty_values = cells.noisy[~np.isin(cells.node, present)]

    counts = np.zeros(6, dtype=np.int64)
    counts[present] = weight
    noisy = SecureNoise(seed=6).discrete_laplace(scale, 6 * n_par).reshape(n_par, 6) + counts
    passed = noisy >= threshold
    brute = (passed * (1 << np.arange(6))).sum(axis=1)
    brute_empty = noisy[:, [0, 2, 3, 5]][passed[:, [0, 2, 3, 5]]]

    patterns = np.union1d(shortcut, brute)
    table = np.array([[np.sum(x == p) for p in patterns] for x in (shortcut, brute)])
    table = table[:, table.min(axis=0) >= 5]
    assert chi2_contingency(table).pvalue > 1e-3
    assert ks_2samp(empty_values, brute_empty).pvalue > 1e-3
