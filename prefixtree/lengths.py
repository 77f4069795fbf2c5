"""Released sequence lengths that follow a noisy length histogram (post-processing of the tree).

The tree with its Markov completion (Chen et al. 2012, section 4.2; :mod:`prefixtree.completion`)
releases too many short sequences where the tree is thin: on SUBE Tuesday at epsilon 1, 56% of
the released cards hold one boarding against 25% of the real ones. One cheap histogram fixes it:
the number of cards by truncated length ``1..h`` (a card is in one cell: L1 sensitivity 1),
released with the discrete Laplace mechanism (its own ledger line). The released sequences are
then moved to those lengths (:func:`length_coupling`, which changes as few sequences as the two
distributions allow), and only the completions move (:func:`kind_couplings`): the sequences the
tree's surviving nodes describe whole (its end cells) stay as they are. A sequence made shorter
keeps its prefix; one made longer is replaced by a copy of a released sequence of its new length
where the release holds at least ``WHOLE_POOL`` (2,000) distinct ones, else by the concatenation
of released sequences of at most ``LONGEST_PIECE`` (3) locations (:func:`pieces`: 4 = 2 + 2, 8 =
3 + 3 + 2), each drawn by its copies, or continued by a first-order Markov chain of the noisy
tree's consistent counts where the release has none of a piece's length.

Why (SUBE Tuesday, epsilon 1, h = 8, untimed TP@100 over noise seeds 1-20; length TV 0.020-0.021
for all): no move at all (the 2% spent, lengths left as the tree gives them, TV 0.28) 67.55; any
sequence replaced by a whole released sequence of its new length 67.05; that, completions only
66.80; concatenations of pieces of at most 2 / 3 / 4 locations, completions only, 67.60 / **67.95**
/ 67.45, pieces of 3 moving any sequence 67.55. Copying whole long sequences multiplied the few
released ones of length 4-8, completions that repeat a line (``(32, 32, 32, 32, 32)`` and the
like, supports 35-100 against about 22 at rank 100 of the real top 100) into false top
patterns; pieces of 2-3 locations repeat the tree's frequent pairs instead. Where the pool is
large the pieces lose instead: on the SIMULATED wide shape (:mod:`bench_prefixtree` ``SHAPES``,
h = 6, pools of 7,600-15,000 distinct sequences of length 2-6) pieces of 3 gave 83.3 against
86.5 for whole copies (seeds 1-6), while on the dense shape (pools up to 19,000 at h = 12) they
gave 95.3 against 91.7 and on the sparse one 74.3 against 62.0 (seeds 1-3). A pool of 1,000 or
3,000 as the switch gave the same figures everywhere (SUBE's largest pool: 804); with 2,000:
SUBE Tuesday 67.95 (seeds 1-20), wide 86.0 (seeds 1-10; whole copies of any sequence, the rule
before: 86.4), dense 91.7 (before: 92.0) and sparse 74.3 (before: 61.7; seeds 1-3). Tried and
worse (seeds
1-5, against 66.6 for whole copies): continuing each lengthened sequence by the chain (64.4; 64.6
completions only), by returning to its first location (64.8), keeping it and appending a
released sequence of the missing length (65.6-65.8); earlier, copying prefixes of longer sequences
or only sequences with the same first location (64.4 and 64.6). Everything after the histogram is
post-processing of released values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

__all__ = [
    "LONGEST_PIECE",
    "WHOLE_POOL",
    "LocationChain",
    "consistent_distribution",
    "kind_couplings",
    "length_coupling",
    "noisy_length_histogram",
    "pieces",
    "retarget_lengths",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: the longest released sequence copied whole into a lengthened one (:func:`pieces`)
LONGEST_PIECE = 3
#: a length whose release holds at least this many distinct sequences is lengthened to by whole
#: copies of them (copies spread over many); below it, by concatenated pieces (:func:`pieces`)
WHOLE_POOL = 2000


def noisy_length_histogram(
    by_length: npt.ArrayLike, height: int, scale: float, noise: Any
) -> IntArray:
    """Noisy number of cards with each truncated length ``1..height`` (index 0 = length 1) from
    the exact counts ``by_length[l]`` of cards with ``l`` locations (index 0: none, not counted;
    lengths over ``height`` are truncated to it): a card is in one cell, so adding or removing it
    changes one count by 1 (L1 sensitivity 1)."""
    exact_counts = np.zeros(height + 1, dtype=np.int64)
    given = np.asarray(by_length, dtype=np.int64)
    exact_counts[: min(given.size, height + 1)] = given[: height + 1]
    exact_counts[height] += int(given[height + 1 :].sum())
    noisy = exact_counts[1:] + np.asarray(noise.discrete_laplace(scale, height), np.int64)
    return noisy.astype(np.int64)


def consistent_distribution(noisy: npt.ArrayLike) -> FloatArray:
    """Norm-sub (Wang et al. 2020): subtract the one ``delta`` that makes ``max(x - delta, 0)`` sum
    to the noisy total, then normalise. Clamping alone would keep the positive half of the noise
    on every empty cell; norm-sub removes that bias. Post-processing; all zeros if the noisy total
    is not positive."""
    x = np.asarray(noisy, dtype=np.float64)
    total = float(x.sum())
    if total <= 0 or not x.size:
        return np.zeros(x.size)
    desc = np.sort(x)[::-1]
    cum = np.cumsum(desc)
    k = np.arange(1, x.size + 1)
    delta_k = (cum - total) / k
    fits = desc - delta_k > 0  # the cells above delta with k cells kept
    kk = int(np.flatnonzero(fits)[-1]) if fits.any() else 0
    out = np.maximum(x - delta_k[kk], 0.0)
    s = out.sum()
    return out / s if s > 0 else np.zeros(x.size)


def length_coupling(current: npt.ArrayLike, target: npt.ArrayLike) -> FloatArray:
    """``P[l, l']``: the probability that a released sequence of length ``l + 1`` is moved to length
    ``l' + 1``. Each length keeps ``min(current, target)`` of its sequences; the excess of the
    lengths with too many goes to the lengths with too few by the monotone (quantile) coupling of
    the two, shortest to shortest. This changes the fewest sequences the two distributions allow;
    on SUBE Tuesday it kept 2-3 more of the top 100 patterns than the monotone coupling of the
    whole distributions (which moves nearly every sequence by a step)."""
    cur = np.asarray(current, dtype=np.float64)
    tgt = np.asarray(target, dtype=np.float64)
    n = cur.size
    if cur.sum() <= 0 or tgt.sum() <= 0:
        return np.eye(n)
    cur, tgt = cur / cur.sum(), tgt / tgt.sum()
    keep = np.minimum(cur, tgt)
    excess, deficit = cur - keep, tgt - keep
    e_hi, d_hi = np.cumsum(excess), np.cumsum(deficit)
    moved = np.maximum(
        np.minimum(e_hi[:, None], d_hi[None, :])
        - np.maximum((e_hi - excess)[:, None], (d_hi - deficit)[None, :]),
        0.0,
    )
    flow = np.diag(keep) + moved
    rows = flow.sum(axis=1, keepdims=True)
    return np.where(rows > 0, flow / np.where(rows > 0, rows, 1.0), np.eye(n))


def kind_couplings(
    depth: IntArray,
    ending: IntArray,
    kind: npt.NDArray[np.int8],
    target: FloatArray,
    height: int,
) -> FloatArray:
    """One coupling per release entry kind (``kind``: 0 a tree ending, 1 a completion below a
    node, 2 a completion of the root; ``ending`` copies of ``depth`` locations each), shape
    ``(3, height, height)``. Only the completions move: the tree's endings are sequences its
    surviving nodes describe whole, and keeping them keeps its patterns (SUBE Tuesday, epsilon 1,
    h = 8, noise seeds 1-20: TP@100 67.95 against 67.55 moving any sequence, both with the
    concatenated lengthening). The completions go from their lengths to ``target * total`` less
    the tree's endings (clamped at 0), by :func:`length_coupling`; where the tree alone exceeds
    the target at a length the excess stays (the lengths then miss the target by it). Without
    completions every entry moves."""
    cnt = np.zeros((3, height))
    for k in range(3):
        sel = kind == k
        cnt[k] = np.bincount(depth[sel] - 1, weights=ending[sel], minlength=height)[:height]
    mov = np.array([False, True, True]) if cnt[1:].sum() > 0 else np.ones(3, dtype=bool)
    out = np.stack([np.eye(height)] * 3)
    want = np.maximum(np.asarray(target, np.float64) * cnt.sum() - cnt[~mov].sum(axis=0), 0.0)
    moving = cnt[mov].sum(axis=0)
    if moving.sum() > 0 and want.sum() > 0:
        out[mov] = length_coupling(moving, want)
    return out


@dataclass(frozen=True)
class LocationChain:
    """First-order transitions between locations read off the noisy tree's consistent counts
    (a node's count is the weight of ``parent location -> node location``). From a location
    with no surviving transition the sequence returns to its first location (the return trip,
    the most frequent pattern of smart-card days: on SUBE Tuesday each of the top 10 patterns is
    a line taken twice) with the tree's own return rate (the count share of its transitions
    that repeat a location), else it goes to a location drawn by its weight at depth >= 2.
    Always returning doubled the share of repeats among extended sequences there (90% against
    57% of the real two-tap cards); never returning made popular lines follow rare ones."""

    start: IntArray  # per location: first index into `to`/`cum` (CSR)
    stop: IntArray
    to: IntArray
    cum: FloatArray  # global cumulative weight in CSR order
    return_rate: float
    overall_to: IntArray
    overall_cum: FloatArray

    @classmethod
    def from_tree(cls, tree: pd.DataFrame, n_locations: int) -> LocationChain:
        parent = tree["parent"].to_numpy()
        loc = tree["location"].cat.codes.to_numpy().astype(np.int64)
        count = np.maximum(tree["count"].to_numpy(dtype=np.float64), 0.0)
        depth = tree["depth"].to_numpy()
        inner = np.flatnonzero((depth == 2) & (count > 0))
        key = loc[parent[inner]] * n_locations + loc[inner]
        uniq, inv = np.unique(key, return_inverse=True)
        weight = np.bincount(inv, weights=count[inner], minlength=uniq.size)
        frm, to = uniq // n_locations, uniq % n_locations
        start = np.searchsorted(frm, np.arange(n_locations), side="left")
        stop = np.searchsorted(frm, np.arange(n_locations), side="right")
        total = float(weight.sum())
        rate = float(weight[frm == to].sum()) / total if total > 0 else 1.0
        overall = np.bincount(to, weights=weight, minlength=n_locations)
        kept = np.flatnonzero(overall > 0)
        return cls(
            start.astype(np.int64),
            stop.astype(np.int64),
            to.astype(np.int64),
            np.cumsum(weight),
            rate,
            kept.astype(np.int64),
            np.cumsum(overall[kept]),
        )

    def draw(self, current: IntArray, first: IntArray, rng: np.random.Generator) -> IntArray:
        """One next location for each of ``current`` (vectorised inverse-CDF draws over the CSR
        rows); ``first[i]`` where ``current[i]`` has no transition."""
        cur = np.asarray(current, dtype=np.int64)
        lo, hi = self.start[cur], self.stop[cur]
        out = np.asarray(first, dtype=np.int64).copy()
        away = np.flatnonzero((hi <= lo) & (rng.random(cur.size) >= self.return_rate))
        if away.size and self.overall_to.size:
            v = rng.random(away.size) * self.overall_cum[-1]
            j = np.searchsorted(self.overall_cum, v, side="right")
            out[away] = self.overall_to[np.minimum(j, self.overall_to.size - 1)]
        has = np.flatnonzero(hi > lo)
        if has.size:
            lo, hi = lo[has], hi[has]
            base = np.where(lo > 0, self.cum[np.maximum(lo - 1, 0)], 0.0)
            u = base + rng.random(has.size) * (self.cum[hi - 1] - base)
            idx = np.clip(np.searchsorted(self.cum, u, side="right"), lo, hi - 1)
            out[has] = self.to[idx]
        return out


@dataclass(frozen=True)
class Donors:
    """The released sequences (before the length fix) by length, to copy from: location paths
    (``-1`` padded), lengths and numbers of copies."""

    paths: IntArray
    lengths: IntArray
    copies: IntArray

    def distinct(self, length: int) -> int:
        """Number of distinct released sequences of ``length`` locations."""
        return int(((self.lengths == length) & (self.copies > 0)).sum())

    def draw(self, length: int, size: int, rng: np.random.Generator) -> IntArray | None:
        """``size`` paths of ``length`` locations drawn by their copies, or None if none."""
        pick = np.flatnonzero((self.lengths == length) & (self.copies > 0))
        if not pick.size:
            return None
        cum = np.cumsum(self.copies[pick].astype(np.float64))
        j = np.searchsorted(cum, rng.random(size) * cum[-1], side="right")
        return self.paths[pick[np.minimum(j, pick.size - 1)]]


def pieces(length: int, longest: int = LONGEST_PIECE) -> list[int]:
    """The lengths of the released sequences whose concatenation makes a sequence of ``length``:
    ``length`` itself up to ``longest``, else pieces of ``longest`` then a last one or two of at
    least 2 (never a piece of 1: the release's single locations are mostly completions of the
    root, rare first locations). ``pieces(8) == [3, 3, 2]``, ``pieces(4) == [2, 2]``."""
    if length <= longest:
        return [length]
    out = []
    rest = length
    while rest > longest:
        take = longest if rest - longest >= 2 else rest - 2
        out.append(take)
        rest -= take
    return [*out, rest]


def retarget_lengths(
    locs: IntArray,
    lengths: IntArray,
    coupling: FloatArray,
    chain: LocationChain,
    rng: np.random.Generator,
    donors: Donors | None = None,
    kind: npt.NDArray[np.int8] | None = None,
) -> tuple[IntArray, IntArray]:
    """Each sequence (row of ``locs``, ``-1`` padded, width = the height) moved to a length drawn
    from its row of ``coupling`` (``(h, h)``, or ``(K, h, h)`` with each sequence's ``kind``
    choosing its matrix, :func:`kind_couplings`): cut to its prefix; made longer, replaced by
    a copy of a released sequence of its new length where ``donors`` hold at least
    ``WHOLE_POOL`` distinct ones, else the concatenation of released sequences of the lengths
    :func:`pieces` gives, each drawn by its copies, or, where a piece's length has no donor,
    continued by ``chain``."""
    locs = np.array(locs, dtype=np.int64, copy=True)
    lengths = np.asarray(lengths, dtype=np.int64)
    cum = np.cumsum(np.asarray(coupling, dtype=np.float64), axis=-1)
    cum[..., -1] = 1.0
    u = rng.random(lengths.size)
    rows = cum[lengths - 1] if cum.ndim == 2 else cum[np.asarray(kind), lengths - 1]
    target = (rows < u[:, None]).sum(axis=1) + 1
    width = locs.shape[1]
    cols = np.arange(width)[None, :]
    locs[cols >= target[:, None]] = -1
    if donors is not None:
        lengths = lengths.copy()
        for length in range(2, width + 1):
            grow = np.flatnonzero((target == length) & (lengths < length))
            if not grow.size:
                continue
            parts = []
            whole = donors.distinct(length) >= WHOLE_POOL
            for piece in [length] if whole else pieces(length):
                part = donors.draw(piece, grow.size, rng)
                if part is None:
                    break
                parts.append(part[:, :piece])
            else:
                locs[grow] = -1
                locs[grow, :length] = np.concatenate(parts, axis=1)
                lengths[grow] = length
    for k in range(1, width):
        grow = np.flatnonzero((lengths <= k) & (target > k))
        if grow.size:
            locs[grow, k] = chain.draw(locs[grow, k - 1], locs[grow, 0], rng)
    return locs, target
