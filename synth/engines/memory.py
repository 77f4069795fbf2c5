"""The in-memory engine (numpy): the counting code paths the releases always had."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from synth.engines.base import Counts, Engine, IntArray, SBHEvents, table_spec
from synth.engines.kernels import bound_rank, count_keys

__all__ = ["MemoryEngine", "MemoryPrefixCounter", "group_keys", "table_keys"]


def group_keys(key: IntArray, key_range: int) -> tuple[IntArray, IntArray, IntArray]:
    """``np.unique(key, return_inverse=True)`` plus counts; by counting sort when the key range is
    small compared with the number of keys (the common case: few nodes x locations x bins)."""
    if key_range <= max(4 * key.size, 1 << 20):
        counts = np.bincount(key, minlength=key_range)
        present = counts > 0
        ukey = np.flatnonzero(present)
        rank = np.cumsum(present) - 1
        return ukey, rank[key], counts[ukey].astype(np.int64)
    ukey, inverse = np.unique(key, return_inverse=True)
    return ukey, inverse, np.bincount(inverse).astype(np.int64)


class MemoryPrefixCounter:
    """Prefix-tree cell counts over an in-memory sequence matrix."""

    def __init__(
        self,
        codes: npt.NDArray[np.integer],
        time_bins: npt.NDArray[np.integer] | None,
        *,
        n_bins: int,
        n_locations: int,
    ) -> None:
        self.codes = np.asarray(codes)
        self.bins = None if time_bins is None else np.asarray(time_bins)
        self.n_sequences = int(self.codes.shape[0])
        self.n_bins = n_bins
        self.n_locations = n_locations
        self._alive = np.arange(self.n_sequences, dtype=np.int64)
        self._node = np.zeros(self.n_sequences, dtype=np.int64)
        self._seq_cell = np.zeros(0, dtype=np.int64)

    def length_counts(self) -> npt.NDArray[np.int64]:
        """Sequences by number of locations (index = length 0..height)."""
        lengths = (self.codes >= 0).sum(axis=1)
        return np.bincount(lengths, minlength=self.codes.shape[1] + 1).astype(np.int64)

    def level_counts(self, level: int, n_nodes: int) -> Counts:
        leaf = self.codes[self._alive, level].astype(np.int64)
        has_step = leaf >= 0
        self._alive, leaf = self._alive[has_step], leaf[has_step]
        self._node = self._node[has_step]
        tb = (
            np.zeros(self._alive.size, dtype=np.int64)
            if self.bins is None
            else self.bins[self._alive, level].astype(np.int64)
        )
        key = (self._node * self.n_bins + tb) * self.n_locations + leaf
        ukey, self._seq_cell, counts = group_keys(key, n_nodes * self.n_bins * self.n_locations)
        return ukey.astype(np.int64), counts

    def advance(self, level: int, keys: IntArray, node: IntArray) -> None:
        seq_node = np.asarray(node, dtype=np.int64)[self._seq_cell]
        kept = seq_node >= 0
        self._alive, self._node = self._alive[kept], seq_node[kept]

    def close(self) -> None:
        self.codes = np.zeros((0, 0), dtype=np.int64)


def table_keys(
    side: np.ndarray,
    part: np.ndarray,
    minute: np.ndarray,
    location: np.ndarray,
    name: str,
    *,
    n_locations: int,
    n_bins: int,
    bin_minutes: int,
) -> np.ndarray:
    """Cell keys of one SBH table (partition-major, then time bin, then location)."""
    s, has_time, has_loc = table_spec(name)
    mask = side == s
    key = part[mask].astype(np.int64)
    if has_time:
        key = key * n_bins + minute[mask].astype(np.int64) // bin_minutes
    if has_loc:
        key = key * n_locations + location[mask].astype(np.int64)
    return key


class MemoryEngine(Engine):
    """numpy/pandas, everything in memory (the default)."""

    name = "memory"

    def prefix_counter(
        self,
        codes: npt.NDArray[np.integer],
        time_bins: npt.NDArray[np.integer] | None,
        *,
        n_bins: int,
        n_locations: int,
    ) -> MemoryPrefixCounter:
        return MemoryPrefixCounter(codes, time_bins, n_bins=n_bins, n_locations=n_locations)

    def sbh_counts(
        self,
        events: SBHEvents,
        tables: Sequence[str],
        *,
        n_locations: int,
        n_bins: int,
        bin_minutes: int,
        max_contributions: int | None,
    ) -> dict[str, Counts]:
        side, part, minute, loc = events.side, events.part, events.minute, events.location
        if events.unit is not None and max_contributions is not None:
            rank = bound_rank([events.unit, side.astype(np.int64)], [minute, part, loc])
            keep = rank < int(max_contributions)
            side, part, minute, loc = side[keep], part[keep], minute[keep], loc[keep]
        out: dict[str, Counts] = {}
        for name in tables:
            _, has_time, has_loc = table_spec(name)
            size = (
                (int(part.max()) + 1 if part.size else 1)
                * (n_bins if has_time else 1)
                * (n_locations if has_loc else 1)
            )
            key = table_keys(
                side,
                part,
                minute,
                loc,
                name,
                n_locations=n_locations,
                n_bins=n_bins,
                bin_minutes=bin_minutes,
            )
            out[name] = count_keys(key, size)
        return out
