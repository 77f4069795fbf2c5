"""The public plan of a :class:`~prefixtree.synthesizer.PrefixTreeSynthesizer` (Chen et al. 2012,
section 4.1): generalized levels, budget per tree level and sub-level, pass thresholds, and the
expected tree size checked before any data is read. Only public facts enter.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from prefixtree.estimate import BYTES_PER_NODE, TreeEstimate, available_memory, estimate_tree
from prefixtree.presets import auto_config, generalized_split, hybrid_split, kdd12
from prefixtree.tree import SubLevel, TaxonomyIndex
from synth.errors import ConfigError
from synth.generator import Generator
from synth.params import spell
from synth.privacy import exact
from synth.taxonomy import Taxonomy

__all__ = [
    "MINUTES_PER_DAY",
    "PRESET_KEYS",
    "TIGHTEN_STEPS",
    "TreePlanning",
    "scale_for",
]

MINUTES_PER_DAY = 1440
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
    "completion_hints",
)


def scale_for(epsilon: Fraction) -> float:
    """``1 / epsilon`` as the smallest float >= the exact value (never less noise than claimed)."""
    exact = 1 / epsilon
    scale = float(exact)
    if Fraction(scale) < exact:
        scale = math.nextafter(scale, math.inf)
    return scale


class TreePlanning(Generator):
    """The planning half of :class:`~prefixtree.synthesizer.PrefixTreeSynthesizer`."""

    # parameters and state, set by the synthesizer
    taxonomy: Taxonomy
    preset: str
    thresholds: Mapping[int, float] | None
    false_children: float | Sequence[float] | None
    time_bin: int | None
    coarse_time_bin: int | None
    random_state: Any
    max_nodes: int
    height: int
    root_share: float | None
    config_: dict[str, Any]
    estimate_: TreeEstimate

    def _tree_time_bins(self) -> int | None:
        """Minutes per time bin of the tree's nodes (the factorised time model has none)."""
        return self.time_bin

    def resolved(self) -> dict[str, Any]:
        """The configuration the fit uses: the preset's values (``auto``: computed from public
        facts only, :mod:`prefixtree.presets`), overridden by every explicit parameter."""
        h = self.height  # checked by the table (prefixtree.params) before any planning
        if self.preset == "kdd12":
            cfg = kdd12()
        else:
            cfg = auto_config(self.taxonomy, int(h), self._tree_time_bins())
        explicit = {key: getattr(self, key) for key in PRESET_KEYS}
        wants_hybrid = explicit["variant"] == "hybrid" or (
            explicit["variant"] is None and self.coarse_time_bin is not None
        )
        if self.preset == "auto" and wants_hybrid:  # coarse time bins need a generalized level
            explicit["variant"] = "hybrid"
        skipped = False
        if explicit["variant"] is not None and explicit["budget_split"] is None:
            # the preset's split was for the variant it chose
            cfg["budget_split"] = None
            if self.preset == "auto" and explicit["variant"] == "hybrid":
                cfg["budget_split"], skipped = self._auto_hybrid_split(explicit, cfg)
        for key, value in explicit.items():
            if value is not None:
                cfg[key] = value
        if skipped:  # no generalized level pays for itself: the tree is the simple one
            cfg["variant"] = "simple"
        cfg["hybrid_skipped"] = skipped
        if cfg["completion"] != "markov" and self.root_share is None:
            cfg["root_share"] = 0.0  # the root count serves the completion only
        hints_serve = cfg["completion"] == "markov" and cfg["threshold_rule"] == "candidates"
        if not hints_serve and explicit["completion_hints"] is None:
            cfg["completion_hints"] = 0.0  # hints serve the Markov completion's first step only
        return cfg

    def _auto_hybrid_split(
        self, explicit: dict[str, Any], cfg: dict[str, Any]
    ) -> tuple[dict[int, float] | None, bool]:
        """The split of a hybrid tree asked for under ``auto`` and whether its generalized levels
        are all skipped: the levels that pay for themselves (:func:`generalized_split`); with
        ``coarse_time_bin`` (time generalizes too) the ``sqrt(f)`` split (:func:`hybrid_split`)."""
        fc = explicit["false_children"] or cfg["false_children"]
        first = float(fc[0] if isinstance(fc, Sequence | np.ndarray) else fc)
        if self.coarse_time_bin is not None:
            return hybrid_split(self.taxonomy, first) or None, False
        split = generalized_split(self.taxonomy, first)
        return split or None, not split

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
                        f"{spell('budget_split')}: level {g!r} is not an inner taxonomy level "
                        f"(1..{tax.height - 1})"
                    )
                share = exact(value, f"budget_split[{g}]")  # >= 0: checked by the table
                if share > 0:
                    shares[g] = share
            if sum(shares.values()) >= 1:
                raise ConfigError(
                    f"{spell('budget_split')} must leave a positive share for the locations"
                )
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
        weights = list(self.config_["level_weights"])  # h of them, > 0: checked in fit's check
        exact_weights = [exact(w, f"level_weights[{i}]") for i, w in enumerate(weights)]
        total = sum(exact_weights, Fraction(0))
        return [w / total for w in exact_weights]

    def _false_children(self, h: int) -> list[float]:
        """``false_children`` of each tree level (one number serves every level; one per level
        and each in (0, 1]: checked before planning, :meth:`_check_params`)."""
        fc = self.config_["false_children"]
        if isinstance(fc, Sequence | np.ndarray) and not isinstance(fc, str):
            return [float(v.item() if isinstance(v, np.generic) else v) for v in fc]
        return [float(fc)] * h

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
        read (:mod:`prefixtree.estimate`): over ``max_nodes`` the ``auto`` preset divides its
        false children by 4 (higher thresholds) until it fits, any other configuration stops with
        a :class:`ConfigError` naming ``--max-nodes``. Only public facts and ``max_nodes`` enter:
        neither the private data nor the machine changes the plan. The plan is made once per
        set of parameters and frozen: a later call (a re-fit, or ``fit`` after ``check_params``)
        reuses it. Free memory may only refuse the plan (:meth:`_check_memory`), never change it."""
        key = self._plan_key()
        frozen = getattr(self, "_frozen_plan", None)
        if frozen is not None and frozen[0] == key:
            _, config, self.estimate_, self._prepared = frozen
            self.config_ = dict(config)
            return
        root_share = exact(self.config_["root_share"], "root_share")
        eps_tree = eps * (1 - root_share)
        false_children = self._false_children(h)
        tightened = 0
        layout = self._layout()
        while True:
            built_plan = self._plan(layout, eps_tree, h, false_children)
            estimate = self._estimate(built_plan)
            limit = float(self.max_nodes)
            if estimate.total <= limit or not self._secure_noise():
                break
            if not self._may_tighten() or tightened >= TIGHTEN_STEPS:
                self._refuse(estimate, limit)
            false_children = [v / 4 for v in false_children]
            tightened += 1
        if self._secure_noise():
            self._check_memory(estimate)
        self.estimate_ = estimate
        self.config_["false_children"] = false_children
        self.config_["tightened"] = tightened
        self._prepared = built_plan
        self._frozen_plan = (key, dict(self.config_), estimate, built_plan)

    def _plan_key(self) -> str:
        """What the plan is a function of: every parameter but those that only say how the data
        is read or where it is counted (and the taxonomy object itself)."""
        params = self.get_params(deep=False)
        skip = {"progress", "engine", "engine_options", "input_format", "location_column"}
        skip |= {"on_unknown", "timezone", "per_day", "taxonomy"}
        rest = sorted((k, repr(v)) for k, v in params.items() if k not in skip)
        return repr((id(self.taxonomy), rest))

    def _check_memory(self, estimate: TreeEstimate) -> None:
        """Refuse (never change) a plan whose expected tree needs over half the available memory:
        the machine may stop a release, it never shapes one."""
        memory = available_memory()
        if estimate.bytes <= memory / 2:
            return
        fits = max(1, int(memory / 2 / BYTES_PER_NODE))
        raise ConfigError(
            f"the planned tree would hold about {estimate.total:.3g} nodes "
            f"(~{estimate.bytes / 1e9:.2g} GB), over half the available memory "
            f"({memory / 1e9:.2g} GB): give --max-nodes {fits} or less (the auto preset then "
            "raises its thresholds to fit; other presets need a smaller --height or a larger "
            "--epsilon) or free memory; the plan never depends on the machine"
        )

    def _hint_threshold(self, theta: float, epsilon: Fraction, false_children: float) -> int | None:
        """The hint threshold of a locations sub-level (:attr:`~prefixtree.tree.SubLevel.hint`):
        where ``completion_hints`` empty cells per parent are expected to reach it (the candidates
        rule at that many false children instead of ``false_children``); None without hints."""
        hints = float(self.config_["completion_hints"])
        if hints <= false_children:
            return None
        return max(1, math.ceil(theta - math.log(hints / false_children) / float(epsilon)))

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
            f"{level}), over --max-nodes {self.max_nodes}: too many "
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
        tree_bins = self._tree_time_bins()
        n_bins = 1 if tree_bins is None else math.ceil(MINUTES_PER_DAY / tree_bins)
        if self.coarse_time_bin is not None and not levels:
            raise ConfigError(
                f"{spell('coarse_time_bin')}: the hybrid tree uses no generalized level here (see "
                f"{spell('variant')}): there is no sub-level to count coarse bins in"
            )
        widths = [
            int(self.coarse_time_bin // self.time_bin)  # type: ignore[operator]
            if self.coarse_time_bin is not None and j < len(levels)
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
        tree_bins = self._tree_time_bins()
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
        weights = self._level_shares(h)
        for i, weight in enumerate(weights):
            eps_bar = eps * weight
            eps_subs = [eps_bar * s for s in shares] + [eps_bar * rest]
            subs: list[SubLevel] = []
            for j, (g, e) in enumerate(zip(index.levels, eps_subs, strict=True)):
                generalized = j < len(levels)
                scale = scale_for(e)
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
                hint = None
                if not generalized and weight * 2 >= max(weights):
                    hint = self._hint_threshold(theta, e, false_children[i])
                subs.append(
                    SubLevel(
                        j=j, scale=scale, threshold=math.ceil(theta), bin_width=widths[j], hint=hint
                    )
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
                        "hint_threshold": hint,
                        "time_bin_minutes": (None if tree_bins is None else tree_bins * widths[j]),
                    }
                )
            plan.append(subs)
            eps_plan.append(eps_subs)
        return levels, index, plan, eps_plan, plan_rows, layout["n_bins"]
