"""The release of a fitted :class:`~prefixtree.synthesizer.PrefixTreeSynthesizer` (Chen et al.
2012, section 4.2): n(v) copies of prefix(v) for every node, plus the Markov completions, in long
format; post-processing of the fitted tree only (the fitted tree itself, the end of ``fit``, is
made by :mod:`prefixtree.fitted`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from synth.errors import ConfigError
from synth.generator import Generator

__all__ = ["PrefixTreeSampling"]


class PrefixTreeSampling(Generator):
    """The sampling half of :class:`~prefixtree.synthesizer.PrefixTreeSynthesizer`."""

    # parameters and fitted state, set by the synthesizer
    height: int
    time_bin: int | None
    tree_: pd.DataFrame
    locations_: list[str]
    n_time_bins_: int
    random_state: Any
    sub_levels_: pd.DataFrame
    generalized_: pd.DataFrame
    root_count_: Any
    _completed: Any

    def _tree_time_bins(self) -> int | None:
        return self.time_bin

    def _post_active(self) -> bool:  # overridden by prefixtree.factorised
        return False

    def _coupling(
        self, loc_path: np.ndarray, depth: np.ndarray, ending: np.ndarray, kind: np.ndarray
    ) -> np.ndarray | None:
        return None

    def _post_rng(self) -> np.random.Generator:
        return np.random.default_rng()

    def _post_chunk(self, *args: Any) -> pd.DataFrame:
        raise NotImplementedError

    def n_sequences(self) -> int:
        """Number of released sequences (tree endings and completions)."""
        return int(self._release_entries()[3].sum())

    def _time_labels(self) -> list[str]:
        width = int(self.time_bin)  # type: ignore[arg-type]
        return [f"{(b * width) // 60:02d}:{(b * width) % 60:02d}" for b in range(self.n_time_bins_)]

    def sample(self) -> pd.DataFrame:
        """The release (section 4.2): n(v) copies of prefix(v) for every node, in long format
        (with ``completion="markov"``: ``ending`` copies, plus the completed sequences).

        Post-processing of the fitted tree (and, :mod:`prefixtree.factorised`, of the length
        histogram and the time tables) only. Columns ``seq_id`` (int, 0..), ``pos``, ``location``
        (categorical) and, for trajectories, ``time`` (``HH:MM``: the bin's start under
        ``time_model="tree"``, a sampled clock time under ``"factorised"``). Rows are ordered by
        the tree's sequence length, then by the taxonomy order of their (time bin, location)
        steps: a function of the release alone, never of input order. The concatenation
        of :meth:`iter_sample`'s chunks (use that for releases larger than memory).
        """
        return pd.concat(self.iter_sample(chunk_rows=1 << 22), ignore_index=True)

    def _release_entries(
        self,
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
        """The release as distinct entries: location path and time-bin path (``-1``/0 pad),
        length and number of copies; tree nodes (their ``ending``) then completions, ordered by
        length then by the (time bin, location) steps (the tree's breadth-first order)."""
        tree = self.tree_
        parent = tree["parent"].to_numpy()
        depth = tree["depth"].to_numpy().astype(np.int64)
        loc = tree["location"].cat.codes.to_numpy()
        tbin = tree["time_bin"].to_numpy() if "time_bin" in tree.columns else None
        ending = tree["ending"].to_numpy().astype(np.int64)
        height = int(depth.max()) if depth.size else 0
        loc_path = np.full((depth.size, max(height, 1)), -1, dtype=np.int32)
        bin_path = np.zeros_like(loc_path) if tbin is not None else None
        for d in range(1, height + 1):
            nodes = np.flatnonzero(depth == d)
            if d > 1:
                loc_path[nodes] = loc_path[parent[nodes]]
                if bin_path is not None:
                    bin_path[nodes] = bin_path[parent[nodes]]
            loc_path[nodes, d - 1] = loc[nodes]
            if bin_path is not None and tbin is not None:
                bin_path[nodes, d - 1] = tbin[nodes]
        if self._completed is None or not self._completed[0].size:
            self._entry_kind = np.zeros(depth.size, dtype=np.int8)
            return loc_path, bin_path, depth, ending
        origin, steps, copies = self._completed
        width = int(self.height)
        n_loc = len(self.locations_)
        at_root = origin < 0  # completions of the root: no prefix
        c_loc = np.full((origin.size, width), -1, dtype=np.int32)
        c_bin = np.zeros_like(c_loc)
        c_len = np.zeros(origin.size, dtype=np.int64)
        below = np.flatnonzero(~at_root)
        c_loc[below, : loc_path.shape[1]] = loc_path[origin[below]]
        if bin_path is not None:
            c_bin[below, : bin_path.shape[1]] = bin_path[origin[below]]
        c_len[below] = depth[origin[below]]
        for k in range(steps.shape[1]):
            rows = np.flatnonzero(steps[:, k] >= 0)
            c_loc[rows, c_len[rows]] = steps[rows, k] % n_loc
            c_bin[rows, c_len[rows]] = steps[rows, k] // n_loc
            c_len[rows] += 1
        keep = c_len > 0  # a root completion without an admissible first step releases nothing
        c_loc, c_bin, c_len, copies = c_loc[keep], c_bin[keep], c_len[keep], copies[keep]
        pad = width - loc_path.shape[1]
        loc_all = np.concatenate([np.pad(loc_path, ((0, 0), (0, pad)), constant_values=-1), c_loc])
        length = np.concatenate([depth, c_len])
        copies_all = np.concatenate([ending, copies])
        keys: list[np.ndarray] = []
        bin_all = None
        if bin_path is not None:
            bin_all = np.concatenate([np.pad(bin_path, ((0, 0), (0, pad))), c_bin])
        for k in range(width - 1, -1, -1):
            keys.append(loc_all[:, k])
            if bin_all is not None:
                keys.append(bin_all[:, k])
        order = np.lexsort([*keys, length])
        kind = np.concatenate([np.zeros(depth.size, np.int8), np.where(at_root[keep], 2, 1)])
        self._entry_kind = kind[order].astype(np.int8)
        return (
            loc_all[order],
            None if bin_all is None else bin_all[order],
            length[order],
            copies_all[order],
        )

    def iter_sample(self, *, chunk_rows: int = 1_000_000) -> Iterator[pd.DataFrame]:
        """The release of :meth:`sample` as consecutive long-format chunks of whole sequences.

        A chunk holds at most ``chunk_rows`` rows, or a single sequence when that one is longer
        (sequences are never split); ``seq_id`` continues across chunks, and at least one chunk is
        yielded (empty for an empty release). Memory: one chunk plus a location path per tree node
        (and per distinct completion), never the whole release (about ``mean length`` rows per
        released sequence).
        """
        self._check_fitted()
        if (
            isinstance(chunk_rows, bool)
            or not isinstance(chunk_rows, int | np.integer)
            or chunk_rows < 1
        ):
            raise ConfigError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
        loc_path, bin_path, depth, ending = self._release_entries()
        locations = pd.Index(self.locations_)
        times = pd.Index(self._time_labels()) if bin_path is not None else None
        seq_end = np.cumsum(ending)  # sequences released up to and including each node
        row_end = np.cumsum(ending * depth)
        n_seq = int(seq_end[-1]) if seq_end.size else 0
        n_rows = int(row_end[-1]) if row_end.size else 0
        start = row = 0
        post = self._post_active()  # the length fix and the factorised times (post-processing)
        kind = self._entry_kind
        coupling = self._coupling(loc_path, depth, ending, kind) if post else None
        rng = self._post_rng() if post else None
        while True:
            target = row + int(chunk_rows)
            if target >= n_rows:
                stop = n_seq
            else:  # whole sequences up to row `target`, at least one
                u = int(np.searchsorted(row_end, target, side="right"))
                first_row = int(row_end[u] - ending[u] * depth[u])
                first_seq = int(seq_end[u] - ending[u])
                stop = max(start + 1, first_seq + (target - first_row) // int(depth[u]))
            seq = np.arange(start, stop, dtype=np.int64)
            node = np.searchsorted(seq_end, seq, side="right")
            lengths = depth[node]
            if post:
                out = self._post_chunk(
                    seq, loc_path[node], lengths, kind[node], coupling, rng, locations
                )
                yield out
                start, row = stop, row + len(out)
                if start >= n_seq:
                    return
                continue
            row_seq = np.repeat(seq, lengths)
            offsets = np.cumsum(lengths) - lengths
            pos = np.arange(row_seq.size, dtype=np.int64) - np.repeat(offsets, lengths)
            row_node = np.repeat(node, lengths)
            out = pd.DataFrame(
                {
                    "seq_id": row_seq,
                    "pos": pos,
                    "location": pd.Categorical.from_codes(
                        loc_path[row_node, pos], categories=locations
                    ),
                }
            )
            if bin_path is not None:
                out["time"] = pd.Categorical.from_codes(bin_path[row_node, pos], categories=times)
            yield out
            start, row = stop, row + row_seq.size
            if start >= n_seq:
                return
