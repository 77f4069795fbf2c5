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
of releasing them as ending there; ``completion_hints`` keeps the pruned cells of the heaviest
levels whose noisy count reached a lower threshold, and a node's first completion step follows them
(:mod:`prefixtree.hints`: the same histogram, post-processing).

Trajectories (section 4.4): with ``time_bin`` (minutes per bin), nodes are (location, time bin)
pairs and a node's candidates are all (location, bin) with bin >= its own. The input ``time`` column
is reduced to the time of day; within a sequence bins are made non-decreasing by a running maximum
(a deterministic per-record transformation). ``coarse_time_bin`` (hybrid) generalizes time as the
taxonomy generalizes locations: the generalized sub-levels count (line, coarse bin) cells, and the
locations sub-level refines a surviving one into (station, fine bin) cells within its coarse bin
(and not before the node's own bin), so a level's first histogram has ``coarse / fine`` times
fewer candidates per node. That is ``time_model="tree"``; the default with ``time_bin`` is
``"factorised"``: an untimed tree, and clock times sampled per sequence from two small noisy
tables (:mod:`prefixtree.factorised`, :mod:`prefixtree.timing`). ``length_share``: the released
lengths follow a noisy length histogram (:mod:`prefixtree.lengths`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from prefixtree.factorised import FactorisedTiming
from prefixtree.fitted import FittedTree
from prefixtree.inputs import detect_input_format, read_sequences
from prefixtree.output import taxonomy_inputs, tree_parameters, write_sequences_file
from prefixtree.params import DEFAULT_MAX_NODES, PARAMS
from prefixtree.plan import TreePlanning, scale_for
from prefixtree.sampling import PrefixTreeSampling
from prefixtree.tree import SubLevel, TaxonomyIndex, build_noisy_tree_counted
from synth.engines import check_engine, get_engine
from synth.errors import ConfigError, TransitSynthWarning
from synth.params import Constraint, ParamTable, spell
from synth.privacy import PrivacyLedger, check_budget, exact, noise_source
from synth.records import encode_sequences
from synth.records.mapped_source import MappedSource
from synth.taxonomy import Taxonomy
from synth.times import check_timezone

if TYPE_CHECKING:
    from synth.release import ReleaseWriter

__all__ = ["PrefixTreeSynthesizer"]

NOISE_METHODS = ("discrete_laplace", "empty_cells_passing", "choice")


class PrefixTreeSynthesizer(FactorisedTiming, TreePlanning, PrefixTreeSampling, FittedTree):
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
    - ``time_bin``: minutes per time bin for trajectories (section 4.4), or ``None``.
    - ``coarse_time_bin``: minutes per time bin of the generalized sub-levels (a multiple of
      ``time_bin``; hybrid trajectories only), or ``None``: the same bins as the locations.
    - ``time_model``: ``"auto"``, ``"factorised"`` or ``"tree"``; ``length_share``: share of
      epsilon for the length histogram (``None``: auto), :mod:`prefixtree.factorised`.
    - ``random_state``: ``None`` (secure noise), an ``int`` (seeded, NOT private: tests only), or an
      object with ``SecureNoise``'s ``discrete_laplace``/``empty_cells_passing``/``choice``. The
      completion's draws (post-processing) use ``numpy.random.default_rng(random_state)`` for an
      ``int``, fresh OS entropy otherwise.
    - ``max_nodes``: refuse, before reading the data, a tree expected to exceed this many nodes
      (auto tightens its thresholds instead), and stop one that grows past it (empty cells that
      pass the threshold multiply when ``|locations| * P(pass) > 1``).
    - ``root_share``: share of epsilon for the noisy number of sequences (needs the Markov
      completion; 0 = none).
    - ``completion_hints``: on the levels whose weight is at least half the largest, the pruned
      cells whose noisy count reaches the candidates threshold at this many empty cells per
      parent (instead of ``false_children``) guide the Markov completion's first step (same
      histogram: post-processing; needs the candidates rule and the Markov completion; 0 = none;
      auto: 3).
    - ``engine``: where the counting runs (:mod:`synth.engines`): ``"auto"`` (default: memory
      for frames and small files, DuckDB for large files), ``"memory"``,
      ``"duckdb"`` (out of core over Parquet/CSV) or ``"spark"``; ``engine_options`` its options
      (``temp_directory``, ``memory_limit``, ``threads``; Spark: ``master``). The noise is always
      drawn here, once, on the collected counts: the engine never changes the release.
    - reading the data (:mod:`prefixtree.inputs`): ``input_format`` (``"auto"``: from the column
      names; ``"taps"``, ``"sequences"`` or ``"trips"``), ``location_column`` (the location
      column of any layout), ``on_unknown`` (``"error"`` or ``"drop"`` rows whose location is not
      in the taxonomy), ``timezone`` (times are read per value as the wall clock as written, or
      in this IANA zone, :mod:`synth.times`), ``per_day`` (taps and trips: one sequence per card
      and day, so the privacy unit is the card-day).
    - ``progress(done, total)``: called as each (level, sub-level) histogram of the tree is about
      to be drawn (``total`` = height x sub-levels; the tree may stop early).

    The scikit-learn estimator contract (:class:`~synth.generator.Generator`): ``fit(data)``
    spends the budget in :attr:`ledger_` and returns ``self``; :meth:`sample` and
    :meth:`iter_sample` are post-processing; ``sklearn.base.clone`` gives an unfitted copy.

    Fitted attributes: ``tree_`` (non-generalized nodes, breadth first: node, parent, depth,
    location [, time_bin], noisy_count, consistent count, ending = n(v)), ``generalized_`` (the
    surviving generalized cells with their noisy counts; with ``completion="markov"`` also
    end_noisy, the end-of-sequence cell's noisy count (NA at depth h), ending = its consistent
    count, and continued = the sequences completed below the node), ``ledger_`` (the privacy
    spends), ``sub_levels_`` (budget plan: level, fan-out, epsilon, scale, threshold),
    ``locations_`` (locations in taxonomy depth-first order), ``noise_seeded_``, ``config_`` (the
    resolved configuration), ``estimate_`` (expected nodes per level), ``root_count_``.
    """

    #: one row per parameter (:mod:`prefixtree.params`): validator, config keys, flags
    parameter_table: ClassVar[ParamTable] = PARAMS
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = PARAMS.constraints()
    #: set last in fit: its presence means "fitted"
    _fitted_attribute: ClassVar[str] = "tree_"

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
        completion_hints: float | None = None,
        time_bin: int | None = None,
        coarse_time_bin: int | None = None,
        time_model: str = "auto",
        length_share: float | None = None,
        random_state: int | object | None = None,
        max_nodes: int = DEFAULT_MAX_NODES,
        engine: str = "auto",
        engine_options: Mapping[str, Any] | None = None,
        input_format: str = "auto",
        location_column: str | None = None,
        on_unknown: str = "error",
        timezone: str | None = None,
        per_day: bool = False,
        progress: Callable[[int, int], None] | None = None,
        **renamed: Any,
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
        self.completion_hints = completion_hints
        self.time_bin = time_bin
        self.coarse_time_bin = coarse_time_bin
        self.time_model = time_model
        self.length_share = length_share
        self.random_state = random_state
        self.max_nodes = max_nodes
        self.engine = engine
        self.engine_options = engine_options
        self.input_format = input_format
        self.location_column = location_column
        self.on_unknown = on_unknown
        self.timezone = timezone
        self.per_day = per_day
        self.progress = progress
        for name, value in PARAMS.renamed(renamed).items():  # time_bins=, coarse_time_bins=
            setattr(self, name, value)

    # ------------------------------------------------------------------ parameters
    def _noise(self) -> Any:
        return noise_source(self.random_state, methods=NOISE_METHODS)

    def check_params(self) -> tuple[Fraction, int]:
        """Validate the parameters (ConfigError) without data and plan the tree; returns exact
        epsilon and h. The validation is :meth:`_validate_params` (the table, then
        :meth:`_check_params`). Sets ``config_``: the resolved configuration (:meth:`resolved`)."""
        self._validate_params()
        eps, _ = check_budget(self.epsilon)
        h = int(self.height)
        self._prepare(self._tree_epsilon(eps), h)
        return eps, h

    def _check_params(self) -> None:
        """The rules between parameters that the table (one row each) cannot state, on the
        resolved configuration (set as ``config_``)."""
        cfg = self.resolved()
        self.config_ = cfg
        self._check_combinations(cfg)
        if cfg["hybrid_skipped"] and not getattr(self, "_warned_hybrid", False):
            self._warned_hybrid = True  # check_params runs before reading and again in fit
            warnings.warn(
                "variant 'hybrid' under preset 'auto': no generalized taxonomy level pays for "
                "itself on this taxonomy (each would starve locations the simple tree keeps), so "
                "none is used and the tree is the simple one; give --budget-split LEVEL=SHARE "
                "(budget_split) to force a generalized level",
                TransitSynthWarning,
                stacklevel=4,
            )
        h = int(self.height)
        for name, what in (
            ("level_weights", "one weight"),
            ("false_children", "one number or one"),
        ):
            value = cfg[name]
            if isinstance(value, Sequence | np.ndarray) and len(value) != h:
                raise ConfigError(
                    f"{spell(name)} needs {what} per tree level ({h}), got {len(value)}"
                )
        check_engine(self.engine, self.engine_options)
        self._table_shares()  # length_share against the time model

    def _check_combinations(self, cfg: Mapping[str, Any]) -> None:
        """The rules between parameters that the table (one row each) cannot state."""
        if cfg["budget_split"] and cfg["variant"] == "simple":
            raise ConfigError(
                f"{spell('budget_split')} only applies to {spell('variant', 'hybrid')}"
            )
        markov = spell("completion", "markov")
        if cfg["root_share"] and cfg["completion"] != "markov":
            raise ConfigError(f"{spell('root_share')} (a noisy root count) needs {markov}")
        if cfg["completion_hints"] and (
            cfg["completion"] != "markov" or cfg["threshold_rule"] != "candidates"
        ):
            raise ConfigError(
                f"{spell('completion_hints')} needs {markov} and "
                f"{spell('threshold_rule', 'candidates')}"
            )
        tb, coarse = self.time_bin, self.coarse_time_bin
        if coarse is not None:
            if tb is None or cfg["variant"] != "hybrid":
                raise ConfigError(
                    f"{spell('coarse_time_bin')} needs {spell('time_bin')} and "
                    f"{spell('variant', 'hybrid')}"
                )
            if coarse < tb or coarse % tb:
                raise ConfigError(
                    f"{spell('coarse_time_bin')} must be a multiple of {spell('time_bin')} ({tb}) "
                    f"in {tb}..1440 minutes, got {coarse!r}"
                )

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        data: pd.DataFrame | str | os.PathLike[str] | MappedSource,
        *,
        progress: Callable[[int, int], None] | None = None,
        on_unknown: str | None = None,
        location_column: str | None = None,
        timezone: str | None = None,
    ) -> PrefixTreeSynthesizer:
        """Build the noisy prefix tree of ``data``: taps, long-format sequences (seq_id, pos,
        location[, time]) or trips, as a DataFrame or a CSV/Parquet path (:mod:`prefixtree.inputs`),
        or a :class:`~synth.records.mapped_source.MappedSource` (a file or frame with its input
        mapping, read here after the parameters are checked).

        Each sequence is one privacy unit (one card); it is truncated to ``height`` locations.
        A file may be counted by the engine itself, out of core (DuckDB). Sequences made with
        ``load_sequences(per_day=True)`` (``attrs["privacy_unit"] == "card-day"``) or read with
        ``per_day=True`` are one card-day each: the manifest says so. The keyword arguments are
        deprecated: they are constructor parameters now (a value given here still wins, with a
        DeprecationWarning).
        """
        opts = self._deprecated_fit_args(
            {
                "progress": progress,
                "on_unknown": on_unknown,
                "location_column": location_column,
                "timezone": timezone,
            }
        )
        eps, h = self.check_params()
        check_timezone(opts["timezone"])
        source = data if isinstance(data, MappedSource) else None
        if isinstance(data, MappedSource):  # read here, after the checks (issue 27)
            data = data.read()
        self.__dict__.pop("tree_", None)  # a failed re-fit leaves no half-fitted model
        levels, index, plan, eps_plan, plan_rows, n_bins = self._prepared
        noise = self._noise()
        with get_engine(self.engine, self.engine_options, data) as engine:
            with source.naming() if source is not None else nullcontext():
                counter, unit = self._counter(engine, data, opts, index, h, n_bins)
            try:
                ledger = self._new_ledger(eps, unit)
                root_scale = self._spend_root(ledger, self._tree_epsilon(eps))
                self._spend_tables(ledger, eps, noise, *self._table_inputs(counter))
                record = self._recorder(ledger, opts["progress"], levels, index, plan, eps_plan)
                built = build_noisy_tree_counted(
                    counter,
                    h,
                    index=index,
                    sub_levels=plan,
                    n_bins=n_bins,
                    noise=noise,
                    before_sub_level=record,
                    max_nodes=int(self.max_nodes),
                    end_cells=self.config_["completion"] == "markov",
                    root_scale=root_scale,
                )
            finally:
                counter.close()
        built_levels = sum(s.label.startswith("prefix tree level") for s in ledger.spends)
        if built_levels < h * len(index.levels):  # the builder ran out of nodes
            ledger.stop_early(
                f"no node left to count after level {built_levels // len(index.levels)}"
            )
        if opts["progress"] is not None:
            opts["progress"](h * len(index.levels), h * len(index.levels))
        self.locations_ = index.locations
        self.index_ = index
        self.n_time_bins_ = n_bins
        self.sub_levels_ = pd.DataFrame(plan_rows)
        self.ledger_ = ledger
        self.noise_seeded_ = bool(getattr(noise, "seeded", False))
        self._finish(built, [subs[-1].scale for subs in plan])
        return self

    def _counter(
        self,
        engine: Any,
        data: pd.DataFrame | str | os.PathLike[str],
        opts: dict[str, Any],
        index: TaxonomyIndex,
        h: int,
        n_bins: int,
    ) -> tuple[Any, str]:
        """The engine's prefix counter over the data, and the privacy unit: a file the engine
        reads itself (out of core), else long-format sequences counted in memory."""
        fmt = self.input_format
        if (
            not isinstance(data, pd.DataFrame)
            and opts["timezone"] is None
            and fmt in ("auto", "sequences", "taps")
            and not self.per_day
            and self.resolved_time_model() != "factorised"  # the time tables read the times
        ):
            counter = engine.prefix_counter_from_file(
                data,
                locations=index.locations,
                height=h,
                time_bin_minutes=self._tree_time_bins(),
                on_unknown=opts["on_unknown"],
                location_column=opts["location_column"],
            )
            if counter is not None:
                return counter, "card"
        column = opts["location_column"]
        if (
            isinstance(data, pd.DataFrame)
            and (detect_input_format(data.columns) if fmt == "auto" else fmt) == "sequences"
            and (column in (None, "location") or column not in data.columns)
        ):
            sequences = data  # already long format (seq_id, pos, location): counted as given
        else:
            sequences = read_sequences(
                data,
                input_format=fmt,
                taxonomy=self.taxonomy,
                on_unknown=opts["on_unknown"],
                location_column=opts["location_column"],
                timezone=opts["timezone"],
                per_day=self.per_day,
            )
        assert isinstance(sequences, pd.DataFrame)
        unit = str(sequences.attrs.get("privacy_unit", "card"))
        codes = encode_sequences(sequences, index.locations, h)
        times = (
            None
            if self.time_bin is None
            else self._time_matrix(sequences, len(codes), h, opts["timezone"])
        )
        self._card_times = None if times is None else ((codes >= 0).sum(axis=1), times, codes)
        if self._tree_time_bins() is None:
            times = None
        counter = engine.prefix_counter(codes, times, n_bins=n_bins, n_locations=index.n_locations)
        return counter, unit

    def _new_ledger(self, eps: Fraction, unit: str) -> PrivacyLedger:
        return PrivacyLedger(
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

    def _spend_root(self, ledger: PrivacyLedger, eps: Fraction) -> float | None:
        """The noisy number of sequences' spend (``root_share``), recorded before the noise is
        drawn; its noise scale, or None without one."""
        root_share = exact(self.config_["root_share"], "root_share")
        self._root_scale = None
        if not root_share:
            return None
        root_scale = scale_for(eps * root_share)
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
        return root_scale

    def _recorder(
        self,
        ledger: PrivacyLedger,
        progress: Callable[[int, int], None] | None,
        levels: list[int],
        index: TaxonomyIndex,
        plan: list[list[SubLevel]],
        eps_plan: list[list[Fraction]],
    ) -> Callable[[int, int], None]:
        """The callback the tree builder calls before drawing each sub-level's histogram: it
        records the spend in ``ledger`` (so an overspend stops before any noise) and reports
        progress."""
        names = [
            ("locations" if j == len(levels) else f"taxonomy level {g}")
            for j, g in enumerate(index.levels)
        ]
        n_sub = len(index.levels)
        h = len(plan)
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
                    + (
                        f"; cells in [{plan[level][j].hint}, threshold) kept as completion hints "
                        "(post-processing)"
                        if plan[level][j].hint is not None
                        else ""
                    )
                ),
            )

        return record

    # ------------------------------------------------------------------ release
    def parameters(self) -> dict[str, Any]:
        """The public parameters of the fitted release, as the manifest records them
        (:func:`prefixtree.output.tree_parameters`)."""
        self._check_fitted()
        return tree_parameters(self)

    def public_inputs(self) -> dict[str, str | os.PathLike[str]]:
        """The taxonomy file the tree was planned on, when it is one (fingerprinted)."""
        return taxonomy_inputs(self.taxonomy)

    def _write_data(self, release: ReleaseWriter, format: str) -> dict[str, int]:
        """``sequences.csv|parquet``, streamed chunk by chunk (never held whole)."""
        return write_sequences_file(self.iter_sample(), release, format)
