"""Vectorised construction of the noisy (hybrid-granularity) prefix tree: Procedure 1 of Chen et al.

The private input is an integer matrix ``codes`` (one row per card's sequence, truncated to the tree
height; column i = the location at position i as an index into :attr:`TaxonomyIndex.locations`, -1
pads) and, for trajectories, a matrix of time bins of the same shape. Levels are built one at a
time; inside a level, one *sub-level* per generalized taxonomy level, then the locations (section
4.1).

Every sub-level is one discrete-Laplace histogram over *all* candidate cells: the children, in the
taxonomy, of every surviving cell of the sub-level above (for the first sub-level of a level: every
node of the generalized taxonomy level, crossed with every time bin not before the parent's, under
every surviving tree node), each crossed with the sub-level's time bins inside its cell's (a
generalized sub-level may count coarser bins, which the next sub-level refines). Each card's
sequence falls in at most one cell, so the vector has L1 sensitivity 1. Cells holding data get
explicit noise; the empty ones are never enumerated: how many pass the threshold and their values
come from ``noise.empty_cells_passing`` (Theorem 4.1, exact for the discrete noise), and which
empty cells they are from ``noise.choice`` over the concatenated absent cells of all parents
(mapped back to cells without listing them). Surviving cells are then sorted by (parent, cell), so
neither the tree nor its order tells real cells from passing empty ones.

With ``end_cells``, the locations sub-level of level i also holds one *end-of-sequence* cell per
surviving node of depth i - 1: the number of sequences that end there (exactly i - 1 locations
long). A sequence either continues to a child cell or ends at its prefix node, never both, so the
level's histogram keeps L1 sensitivity 1; every surviving node gets one (no threshold), so the end
cells reveal nothing through their presence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from prefixtree.hints import Hints, concatenate_hints, hint_cells, split_hints
from synth.engines.base import PrefixCounter
from synth.engines.memory import MemoryPrefixCounter
from synth.errors import ConfigError
from synth.privacy import threshold_release
from synth.taxonomy import Taxonomy

__all__ = [
    "BuiltTree",
    "SubLevel",
    "TaxonomyIndex",
    "build_noisy_tree",
    "build_noisy_tree_counted",
]

IntArray = npt.NDArray[np.int64]
NOISE_BATCH = 1 << 22


@dataclass(frozen=True)
class TaxonomyIndex:
    """Integer view of a taxonomy for the generalized levels in use.

    ``locations`` are the leaves in depth-first order (children sorted), so the descendants, at any
    lower level, of any node form a contiguous range. For each level ``levels[j]`` (the generalized
    taxonomy levels in use, top first, then the leaf level), ``ancestor[j][leaf]`` is the index of
    the leaf's node at that level (a leaf shallower than the level stands for itself), ``names[j]``
    the node names, and ``start[j][a]``/``size[j][a]`` the range of level-j nodes under node ``a``
    of the level above (the root for j = 0).
    """

    locations: list[str]
    levels: list[int]
    names: list[list[str]]
    ancestor: list[IntArray]
    start: list[IntArray]
    size: list[IntArray]

    @classmethod
    def build(cls, taxonomy: Taxonomy, generalized_levels: Sequence[int]) -> TaxonomyIndex:
        """Index ``taxonomy`` for the given generalized levels (strictly increasing, >= 1)."""
        leaves = taxonomy.leaves()
        gens = list(generalized_levels)
        paths = [[taxonomy.generalize(leaf, g) for g in gens] + [leaf] for leaf in leaves]
        paths.sort()
        locations = [p[-1] for p in paths]
        names: list[list[str]] = []
        ancestor: list[IntArray] = []
        for j in range(len(gens) + 1):
            col = [p[j] for p in paths]
            seen: dict[str, int] = {}
            anc = np.array([seen.setdefault(x, len(seen)) for x in col], dtype=np.int64)
            names.append(list(seen))
            ancestor.append(anc)
        start: list[IntArray] = []
        size: list[IntArray] = []
        for j, anc in enumerate(ancestor):
            n_nodes = len(names[j])
            if j == 0:
                start.append(np.zeros(1, dtype=np.int64))
                size.append(np.array([n_nodes], dtype=np.int64))
                continue
            above = np.zeros(n_nodes, dtype=np.int64)
            above[anc] = ancestor[j - 1]
            n_above = len(names[j - 1])
            size.append(np.bincount(above, minlength=n_above).astype(np.int64))
            start.append(np.searchsorted(above, np.arange(n_above)).astype(np.int64))
        return cls(locations, [*gens, taxonomy.height], names, ancestor, start, size)

    @property
    def n_locations(self) -> int:
        """Number of locations (leaves)."""
        return len(self.locations)


@dataclass(frozen=True)
class SubLevel:
    """One sub-level of every tree level: the index ``j`` into a :class:`TaxonomyIndex`, the
    discrete Laplace scale of its noise, its integer pass threshold and, for trajectories, the
    width of its time bins in fine bins (1 at the locations; a generalized sub-level may use
    coarser bins, each a whole number of the next sub-level's). ``hint`` (locations sub-level
    only): the cells whose noisy count is in ``[hint, threshold)`` are not nodes but completion
    hints (:attr:`BuiltTree.hints`): the same histogram, thresholded lower (post-processing)."""

    j: int
    scale: float
    threshold: int
    bin_width: int = 1
    hint: int | None = None  # cells in [hint, threshold) are kept as completion hints


@dataclass
class BuiltTree:
    """The noisy tree: non-generalized nodes in breadth-first order (parents first, siblings sorted
    by (time bin, location)); ``parent`` is -1 under the virtual root. ``generalized`` lists the
    surviving generalized cells per level and sub-level: (level, j, parent node, taxonomy node
    index, time bin, noisy count) rows."""

    parent: IntArray
    depth: IntArray
    location: IntArray
    time_bin: IntArray
    noisy: IntArray
    generalized: list[IntArray] = field(default_factory=list)
    end_noisy: IntArray | None = None  # noisy end-of-sequence count (end_cells; 0 at depth h)
    root_noisy: int | None = None  # noisy number of sequences (root_scale)
    #: completion hints (:attr:`SubLevel.hint`): parent node (-1: the root), location, time bin,
    #: noisy count of each pruned cell whose noisy count reached its sub-level's hint threshold
    hints: Hints | None = None


@dataclass
class _Cells:
    """Surviving cells of one sub-level (parents of the next). ``time_bin`` to ``time_end`` is
    the range of fine time bins a child may take: from the previous tree node's bin (times never
    go back) to the end of the cell's own, possibly coarse, bin."""

    tree_node: IntArray  # index, within the current tree level, of the tree node they hang under
    node: IntArray  # taxonomy node index at this sub-level's level
    time_bin: IntArray
    time_end: IntArray
    noisy: IntArray
    exact: IntArray | None = None  # exact counts (0 for passing empty cells), kept for end cells


def _absent_ranks(
    parent_of_present: IntArray,
    rank_of_present: IntArray,
    group_start: IntArray,
    parent: IntArray,
    j: IntArray,
    width: int,
) -> IntArray:
    """Rank of the j-th absent cell of each queried parent, from its sorted present ranks.

    Within a parent with present ranks q_0 < q_1 < ..., the j-th absent rank is j plus the number of
    k with q_k - k <= j; the keys ``parent * width + (q_k - k)`` are non-decreasing globally.
    """
    within = np.arange(parent_of_present.size) - group_start[parent_of_present]
    keys = parent_of_present * width + (rank_of_present - within)
    before = np.searchsorted(keys, parent * width + j, side="right") - group_start[parent]
    return j + before


def _aggregate(flat: IntArray, weight: IntArray) -> tuple[IntArray, IntArray | None, IntArray]:
    """Distinct keys of ``flat``, the key index of each entry (``None``: the keys are ``flat``
    itself, all distinct) and the summed weights. The engines give the cells sorted by (parent,
    time bin, location), so the keys usually come sorted: runs are summed in one pass, without
    np.unique's sort and its copies (the level's cells are the driver's largest arrays)."""
    if flat.size < 2 or bool(np.all(flat[1:] >= flat[:-1])):
        new_run = np.empty(flat.size, dtype=bool)
        new_run[:1] = True
        np.not_equal(flat[1:], flat[:-1], out=new_run[1:])
        if new_run.all():  # counts are only read: the weights themselves serve
            return flat, None, np.asarray(weight, dtype=np.int64)
        starts = np.flatnonzero(new_run)
        inverse = np.cumsum(new_run, dtype=np.int64) - 1
        counts = np.add.reduceat(weight, starts).astype(np.int64) if flat.size else flat[:0]
        return flat[starts], inverse, counts
    keys, inverse = np.unique(flat, return_inverse=True)
    return keys, inverse, np.bincount(inverse, weights=weight).astype(np.int64)


def _sub_level(
    noise: object,
    level: SubLevel,
    index: TaxonomyIndex,
    parents: _Cells,
    n_bins: int,
    cell_parent: IntArray,
    cell_leaf: npt.NDArray[np.integer],
    cell_bin: npt.NDArray[np.integer],
    cell_weight: IntArray,
    *,
    room: int = 1 << 62,
    where: str = "a sub-level",
) -> tuple[_Cells, IntArray, Hints | None]:
    """Noisy counts for every candidate cell under ``parents``; returns the survivors, the new
    parent (survivor index or -1) of each data cell and the hints (:attr:`SubLevel.hint`).

    A parent's candidates are its taxonomy children crossed with the sub-level's time bins (of
    ``bin_width`` fine bins) that meet its range ``[time_bin, time_end)``; a cell's rank within
    its parent is (bin - first bin) x children + child."""
    j = level.j
    start, size = index.start[j], index.size[j]
    anc = index.ancestor[j]
    k = level.bin_width
    n_par = parents.node.size
    par_size = size[parents.node]
    par_start = start[parents.node]
    first_bin = parents.time_bin // k
    n_candidates = par_size * ((parents.time_end - 1) // k - first_bin + 1)
    width = int(n_candidates.max()) + 1 if n_par else 1

    live = cell_parent >= 0
    every = bool(live.all())
    present_parent, present_rank, inverse, counts = _present_cells(
        (anc, par_start, par_size, first_bin),
        k,
        width,
        n_bins,
        (cell_parent, cell_leaf, cell_bin, cell_weight),
        None if every else live,
    )
    n_keys = present_parent.size

    n_present = np.bincount(present_parent, minlength=n_par)
    n_empty = n_candidates - n_present
    noisy_present, passed, fake, hinted = _noisy_cells(
        noise, level, counts, n_empty, (present_parent, present_rank), width
    )
    fake_parent, fake_rank, fake_values = fake
    _check_room(int(passed.sum()) + fake_values.size, room, where)

    surv_parent = np.concatenate([present_parent[passed], fake_parent])
    surv_rank = np.concatenate([present_rank[passed], fake_rank])
    surv_noisy = np.concatenate([noisy_present[passed], fake_values])
    order = np.lexsort((surv_rank, surv_parent))
    surv_parent, surv_rank, surv_noisy = surv_parent[order], surv_rank[order], surv_noisy[order]

    new_cell_parent = _new_cell_parent(passed, order, n_keys, inverse, cell_parent, live, every)

    s_size = par_size[surv_parent]
    node = par_start[surv_parent] + surv_rank % s_size
    cell_bin_start = (first_bin[surv_parent] + surv_rank // s_size) * k
    tbin = np.maximum(parents.time_bin[surv_parent], cell_bin_start)
    tend = np.minimum(parents.time_end[surv_parent], cell_bin_start + k)
    exact = np.concatenate([counts[passed], np.zeros(fake_parent.size, dtype=np.int64)])[order]
    cells = _Cells(parents.tree_node[surv_parent], node, tbin, tend, surv_noisy, exact)
    hints = (
        None
        if hinted is None
        else hint_cells(hinted, (parents.tree_node, parents.time_bin), par_start, par_size, k)
    )
    return cells, new_cell_parent, hints


def _noisy_cells(
    noise: object,
    level: SubLevel,
    counts: IntArray,
    n_empty: IntArray,
    present: tuple[IntArray, IntArray],
    width: int,
) -> tuple[
    IntArray,
    npt.NDArray[np.bool_],
    tuple[IntArray, IntArray, IntArray],
    tuple[IntArray, IntArray, IntArray] | None,
]:
    """The privacy core's noisy-threshold step at the sub-level's lowest threshold (present
    cells, then the empty ones that reach it): noisy present counts, which passed, the passing
    empty cells (parent, rank, value) and the hints (:func:`prefixtree.hints.split_hints`)."""
    present_parent, present_rank = present
    low = level.threshold if level.hint is None else min(level.hint, level.threshold)
    noisy_present, passed, fake_values = threshold_release(
        counts,
        scale=level.scale,
        threshold=low,
        noise=noise,
        n_empty=int(n_empty.sum()),
        batch=NOISE_BATCH,
    )
    fake_parent, fake_rank = _absent_cells(
        noise, n_empty, fake_values.size, present_parent, present_rank, width
    )
    fake: tuple[IntArray, IntArray, IntArray] = (fake_parent, fake_rank, fake_values)
    if low == level.threshold:
        return noisy_present, passed, fake, None
    # the cells in [low, threshold) become hints, not nodes
    hinted, passed, fake = split_hints(
        (present_parent, present_rank, noisy_present, passed), fake, level.threshold
    )
    return noisy_present, passed, fake, hinted


def _absent_cells(
    noise: object,
    n_empty: IntArray,
    n_fake: int,
    present_parent: IntArray,
    present_rank: IntArray,
    width: int,
) -> tuple[IntArray, IntArray]:
    """(parent, rank) of the ``n_fake`` empty cells that passed, drawn uniformly among the
    ``n_empty`` absent candidates of each parent."""
    if not n_fake:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    total_empty = int(n_empty.sum())
    picked = np.asarray(noise.choice(total_empty, n_fake), dtype=np.int64)  # type: ignore[attr-defined]
    ends = np.cumsum(n_empty)
    fake_parent = np.searchsorted(ends, picked, side="right").astype(np.int64)
    local = picked - (ends[fake_parent] - n_empty[fake_parent])
    group_start = np.searchsorted(present_parent, np.arange(n_empty.size)).astype(np.int64)
    fake_rank = _absent_ranks(present_parent, present_rank, group_start, fake_parent, local, width)
    return fake_parent, fake_rank


def _new_cell_parent(
    passed: npt.NDArray[np.bool_],
    order: IntArray,
    n_keys: int,
    inverse: IntArray | None,
    cell_parent: IntArray,
    live: npt.NDArray[np.bool_],
    every: bool,
) -> IntArray:
    """The new parent of each data cell: the survivor index of its present cell (-1 when that
    cell did not pass, or the data cell was already out of the tree)."""
    # survivor index of each present cell (-1 when it did not pass)
    survivor_of_present = np.full(n_keys, -1, dtype=np.int64)
    position = np.empty(order.size, dtype=np.int64)
    position[order] = np.arange(order.size)
    survivor_of_present[np.flatnonzero(passed)] = position[: int(passed.sum())]

    by_cell = survivor_of_present if inverse is None else survivor_of_present[inverse]
    if every:
        new_cell_parent = by_cell
    else:
        new_cell_parent = np.full(cell_parent.size, -1, dtype=np.int64)
        new_cell_parent[live] = by_cell
    return new_cell_parent


def _present_cells(
    parent_info: tuple[IntArray, IntArray, IntArray, IntArray],
    k: int,
    width: int,
    n_bins: int,
    cells: tuple[IntArray, npt.NDArray[np.integer], npt.NDArray[np.integer], IntArray],
    live: npt.NDArray[np.bool_] | None,
) -> tuple[IntArray, IntArray, IntArray | None, IntArray]:
    """The present candidate cells of a sub-level: (parent, rank, inverse of each live data cell,
    exact count). ``parent_info``: (ancestor map, parents' first child, number of children, first
    bin); ``cells``: the data cells' (parent, leaf, bin, weight); ``live``: the data cells still
    in the tree (``None``: all)."""
    anc, par_start, par_size, first_bin = parent_info
    cell_parent, cell_leaf, cell_bin, cell_weight = cells
    every = live is None
    # flat key parent * width + rank of every live cell, built in place: a level can hold tens of
    # millions of cells, and these arrays are the driver's peak
    cp = cell_parent if every else cell_parent[live]
    flat = anc[cell_leaf if every else cell_leaf[live]]
    flat -= par_start[cp]
    if n_bins > 1:
        shift = (cell_bin if every else cell_bin[live]) // k - first_bin[cp]
        shift *= par_size[cp]
        flat += shift
        del shift
    shift = cp * width
    flat += shift
    del shift, cp
    keys, inverse, counts = _aggregate(flat, cell_weight if every else cell_weight[live])
    del flat
    present_parent = keys // width
    present_rank = keys - present_parent * width
    del keys
    return present_parent, present_rank, inverse, counts


def build_noisy_tree(
    codes: npt.NDArray[np.integer],
    time_bins: npt.NDArray[np.integer] | None,
    *,
    index: TaxonomyIndex,
    sub_levels: Sequence[Sequence[SubLevel]],
    n_bins: int,
    noise: object,
    before_sub_level: object,
    max_nodes: int,
    end_cells: bool = False,
) -> BuiltTree:
    """Procedure 1 (BuildNoisyPrefixTree), one level per column of ``codes`` (in memory).

    ``sub_levels[i]`` are the sub-levels (scale, threshold) of tree level i + 1.

    ``before_sub_level(level, sub_level)`` is called before the noise of each sub-level is drawn (it
    records the spend in the ledger, which refuses an overspend before any noise is drawn).
    """
    codes = np.asarray(codes)
    counter = MemoryPrefixCounter(codes, time_bins, n_bins=n_bins, n_locations=index.n_locations)
    return build_noisy_tree_counted(
        counter,
        int(codes.shape[1]),
        index=index,
        sub_levels=sub_levels,
        n_bins=n_bins,
        noise=noise,
        before_sub_level=before_sub_level,
        max_nodes=max_nodes,
        end_cells=end_cells,
    )


def build_noisy_tree_counted(
    counter: PrefixCounter,
    height: int,
    *,
    index: TaxonomyIndex,
    sub_levels: Sequence[Sequence[SubLevel]],
    n_bins: int,
    noise: object,
    before_sub_level: object,
    max_nodes: int,
    end_cells: bool = False,
    root_scale: float | None = None,
) -> BuiltTree:
    """Procedure 1 over any engine's :class:`~synth.engines.PrefixCounter`: the engine counts
    the cells of each level; the noise is drawn here, on the collected counts.

    ``end_cells``: also one end-of-sequence cell per node of depth < ``height``, drawn with the
    locations sub-level of the next level (its exact value is the node's count minus its present
    children's: no engine work).

    ``root_scale``: also draw the root's noisy count (the number of sequences, sensitivity 1) with
    that scale (the caller records its spend first); ``BuiltTree.root_noisy``.

    ``max_nodes`` is checked at each histogram as soon as the number of its survivors is known,
    before they are built: a tree that would outgrow it stops with a :class:`ConfigError`."""
    level_bins = np.zeros(1, dtype=np.int64)
    root_noisy: int | None = None
    built = _Levels()
    level_exact = np.zeros(1, dtype=np.int64)
    level_offset = 0  # global id of the first node of the level being expanded (below the root)
    n_total = 0
    for i in range(height):
        n_level = level_bins.size
        ukey, cell_weight = counter.level_counts(i, n_level)
        cell_leaf = (ukey % index.n_locations).astype(np.int32)
        cell_bin = ((ukey // index.n_locations) % n_bins).astype(np.int32)
        cell_parent = ukey // (index.n_locations * n_bins)
        if i == 0 and root_scale is not None:
            root_noise = noise.discrete_laplace(root_scale, 1)  # type: ignore[attr-defined]
            root_noisy = int(np.asarray(cell_weight).sum()) + int(np.asarray(root_noise)[0])
        parents = _level_roots(level_bins, n_bins)
        level_subs = sub_levels[i]
        if end_cells and i:
            continuing = np.bincount(cell_parent, weights=cell_weight, minlength=n_level)
            end_exact = level_exact - continuing.astype(np.int64)
        for s, sub in enumerate(level_subs):
            before_sub_level(i, s)  # type: ignore[operator]
            if end_cells and i and s == len(level_subs) - 1:
                noise_end = noise.discrete_laplace(sub.scale, n_level)  # type: ignore[attr-defined]
                built.end.append(end_exact + np.asarray(noise_end, dtype=np.int64))
            parents, cell_parent, hints = _sub_level(
                noise,
                sub,
                index,
                parents,
                n_bins,
                cell_parent,
                cell_leaf,
                cell_bin,
                cell_weight,
                room=max_nodes - n_total,
                where=f"level {i + 1}",
            )
            if s < len(level_subs) - 1:
                built.generalized.append(_generalized_rows(parents, i, sub, level_offset))
            if hints is not None:
                node = hints[0] + level_offset if i else np.full(hints[0].size, -1)
                built.hints.append((node, *hints[1:]))
        n_new = parents.node.size
        built.add(parents, i, level_offset)
        level_offset = n_total
        n_total += n_new
        if n_new and i < height - 1:
            counter.advance(i, ukey, cell_parent)
        level_bins = parents.time_bin
        level_exact = parents.exact if parents.exact is not None else level_exact
        if n_new == 0:
            break
    return built.tree(end_cells, root_noisy)


def _level_roots(level_bins: IntArray, n_bins: int) -> _Cells:
    """The nodes of a level as the parents of the next one's cells (whole time range)."""
    n_level = level_bins.size
    return _Cells(
        np.arange(n_level, dtype=np.int64),
        np.zeros(n_level, dtype=np.int64),
        level_bins,
        np.full(n_level, n_bins, dtype=np.int64),
        np.zeros(n_level, dtype=np.int64),
    )


def _generalized_rows(parents: _Cells, i: int, sub: SubLevel, level_offset: int) -> IntArray:
    """The survivors of a generalized sub-level as rows ``level, j, parent, node, time bin,
    noisy count`` (:attr:`BuiltTree.generalized`)."""
    return np.stack(
        [
            np.full(parents.node.size, i + 1),
            np.full(parents.node.size, sub.j),
            parents.tree_node + level_offset if i else np.full(parents.node.size, -1),
            parents.node,
            parents.time_bin // sub.bin_width * sub.bin_width,
            parents.noisy,
        ],
        axis=1,
    ).astype(np.int64)


@dataclass
class _Levels:
    """The nodes of the levels built so far, concatenated into a :class:`BuiltTree` at the end."""

    parent: list[IntArray] = field(default_factory=list)
    depth: list[IntArray] = field(default_factory=list)
    location: list[IntArray] = field(default_factory=list)
    time_bin: list[IntArray] = field(default_factory=list)
    noisy: list[IntArray] = field(default_factory=list)
    generalized: list[IntArray] = field(default_factory=list)
    end: list[IntArray] = field(default_factory=list)
    hints: list[Hints] = field(default_factory=list)

    def add(self, parents: _Cells, i: int, level_offset: int) -> None:
        """The survivors of level ``i + 1`` as nodes (their parents' ids offset to global ids)."""
        n_new = parents.node.size
        self.parent.append(parents.tree_node + level_offset if i else np.full(n_new, -1))
        self.location.append(parents.node)
        self.time_bin.append(parents.time_bin)
        self.noisy.append(parents.noisy)
        self.depth.append(np.full(n_new, i + 1, dtype=np.int64))

    def tree(self, end_cells: bool, root_noisy: int | None) -> BuiltTree:
        cat = np.concatenate
        empty = np.zeros(0, dtype=np.int64)
        n_nodes = sum(a.size for a in self.depth)
        end_noisy = None
        if end_cells:
            end_noisy = np.zeros(n_nodes, dtype=np.int64)
            drawn = cat(self.end) if self.end else empty
            end_noisy[: drawn.size] = drawn
        return BuiltTree(
            parent=cat(self.parent) if self.parent else empty,
            depth=cat(self.depth) if self.depth else empty,
            location=cat(self.location) if self.location else empty,
            time_bin=cat(self.time_bin) if self.time_bin else empty,
            noisy=cat(self.noisy) if self.noisy else empty,
            generalized=self.generalized,
            end_noisy=end_noisy,
            root_noisy=root_noisy,
            hints=concatenate_hints(self.hints),
        )


def _check_room(n_survivors: int, room: int, where: str) -> None:
    """``max_nodes`` checked as soon as a histogram's number of survivors is known."""
    if n_survivors > room:
        raise ConfigError(
            f"the noisy tree would grow past --max-nodes (max_nodes) at {where}: "
            f"{n_survivors} more nodes than the {room} left; too many empty cells pass the "
            "thresholds (use --preset auto, a smaller --height or a larger --epsilon, or raise "
            "--max-nodes)"
        )
