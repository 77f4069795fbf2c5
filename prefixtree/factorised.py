"""Time models and the length fix of :class:`~prefixtree.synthesizer.PrefixTreeSynthesizer`.

``time_model`` (with ``time_bin``):

- ``"tree"``: Chen et al. (2012, section 4.4): the tree's nodes are (location, time bin) cells.
- ``"factorised"``: the tree counts locations only; time comes from two small noisy card-level
  tables (:mod:`prefixtree.timing`), sampled conditioned on each released sequence.
- ``"auto"`` (default): ``factorised``, unless ``coarse_time_bin`` asks for the hybrid
  (location, time) tree or the preset is ``kdd12`` (the paper), which are then ``tree``. Chosen
  on public facts: the tree's first level has ``|locations| x bins`` candidates (SUBE: 382 x 24),
  far more than an agency's cards fill at epsilon 1, while the factorised tables have
  ``3 x bins`` and ``16 x 13`` cells whatever the network. On SUBE Tuesday (epsilon 1, hourly
  bins, h = 8) the factorised release scored hour TV 0.04 and 21 of the top-50 timed
  transitions, the timed tree 0.26-0.28 and 6-12 (the figures of issue 24).

``length_share`` (auto: ``LENGTH_SHARE`` under the ``auto`` preset, 0 under ``kdd12`` and with
the ``tree`` time model, whose nodes carry times the length fix cannot extend): a share of
epsilon for the card-length histogram (:mod:`prefixtree.lengths`), after which the released
lengths follow it (timed or not): the completions move, the tree's endings stay, a lengthened
sequence is a copy of a released one of its length where 2,000 distinct ones are released, else
a concatenation of released ones of at most 3 locations (``LENGTH_RULE``, in the manifest).

Budget (a public rule, fixed fractions of epsilon): the length histogram ``LENGTH_SHARE`` (2%),
the first-tap table ``FIRST_SHARE`` (6%) and the gap table ``GAP_SHARE`` (6%; factorised only),
the tree the rest (86% timed, 98% untimed). Chosen on SUBE Tuesday only (epsilon 1, h = 8): the
length histogram has h cells and 2% puts its TV at 0.02; 5% + 10% for the two time tables cost
one of the top-100 patterns against 12% in all (60.7 against 61.7, 3 seeds); of 12%, 4% + 8%
gave hour TV 0.052 and gap TV 0.070, 6% + 6% 0.048 and 0.074 (5 seeds): the daily profile
rests on the first-tap table's 72 cells, the gap TV had room.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from prefixtree.lengths import (
    LONGEST_PIECE,
    WHOLE_POOL,
    Donors,
    LocationChain,
    consistent_distribution,
    kind_couplings,
    noisy_length_histogram,
    retarget_lengths,
)
from prefixtree.plan import MINUTES_PER_DAY, scale_for
from prefixtree.timing import (
    LENGTH_CLASSES,
    MAX_GAPS,
    PERIODS,
    TimeTables,
    clock_labels,
    noisy_time_tables,
    sample_minutes,
)
from synth.errors import ConfigError, InputError
from synth.params import spell
from synth.privacy import PrivacyLedger, exact
from synth.times import times_of_day

__all__ = ["FIRST_SHARE", "GAP_SHARE", "LENGTH_SHARE", "TIME_MODELS", "FactorisedTiming"]

TIME_MODELS = ("auto", "factorised", "tree")
LENGTH_SHARE = Fraction(2, 100)
#: the post-processing that moves the released sequences to the length histogram (the manifest's)
LENGTH_RULE = (
    "minimal-change coupling of the completions' lengths to the noisy histogram less the tree's "
    "endings (which stay); shortened: prefix kept; lengthened: a copy of a released sequence of "
    f"the new length where at least {WHOLE_POOL} distinct ones are released, else a "
    f"concatenation of released sequences of at most {LONGEST_PIECE} locations drawn by copies "
    "(a Markov chain of the tree's counts where none has a piece's length)"
)
FIRST_SHARE = Fraction(6, 100)
GAP_SHARE = Fraction(6, 100)


class FactorisedTiming:
    """The time-model and length half of the synthesizer (mixed in)."""

    time_bin: int | None
    coarse_time_bin: int | None
    time_model: str
    length_share: float | None
    preset: str
    height: int
    random_state: Any
    timezone: str | None
    config_: dict[str, Any]
    tree_: pd.DataFrame
    locations_: list[str]

    # ------------------------------------------------------------------ configuration
    def resolved_time_model(self) -> str | None:
        """``None`` without time bins, else ``"tree"`` or ``"factorised"``."""
        model = self.time_model  # one of TIME_MODELS: checked by the table (prefixtree.params)
        if self.time_bin is None:
            if model != "auto":
                raise ConfigError(f"{spell('time_model', model)} needs {spell('time_bin')}")
            return None
        if model == "auto":
            return (
                "tree"
                if self.coarse_time_bin is not None or self.preset == "kdd12"
                else "factorised"
            )
        if model == "factorised" and self.coarse_time_bin is not None:
            raise ConfigError(
                f"{spell('coarse_time_bin')} refines the (location, time) tree: "
                f"{spell('time_model', 'tree')}"
            )
        return model

    def _tree_time_bins(self) -> int | None:
        """The time bins of the tree's nodes (none under the factorised model)."""
        return None if self.resolved_time_model() == "factorised" else self.time_bin

    def _length_share(self) -> Fraction:
        share = self.length_share
        tree_timed = self.resolved_time_model() == "tree"
        if share is None:
            return Fraction(0) if self.preset == "kdd12" or tree_timed else LENGTH_SHARE
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share < 0.5:
            raise ConfigError(f"{spell('length_share')} must be in [0, 0.5), got {share!r}")
        if share and tree_timed:
            raise ConfigError(
                f"{spell('length_share')} needs a tree of locations (no time bins, or "
                f"{spell('time_model', 'factorised')})"
            )
        return exact(share, "length_share")

    def _table_shares(self) -> tuple[Fraction, Fraction, Fraction]:
        """Shares of epsilon: length histogram, first-tap table, gap table."""
        timed = self.resolved_time_model() == "factorised"
        return (
            self._length_share(),
            FIRST_SHARE if timed else Fraction(0),
            GAP_SHARE if timed else Fraction(0),
        )

    def _tree_epsilon(self, eps: Fraction) -> Fraction:
        return eps * (1 - sum(self._table_shares()))

    # ------------------------------------------------------------------ fit
    def _time_matrix(
        self, seqs: pd.DataFrame, n_rows: int, height: int, timezone: str | None = None
    ) -> np.ndarray:
        """Time bins per card and position: the time of day of each value on its own, in bins,
        made non-decreasing by a running maximum (a per-record transformation)."""
        width = int(self.time_bin)  # type: ignore[arg-type]
        if "time" not in seqs.columns:
            raise InputError(f"sequences: {spell('time_bin')} needs a 'time' column")
        raw = seqs["time"]
        if pd.api.types.is_timedelta64_dtype(raw):
            minutes = (raw.dt.total_seconds() // 60).to_numpy(dtype=np.int64) % MINUTES_PER_DAY
        else:  # each value on its own: a timestamp (wall clock) or a clock time HH:MM
            minutes = times_of_day(raw, timezone=timezone, source="sequences")[0] % MINUTES_PER_DAY
        row, _ = pd.factorize(seqs["seq_id"], sort=True)
        pos = seqs["pos"].to_numpy(dtype=np.int64)
        keep = pos < height
        mat = np.zeros((n_rows, height), dtype=np.int64)
        mat[row[keep], pos[keep]] = minutes[keep] // width
        return np.maximum.accumulate(mat, axis=1)

    def _spend_tables(
        self,
        ledger: PrivacyLedger,
        eps: Fraction,
        noise: Any,
        length_counts: np.ndarray | None,
        card_times: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
    ) -> None:
        """Record, then draw, the length histogram and the time tables."""
        s_len, s_first, s_gap = self._table_shares()
        h = int(self.height)
        self.lengths_noisy_: np.ndarray | None = None
        self.time_tables_: TimeTables | None = None
        if s_len and length_counts is not None:
            scale = scale_for(eps * s_len)
            ledger.spend(
                label="sequence lengths: cards by truncated length 1..h",
                mechanism="discrete_laplace",
                epsilon=eps * s_len,
                sensitivity=1,
                scale=scale,
                note="a card is in one length cell (L1 sensitivity 1); released lengths follow "
                "the histogram by post-processing",
            )
            self.lengths_noisy_ = noisy_length_histogram(length_counts, h, scale, noise)
        if s_gap and card_times is not None:
            first_scale = scale_for(eps * s_first)
            gap_scale = scale_for(eps * s_gap / MAX_GAPS)
            bins = math.ceil(MINUTES_PER_DAY / int(self.time_bin))  # type: ignore[arg-type]
            ledger.spend(
                label="time: first tap's bin by length class",
                mechanism="discrete_laplace",
                epsilon=eps * s_first,
                sensitivity=1,
                scale=first_scale,
                note=f"{LENGTH_CLASSES} length classes x {bins} bins; a card is in one cell",
            )
            ledger.spend(
                label="time: gap to the next tap by repeat and period of the tap before",
                mechanism="discrete_laplace",
                epsilon=eps * s_gap,
                sensitivity=MAX_GAPS,
                scale=gap_scale,
                note=f"(same location or not) x {PERIODS} periods x gap classes; a card "
                f"contributes its first {MAX_GAPS} gaps (L1 sensitivity {MAX_GAPS})",
            )
            lengths, times, locs = card_times
            self.time_tables_ = noisy_time_tables(
                lengths,
                times,
                locs,
                bin_minutes=int(self.time_bin),  # type: ignore[arg-type]
                first_scale=first_scale,
                gap_scale=gap_scale,
                noise=noise,
            )

    def _table_inputs(
        self, counter: Any
    ) -> tuple[np.ndarray | None, tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
        """Exact cards by length (``counter.length_counts()``, before the tree advances it) and
        the per-card (length, time bins) read in memory for the time tables."""
        card_times = self.__dict__.pop("_card_times", None)
        if not self._length_share():
            return None, card_times
        return np.asarray(counter.length_counts(), dtype=np.int64), card_times

    # ------------------------------------------------------------------ release
    def _post_rng(self) -> np.random.Generator:
        rs = self.random_state
        seeded = isinstance(rs, int | np.integer) and not isinstance(rs, bool)
        return np.random.default_rng([int(rs), 24] if seeded else None)

    def _post_active(self) -> bool:
        return getattr(self, "lengths_noisy_", None) is not None or (
            getattr(self, "time_tables_", None) is not None
        )

    def _coupling(
        self, loc_path: np.ndarray, depth: np.ndarray, ending: np.ndarray, kind: np.ndarray
    ) -> np.ndarray | None:
        if getattr(self, "lengths_noisy_", None) is None:
            return None
        self._donors = Donors(loc_path.astype(np.int64), depth.astype(np.int64), ending)
        h = int(self.height)
        target = consistent_distribution(self.lengths_noisy_)  # type: ignore[arg-type]
        if target.sum() <= 0:
            return None
        return kind_couplings(depth, ending, kind, target, h)

    def _post_chunk(
        self,
        seq: np.ndarray,
        locs: np.ndarray,
        lengths: np.ndarray,
        kind: np.ndarray,
        coupling: np.ndarray | None,
        rng: np.random.Generator,
        locations: pd.Index,
    ) -> pd.DataFrame:
        """One chunk of the release after the length fix and with sampled clock times."""
        h = int(self.height)
        mat = np.full((locs.shape[0], h), -1, dtype=np.int64)
        mat[:, : locs.shape[1]] = locs[:, :h]
        if coupling is not None:
            chain = getattr(self, "_chain", None)
            if chain is None:
                chain = self._chain = LocationChain.from_tree(self.tree_, len(self.locations_))
            mat, lengths = retarget_lengths(mat, lengths, coupling, chain, rng, self._donors, kind)
        lengths = np.asarray(lengths, dtype=np.int64)
        valid = np.arange(h)[None, :] < lengths[:, None]
        out = pd.DataFrame(
            {
                "seq_id": np.repeat(seq, lengths),
                "pos": np.nonzero(valid)[1].astype(np.int64),
                "location": pd.Categorical.from_codes(mat[valid], categories=locations),
            }
        )
        tables = getattr(self, "time_tables_", None)
        if tables is not None:
            out["time"] = clock_labels(sample_minutes(tables, lengths, mat, rng)[valid])
        return out

    def time_parameters(self) -> dict[str, Any]:
        """What the manifest records about the time model and the length fix."""
        model = self.resolved_time_model()
        s_len, s_first, s_gap = self._table_shares()
        out: dict[str, Any] = {
            "time_model": model,
            "length_share": float(s_len),
        }
        if s_len:
            out["length_rule"] = LENGTH_RULE
        if model is not None:
            out["time_convention"] = (
                f"clock time HH:MM in {self.timezone}"
                if self.timezone
                else "clock time HH:MM, wall clock as written in the input"
            )
        if model == "factorised":
            out["time_tables"] = {
                "first_share": float(s_first),
                "gap_share": float(s_gap),
                "length_classes": LENGTH_CLASSES,
                "periods": PERIODS,
                "max_gaps_per_card": MAX_GAPS,
                "minute_rule": "uniform minute within the sampled bin; a sequence's minutes sorted",
            }
        return out
