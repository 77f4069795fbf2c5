"""Top-k frequent sequential patterns and TP / FP / FD (Chen et al. 2012, sections 3.3, 5.1).

The support of a pattern is the number of sequences containing it as a (not necessarily contiguous)
subsequence, each sequence counted once: PrefixSpan semantics. ``F_k(D)`` is the set of the k most
frequent patterns of length > 1, ties broken deterministically by support (descending), then pattern
(lexicographic over the location id strings, e.g. "16" < "207" < "32").

The miner is a best-first PrefixSpan over int-encoded numpy arrays with pseudo-projection: the
sequences are one flat array of locations, and a projected database is a pair of arrays (sequence
row, start position). Expanding a prefix gathers the projected suffixes (a ragged arange) and
counts, in one vectorised pass, the first occurrence of every location in each. Prefixes are
popped from a heap in (support descending, pattern ascending) order; since a child never ranks
before its parent, the patterns come out already in ranking order and the miner stops after the
k-th pattern of length > 1. Children whose support is below the k-th best support among the
candidates seen so far are pruned (that bound never exceeds the final k-th support, so the result
is exact).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.records import encode_sequences

__all__ = [
    "Pattern",
    "mine_top_k",
    "pattern_support",
    "pattern_utility",
    "top_k_patterns",
    "utility_curve",
]

#: A ranked pattern: (locations, support).
Pattern = tuple[tuple[Any, ...], int]


@dataclass(frozen=True)
class _Flat:
    """The sequences as one flat array of locations (row-major, padding dropped).

    ``row_ptr[r]`` is where row ``r`` starts; ``pos`` is each element's position in its row and
    ``prev`` the position of the previous occurrence of the same location in the row (``-1``).
    """

    code: np.ndarray
    pos: np.ndarray
    prev: np.ndarray
    row_ptr: np.ndarray

    @classmethod
    def from_codes(cls, codes: np.ndarray) -> _Flat:
        valid = codes >= 0
        row, _ = np.nonzero(valid)
        code = codes[valid].astype(np.int16 if codes.max() < 2**15 else np.int32)
        row_ptr = np.r_[0, np.cumsum(valid.sum(axis=1))]
        pos = (np.arange(len(code)) - row_ptr[row]).astype(np.int32)
        # a stable sort by location keeps row-major order inside each location: equal neighbours
        # in (location, row) are consecutive occurrences in one sequence
        order = np.argsort(code, kind="stable")
        sc, sr = code[order], row[order]
        same = np.r_[False, (sc[1:] == sc[:-1]) & (sr[1:] == sr[:-1])]
        prev = np.full(len(code), -1, dtype=np.int32)
        prev[order[same]] = pos[order[np.flatnonzero(same) - 1]]
        return cls(code, pos, prev, row_ptr)


def _expand(
    flat: _Flat, rows: np.ndarray, starts: np.ndarray, bound: int, n_codes: int
) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """Children ``(code, support, rows, starts)`` of a projected database, support >= ``bound``."""
    begin = flat.row_ptr[rows] + starts
    size = np.maximum(flat.row_ptr[rows + 1] - begin, 0)
    owner = np.repeat(np.arange(len(rows)), size)  # ragged arange over the suffixes
    elem = np.arange(len(owner)) + np.repeat(begin - (np.cumsum(size) - size), size)
    first = flat.prev[elem] < starts[owner]  # first occurrence of its location in the suffix
    elem, owner = elem[first], owner[first]
    x = flat.code[elem]
    counts = np.bincount(x, minlength=n_codes)
    keep = counts[x] >= bound
    elem, owner = elem[keep], owner[keep]
    # group by location: one sort of (location << 32 | index), measured faster than an argsort
    order = np.sort((x[keep].astype(np.int64) << 32) | np.arange(len(elem))) & 0xFFFFFFFF
    elem, owner = elem[order], owner[order]
    frequent = np.flatnonzero(counts >= bound)
    ends = np.cumsum(counts[frequent])
    child_rows, child_starts = rows[owner], flat.pos[elem] + 1
    lo = 0
    for code, hi in zip(frequent.tolist(), ends.tolist(), strict=True):
        yield code, hi - lo, child_rows[lo:hi], child_starts[lo:hi]
        lo = hi


def mine_top_k(
    codes: np.ndarray, k: int, *, min_length: int = 2
) -> list[tuple[tuple[int, ...], int]]:
    """The ``k`` top-ranked patterns of length >= ``min_length`` over an encoded array.

    ``codes`` is ``(n_sequences, width)`` of non-negative location codes, ``-1`` = padding. Ranking:
    support descending, then the code tuple ascending. Fewer than ``k`` are returned only when fewer
    patterns exist.
    """
    codes = np.asarray(codes)
    if codes.ndim != 2:
        raise InputError("encoded sequences must be a 2-D array")
    if k < 1 or min_length < 1:
        raise ConfigError("k and min_length must be positive")
    if not codes.size or codes.max() < 0:
        return []
    n_codes = int(codes.max()) + 1
    flat = _Flat.from_codes(codes)
    ids = itertools.count()
    n = codes.shape[0]
    heap: list[tuple[int, tuple[int, ...], int, np.ndarray, np.ndarray]] = [
        (-n, (), next(ids), np.arange(n), np.zeros(n, dtype=np.int64))
    ]
    best: list[int] = []  # min-heap of the k largest candidate supports (length >= min_length)
    result: list[tuple[tuple[int, ...], int]] = []
    while heap and len(result) < k:
        neg, pattern, _, rows, starts = heapq.heappop(heap)
        if len(pattern) >= min_length:
            result.append((pattern, -neg))
            if len(result) == k:
                break
        bound = best[0] if len(best) == k else 1
        for code, support, child_rows, child_starts in _expand(flat, rows, starts, bound, n_codes):
            if len(pattern) + 1 >= min_length:
                if len(best) < k:
                    heapq.heappush(best, support)
                elif support > best[0]:
                    heapq.heapreplace(best, support)
            heapq.heappush(heap, (-support, (*pattern, code), next(ids), child_rows, child_starts))
    return result


def _encode(seqs: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Encode long-format sequences over their sorted locations (code order = string order)."""
    missing = {"seq_id", "pos", "location"} - set(seqs.columns)
    if missing:
        raise InputError(f"sequences: missing column(s) {', '.join(sorted(missing))}")
    locations = sorted(seqs["location"].astype(str).unique())
    return encode_sequences(seqs, locations), locations


def top_k_patterns(seqs: pd.DataFrame, k: int) -> list[Pattern]:
    """``F_k(D)`` of long-format sequences, ranked ``[((loc, ...), support), ...]`` (sec. 3.3)."""
    codes, locations = _encode(seqs)
    return [
        (tuple(locations[c] for c in pattern), support) for pattern, support in mine_top_k(codes, k)
    ]


def pattern_support(codes: np.ndarray, pattern: Sequence[int]) -> int:
    """Number of rows of ``codes`` containing ``pattern`` as a subsequence (each row once)."""
    codes = np.asarray(codes)
    rows = np.arange(codes.shape[0])
    pos = np.zeros(codes.shape[0], dtype=np.int64)
    cols = np.arange(codes.shape[1])
    for code in pattern:
        hit = (codes[rows] == code) & (cols >= pos[:, None])
        found = hit.any(axis=1)
        rows, pos = rows[found], hit[found].argmax(axis=1) + 1
    return int(rows.size)


def pattern_utility(
    original: Iterable[Sequence[Any]], synthetic: Iterable[Sequence[Any]]
) -> dict[str, int]:
    """TP, FP and FD of section 3.3 for two top-k pattern sets.

    TP = |F_k(D) ∩ F_k(D~)|, FP = |F_k(D~) - F_k(D) ∩ F_k(D~)|, FD = |F_k(D) ∪ F_k(D~) - F_k(D~)|.
    """
    fo = {tuple(p) for p in original}
    fs = {tuple(p) for p in synthetic}
    return {"tp": len(fo & fs), "fp": len(fs - (fo & fs)), "fd": len((fo | fs) - fs)}


def utility_curve(
    original: Sequence[Pattern], synthetic: Sequence[Pattern], ks: Iterable[int]
) -> list[dict[str, int]]:
    """TP/FP/FD for each k (``F_k`` is the first k of a ranking), as in the paper's Table 3."""
    return [
        {"k": k, **pattern_utility((p for p, _ in original[:k]), (p for p, _ in synthetic[:k]))}
        for k in ks
    ]
