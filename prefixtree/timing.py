"""The factorised time model: times from two small noisy card-level tables, sampled conditioned on
the released location sequence (post-processing).

Chen et al. (2012, section 4.4) put time into the tree's nodes: (location, time bin) cells. At
agency scale that universe is too wide for the budget (SUBE: 382 lines x 24 hourly bins = 9,168
first-level candidates for 10,000 cards) and the timed tree collapses. Here the location sequence
comes from the untimed tree, and time from two low-dimensional histograms, each with its own
ledger line (privacy unit: the card's sequence, truncated to its first h taps, times in bins made
non-decreasing by a running maximum):

- ``first``: the first tap's time bin by length class (1, 2, 3 or more taps): a card is in one
  cell, L1 sensitivity 1. Cards with a single tap ride at other hours than commuters.
- ``gap``: the gap in bins to the next tap by the period of the tap before it (the day cut in
  ``PERIODS`` equal periods) and gap class (``0 .. G - 1`` bins, and ``G`` or more, with ``G``
  the bins of 12 hours): each card contributes its first ``MAX_GAPS`` gaps, so the L1 sensitivity
  is ``MAX_GAPS``. Both numbers are public rules: the day in 8 periods of 3 hours follows the
  usual transit peak definitions; ``MAX_GAPS = 2`` was chosen on SUBE Tuesday (a card has 1.6
  gaps on average; a larger bound buys more gaps for proportionally more noise).

Both are drawn with the exact discrete Laplace sampler, then made consistent (non-negative,
normalised) by norm-sub (Wang et al. 2020). Sampling, for each released sequence: the first bin
from ``first`` given its length class, each next bin from ``gap`` given the period of the tap
before, restricted to the bins left in the day; a clock time within each bin is a uniform minute
(the public rule), and the minutes of a sequence are sorted, so times never decrease.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from prefixtree.lengths import consistent_distribution

__all__ = [
    "LENGTH_CLASSES",
    "MAX_GAPS",
    "PERIODS",
    "TimeTables",
    "clock_labels",
    "first_cells",
    "gap_cells",
    "noisy_time_tables",
    "sample_minutes",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: the day is cut in this many periods for the gap table (3-hour periods with hourly bins)
PERIODS = 8
#: gaps each card contributes to the gap table (its first ones): the table's L1 sensitivity
MAX_GAPS = 2
#: first-tap table rows: sequences of 1, 2, and 3 or more taps
LENGTH_CLASSES = 3
#: gap classes cover 0 .. G - 1 bins and "G or more", G the bins of this many minutes
GAP_SPAN_MINUTES = 720
#: redraws of the sequences whose times pass the end of the day (sample_minutes)
REDRAWS = 20


@dataclass(frozen=True)
class TimeTables:
    """The released time tables (noisy counts) and their public layout."""

    bin_minutes: int
    n_bins: int
    first_noisy: IntArray  # (LENGTH_CLASSES, n_bins)
    gap_noisy: IntArray  # (2 * PERIODS, n_gap_classes): rows (repeat, period)

    @property
    def n_gap_classes(self) -> int:
        return gap_span(self.n_bins, self.bin_minutes) + 1

    def first(self) -> FloatArray:
        return np.vstack([consistent_distribution(row) for row in self.first_noisy])

    def gap(self) -> FloatArray:
        return np.vstack([consistent_distribution(row) for row in self.gap_noisy])


def gap_span(n_bins: int, bin_minutes: int) -> int:
    """``G``: gaps of ``G`` bins or more share one class (public: from the bin width)."""
    return max(1, min(n_bins - 1, math.ceil(GAP_SPAN_MINUTES / bin_minutes)))


def period_of(bins: IntArray, n_bins: int) -> IntArray:
    return (np.asarray(bins, dtype=np.int64) * PERIODS) // n_bins


def gap_row(prev_bins: IntArray, repeat: npt.ArrayLike, n_bins: int) -> IntArray:
    """Row of the gap table: the period of the tap before, and whether the next tap is at the
    same location (a return or a repeated ride: long gaps) or not (a transfer: short ones)."""
    return np.asarray(repeat, dtype=np.int64) * PERIODS + period_of(prev_bins, n_bins)


def first_cells(lengths: IntArray, bins: IntArray, n_bins: int) -> IntArray:
    """Exact counts of the first table: cards by (length class, first bin)."""
    ok = np.asarray(lengths) > 0
    cls = np.minimum(np.asarray(lengths)[ok], LENGTH_CLASSES) - 1
    flat = cls * n_bins + np.asarray(bins)[ok, 0]
    return np.bincount(flat, minlength=LENGTH_CLASSES * n_bins).reshape(LENGTH_CLASSES, n_bins)


def gap_cells(
    lengths: IntArray, bins: IntArray, locs: IntArray, n_bins: int, bin_minutes: int
) -> IntArray:
    """Exact counts of the gap table: each card's first ``MAX_GAPS`` gaps by (same location or
    not, period of the tap before; gap class)."""
    g_span = gap_span(n_bins, bin_minutes)
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.zeros((2 * PERIODS, g_span + 1), dtype=np.int64)
    for k in range(min(MAX_GAPS, bins.shape[1] - 1)):
        rows = np.flatnonzero(lengths > k + 1)
        prev, nxt = bins[rows, k], bins[rows, k + 1]
        gap = np.minimum(np.maximum(nxt - prev, 0), g_span)
        repeat = locs[rows, k + 1] == locs[rows, k]
        np.add.at(out, (gap_row(prev, repeat, n_bins), gap), 1)
    return out


def noisy_time_tables(
    lengths: IntArray,
    bins: IntArray,
    locs: IntArray,
    *,
    bin_minutes: int,
    first_scale: float,
    gap_scale: float,
    noise: Any,
) -> TimeTables:
    """Both tables with discrete Laplace noise of the given scales (``first``: sensitivity 1,
    ``gap``: sensitivity ``MAX_GAPS``; the caller records the spends before calling)."""
    n_bins = math.ceil(1440 / bin_minutes)
    first = first_cells(lengths, bins, n_bins)
    gap = gap_cells(lengths, bins, locs, n_bins, bin_minutes)
    first_noisy = first + np.asarray(noise.discrete_laplace(first_scale, first.size)).reshape(
        first.shape
    )
    gap_noisy = gap + np.asarray(noise.discrete_laplace(gap_scale, gap.size)).reshape(gap.shape)
    return TimeTables(
        int(bin_minutes), n_bins, first_noisy.astype(np.int64), gap_noisy.astype(np.int64)
    )


def _draw_rows(
    probs: FloatArray, rows: IntArray, limit: IntArray, rng: np.random.Generator
) -> IntArray:
    """For each i, a class in ``0 .. limit[i]`` drawn from ``probs[rows[i]]`` truncated there
    (uniform when that truncated row has no mass)."""
    cum = np.cumsum(probs, axis=1)[rows]
    top = cum[np.arange(rows.size), limit]
    u = rng.random(rows.size) * top
    drawn = (cum <= u[:, None]).sum(axis=1)
    empty = top <= 0
    drawn[empty] = np.floor(rng.random(int(empty.sum())) * (limit[empty] + 1)).astype(np.int64)
    return np.minimum(drawn, limit)


def gap_classes_of_pairs(
    tables: TimeTables, lengths: IntArray, locs: IntArray, rng: np.random.Generator
) -> npt.NDArray[np.bool_]:
    """Per pair of consecutive taps: which row class (repeat or not) its gap is drawn from.

    A pair at the same location is a repeat. When the released sequences hold a share ``s`` of
    repeats other than the table's ``r`` (its noisy row totals, clamped), pairs are moved at
    random to the other class (a repeat with probability ``1 - r / s`` when ``s > r``, a
    non-repeat with ``(r - s) / (1 - s)`` otherwise), so the gap distribution over all pairs is
    the table's mixture; the pairs keep their class wherever the two shares allow. Post-processing.
    """
    width = locs.shape[1]
    valid = np.arange(1, width)[None, :] < lengths[:, None]
    repeat = (locs[:, 1:] == locs[:, :-1]) & valid
    n_pairs = int(valid.sum())
    rows = np.maximum(tables.gap_noisy, 0).sum(axis=1).astype(np.float64)
    total = rows.sum()
    if not n_pairs or total <= 0:
        return repeat
    r = rows[PERIODS:].sum() / total
    s = repeat.sum() / n_pairs
    u = rng.random(repeat.shape)
    if s > r:
        return repeat & (u < r / s)
    return repeat | (valid & (u < (r - s) / (1 - s)))


def _sample_bins(
    tables: TimeTables,
    lengths: IntArray,
    repeat: npt.NDArray[np.bool_],
    rng: np.random.Generator,
    *,
    fit: bool,
    first: IntArray | None = None,
) -> IntArray:
    """Time bins of sequences of the given lengths: the first from ``first``, each gap from
    ``gap`` given the period of the tap before; ``fit``: each gap truncated to the bins left in
    the day, else drawn freely (the result may pass the last bin)."""
    n, n_bins = lengths.size, tables.n_bins
    width = repeat.shape[1] + 1
    bins = np.zeros((n, width), dtype=np.int64)
    cls = np.minimum(np.maximum(lengths, 1), LENGTH_CLASSES) - 1
    bins[:, 0] = (
        _draw_rows(tables.first(), cls, np.full(n, n_bins - 1), rng) if first is None else first
    )
    g_span = tables.n_gap_classes - 1
    gap_p = tables.gap()
    for k in range(1, width):
        rows = np.flatnonzero(lengths > k)
        if not rows.size:
            break
        prev = bins[rows, k - 1]
        left = np.maximum(n_bins - 1 - prev, 0) if fit else np.full(rows.size, n_bins - 1)
        g = _draw_rows(
            gap_p,
            gap_row(np.minimum(prev, n_bins - 1), repeat[rows, k - 1], n_bins),
            np.minimum(left, g_span),
            rng,
        )
        tail = g >= g_span  # "G or more": uniform over the bins from G to the day's end
        extra = np.floor(rng.random(rows.size) * np.maximum(left - g_span + 1, 1)).astype(np.int64)
        bins[rows, k] = prev + np.where(tail, g_span + extra, g)
    return bins


def sample_minutes(
    tables: TimeTables, lengths: IntArray, locs: IntArray, rng: np.random.Generator
) -> IntArray:
    """Minutes of the day (``-1`` padded like ``locs``) for sequences of the given lengths:
    non-decreasing within each sequence, each in its sampled bin.

    The gaps of a sequence are drawn conditioned on fitting in the day (rejection: up to
    ``REDRAWS`` fresh draws of the gaps of the sequences whose last tap passed the day's last
    bin, the first bin kept; a real card's taps all fall in the day, and drawing each gap
    truncated instead piles the long sequences that start late onto the last hours). Those
    still past it take gaps truncated to the bins left. Redrawing the first bin too biased the
    first taps early (SUBE Tuesday, exact tables: hour TV 0.056 against 0.045)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    n_bins, w = tables.n_bins, tables.bin_minutes
    width = locs.shape[1]
    repeat = gap_classes_of_pairs(tables, lengths, locs, rng)
    bins = _sample_bins(tables, lengths, repeat, rng, fit=False)
    last = np.maximum(lengths - 1, 0)
    over = np.flatnonzero(bins[np.arange(lengths.size), last] >= n_bins)
    for _ in range(REDRAWS):
        if not over.size:
            break
        bins[over] = _sample_bins(
            tables, lengths[over], repeat[over], rng, fit=False, first=bins[over, 0]
        )
        over = over[bins[over, last[over]] >= n_bins]
    if over.size:
        bins[over] = _sample_bins(
            tables, lengths[over], repeat[over], rng, fit=True, first=bins[over, 0]
        )
    span = np.minimum((np.arange(n_bins) + 1) * w, 1440) - np.arange(n_bins) * w
    minutes = bins * w + np.floor(rng.random(bins.shape) * span[bins]).astype(np.int64)
    valid = np.arange(width)[None, :] < lengths[:, None]
    minutes = np.sort(np.where(valid, minutes, 1 << 30), axis=1)
    return np.where(valid, minutes, -1)


def clock_labels(minutes: IntArray) -> npt.NDArray[np.str_]:
    """``HH:MM`` for minutes of the day (an empty array for none: a chunk whose sequences all
    vanished)."""
    m = np.asarray(minutes, dtype=np.int64)
    if m.size == 0:  # numpy's zfill has no width to take the maximum of
        return np.empty(m.shape, dtype="<U5")
    return np.char.add(
        np.char.add(np.char.zfill((m // 60).astype(str), 2), ":"),
        np.char.zfill((m % 60).astype(str), 2),
    )
