"""Count queries over sequences (Chen et al. 2012: Definition 3.4, section 5.1).

``Q(D)`` is the number of sequences whose *set* of locations contains every location of the query
(order is ignored). Answers come from a bitset inverted index: one packed bit array over the
sequences per location; a query ANDs the arrays of its locations (rarest first, only over the words
still non-zero) and counts the bits left. The workload is the paper's: 4 subsets, the i-th with
query lengths uniform in ``[1, i*h/4]``, locations uniform over a public universe; plus a
popularity-weighted variant (locations drawn by how many original sequences visit them) because
uniform queries over a large universe are mostly empty. The error of a query is ``|Q(D~) - Q(D)| /
max(Q(D), s)`` with the sanity bound ``s`` = 0.1% of ``|D|``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError

__all__ = [
    "CountIndex",
    "Workload",
    "count_query_errors",
    "paper_workload",
    "relative_errors",
]

SANITY_FRACTION = 0.001


class CountIndex:
    """Bitset inverted index answering count queries (Definition 3.4).

    ``bits_[l]`` packs, over the ``n_sequences_`` sequences, whether location code ``l`` occurs in
    the sequence; ``support_[l]`` is its popcount (the answer of the one-location query ``{l}``);
    ``n_outside_`` counts the records whose location was outside the universe (left out).
    """

    n_outside_: int = 0
    #: indexes of at most this many 64-bit words per location answer queries in vectorised batches;
    #: larger ones query by query, starting from the non-zero words of the rarest location
    batch_words: int = 1024

    def __init__(self, rows: np.ndarray, locations: np.ndarray, n_sequences: int, n_locations: int):
        rows = np.asarray(rows, dtype=np.int64)
        locations = np.asarray(locations, dtype=np.int64)
        keep = locations >= 0
        rows, locations = rows[keep], locations[keep]
        if rows.size and (rows.min() < 0 or rows.max() >= n_sequences):
            raise InputError("count index: sequence row out of range")
        if locations.size and locations.max() >= n_locations:
            raise InputError("count index: location code out of range")
        self.n_sequences_ = int(n_sequences)
        self.n_locations_ = int(n_locations)
        n_words = max(1, -(-self.n_sequences_ // 64))
        packed = np.zeros(self.n_locations_ * n_words * 8, dtype=np.uint8)
        bit = np.left_shift(np.uint8(1), (rows & 7).astype(np.uint8))
        np.bitwise_or.at(packed, locations * (n_words * 8) + (rows >> 3), bit)
        self.bits_ = packed.view(np.uint64).reshape(self.n_locations_, n_words)
        self.support_ = np.bitwise_count(self.bits_).sum(axis=1, dtype=np.int64)
        # the non-zero words of each location (CSR), where a query starts from its rarest location
        loc, words = np.nonzero(self.bits_)
        self._words = words.astype(np.int32)
        self._word_ptr = np.r_[0, np.cumsum(np.bincount(loc, minlength=self.n_locations_))]

    @classmethod
    def from_codes(cls, codes: np.ndarray, n_locations: int) -> CountIndex:
        """Index an encoded array ``(n_sequences, width)`` of location codes, ``-1`` = padding."""
        codes = np.asarray(codes)
        if codes.ndim != 2:
            raise InputError("count index: encoded sequences must be a 2-D array")
        rows = np.repeat(np.arange(codes.shape[0]), codes.shape[1])
        return cls(rows, codes.ravel(), codes.shape[0], n_locations)

    @classmethod
    def from_sequences(cls, seqs: pd.DataFrame, universe: Sequence[str]) -> CountIndex:
        """Index long-format sequences (``seq_id``, ``location``) over the public ``universe``.

        Locations outside the universe are left out (no query can name them); their number is kept
        in ``n_outside_``.
        """
        missing = {"seq_id", "location"} - set(seqs.columns)
        if missing:
            raise InputError(f"sequences: missing column(s) {', '.join(sorted(missing))}")
        rows, ids = pd.factorize(seqs["seq_id"], sort=False)
        codes = pd.Index(list(universe)).get_indexer(pd.Index(seqs["location"].astype(str)))
        index = cls(rows, codes, len(ids), len(universe))
        index.n_outside_ = int((codes < 0).sum())
        return index

    def count(self, queries: np.ndarray) -> np.ndarray:
        """Answers ``Q(D)`` of a query array ``(n_queries, max_length)`` padded with ``-1``."""
        queries = np.asarray(queries, dtype=np.int64)
        if queries.ndim != 2:
            raise ConfigError("queries must be a 2-D array of location codes padded with -1")
        if queries.size and queries.max() >= self.n_locations_:
            raise ConfigError("a query names a location code outside the index")
        valid = queries >= 0
        support = np.where(
            valid, self.support_[np.where(valid, queries, 0)], np.iinfo(np.int64).max
        )
        order = np.argsort(support, axis=1, kind="stable")  # rarest location first
        sorted_q = np.take_along_axis(np.where(valid, queries, -1), order, axis=1)
        lengths = valid.sum(axis=1)
        answers = np.where(lengths > 0, support.min(axis=1, initial=np.iinfo(np.int64).max), 0)
        answers = np.where(lengths == 0, self.n_sequences_, answers)  # empty set: every sequence
        todo = np.flatnonzero((lengths > 1) & (answers > 0))
        if self.bits_.shape[1] <= self.batch_words:
            answers[todo] = self._count_batch(sorted_q[todo], lengths[todo])
        else:
            for i, query in zip(todo.tolist(), sorted_q[todo].tolist(), strict=True):
                answers[i] = self._count_one(query[: lengths[i]])
        return answers.astype(np.int64)

    def _count_batch(self, queries: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Many queries at once: gather whole bit rows, chunked to bound memory (small indexes)."""
        bits = self.bits_
        out = np.empty(len(queries), dtype=np.int64)
        chunk = max(1, 2**21 // bits.shape[1])
        for lo in range(0, len(queries), chunk):
            q, n = queries[lo : lo + chunk], lengths[lo : lo + chunk]
            acc = bits[q[:, 0]]
            for j in range(1, q.shape[1]):
                rows = np.flatnonzero(n > j)
                if not rows.size:
                    break
                acc[rows] &= bits[q[rows, j]]
            out[lo : lo + chunk] = np.bitwise_count(acc).sum(axis=1)
        return out

    def _count_one(self, query: list[int]) -> int:
        """AND the bit arrays of ``query`` (rarest location first) and count the bits left.

        When the rarest location occupies at most a quarter of the words, only those words are
        gathered and the set shrinks as words turn zero; otherwise whole rows are ANDed in place
        (measured faster than testing a dense intersection for sparsity at each step).
        """
        bits = self.bits_
        lo, hi = self._word_ptr[query[0]], self._word_ptr[query[0] + 1]
        if 4 * (hi - lo) > bits.shape[1]:
            acc = np.bitwise_and(bits[query[0]], bits[query[1]])
            for loc in query[2:]:
                np.bitwise_and(acc, bits[loc], out=acc)
            return int(np.bitwise_count(acc).sum())
        words = self._words[lo:hi]
        acc = bits[query[0], words]
        for loc in query[1:]:
            acc &= bits[loc, words]
            keep = np.flatnonzero(acc)
            if keep.size < acc.size:
                if not keep.size:
                    return 0
                words, acc = words[keep], acc[keep]
        return int(np.bitwise_count(acc).sum())


@dataclass(frozen=True)
class Workload:
    """A random count-query workload over location codes ``0 .. n_locations - 1``.

    ``queries`` is ``(n_queries, max_length)`` padded with ``-1``; ``subsets[i]`` is the index of
    the subset query ``i`` belongs to and ``max_lengths[j]`` the largest length of subset ``j``.
    """

    queries: np.ndarray
    lengths: np.ndarray
    subsets: np.ndarray
    max_lengths: tuple[int, ...]
    kind: str


def paper_workload(
    n_locations: int,
    height: int,
    *,
    n_queries: int = 40_000,
    n_subsets: int = 4,
    weights: np.ndarray | None = None,
    seed: int = 0,
) -> Workload:
    """The section 5.1 workload: subset ``i`` (1-based) has lengths uniform in ``[1, i*h/4]``.

    Locations of one query are distinct, drawn uniformly over the universe (``weights=None``) or
    with probability proportional to ``weights`` (popularity workload; zero-weight locations are
    never drawn), without replacement. Deterministic for a given ``seed``.
    """
    if n_locations < 1:
        raise ConfigError("the location universe is empty")
    if height < 1 or n_queries < 1 or n_subsets < 1:
        raise ConfigError("height, n_queries and n_subsets must be positive")
    if weights is None:
        weights = np.ones(n_locations)
        kind = "uniform"
    else:
        weights = np.asarray(weights, dtype=float)
        if weights.shape != (n_locations,) or (weights < 0).any() or not (weights > 0).any():
            raise ConfigError("popularity weights: one non-negative weight per location, not all 0")
        kind = "popularity"
    available = int((weights > 0).sum())
    with np.errstate(divide="ignore"):
        # relative to the largest weight, so >= 1; inf for zero weights: never among the smallest
        inv_w = (weights.max() / weights).astype(np.float32)
    rng = np.random.default_rng(seed)
    max_lengths = tuple(
        min(available, max(1, (i * height) // n_subsets)) for i in range(1, 1 + n_subsets)
    )
    sizes = np.full(n_subsets, n_queries // n_subsets)
    sizes[: n_queries % n_subsets] += 1
    width = max(max_lengths)
    queries = np.full((n_queries, width), -1, dtype=np.int64)
    lengths = np.empty(n_queries, dtype=np.int64)
    subsets = np.repeat(np.arange(n_subsets), sizes)
    chunk = max(1, 4_000_000 // n_locations)
    start = 0
    for size, top in zip(sizes, max_lengths, strict=True):
        lengths[start : start + size] = rng.integers(1, top + 1, size=size)
        for lo in range(start, start + size, chunk):
            hi = min(start + size, lo + chunk)
            # exponential race: the smallest E_l / w_l are successive weighted draws w/o replacement
            keys = rng.standard_exponential((hi - lo, n_locations), dtype=np.float32) * inv_w
            best = np.argpartition(keys, top - 1, axis=1)[:, :top]
            best = np.take_along_axis(
                best, np.argsort(np.take_along_axis(keys, best, axis=1), axis=1), axis=1
            )
            mask = np.arange(top) < lengths[lo:hi, None]
            queries[lo:hi, :top] = np.where(mask, best, -1)
        start += size
    return Workload(queries, lengths, subsets, max_lengths, kind)


def relative_errors(
    true: np.ndarray,
    estimate: np.ndarray,
    n_sequences: int,
    sanity_fraction: float = SANITY_FRACTION,
) -> np.ndarray:
    """``|Q(D~) - Q(D)| / max(Q(D), s)`` with ``s = sanity_fraction * |D|`` (section 3.3)."""
    if n_sequences < 1:
        raise InputError("the original database is empty")
    s = sanity_fraction * n_sequences
    true = np.asarray(true, dtype=float)
    return np.abs(np.asarray(estimate, dtype=float) - true) / np.maximum(true, s)


def count_query_errors(
    true: np.ndarray,
    estimate: np.ndarray,
    workload: Workload,
    n_sequences: int,
    *,
    sanity_fraction: float = SANITY_FRACTION,
) -> dict[str, Any]:
    """Mean relative error of a workload's answers overall, per subset and per query length.

    ``true`` are the answers on the original (``n_sequences`` = ``|D|``), ``estimate`` on a release.
    """
    if len(true) != len(workload.lengths) or len(estimate) != len(true):
        raise ConfigError("one true and one estimated answer per query of the workload are needed")
    err = relative_errors(true, estimate, n_sequences, sanity_fraction)
    lengths = np.unique(workload.lengths)
    return {
        "workload": workload.kind,
        "n_queries": len(err),
        "sanity_bound": sanity_fraction * n_sequences,
        "mean_relative_error": float(err.mean()),
        "median_relative_error": float(np.median(err)),
        "fraction_empty_queries": float((np.asarray(true) == 0).mean()),
        "by_subset": [
            {"max_length": m, "mean_relative_error": float(err[workload.subsets == j].mean())}
            for j, m in enumerate(workload.max_lengths)
        ],
        "by_length": {int(n): float(err[workload.lengths == n].mean()) for n in lengths},
    }
