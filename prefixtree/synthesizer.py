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
exceeds 2 and its groups act as at least two (inverse Simpson index of their sizes >= 2); a level
failing either barely generalises: it is skipped, and with no level left the tree is the
``simple`` variant; from the top, each used level takes ``2 / f`` of the budget the
levels above left, the locations the rest. ``budget_split`` (``{taxonomy level: fraction of
eps_bar}``, the locations get the rest) and ``thresholds`` (``{taxonomy level: threshold}``,
``taxonomy.height`` = the locations) override. A very skewed taxonomy (SUBE: one mode holds 373 of
382 lines, f = 127) would make ``eps_1`` tiny and its threshold huge for no pruning: the Simpson
test skips it.

Presets (:mod:`prefixtree.presets`): ``preset="auto"`` (default) computes every tuning value
below from public facts (epsilon, h, the taxonomy), ``preset="kdd12"`` is the paper's settings;
an explicit parameter overrides either. Before any data is read the expected tree size is
estimated (:mod:`prefixtree.estimate`) against ``max_nodes``. With ``root_share`` (auto: 0.01) a
noisy count of sequences (its own ledger line) joins consistency as the root, and the mass no
surviving first-level node holds is released as single locations (volume fidelity).

Beyond the paper (options). ``level_weights`` gives tree level i the
share ``w_i / sum(w)`` of epsilon instead of ``1 / h`` (levels compose sequentially, so the total
stays epsilon; frequent patterns are short, so the first levels matter most); consistency then
weights each node by its level's inverse noise variance (weighted least squares, the natural
generalisation of Theorem 4.3 to unequal variances). ``threshold_rule="candidates"`` sets each
sub-level's threshold from the public number ``m`` of candidates of a parent so that at most
``false_children`` empty candidates pass per parent in expectation: with the paper's
``2 sqrt(2) / eps_2`` about ``m * 0.03`` pass (11 per node over SUBE's 382 lines), and the tree
grows as that power of h (Theorem 4.2). Both are fixed before the data is read.
``completion="markov"`` adds one end-of-sequence cell per node (same histogram, same sensitivity:
a sequence ends once) and continues the sequences that went on below a node through pruned children
with a Markov chain read off the noisy tree (:mod:`prefixtree.completion`, post-processing) instead
of releasing them as ending there.

Trajectories (section 4.4): with ``time_bins`` (minutes per bin), nodes are (location, time bin)
pairs and a node's candidates are all (location, bin) with bin >= its own. The input ``time`` column
is reduced to the time of day; within a sequence bins are made non-decreasing by a running maximum
(a deterministic per-record transformation). ``coarse_time_bins`` (hybrid) generalizes time as the
taxonomy generalizes locations: the generalized sub-levels count (line, coarse bin) cells, and the
locations sub-level refines a surviving one into (station, fine bin) cells within its coarse bin
(and not before the node's own bin), so a level's first histogram has ``coarse / fine`` times
fewer candidates per node.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from prefixtree.completion import complete_sequences
from prefixtree.consistency import consistent_counts, release_counts
from prefixtree.estimate import BYTES_PER_NODE, TreeEstimate, available_memory, estimate_tree
from prefixtree.presets import PRESETS, auto_config, hybrid_split, kdd12
from prefixtree.tree import BuiltTree, SubLevel, TaxonomyIndex, build_noisy_tree_counted
from synth.engines import check_engine, get_engine
from synth.errors import ConfigError, InputError
from synth.privacy import PrivacyLedger, check_budget, exact, noise_source
from synth.records import encode_sequences, load_sequences
from synth.taxonomy import Taxonomy
from synth.times import check_timezone, times_of_day

__all__ = ["PrefixTreeSynthesizer"]

MINUTES_PER_DAY = 1440
VARIANTS = ("hybrid", "simple")
THRESHOLD_RULES = ("paper", "candidates")
COMPLETIONS = ("none", "markov")
NOISE_METHODS = ("discrete_laplace", "empty_cells_passing", "choice")
DEFAULT_MAX_NODES = 5_000_000
MAX_HEIGHT = 1000
TIGHTEN_STEPS = 12
#: the parameters a preset sets (an explicit value overrides the preset's)
PRESET_KEYS = (
    "variant",
    "budget_split",
    "threshold_rule",
    "false_children",
    "level_weights",
    "completion",
    "root_share",
)


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
    - ``preset``: ``"auto"`` (default: the values of the parameters left ``None`` computed from
      public facts, :mod:`prefixtree.presets`) or ``"kdd12"`` (Chen et al. 2012).
    - ``variant``: ``"hybrid"`` (generalized sub-levels) or ``"simple"`` (the paper's baseline).
    - ``budget_split``: ``{taxonomy level: fraction of eps_bar}`` for the generalized sub-levels.
    - ``thresholds``: ``{taxonomy level: pass threshold}`` (``taxonomy.height`` for locations).
    - ``level_weights``: one weight per tree level; level i gets ``epsilon * w_i / sum(w)``
      instead of the paper's ``epsilon / height`` (levels compose sequentially). When the levels'
      noise differs, consistency weights each node by its level's inverse noise variance.
    - ``threshold_rule``: ``"paper"`` (section 4.1) or ``"candidates"``: the smallest threshold at
      which at most ``false_children`` empty candidates are expected to pass under one parent,
      from the public number of candidates (taxonomy size x time bins); the paper's rule lets
      ``|candidates| * P(pass)`` empty children through, which on large location sets (SUBE: 382
      lines) multiplies level after level. ``false_children`` is one number for every level or
      one per tree level: a level with a small share of epsilon has a high threshold, and an
      empty child passing it takes about that many sequences from its parent in consistency, so
      such levels want far fewer false children than the first ones.
    - ``completion``: ``"none"`` (the paper: ``n(v) = c(v) - sum of children`` sequences end at
      v) or ``"markov"``: end-of-sequence cells, and the sequences that continued below v through
      pruned children are completed by a Markov chain of the noisy tree (post-processing).
    - ``time_bins``: minutes per time bin for trajectories (section 4.4), or ``None``.
    - ``coarse_time_bins``: minutes per time bin of the generalized sub-levels (a multiple of
      ``time_bins``; hybrid trajectories only), or ``None``: the same bins as the locations.
    - ``random_state``: ``None`` (secure noise), an ``int`` (seeded, NOT private: tests only), or an
      object with ``SecureNoise``'s ``discrete_laplace``/``empty_cells_passing``/``choice``. The
      completion's draws (post-processing) use ``numpy.random.default_rng(random_state)`` for an
      ``int``, fresh OS entropy otherwise.
    - ``max_nodes``: refuse, before reading the data, a tree expected to exceed this many nodes
      (auto tightens its thresholds instead), and stop one that grows past it (empty cells that
      pass the threshold multiply when ``|locations| * P(pass) > 1``).
    - ``root_share``: share of epsilon for the noisy number of sequences (needs the Markov
      completion; 0 = none).
    - ``engine``: where the counting runs (:mod:`synth.engines`): ``"auto"`` (default: memory
      for frames and small files, DuckDB for large files), ``"memory"``,
      ``"duckdb"`` (out of core over Parquet/CSV) or ``"spark"``; ``engine_options`` its options
      (``temp_directory``, ``memory_limit``, ``threads``; Spark: ``master``). The noise is always
      drawn here, once, on the collected counts: the engine never changes the release.

    Fitted attributes: ``tree_`` (non-generalized nodes, breadth first: node, parent, depth,
    location [, time_bin], noisy_count, consistent count, ending = n(v)), ``generalized_`` (the
    surviving generalized cells with their noisy counts; with ``completion="markov"`` also
    end_noisy, the end-of-sequence cell's noisy count (NA at depth h), ending = its consistent
    count, and continued = the sequences completed below the node), ``ledger_`` (the privacy
    spends), ``sub_levels_`` (budget plan: level, fan-out, epsilon, scale, threshold),
    ``locations_`` (locations in taxonomy depth-first order), ``noise_seeded_``, ``config_`` (the
    resolved configuration), ``estimate_`` (expected nodes per level), ``root_count_``.
    """

    def __init__(
        self,
        *,
        epsilon: float,
        height: int,
        taxonomy: Taxonomy,
        preset: str = "auto",
        variant: str | None = None,
        budget_split: Mapping[int, float] | None = None,
        thresholds: Mapping[int, float] | None = None,
        level_weights: Sequence[float] | None = None,
        threshold_rule: str | None = None,
        false_children: float | Sequence[float] | None = None,
        completion: str | None = None,
        root_share: float | None = None,
        time_bins: int | None = None,
        coarse_time_bins: int | None = None,
        random_state: int | object | None = None,
        max_nodes: int = DEFAULT_MAX_NODES,
        engine: str = "auto",
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.height = height
        self.taxonomy = taxonomy
        self.preset = preset
        self.variant = variant
        self.budget_split = budget_split
        self.thresholds = thresholds
        self.level_weights = level_weights
        self.threshold_rule = threshold_rule
        self.false_children = false_children
        self.completion = completion
        self.root_share = root_share
        self.time_bins = time_bins
        self.coarse_time_bins = coarse_time_bins
        self.random_state = random_state
        self.max_nodes = max_nodes
        self.engine = engine
        self.engine_options = engine_options

    # ------------------------------------------------------------------ parameters
    def _noise(self) -> Any:
        return noise_source(self.random_state, methods=NOISE_METHODS)

    def resolved(self) -> dict[str, Any]:
        """The configuration the fit uses: the preset's values (``auto``: computed from public
        facts only, :mod:`prefixtree.presets`), overridden by every explicit parameter."""
        if self.preset not in PRESETS:
            raise ConfigError(f"preset must be one of {', '.join(PRESETS)}, got {self.preset!r}")
        h = self.height
        if isinstance(h, bool) or not isinstance(h, int | np.integer) or not 1 <= h <= MAX_HEIGHT:
            raise ConfigError(
                f"height must be an integer in 1..{MAX_HEIGHT}, got {h!r} (the size estimate "
                "allows no taller tree: each level gets epsilon / height)"
            )
        if not isinstance(self.taxonomy, Taxonomy):
            raise ConfigError("taxonomy must be a synth.taxonomy.Taxonomy")
        if self.preset == "kdd12":
            cfg = kdd12()
        else:
            cfg = auto_config(self.taxonomy, int(h), self.time_bins)
        explicit = {key: getattr(self, key) for key in PRESET_KEYS}
        wants_hybrid = explicit["variant"] == "hybrid" or (
            explicit["variant"] is None and self.coarse_time_bins is not None
        )
        if self.preset == "auto" and wants_hybrid:  # coarse time bins need a generalized level
            explicit["variant"] = "hybrid"
        if explicit["variant"] is not None and explicit["budget_split"] is None:
            # the preset's split was for the variant it chose
            cfg["budget_split"] = None
            if self.preset == "auto" and explicit["variant"] == "hybrid":
                fc = explicit["false_children"] or cfg["false_children"]
                first = fc[0] if isinstance(fc, Sequence | np.ndarray) else fc
                cfg["budget_split"] = hybrid_split(self.taxonomy, float(first)) or None
        for key, value in explicit.items():
            if value is not None:
                cfg[key] = value
        if cfg["completion"] != "markov" and self.root_share is None:
            cfg["root_share"] = 0.0  # the root count serves the completion only
        return cfg

    def check_params(self) -> tuple[Fraction, int]:
        """Validate the parameters (ConfigError) without data; returns exact epsilon and h.

        Sets ``config_``: the resolved configuration (:meth:`resolved`)."""
        eps, _ = check_budget(self.epsilon)
        cfg = self.resolved()
        self.config_ = cfg
        h = self.height
        if cfg["variant"] not in VARIANTS:
            raise ConfigError(
                f"variant must be one of {', '.join(VARIANTS)}, got {cfg['variant']!r}"
            )
        if cfg["budget_split"] and cfg["variant"] == "simple":
            raise ConfigError("budget_split only applies to variant='hybrid'")
        share = cfg["root_share"]
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share < 0.5:
            raise ConfigError(f"root_share must be in [0, 0.5), got {share!r}")
        if share and cfg["completion"] != "markov":
            raise ConfigError("root_share (a noisy root count) needs completion='markov'")
        tb = self.time_bins
        if tb is not None and (
            isinstance(tb, bool) or not isinstance(tb, int | np.integer) or not 1 <= tb <= 1440
        ):
            raise ConfigError(f"time_bins must be minutes per bin in 1..1440, got {tb!r}")
        coarse = self.coarse_time_bins
        if coarse is not None:
            if tb is None or cfg["variant"] != "hybrid":
                raise ConfigError("coarse_time_bins needs time_bins and variant='hybrid'")
            if (
                isinstance(coarse, bool)
                or not isinstance(coarse, int | np.integer)
                or not tb <= coarse <= 1440
                or coarse % tb
            ):
                raise ConfigError(
                    f"coarse_time_bins must be a multiple of time_bins ({tb}) in {tb}..1440 "
                    f"minutes, got {coarse!r}"
                )
        if cfg["threshold_rule"] not in THRESHOLD_RULES:
            raise ConfigError(
                f"threshold_rule must be one of {', '.join(THRESHOLD_RULES)}, "
                f"got {cfg['threshold_rule']!r}"
            )
        if cfg["completion"] not in COMPLETIONS:
            raise ConfigError(
                f"completion must be one of {', '.join(COMPLETIONS)}, got {cfg['completion']!r}"
            )
        self._false_children(int(h))
        if cfg["level_weights"] is not None:
            self._level_shares(int(h))
        mn = self.max_nodes
        if isinstance(mn, bool) or not isinstance(mn, int | np.integer) or mn < 1:
            raise ConfigError(f"max_nodes must be a positive integer, got {mn!r}")
        check_engine(self.engine, self.engine_options)
        self._prepare(eps, int(h))
        return eps, int(h)

    def _generalized_levels(self) -> tuple[list[int], list[Fraction], dict[int, Fraction]]:
        """Generalized taxonomy levels in use (top first), their budget shares, and their f.

        Default (hybrid): walking up from the locations, an inner level g is used when its fan-out
        ``f_g = (#nodes of the next level in use below it) / (#nodes of g)`` exceeds 2 and its
        groups are not so unequal that they act as fewer than two: the inverse Simpson index
        ``N^2 / sum(size^2)`` of the group sizes is at least 2 (SUBE modes: one holds 373 of 382
        lines, index 1.05: pruning whole groups saves nothing there); then the
        paper's split is applied recursively from the top: each used level takes ``2 / f_g`` of
        what the levels above left, the locations keep the rest. With one inner level this is
        exactly ``eps_1 = 2 eps_bar / f`` and ``eps_2 = (f - 2) eps_bar / f``.
        """
        tax = self.taxonomy
        leaves = tax.leaves()
        n_nodes = {
            g: len({tax.generalize(leaf, g) for leaf in leaves}) for g in range(1, tax.height)
        }
        cfg = getattr(self, "config_", None) or self.resolved()
        if cfg["variant"] == "simple":
            return [], [], {}
        split = cfg["budget_split"]
        if split:
            shares: dict[int, Fraction] = {}
            for g, value in split.items():
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
        below_level = tax.height
        below_count = len(leaves)
        for g in sorted(n_nodes, reverse=True):
            pairs = {(tax.generalize(x, g), tax.generalize(x, below_level)) for x in leaves}
            sizes = np.array(list(Counter(group for group, _ in pairs).values()), dtype=float)
            f = Fraction(below_count, n_nodes[g])
            if f > 2 and below_count**2 / float((sizes**2).sum()) >= 2:
                fan[g] = f
                below_level = g
                below_count = n_nodes[g]
        levels = sorted(fan)
        remaining = Fraction(1)
        out: list[Fraction] = []
        for g in levels:
            out.append(remaining * 2 / fan[g])
            remaining -= out[-1]
        return levels, out, fan

    def _level_shares(self, h: int) -> list[Fraction]:
        """Share of epsilon of each tree level: ``1 / h`` each (the paper's ``eps_bar``) or the
        normalised ``level_weights`` (levels compose sequentially: any shares summing to 1 do)."""
        if self.config_["level_weights"] is None:
            return [Fraction(1, h)] * h
        weights = list(self.config_["level_weights"])
        if len(weights) != h:
            raise ConfigError(
                f"level_weights needs one weight per tree level ({h}), got {len(weights)}"
            )
        exact_weights = [exact(w, f"level_weights[{i}]") for i, w in enumerate(weights)]
        if any(w <= 0 for w in exact_weights):
            raise ConfigError("level_weights must all be > 0")
        total = sum(exact_weights, Fraction(0))
        return [w / total for w in exact_weights]

    def _false_children(self, h: int) -> list[float]:
        """``false_children`` of each tree level (one number serves every level)."""
        fc = self.config_["false_children"]
        values: list[Any]
        if isinstance(fc, Sequence | np.ndarray) and not isinstance(fc, str):
            single, values = False, [v.item() if isinstance(v, np.generic) else v for v in fc]
        else:
            single, values = True, [fc] * h
        if len(values) != h:
            raise ConfigError(
                f"false_children needs one number or one per tree level ({h}), got {len(values)}"
            )
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1:
                where = "" if single else f"[{i}]"
                raise ConfigError(
                    f"false_children{where} must be in (0, 1], got {v!r} (above 1 the passing "
                    "empty nodes branch without bound: Chen et al. 2012, Theorem 4.2)"
                )
        return [float(v) for v in values]

    def _default_threshold(
        self,
        index: TaxonomyIndex,
        j: int,
        generalized: bool,
        epsilon: Fraction,
        n_bins: int,
        false_children: float,
    ) -> float:
        """Pass threshold of sub-level ``j`` at budget ``epsilon`` when ``thresholds`` has none.

        ``"paper"``: ``4 sqrt(2) / eps_1`` (generalized) or ``2 sqrt(2) / eps_2`` (section 4.1).
        ``"candidates"``: the smallest ``t`` such that the expected number of empty candidate
        children passing under one parent, ``m P(noise >= t) = m p^t / (1 + p)`` with ``m`` the
        largest number of candidates of a parent (public: taxonomy size x time bins, ``n_bins``
        the most bins a parent's candidates span) and
        ``p = exp(-epsilon)``, is at most the level's ``false_children`` (Theorem 4.2's
        branching factor).
        """
        if self.config_["threshold_rule"] == "paper":
            return (4 if generalized else 2) * math.sqrt(2) / float(epsilon)
        m = int(index.size[j].max()) * n_bins
        p = math.exp(-float(epsilon))
        return max(0.0, math.log(m / (false_children * (1 + p))) / float(epsilon))

    # ------------------------------------------------------------------ plan
    def _prepare(self, eps: Fraction, h: int) -> None:
        """Plan the tree (budgets, thresholds) and check its expected size before any data is
        read (:mod:`prefixtree.estimate`): over ``max_nodes`` or half the available memory, the
        ``auto`` preset divides its false children by 4 (higher thresholds) until it fits, any
        other configuration stops with a :class:`ConfigError` naming ``--max-nodes``. Only
        public facts enter: changing the private data never changes the plan."""
        root_share = exact(self.config_["root_share"], "root_share")
        eps_tree = eps * (1 - root_share)
        false_children = self._false_children(h)
        tightened = 0
        layout = self._layout()
        while True:
            built_plan = self._plan(layout, eps_tree, h, false_children)
            estimate = self._estimate(built_plan)
            limit = min(float(self.max_nodes), available_memory() / 2 / BYTES_PER_NODE)
            if estimate.total <= limit or not self._secure_noise():
                break
            if not self._may_tighten() or tightened >= TIGHTEN_STEPS:
                self._refuse(estimate, limit)
            false_children = [v / 4 for v in false_children]
            tightened += 1
        self.estimate_ = estimate
        self.config_["false_children"] = false_children
        self.config_["tightened"] = tightened
        self._prepared = built_plan

    def _secure_noise(self) -> bool:
        """The estimate assumes the discrete Laplace noise of the secure (or seeded) sampler;
        a custom noise object (a test's) is only held to the runtime ``max_nodes`` guard."""
        rs = self.random_state
        return rs is None or isinstance(rs, int | np.integer)

    def _may_tighten(self) -> bool:
        """Only the auto preset's own thresholds are tightened, never explicit ones."""
        return (
            self.preset == "auto"
            and self.false_children is None
            and self.thresholds is None
            and self.config_["threshold_rule"] == "candidates"
        )

    def _refuse(self, estimate: TreeEstimate, limit: float) -> None:
        level = estimate.first_level_over(limit)
        raise ConfigError(
            f"the noisy tree would hold about {estimate.total:.3g} nodes "
            f"(~{estimate.bytes / 1e9:.2g} GB; {estimate.nodes[(level or 1) - 1]:.3g} at level "
            f"{level}), over --max-nodes {self.max_nodes} or half the available memory: too many "
            "empty cells pass the thresholds (use --preset auto or --threshold-rule candidates, "
            "a smaller --height, a larger --epsilon, or raise --max-nodes)"
        )

    def _estimate(self, built_plan: tuple[Any, ...]) -> TreeEstimate:
        _, index, plan, _, _, n_bins = built_plan
        rows = self._layout()["spans"]
        cands = [[float(index.size[sub.j].max()) * rows[sub.j] for sub in subs] for subs in plan]
        scales = [[sub.scale for sub in subs] for subs in plan]
        thresholds = [[float(sub.threshold) for sub in subs] for subs in plan]
        return estimate_tree(cands, scales, thresholds, float(index.n_locations * n_bins))

    def _layout(self) -> dict[str, Any]:
        """The public layout of the tree: generalized levels, taxonomy index, time bins."""
        cached = getattr(self, "_layout_cache", None)
        key = (id(self.taxonomy), repr(sorted(self.config_.items(), key=str)))
        if cached is not None and cached[0] == key:
            return cached[1]
        tax = self.taxonomy
        levels, shares, fanout = self._generalized_levels()
        index = TaxonomyIndex.build(tax, levels)
        custom = dict(self.thresholds or {})
        allowed = {*levels, tax.height}
        bad = sorted(set(custom) - allowed)
        if bad:
            raise ConfigError(
                f"thresholds: level {bad[0]!r} is not a sub-level in use ({sorted(allowed)})"
            )
        n_bins = 1 if self.time_bins is None else math.ceil(MINUTES_PER_DAY / self.time_bins)
        if self.coarse_time_bins is not None and not levels:
            raise ConfigError(
                "coarse_time_bins: the hybrid tree uses no generalized level here (see "
                "variant): there is no sub-level to count coarse bins in"
            )
        widths = [
            int(self.coarse_time_bins // self.time_bins)  # type: ignore[operator]
            if self.coarse_time_bins is not None and j < len(levels)
            else 1
            for j in range(len(index.levels))
        ]
        spans = [math.ceil(n_bins / widths[0])] + [
            math.ceil(widths[j - 1] / widths[j]) for j in range(1, len(widths))
        ]
        layout = {
            "levels": levels,
            "shares": shares,
            "fanout": fanout,
            "index": index,
            "custom": custom,
            "n_bins": n_bins,
            "widths": widths,
            "spans": spans,
        }
        self._layout_cache = (key, layout)
        return layout

    def _plan(
        self, layout: dict[str, Any], eps: Fraction, h: int, false_children: list[float]
    ) -> tuple[Any, ...]:
        """Per tree level and sub-level: budget, noise scale, threshold (public only)."""
        levels, shares, fanout = layout["levels"], layout["shares"], layout["fanout"]
        index, custom, widths, spans = (
            layout["index"],
            layout["custom"],
            layout["widths"],
            layout["spans"],
        )
        rest = 1 - sum(shares, Fraction(0))
        plan: list[list[SubLevel]] = []
        eps_plan: list[list[Fraction]] = []
        plan_rows = []
        for i, weight in enumerate(self._level_shares(h)):
            eps_bar = eps * weight
            eps_subs = [eps_bar * s for s in shares] + [eps_bar * rest]
            subs: list[SubLevel] = []
            for j, (g, e) in enumerate(zip(index.levels, eps_subs, strict=True)):
                generalized = j < len(levels)
                scale = _scale_for(e)
                theta = float(
                    custom.get(
                        g,
                        self._default_threshold(
                            index, j, generalized, e, spans[j], false_children[i]
                        ),
                    )
                )
                if not math.isfinite(theta):
                    raise ConfigError(f"thresholds[{g}] must be finite")
                subs.append(
                    SubLevel(j=j, scale=scale, threshold=math.ceil(theta), bin_width=widths[j])
                )
                plan_rows.append(
                    {
                        "level": i + 1,
                        "sub_level": j,
                        "taxonomy_level": g,
                        "generalized": generalized,
                        "nodes": len(index.names[j]),
                        "fanout": float(fanout[g]) if generalized else None,
                        "epsilon": float(e),
                        "scale": scale,
                        "threshold": math.ceil(theta),
                        "time_bin_minutes": (
                            None if self.time_bins is None else self.time_bins * widths[j]
                        ),
                    }
                )
            plan.append(subs)
            eps_plan.append(eps_subs)
        return levels, index, plan, eps_plan, plan_rows, layout["n_bins"]

    # ------------------------------------------------------------------ fit
    def _time_matrix(
        self, seqs: pd.DataFrame, n_rows: int, height: int, timezone: str | None = None
    ) -> np.ndarray:
        width = int(self.time_bins)  # type: ignore[arg-type]
        if "time" not in seqs.columns:
            raise InputError("sequences: time_bins needs a 'time' column")
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

    def fit(
        self,
        sequences: pd.DataFrame | str | os.PathLike[str],
        *,
        progress: Callable[[int, int], None] | None = None,
        on_unknown: str = "error",
        location_column: str | None = None,
        timezone: str | None = None,
    ) -> PrefixTreeSynthesizer:
        """Build the noisy prefix tree of long-format ``sequences`` (seq_id, pos, location[, time]).

        Each ``seq_id`` is one privacy unit (one card); it is truncated to ``height`` locations.
        ``sequences`` may also be a file (taps or sequences, CSV or Parquet): the DuckDB engine
        reads the usual layouts itself, out of core; otherwise it is loaded with
        :func:`synth.records.load_sequences` (``on_unknown``, ``location_column``).
        ``timezone``: times are read per value as the wall clock as written (default) or in
        this IANA zone (:mod:`synth.times`). Sequences made with ``load_sequences(per_day=True)``
        (``attrs["privacy_unit"] == "card-day"``) are one card-day each: the manifest says so.
        ``progress(done, total)``, when given, is called as each (level, sub-level) histogram of
        the tree is about to be drawn (``total`` = height x sub-levels; the tree may stop early).
        """
        eps, h = self.check_params()
        noise = self._noise()
        root_share = exact(self.config_["root_share"], "root_share")
        built_plan = self._prepared
        levels, index, plan, eps_plan, plan_rows, n_bins = built_plan
        names = [
            ("locations" if j == len(levels) else f"taxonomy level {g}")
            for j, g in enumerate(index.levels)
        ]
        unit = "card"
        if isinstance(sequences, pd.DataFrame):
            unit = str(sequences.attrs.get("privacy_unit", "card"))
        ledger = PrivacyLedger(
            epsilon=eps,
            delta=0,
            unit=unit,
            neighbouring=f"add or remove one {unit}'s sequence (its first h locations)"
            + (
                "; a card active on d days is covered with d times the epsilon (group privacy)"
                if unit == "card-day"
                else ""
            ),
        )
        root_scale = None
        self._root_scale = None
        if root_share:
            root_scale = _scale_for(eps * root_share)
            ledger.spend(
                label="prefix tree root: number of sequences",
                mechanism="discrete_laplace",
                epsilon=eps * root_share,
                sensitivity=1,
                sensitivity_norm="l1",
                scale=root_scale,
                note="the number of cards with a sequence; a card adds or removes 1",
            )
            self._root_scale = root_scale
        n_sub = len(index.levels)
        end_cells = self.config_["completion"] == "markov"

        def record(level: int, j: int) -> None:
            if progress is not None:
                progress(level * n_sub + j, h * n_sub)
            ledger.spend(
                label=f"prefix tree level {level + 1}: {names[j]}",
                mechanism="discrete_laplace",
                epsilon=eps_plan[level][j],
                sensitivity=1,
                sensitivity_norm="l1",
                scale=plan[level][j].scale,
                threshold=plan[level][j].threshold,
                note=(
                    "one histogram over every candidate child of every surviving node"
                    + (
                        " and one end-of-sequence cell per surviving node"
                        if end_cells and level and j == n_sub - 1
                        else ""
                    )
                    + "; each card's sequence is in at most one cell (disjoint prefixes: "
                    "parallel composition), L1 sensitivity 1"
                ),
            )

        with get_engine(self.engine, self.engine_options, sequences) as engine:
            counter = None
            if not isinstance(sequences, pd.DataFrame) and check_timezone(timezone) is None:
                counter = engine.prefix_counter_from_file(
                    sequences,
                    locations=index.locations,
                    height=h,
                    time_bin_minutes=self.time_bins,
                    on_unknown=on_unknown,
                    location_column=location_column,
                )
            if counter is None and not isinstance(sequences, pd.DataFrame):
                sequences = load_sequences(
                    sequences,
                    taxonomy=self.taxonomy,
                    on_unknown=on_unknown,
                    location_column=location_column,
                    timezone=timezone,
                )
            if counter is None:
                assert isinstance(sequences, pd.DataFrame)
                codes = encode_sequences(sequences, index.locations, h)
                times = (
                    None
                    if self.time_bins is None
                    else self._time_matrix(sequences, len(codes), h, timezone)
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
                    sub_levels=plan,
                    n_bins=n_bins,
                    noise=noise,
                    before_sub_level=record,
                    max_nodes=int(self.max_nodes),
                    end_cells=end_cells,
                    root_scale=root_scale,
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
        self._finish(built, [subs[-1].scale for subs in plan])
        return self

    def _finish(self, built: BuiltTree, level_scale: list[float]) -> None:
        # inverse noise variance of each node's level (2 p / (1 - p)^2 for the discrete Laplace
        # with p = exp(-1/scale)); equal across levels unless level_weights differ. End cells are
        # leaves under their node, drawn with the next level's noise.
        n = built.parent.size
        height = int(self.height)
        shallow = np.flatnonzero(built.depth < height) if built.end_noisy is not None else None
        parent, noisy, depth = built.parent, built.noisy, built.depth
        if shallow is not None and built.end_noisy is not None:
            parent = np.concatenate([parent, shallow])
            noisy = np.concatenate([noisy, built.end_noisy[shallow]])
            depth = np.concatenate([depth, built.depth[shallow] + 1])
        weights = None
        root = built.root_noisy is not None and self._root_scale is not None
        if len(set(level_scale)) > 1 or root:
            p = np.maximum(np.exp(-1 / np.asarray(level_scale)), 1e-300)
            weights = ((1 - p) ** 2 / (2 * p))[depth - 1]
        if root:  # the root is node 0 of the consistency: depth-1 nodes hang under it
            p_root = math.exp(-1 / float(self._root_scale))  # type: ignore[arg-type]
            parent = np.concatenate([[-1], np.where(parent >= 0, parent + 1, 0)])
            noisy = np.concatenate([[built.root_noisy], noisy])
            p_root = max(p_root, 1e-300)  # no noise at all (huge epsilon): the heaviest weight
            weights = np.concatenate([[(1 - p_root) ** 2 / (2 * p_root)], weights])
        all_counts = consistent_counts(parent, noisy, weights)
        if root:
            root_count = int(all_counts[0])
            all_counts = all_counts[1:]
            parent = parent[1:] - 1
            top = int(all_counts[:n][built.depth == 1].sum())
            self.root_count_: int | None = root_count
            root_rest = max(root_count - top, 0)
        else:
            self.root_count_ = None
            root_rest = 0
        rest = release_counts(parent, all_counts)[:n]
        counts = all_counts[:n]
        self._completed = None
        if shallow is None:
            ending = rest
        else:
            ending = counts.copy()
            ending[shallow] = all_counts[n:]
            continued = np.zeros(n, dtype=np.int64)
            continued[shallow] = rest[shallow]
            n_loc = len(self.locations_)
            state = built.time_bin * n_loc + built.location
            self._completed = complete_sequences(
                built.parent,
                built.depth,
                state,
                counts,
                ending,
                continued,
                height=height,
                n_states=n_loc * self.n_time_bins_,
                n_locations=n_loc,
                child_cap=self._child_cap(height),
                rng=np.random.default_rng(
                    self.random_state
                    if isinstance(self.random_state, int | np.integer)
                    and not isinstance(self.random_state, bool)
                    else None
                ),
                root_continued=root_rest,
            )
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
        if shallow is not None and built.end_noisy is not None:
            end_noisy = pd.Series(built.end_noisy, dtype="Int64")
            end_noisy[built.depth >= height] = pd.NA
            tree.insert(6, "end_noisy", end_noisy)
            tree["continued"] = continued
        if self.time_bins is not None:
            tree.insert(4, "time_bin", built.time_bin)
        self.tree_ = tree
        self.generalized_ = pd.DataFrame(
            np.concatenate(built.generalized) if built.generalized else np.zeros((0, 6), int),
            columns=["depth", "sub_level", "parent", "taxonomy_node", "time_bin", "noisy_count"],
        )

    def _child_cap(self, height: int) -> np.ndarray:
        """Per depth d (0: the root): the largest pass threshold of level d + 1 (a pruned child's
        noisy count was below it)."""
        plan = self.sub_levels_
        top = plan.groupby("level")["threshold"].max()
        cap = np.zeros(height + 1, dtype=np.int64)
        levels = top.index.to_numpy(dtype=np.int64)
        cap[levels - 1] = np.maximum(top.to_numpy(dtype=np.int64), 1)
        return cap

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
            "coarse_time_bin_minutes": self.coarse_time_bins,
            "seeded": self.noise_seeded_,
            "sub_levels": [
                {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
                for row in self.sub_levels_.to_dict(orient="records")
            ],
        }
        cfg = self.config_
        out["preset"] = self.preset
        out["variant"] = cfg["variant"]
        out["completion"] = cfg["completion"]
        out["threshold_rule"] = cfg["threshold_rule"]
        if cfg["threshold_rule"] == "candidates":
            out["false_children"] = cfg["false_children"]
        for key in ("budget_split", "level_weights"):
            if cfg[key] is not None:
                out[key] = (
                    {str(k): v for k, v in cfg[key].items()} if key == "budget_split" else cfg[key]
                )
        if self.thresholds is not None:
            out["thresholds"] = self.thresholds
        out["root_share"] = cfg["root_share"]
        out["max_nodes"] = int(self.max_nodes)
        out["chosen_by_preset"] = sorted(k for k in PRESET_KEYS if getattr(self, k) is None)
        out["tightened"] = cfg.get("tightened", 0)
        out["expected_nodes"] = round(self.estimate_.total)
        return out

    def n_sequences(self) -> int:
        """Number of released sequences (tree endings and completions)."""
        return int(self._release_entries()[3].sum())

    def _time_labels(self) -> list[str]:
        width = int(self.time_bins)  # type: ignore[arg-type]
        return [f"{(b * width) // 60:02d}:{(b * width) % 60:02d}" for b in range(self.n_time_bins_)]

    def sample(self) -> pd.DataFrame:
        """The release (section 4.2): n(v) copies of prefix(v) for every node, in long format
        (with ``completion="markov"``: ``ending`` copies, plus the completed sequences).

        Post-processing of the fitted tree only. Columns ``seq_id`` (int, 0..), ``pos``,
        ``location`` (categorical) and, for trajectories, ``time`` (the bin's start, ``HH:MM``).
        Rows are ordered by sequence length, then by the taxonomy order of their (time bin,
        location) steps: a function of the release alone, never of input order. The concatenation
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
        if not hasattr(self, "tree_"):
            raise ConfigError("PrefixTreeSynthesizer is not fitted: call fit() first")
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
