"""Markov completion of the continuation mass a noisy prefix tree pruned (post-processing).

A node v of the consistent tree holds ``c(v)`` sequences; with end-of-sequence cells
(:mod:`prefixtree.tree`, ``end_cells``) ``end(v)`` of them stop at v and its surviving children
hold ``sum c(w)``. The rest, ``r(v) = c(v) - end(v) - sum c(w)``, went on below v through children
whose noisy counts did not pass the threshold. The paper releases them as ending at v (its ``n(v)``
conflates the two), which drops every pattern they carry after v. Here each of them is continued by
a first-order Markov chain read off the tree, in the spirit of the variable-length n-gram model of
Chen et al. (CCS 2012), with one trip-chaining regularity of smart-card data: going back to where
the sequence started.

- States: the location, or (time bin, location) for trajectories; a sequence's *home* is its first
  location.
- Transitions ``a -> b`` weigh ``c(w)`` for every node w in state b under a node in state a;
  ``a -> end`` weighs ``end(v)`` over the nodes v in state a.
- Return home: a move goes (back) home, keeping the drawn time bin, with probability ``rho``
  (:func:`_returns`). When the tree measures the returns from nodes away from home
  (:func:`_return_rate`), they are modelled per sequence: taken out of the chain (one sequence's
  return is, to the others, a move to where it lives: the busy stations) and drawn at the
  measured rate net of the chain's own moves home; at home the chain's repeats stand. Without
  that evidence (every return pruned) the chain keeps every move, and the rate measured at home
  is drawn everywhere.
- Smoothing: from a state with chain mass M, the move comes from the destination marginal with
  probability K / (M + K), K the pass threshold most of the chain's mass met (counts below it are at
  the noise level, and a passing empty cell must not steer every completion through its state).
- The first step leaves v, so it is drawn among the moves (no end), avoiding v's surviving children
  (their mass is already in the tree): a few rejection rounds, then the destination marginal (all
  non-root nodes' counts) likewise; a sequence that finds no admissible step ends at v, as in the
  paper. Later steps follow the chain, end included, until it ends or reaches the height.

Everything here reads only the released noisy tree, so the release keeps the tree's epsilon
(post-processing); the random draws need no secure source.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["complete_sequences"]

IntArray = npt.NDArray[np.int64]

TRIES = 8
SUPPORT = 10.0  # surviving moves (in pass thresholds) needed to measure a return rate
WIDE = 4.0  # moves (in pass thresholds) of a node whose return surely shows if it is common
BATCH = 1 << 20


@dataclass(frozen=True)
class _Chain:
    """Sparse transition table over arbitrary integer contexts: the edges of each context are
    contiguous in ``dst``/``cum``; ``contexts`` (sorted) index ``base``/``total``."""

    contexts: IntArray
    dst: IntArray  # destination state, -1 = end
    cum: npt.NDArray[np.float64]  # running sum of the edge weights
    base: npt.NDArray[np.float64]  # per context: running sum before its first edge
    total: npt.NDArray[np.float64]  # per context: its total weight

    @classmethod
    def build(
        cls, src: IntArray, dst: IntArray, weight: npt.NDArray[np.int64] | npt.NDArray[np.float64]
    ) -> _Chain:
        keep = weight > 0
        src, dst, weight = src[keep], dst[keep], weight[keep]
        order = np.argsort(src, kind="stable")
        src, dst, w = src[order], dst[order], weight[order].astype(np.float64)
        contexts, first = np.unique(src, return_index=True)
        cum = np.cumsum(w)
        total = np.add.reduceat(w, first) if w.size else np.zeros(0)
        return cls(contexts, dst, cum, np.concatenate([[0.0], cum])[first], total)

    def mass(self, context: IntArray) -> npt.NDArray[np.float64]:
        """Total weight of each context (0 when it has no edge)."""
        if not self.contexts.size:
            return np.zeros(context.size)
        pos = np.minimum(np.searchsorted(self.contexts, context), self.contexts.size - 1)
        return np.where(self.contexts[pos] == context, self.total[pos], 0.0)

    def draw(self, context: IntArray, rng: np.random.Generator) -> IntArray:
        """One destination per context (-1 = end; -2 when the context has no edge)."""
        out = np.full(context.size, -2, dtype=np.int64)
        if not self.contexts.size:
            return out
        pos = np.minimum(np.searchsorted(self.contexts, context), self.contexts.size - 1)
        ok = self.contexts[pos] == context
        p = pos[ok]
        target = self.base[p] + rng.random(p.size) * self.total[p]
        idx = np.minimum(np.searchsorted(self.cum, target, side="right"), self.cum.size - 1)
        out[ok] = self.dst[idx]
        return out


def complete_sequences(
    parent: IntArray,
    depth: IntArray,
    state: IntArray,
    counts: IntArray,
    end: IntArray,
    continued: IntArray,
    *,
    height: int,
    n_states: int,
    n_locations: int,
    child_cap: IntArray,
    rng: np.random.Generator,
    root_continued: int = 0,
    hints: tuple[IntArray, IntArray, IntArray, IntArray] | None = None,
) -> tuple[IntArray, IntArray, IntArray]:
    """Complete ``continued[v]`` sequences below every node v (module docstring).

    ``parent``/``depth``/``state``/``counts``/``end`` describe the consistent tree in breadth-first
    order (``state`` = time bin x ``n_locations`` + location); ``end`` is the end-of-sequence count
    of the nodes shallower than ``height``; ``child_cap[d]`` bounds the sequences completed through
    one pruned child of a node of depth d (its pass threshold: a child holding more would have
    survived, up to noise). ``root_continued`` sequences start at the (virtual) root: the
    consistent root count's mass that no surviving depth-1 node holds; their first location is
    drawn from the marginal, then any location (public), never a surviving depth-1 one, at most
    ``child_cap[0]`` per location; they are released as that one location. Returns
    ``(origin, steps, count)``: the distinct completions, each the node it starts from (-1: the
    root), its continuation states (``height`` columns, ``-1`` pads; all ``-1`` when no
    admissible first step was found) and how many sequences took it. ``hints``: (parent node or
    -1 for the root, location, time bin, noisy count) of pruned cells whose noisy count reached a
    hint threshold (:attr:`prefixtree.tree.SubLevel.hint`): a node's first step goes to them, in
    proportion to their noisy counts, for as much of its continued mass as they hold.
    """
    home = state % n_locations  # location of each node's depth-1 ancestor
    for d in range(2, int(depth.max(initial=0)) + 1):
        nodes = np.flatnonzero(depth == d)
        home[nodes] = home[parent[nodes]]
    child = np.flatnonzero(parent >= 0)
    shallow = np.flatnonzero(depth < height)
    cap = np.maximum(np.asarray(child_cap, dtype=np.int64), 1)
    src = np.concatenate([parent[child], shallow])  # edges: node -> child, node -> end
    dst = np.concatenate([state[child], np.full(shallow.size, -1, dtype=np.int64)])
    weight = np.concatenate([counts[child], end[shallow]])
    moves = dst >= 0
    chain_weight, rho = _returns(src, dst, weight, home, state, continued, cap[depth], n_locations)
    walk = _Walk(
        full=_Chain.build(state[src], dst, chain_weight),
        onward=_Chain.build(state[src[moves]], dst[moves], chain_weight[moves]),
        marginal=_Chain.build(np.zeros(parent.size, dtype=np.int64), state, counts),
        marginal_full=_Chain.build(
            np.zeros(parent.size + 1, dtype=np.int64),
            np.append(state, -1),
            np.append(counts, end[shallow].sum()),
        ),
        rho=rho,
        taken=np.sort(parent[child] * n_states + state[child]),
        n_states=n_states,
        n_locations=n_locations,
        height=height,
        cap=cap,
        smooth=_weighted_median(cap[depth[src]], weight),
    )
    root = parent.size  # a virtual node: the root
    if hints is not None and hints[0].size:
        walk = _with_hints(walk, hints, root, np.append(continued, root_continued), n_locations)
    nodes = np.flatnonzero((continued > 0) & (depth < height))
    mass = continued[nodes]
    if root_continued > 0:
        top = np.flatnonzero(depth == 1)
        walk = dataclasses.replace(
            walk, taken=np.sort(np.concatenate([walk.taken, root * n_states + state[top]]))
        )
        nodes = np.append(nodes, root)
        mass = np.append(mass, root_continued)
        state = np.append(state, 0)
        home = np.append(home, 0)
        depth = np.append(depth, 0)
    return _walk_batches(walk, nodes, mass, (state, home, depth), root, n_states, height, rng)


def _with_hints(
    walk: _Walk,
    hints: tuple[IntArray, IntArray, IntArray, IntArray],
    root: int,
    need: IntArray,
    n_locations: int,
) -> _Walk:
    """``walk`` with its first steps drawn from the hints: per node (the root as ``root``), the
    hint cells weighted by their noisy counts, used for the share of the node's continued mass
    (``need``) that their counts hold (at most all of it)."""
    parent, location, time_bin, noisy = hints
    context = np.where(parent < 0, root, parent)
    chain = _Chain.build(context, time_bin * n_locations + location, noisy.astype(np.float64))
    held = chain.mass(np.arange(root + 1))
    share = np.divide(held, need, out=np.zeros(root + 1), where=need > 0)
    return dataclasses.replace(walk, hint_chain=chain, hint_share=np.minimum(share, 1.0))


def _walk_batches(
    walk: _Walk,
    nodes: IntArray,
    mass: IntArray,
    where: tuple[IntArray, IntArray, IntArray],
    root: int,
    n_states: int,
    height: int,
    rng: np.random.Generator,
) -> tuple[IntArray, IntArray, IntArray]:
    """The walks of ``mass[i]`` sequences from each of ``nodes`` (in batches of about
    :data:`BATCH`), as distinct (origin, steps, count); the virtual ``root`` becomes -1."""
    state, home, depth = where
    batch = (np.cumsum(mass) - mass) // BATCH
    origins, steps, counts_out = [], [], []
    for lo, hi in _runs(batch):
        origin = np.repeat(nodes[lo:hi], mass[lo:hi])
        walked = walk.run(origin, state, home, depth, rng)
        rows, count = _distinct_rows(np.column_stack([origin, walked]), n_states)
        origins.append(rows[:, 0])
        steps.append(rows[:, 1:])
        counts_out.append(count.astype(np.int64))
    width = height
    if not origins:
        empty = np.zeros(0, dtype=np.int64)
        return empty, np.zeros((0, width), dtype=np.int64), empty
    origin_all = np.concatenate(origins)
    origin_all[origin_all == root] = -1
    return origin_all, np.concatenate(steps), np.concatenate(counts_out)


def _returns(
    src: IntArray,
    dst: IntArray,
    weight: IntArray,
    home: IntArray,
    state: IntArray,
    continued: IntArray,
    node_cap: IntArray,
    n_locations: int,
) -> tuple[npt.NDArray[np.float64], tuple[float, float]]:
    """The chain's edge weights and the return rates (at home, away).

    When the tree measures the returns from nodes away from home (:func:`_return_rate`), they are
    modelled per sequence: taken out of the chain (:func:`_without_returns`), and drawn at the
    away rate net of the moves home the chain makes by itself (:func:`_home_share`); at home a
    move "home" is a repeat, left to the chain. Otherwise the tree cannot tell a return from a
    busy move: the chain keeps every move and both kinds draw the at-home rate (0 without
    evidence either)."""
    moves = dst >= 0
    m_src, m_dst = src[moves], dst[moves]
    unit = weight[moves] / node_cap[m_src]  # in pass thresholds of the level below the node
    spread = continued / node_cap
    away = state % n_locations != home
    raw = weight.astype(np.float64)
    if _return_rate(m_src, m_dst, unit, home, spread, n_locations, away) is None:
        at_home = _return_rate(m_src, m_dst, unit, home, spread, n_locations, ~away) or 0.0
        return raw, (at_home, at_home)
    back = (dst % n_locations == home[src]) & away[src] & moves
    chain = _without_returns(state[src], dst, raw, back)
    share = _home_share(state[m_src], m_dst, chain[moves], state, home, n_locations)
    rate = _return_rate(m_src, m_dst, unit, home, spread, n_locations, away, share)
    return chain, (0.0, rate or 0.0)


def _without_returns(
    context: IntArray,
    dst: IntArray,
    weight: npt.NDArray[np.float64],
    back: npt.NDArray[np.bool_],
) -> npt.NDArray[np.float64]:
    """Edge weights for the chain with the ``back`` moves (returns home) taken out: they are drawn
    at the return rate, and a return of one sequence is, to another, a move to someone else's
    home (the busy stations). Each context's other moves are scaled up to its whole move mass, so
    its share of ending stays; a context whose moves are all returns keeps them."""
    move = dst >= 0
    n = int(context.max(initial=-1)) + 1
    total = np.bincount(context[move], weights=weight[move], minlength=n)
    kept = np.bincount(context[move & ~back], weights=weight[move & ~back], minlength=n)
    scale = np.divide(total, kept, out=np.ones(n), where=kept > 0)
    out = weight * np.where(move, scale[context], 1.0)
    out[move & back & (kept[context] > 0)] = 0.0
    return out


def _home_share(
    context: IntArray,
    dst: IntArray,
    weight: npt.NDArray[np.float64],
    state: IntArray,
    home: IntArray,
    n_locations: int,
) -> npt.NDArray[np.float64]:
    """Per node, the chain's probability (moves only) of a move from its state to its home
    location: the returns the chain makes by itself, on top of which the return rate draws."""
    keys, inverse = np.unique(context * n_locations + dst % n_locations, return_inverse=True)
    sums = np.bincount(inverse, weights=weight)
    total = np.bincount(context, weights=weight, minlength=int(state.max(initial=0)) + 1)
    if not keys.size:
        return np.zeros(state.size)
    query = state * n_locations + home
    pos = np.minimum(np.searchsorted(keys, query), keys.size - 1)
    hit = np.where(keys[pos] == query, sums[pos], 0.0)
    return np.divide(hit, total[state], out=np.zeros(state.size), where=total[state] > 0)


def _return_rate(
    src: IntArray,
    dst: IntArray,
    weight: npt.NDArray[np.float64],
    home: IntArray,
    continued: npt.NDArray[np.float64],
    n_locations: int,
    kind: npt.NDArray[np.bool_],
    chain_home: npt.NDArray[np.float64] | None = None,
) -> float | None:
    """Share of the moves of the ``kind`` nodes that go (back) home; ``None`` without evidence.

    ``src``/``dst``/``weight`` are the surviving moves, masses in pass thresholds of the level
    below each node; ``continued`` the moves completed below each node. The first of these node
    sets whose surviving moves reach ``SUPPORT`` is used, over its surviving and completed moves:
    1. the nodes with at least ``WIDE`` thresholds of moves: a return of a fair share of them
       surely passes, and the nodes are chosen by their own mass, not by their return's (choosing
       them by a surviving return would favour the returns that noise pushed up);
    2. the nodes whose return survived: a return that was pruned hides among the completed moves,
       so the other nodes would bias the rate down;
    3. all the nodes with surviving moves (few returns: a low rate is what the tree shows).
    With ``chain_home`` (per node, the chain's own probability of a move home) the rate is net of
    it: the share ``r`` such that ``r + (1 - r) * chain_home`` matches."""
    back = dst % n_locations == home[src]
    seen = np.zeros(home.size, dtype=bool)
    seen[src[back]] = True
    moved = np.zeros(home.size, dtype=bool)
    moved[src] = True
    mass = np.bincount(src, weights=weight, minlength=home.size) + continued
    for nodes in (kind & moved & (mass >= WIDE), kind & seen, kind & moved):
        if float(weight[nodes[src]].sum()) < SUPPORT:
            continue
        total = float(mass[nodes].sum())
        rate = float(weight[back & nodes[src]].sum()) / total
        if chain_home is None:
            return rate
        by_chain = float((chain_home[nodes] * mass[nodes]).sum()) / total
        return max(0.0, (rate - by_chain) / (1.0 - by_chain)) if by_chain < 1 else 0.0
    return None


def _distinct_rows(rows: IntArray, n_states: int) -> tuple[IntArray, IntArray]:
    """Distinct rows (column 0 a node, then states or -1) and their counts, in sorted order: the
    state columns are packed into as few int64 keys as fit (faster than ``np.unique(axis=0)``)."""
    radix = n_states + 1
    per_key = max(1, int(62 // np.log2(radix + 1)))
    keys = [rows[:, 0]]
    for lo in range(1, rows.shape[1], per_key):
        packed = np.zeros(rows.shape[0], dtype=np.int64)
        for col in range(lo, min(lo + per_key, rows.shape[1])):
            packed = packed * radix + rows[:, col] + 1
        keys.append(packed)
    order = np.lexsort(keys[::-1])
    ordered = [k[order] for k in keys]
    new = np.zeros(order.size, dtype=bool)
    new[:1] = True
    for k in ordered:
        new[1:] |= k[1:] != k[:-1]
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, order.size))
    return rows[order[starts]], counts.astype(np.int64)


def _weighted_median(values: IntArray, weight: IntArray) -> float:
    """The value below which half the weight lies (1 without weight)."""
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weight[order])
    if not cum.size or cum[-1] <= 0:
        return 1.0
    return float(values[order][np.searchsorted(cum, cum[-1] / 2)])


def _runs(labels: IntArray) -> list[tuple[int, int]]:
    """(start, stop) of each run of equal values of a sorted array."""
    cuts = np.flatnonzero(np.diff(labels)) + 1
    edges = [0, *cuts.tolist(), labels.size]
    return [(a, b) for a, b in itertools.pairwise(edges) if b > a]


@dataclass(frozen=True)
class _Walk:
    full: _Chain  # transitions by last state, end included (returns out when rho models them)
    onward: _Chain  # the same without the end transitions
    marginal: _Chain  # one context (0): the states of all non-root nodes
    marginal_full: _Chain  # the same and the end
    rho: tuple[float, float]  # share of the moves that go home: from home, from away
    taken: IntArray  # sorted parent * n_states + state of every surviving child
    n_states: int
    n_locations: int
    height: int
    cap: IntArray  # per depth: at most this many first steps through one pruned child
    smooth: float  # pseudo-count of the marginal: the pass threshold most of the chain's mass met
    hint_chain: _Chain | None = None  # first steps by node: the hint cells (:func:`_with_hints`)
    hint_share: npt.NDArray[np.float64] | None = None  # per node: share of first steps by hints

    def _next(
        self, chain: _Chain, home: IntArray, cur: IntArray, rng: np.random.Generator
    ) -> IntArray:
        """A move of ``chain`` from the current state, sent (back) home, keeping its time bin, with
        probability ``rho`` (at home or away)."""
        pick = chain.draw(cur, rng)
        prior = self.marginal_full if chain is self.full else self.marginal
        mass = chain.mass(cur)
        use = rng.random(cur.size) * (mass + self.smooth) >= mass
        alt = prior.draw(np.zeros(int(use.sum()), dtype=np.int64), rng)
        ok = (alt < 0) | (alt // self.n_locations >= cur[use] // self.n_locations)
        pick[np.flatnonzero(use)[ok]] = alt[ok]
        rate = np.where(cur % self.n_locations == home, self.rho[0], self.rho[1])
        back = (pick >= 0) & (rng.random(cur.size) < rate)
        pick[back] += home[back] - pick[back] % self.n_locations
        return pick

    def _admissible_first(
        self, origin: IntArray, cur: IntArray, pick: IntArray, marginal: bool
    ) -> npt.NDArray[np.bool_]:
        ok = pick >= 0
        if marginal:  # the marginal ignores the current state: time bins must not go back
            ok &= pick // self.n_locations >= cur // self.n_locations
        if self.taken.size:
            key = origin * self.n_states + np.maximum(pick, 0)
            pos = np.minimum(np.searchsorted(self.taken, key), self.taken.size - 1)
            ok &= self.taken[pos] != key
        return ok

    def _within_cap(
        self, used: tuple[IntArray, IntArray], keys: IntArray, cap: IntArray
    ) -> tuple[npt.NDArray[np.bool_], tuple[IntArray, IntArray]]:
        """Which new first steps (``keys`` = node x n_states + child) keep every (node, child) at
        most ``cap``, after the ``used`` ones (sorted distinct keys, their counts); and the updated
        ``used``."""
        ukeys, ucounts = used
        pos = np.minimum(np.searchsorted(ukeys, keys), max(ukeys.size - 1, 0))
        before = np.where(ukeys[pos] == keys, ucounts[pos], 0) if ukeys.size else 0
        order = np.argsort(keys, kind="stable")
        ranked = keys[order]
        rank = np.empty(keys.size, dtype=np.int64)
        rank[order] = np.arange(keys.size) - np.searchsorted(ranked, ranked)
        ok = before + rank < cap
        merged, inverse = np.unique(np.concatenate([ukeys, keys[ok]]), return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate([ucounts, np.ones(int(ok.sum()))]))
        return ok, (merged, counts.astype(np.int64))

    def run(
        self,
        origin: IntArray,
        state: IntArray,
        home_of: IntArray,
        depth: IntArray,
        rng: np.random.Generator,
    ) -> IntArray:
        """Continuation states of one sequence per entry of ``origin`` (-1 pads); an origin of
        depth 0 is the root: its first step comes from the marginal, then any state."""
        steps = np.full((origin.size, self.height), -1, dtype=np.int64)
        cur = state[origin]
        home = home_of[origin]
        at_root = depth[origin] == 0
        used = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        for stage in ("hint", "chain", "marginal", "any"):
            todo = np.flatnonzero((steps[:, 0] < 0) & (at_root if stage == "any" else True))
            if stage == "hint":
                if self.hint_chain is None or self.hint_share is None:
                    continue
                todo = todo[rng.random(todo.size) < self.hint_share[origin[todo]]]
            if stage == "chain":
                todo = todo[~at_root[todo]]
            for _ in range(TRIES):
                if not todo.size:
                    break
                if stage == "marginal":
                    pick = self.marginal.draw(np.zeros_like(todo), rng)
                elif stage == "any":
                    pick = rng.integers(0, self.n_states, todo.size)
                elif stage == "hint":
                    pick = self.hint_chain.draw(origin[todo], rng)  # type: ignore[union-attr]
                else:
                    pick = self._next(self.onward, home[todo], cur[todo], rng)
                ok = self._admissible_first(origin[todo], cur[todo], pick, stage != "chain")
                rows = todo[ok]
                ok[ok], used = self._within_cap(
                    used, origin[rows] * self.n_states + pick[ok], self.cap[depth[origin[rows]]]
                )
                steps[todo[ok], 0] = pick[ok]
                todo = todo[~ok]
        home = np.where(at_root & (steps[:, 0] >= 0), steps[:, 0] % self.n_locations, home)
        # a root completion is its first location only: the tree holds nothing of where the
        # sequences pruned at the first level went next (continuing them with the chain from a
        # state it barely saw draws the busy stations' moves, which distorts the frequent patterns)
        alive = np.flatnonzero((steps[:, 0] >= 0) & ~at_root)
        length = depth[origin] + 1
        col = 0
        while True:
            alive = alive[length[alive] < self.height]
            if not alive.size:
                return steps
            nxt = self._next(self.full, home[alive], steps[alive, col], rng)
            moved = nxt >= 0
            alive = alive[moved]
            steps[alive, col + 1] = nxt[moved]
            length[alive] += 1
            col += 1
