"""``PrefixTreeSynthesizer``: epsilon-DP synthetic passenger sequences (Chen et al., KDD 2012).

Algorithm 1: build a noisy hybrid-granularity prefix tree (Procedure 1, :mod:`prefixtree.tree`),
make its counts consistent (section 4.2, :mod:`prefixtree.consistency`) and release, for every
node v, ``n(v) = c(v) - sum of its children's c`` copies of ``prefix(v)``.

Privacy unit: one card's sequence, truncated to its first ``height`` locations (the caller builds
one sequence per card and release window). Budget: ``eps_bar = epsilon / height`` per level; inside
a level one sub-level per generalized taxonomy level in use, then the locations, each a discrete
Laplace histogram of L1 sensitivity 1 over all candidate cells (sequences falling under distinct
prefixes are disjoint: parallel composition inside a sub-level, sequential across sub-levels), so
the ledger's total is ``height * (eps_1 + eps_2) = epsilon``.

Budget split and fan-out (section 4.1). For a two-level taxonomy (stations -> lines) the paper gives
the generalized sub-level ``eps_1 = 2 eps_bar / f`` with threshold ``4 sqrt(2) / eps_1`` and the
stations ``eps_2 = (f - 2) eps_bar / f`` with threshold ``2 sqrt(2) / eps_2``. For irregular
taxonomies ``f`` is the mean fan-out: ``|locations| / #lines`` (a location shallower than the level
stands for itself). Deeper taxonomies (mode -> line -> station) generalise recursively: walking up
from the locations, an inner level is used when its mean fan-out towards the next used level below
exceeds 2 (a level with ``f <= 2`` barely generalises: it is skipped, and with no level left the
tree is the ``simple`` variant); from the top, each used level takes ``2 / f`` of the budget the
levels above left, the locations the rest. ``budget_split`` (``{taxonomy level: fraction of
eps_bar}``, the locations get the rest) and ``thresholds`` (``{taxonomy level: threshold}``,
``taxonomy.height`` = the locations) override. A very skewed taxonomy (SUBE: one mode holds 373 of
382 lines, f = 127) makes ``eps_1`` tiny and its threshold huge; override the split there.

Trajectories (section 4.4): with ``time_bins`` (minutes per bin), nodes are (location, time bin)
pairs and a node's candidates are all (location, bin) with bin >= its own. The input ``time`` column
is reduced to the time of day; within a sequence bins are made non-decreasing by a running maximum
(a deterministic per-record transformation).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from prefixtree.consistency import consistent_counts, release_counts
from prefixtree.tree import BuiltTree, SubLevel, TaxonomyIndex, build_noisy_tree_counted
from synth.engines import check_engine, get_engine
from synth.errors import ConfigError, InputError
from synth.privacy import PrivacyLedger, exact, noise_source
from synth.records import encode_sequences, load_sequences
from synth.taxonomy import Taxonomy

__all__ = ["PrefixTreeSynthesizer"]

MINUTES_PER_DAY = 1440
VARIANTS = ("hybrid", "simple")
NOISE_METHODS = ("discrete_laplace", "empty_cells_passing", "choice")


def _scale_for(epsilon: Fraction) -> float:
    """``1 / epsilon`` as the smallest float >= the exact value (never less noise than claimed)."""
    exact = 1 / epsilon
    scale = float(exact)
    if Fraction(scale) < exact:
        scale = math.nextafter(scale, math.inf)
    return scale


class PrefixTreeSynthesizer:
    """Hybrid-granularity noisy prefix tree for station sequences (KDD 2012, Algorithm 1).

    Parameters (keyword-only, stored as given; validated in :meth:`fit`):

    - ``epsilon``: total privacy budget (> 0); ``height``: tree height h, sequences are truncated
      to their first h locations.
    - ``taxonomy``: public :class:`~synth.taxonomy.Taxonomy` whose leaves are the locations.
    - ``variant``: ``"hybrid"`` (generalized sub-levels) or ``"simple"`` (the paper's baseline).
    - ``budget_split``: ``{taxonomy level: fraction of eps_bar}`` for the generalized sub-levels.
    - ``thresholds``: ``{taxonomy level: pass threshold}`` (``taxonomy.height`` for locations).
    - ``time_bins``: minutes per time bin for trajectories (section 4.4), or ``None``.
    - ``random_state``: ``None`` (secure noise), an ``int`` (seeded, NOT private: tests only), or an
      object with ``SecureNoise``'s ``discrete_laplace``/``empty_cells_passing``/``choice``.
    - ``max_nodes``: refuse to grow a tree past this many nodes (empty cells that pass the threshold
      multiply when ``|locations| * P(pass) > 1``, as in the simple variant on large networks).
    - ``engine``: where the counting runs (:mod:`synth.engines`): ``"memory"`` (default),
      ``"duckdb"`` (out of core over Parquet/CSV) or ``"spark"``; ``engine_options`` its options
      (``temp_directory``, ``memory_limit``, ``threads``; Spark: ``master``). The noise is always
      drawn here, once, on the collected counts: the engine never changes the release.

    Fitted attributes: ``tree_`` (non-generalized nodes, breadth first: node, parent, depth,
    location [, time_bin], noisy_count, consistent count, ending = n(v)), ``generalized_`` (the
    surviving generalized cells with their noisy counts), ``ledger_`` (the privacy spends),
    ``sub_levels_`` (budget plan: level, fan-out, epsilon, scale, threshold), ``locations_``
    (locations in taxonomy depth-first order), ``noise_seeded_``.
    """

    def __init__(
        self,
        *,
        epsilon: float,
        height: int,
        taxonomy: Taxonomy,
        variant: str = "hybrid",
        budget_split: Mapping[int, float] | None = None,
        thresholds: Mapping[int, float] | None = None,
        time_bins: int | None = None,
        random_state: int | object | None = None,
        max_nodes: int = 20_000_000,
        engine: str = "memory",
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.height = height
        self.taxonomy = taxonomy
        self.variant = variant
        self.budget_split = budget_split
        self.thresholds = thresholds
        self.time_bins = time_bins
        self.random_state = random_state
        self.max_nodes = max_nodes
        self.engine = engine
        self.engine_options = engine_options

    # ------------------------------------------------------------------ parameters
    def _noise(self) -> Any:
        return noise_source(self.random_state, methods=NOISE_METHODS)

    def check_params(self) -> tuple[Fraction, int]:
        """Validate the parameters (ConfigError) without data; returns exact epsilon and h."""
        eps = exact(self.epsilon, "epsilon")
        if eps <= 0:
            raise ConfigError(f"epsilon must be > 0, got {self.epsilon!r}")
        h = self.height
        if isinstance(h, bool) or not isinstance(h, int | np.integer) or h < 1:
            raise ConfigError(f"height must be an integer >= 1, got {h!r}")
        if self.variant not in VARIANTS:
            raise ConfigError(f"variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        if not isinstance(self.taxonomy, Taxonomy):
            raise ConfigError("taxonomy must be a synth.taxonomy.Taxonomy")
        if self.budget_split and self.variant == "simple":
            raise ConfigError("budget_split only applies to variant='hybrid'")
        tb = self.time_bins
        if tb is not None and (
            isinstance(tb, bool) or not isinstance(tb, int | np.integer) or not 1 <= tb <= 1440
        ):
            raise ConfigError(f"time_bins must be minutes per bin in 1..1440, got {tb!r}")
        mn = self.max_nodes
        if isinstance(mn, bool) or not isinstance(mn, int | np.integer) or mn < 1:
            raise ConfigError(f"max_nodes must be a positive integer, got {mn!r}")
        check_engine(self.engine, self.engine_options)
        return eps, int(h)

    def _generalized_levels(self) -> tuple[list[int], list[Fraction], dict[int, Fraction]]:
        """Generalized taxonomy levels in use (top first), their budget shares, and their f.

        Default (hybrid): walking up from the locations, an inner level g is used when its fan-out
        ``f_g = (#nodes of the next level in use below it) / (#nodes of g)`` exceeds 2; then the
        paper's split is applied recursively from the top: each used level takes ``2 / f_g`` of
        what the levels above left, the locations keep the rest. With one inner level this is
        exactly ``eps_1 = 2 eps_bar / f`` and ``eps_2 = (f - 2) eps_bar / f``.
        """
        tax = self.taxonomy
        leaves = tax.leaves()
        n_nodes = {
            g: len({tax.generalize(leaf, g) for leaf in leaves}) for g in range(1, tax.height)
        }
        if self.variant == "simple":
            return [], [], {}
        if self.budget_split:
            shares: dict[int, Fraction] = {}
            for g, value in self.budget_split.items():
                if g not in n_nodes:
                    raise ConfigError(
                        f"budget_split: level {g!r} is not an inner taxonomy level "
                        f"(1..{tax.height - 1})"
                    )
                share = exact(value, f"budget_split[{g}]")
                if share < 0:
                    raise ConfigError(f"budget_split[{g}] must be >= 0, got {value!r}")
                if share > 0:
                    shares[g] = share
            if sum(shares.values()) >= 1:
                raise ConfigError("budget_split must leave a positive share for the locations")
            levels = sorted(shares)
            below = [*[n_nodes[g] for g in levels[1:]], len(leaves)]
            fan = {g: Fraction(b, n_nodes[g]) for g, b in zip(levels, below, strict=True)}
            return levels, [shares[g] for g in levels], fan
        fan = {}
        below_count = len(leaves)
        for g in sorted(n_nodes, reverse=True):
            f = Fraction(below_count, n_nodes[g])
            if f > 2:
                fan[g] = f
                below_count = n_nodes[g]
        levels = sorted(fan)
        remaining = Fraction(1)
        out: list[Fraction] = []
        for g in levels:
            out.append(remaining * 2 / fan[g])
            remaining -= out[-1]
        return levels, out, fan

    # ------------------------------------------------------------------ fit
    def _time_matrix(self, seqs: pd.DataFrame, n_rows: int, height: int) -> np.ndarray:
        width = int(self.time_bins)  # type: ignore[arg-type]
        if "time" not in seqs.columns:
            raise InputError("sequences: time_bins needs a 'time' column")
        raw = seqs["time"]
        if pd.api.types.is_datetime64_any_dtype(raw):
            minutes = (raw.dt.hour * 60 + raw.dt.minute).to_numpy(dtype=np.int64)
        elif pd.api.types.is_timedelta64_dtype(raw):
            minutes = (raw.dt.total_seconds() // 60).to_numpy(dtype=np.int64) % MINUTES_PER_DAY
        else:
            text = raw.astype(str)
            parsed = pd.to_datetime(text, format="ISO8601", errors="coerce")
            if parsed.isna().any():
                padded = text.where(text.str.count(":") != 1, text + ":00")
                delta = pd.to_timedelta(padded, errors="coerce")
                if delta.isna().any():
                    bad = int(np.flatnonzero(delta.isna().to_numpy())[0]) + 1
                    raise InputError(
                        f"sequences: column 'time', row {bad}: cannot parse {text.iloc[bad - 1]!r} "
                        "as a time (ISO 8601 timestamp or HH:MM expected)"
                    )
                minutes = (delta.dt.total_seconds() // 60).to_numpy(dtype=np.int64)
                minutes %= MINUTES_PER_DAY
            else:
                minutes = (parsed.dt.hour * 60 + parsed.dt.minute).to_numpy(dtype=np.int64)
        row, _ = pd.factorize(seqs["seq_id"], sort=True)
        pos = seqs["pos"].to_numpy(dtype=np.int64)
        keep = pos < height
        mat = np.zeros((n_rows, height), dtype=np.int64)
        mat[row[keep], pos[keep]] = minutes[keep] // width
        return np.maximum.accumulate(mat, axis=1)

    def fit(
        self,
        sequences: pd.DataFrame | str | os.PathLike[str],
        *,
        progress: Callable[[int, int], None] | None = None,
        on_unknown: str = "error",
        location_column: str | None = None,
    ) -> PrefixTreeSynthesizer:
        """Build the noisy prefix tree of long-format ``sequences`` (seq_id, pos, location[, time]).

        Each ``seq_id`` is one privacy unit (one card); it is truncated to ``height`` locations.
        ``sequences`` may also be a file (taps or sequences, CSV or Parquet): the DuckDB engine
        reads the usual layouts itself, out of core; otherwise it is loaded with
        :func:`synth.records.load_sequences` (``on_unknown``, ``location_column``).
        ``progress(done, total)``, when given, is called as each (level, sub-level) histogram of
        the tree is about to be drawn (``total`` = height x sub-levels; the tree may stop early).
        """
        eps, h = self.check_params()
        noise = self._noise()
        tax = self.taxonomy
        levels, shares, fanout = self._generalized_levels()
        index = TaxonomyIndex.build(tax, levels)
        eps_bar = eps / h
        eps_subs = [eps_bar * s for s in shares] + [eps_bar * (1 - sum(shares, Fraction(0)))]
        custom = dict(self.thresholds or {})
        allowed = {*levels, tax.height}
        bad = sorted(set(custom) - allowed)
        if bad:
            raise ConfigError(
                f"thresholds: level {bad[0]!r} is not a sub-level in use ({sorted(allowed)})"
            )
        subs: list[SubLevel] = []
        plan_rows = []
        for j, (g, e) in enumerate(zip(index.levels, eps_subs, strict=True)):
            generalized = j < len(levels)
            default = (4 if generalized else 2) * math.sqrt(2) / float(e)
            theta = float(custom.get(g, default))
            if not math.isfinite(theta):
                raise ConfigError(f"thresholds[{g}] must be finite")
            subs.append(SubLevel(j=j, scale=_scale_for(e), threshold=math.ceil(theta)))
            plan_rows.append(
                {
                    "sub_level": j,
                    "taxonomy_level": g,
                    "generalized": generalized,
                    "nodes": len(index.names[j]),
                    "fanout": float(fanout[g]) if generalized else None,
                    "epsilon": float(e),
                    "scale": _scale_for(e),
                    "threshold": math.ceil(theta),
                }
            )
        names = [
            ("locations" if j == len(levels) else f"taxonomy level {g}")
            for j, g in enumerate(index.levels)
        ]
        ledger = PrivacyLedger(
            epsilon=eps,
            delta=0,
            unit="card",
            neighbouring="add or remove one card's sequence (its first h locations)",
        )

        n_sub = len(index.levels)

        def record(level: int, j: int) -> None:
            if progress is not None:
                progress(level * n_sub + j, h * n_sub)
            ledger.spend(
                label=f"prefix tree level {level + 1}: {names[j]}",
                mechanism="discrete_laplace",
                epsilon=eps_subs[j],
                sensitivity=1,
                sensitivity_norm="l1",
                scale=subs[j].scale,
                threshold=subs[j].threshold,
                note=(
                    "one histogram over every candidate child of every surviving node; each "
                    "card's sequence is in at most one cell (disjoint prefixes: parallel "
                    "composition), L1 sensitivity 1"
                ),
            )

        n_bins = 1 if self.time_bins is None else math.ceil(MINUTES_PER_DAY / self.time_bins)
        with get_engine(self.engine, self.engine_options) as engine:
            counter = None
            if not isinstance(sequences, pd.DataFrame):
                counter = engine.prefix_counter_from_file(
                    sequences,
                    locations=index.locations,
                    height=h,
                    time_bin_minutes=self.time_bins,
                    on_unknown=on_unknown,
                    location_column=location_column,
                )
                if counter is None:
                    sequences = load_sequences(
                        sequences,
                        taxonomy=tax,
                        on_unknown=on_unknown,
                        location_column=location_column,
                    )
            if counter is None:
                assert isinstance(sequences, pd.DataFrame)
                codes = encode_sequences(sequences, index.locations, h)
                times = (
                    None if self.time_bins is None else self._time_matrix(sequences, len(codes), h)
                )
                counter = engine.prefix_counter(
                    codes, times, n_bins=n_bins, n_locations=index.n_locations
                )
                del codes, times
            try:
                built = build_noisy_tree_counted(
                    counter,
                    h,
                    index=index,
                    sub_levels=subs,
                    n_bins=n_bins,
                    noise=noise,
                    before_sub_level=record,
                    max_nodes=int(self.max_nodes),
                )
            finally:
                counter.close()
        if progress is not None:
            progress(h * n_sub, h * n_sub)
        self.locations_ = index.locations
        self.index_ = index
        self.n_time_bins_ = n_bins
        self.sub_levels_ = pd.DataFrame(plan_rows)
        self.ledger_ = ledger
        self.noise_seeded_ = bool(getattr(noise, "seeded", False))
        self._finish(built)
        return self

    def _finish(self, built: BuiltTree) -> None:
        counts = consistent_counts(built.parent, built.noisy)
        ending = release_counts(built.parent, counts)
        tree = pd.DataFrame(
            {
                "node": np.arange(built.parent.size, dtype=np.int64),
                "parent": built.parent,
                "depth": built.depth,
                "location": pd.Categorical.from_codes(
                    built.location, categories=pd.Index(self.locations_)
                ),
                "noisy_count": built.noisy,
                "count": counts,
                "ending": ending,
            }
        )
        if self.time_bins is not None:
            tree.insert(4, "time_bin", built.time_bin)
        self.tree_ = tree
        self.generalized_ = pd.DataFrame(
            np.concatenate(built.generalized) if built.generalized else np.zeros((0, 6), int),
            columns=["depth", "sub_level", "parent", "taxonomy_node", "time_bin", "noisy_count"],
        )

    # ------------------------------------------------------------------ release
    def parameters(self) -> dict[str, Any]:
        """The public parameters of the fitted release, as the manifest records them."""
        if not hasattr(self, "tree_"):
            raise ConfigError("PrefixTreeSynthesizer is not fitted: call fit() first")
        out: dict[str, Any] = {
            "generator": "prefixtree",
            "variant": self.variant,
            "epsilon": self.epsilon,
            "height": self.height,
            "taxonomy": self.taxonomy.source,
            "time_bin_minutes": self.time_bins,
            "seeded": self.noise_seeded_,
            "sub_levels": self.sub_levels_.to_dict(orient="records"),
        }
        for key in ("budget_split", "thresholds"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    def _time_labels(self) -> list[str]:
        width = int(self.time_bins)  # type: ignore[arg-type]
        return [f"{(b * width) // 60:02d}:{(b * width) % 60:02d}" for b in range(self.n_time_bins_)]

    def sample(self) -> pd.DataFrame:
        """The release (section 4.2): n(v) copies of prefix(v) for every node, in long format.

        Post-processing of the fitted tree only. Columns ``seq_id`` (int, 0..), ``pos``,
        ``location`` (categorical) and, for trajectories, ``time`` (the bin's start, ``HH:MM``).
        Rows are ordered by sequence length, then by the taxonomy order of their (time bin,
        location) steps: a function of the release alone, never of input order.
        """
        if not hasattr(self, "tree_"):
            raise ConfigError("PrefixTreeSynthesizer is not fitted: call fit() first")
        tree = self.tree_
        parent = tree["parent"].to_numpy()
        depth = tree["depth"].to_numpy()
        loc = tree["location"].cat.codes.to_numpy().astype(np.int64)
        tbin = tree["time_bin"].to_numpy() if "time_bin" in tree.columns else None
        ending = tree["ending"].to_numpy()
        height = int(depth.max()) if depth.size else 0
        loc_path = np.full((depth.size, max(height, 1)), -1, dtype=np.int64)
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
        seq_node = np.repeat(np.arange(depth.size), ending)
        lengths = depth[seq_node]
        row_seq = np.repeat(np.arange(seq_node.size, dtype=np.int64), lengths)
        starts = np.cumsum(lengths) - lengths
        pos = np.arange(row_seq.size, dtype=np.int64) - np.repeat(starts, lengths)
        row_node = seq_node[row_seq]
        out = pd.DataFrame(
            {
                "seq_id": row_seq,
                "pos": pos,
                "location": pd.Categorical.from_codes(
                    loc_path[row_node, pos], categories=pd.Index(self.locations_)
                ),
            }
        )
        if bin_path is not None:
            out["time"] = pd.Categorical.from_codes(
                bin_path[row_node, pos], categories=pd.Index(self._time_labels())
            )
        return out
