"""Location taxonomies: rooted trees whose leaves are locations (docs/design.md section 2).

A :class:`Taxonomy` wraps a :class:`networkx.DiGraph` with edges ``parent -> child``. Leaves are
the locations that appear in records (stops, stations, branches); inner nodes generalise them
(lines, routes, modes); the root sits at level 0. Leaves may sit at different depths. The taxonomy
is a public input, never read off private data (the hybrid-granularity prefix tree of Chen et al.
2012, section 4.1, relies on that).

Node naming: leaves keep the raw location ids (strings). Inner nodes built by the constructors below
carry a prefix so that they can never collide with a location id: ``route:<route_id>`` and
``mode:<name>`` (GTFS), ``<prefix>:<value>`` (:meth:`Taxonomy.from_frame`, e.g. ``line:32``,
``mode:SUB``), ``fanout:<k>:<i>`` (fan-out); the root is ``root``. A CSV edge list keeps its names
as given.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError, TransitSynthWarning
from synth.gtfs import check_route_rule, route_assignment, route_trip_counts
from synth.io import id_strings, read_table, table_format

__all__ = ["GTFS_MODES", "ROOT", "Taxonomy", "natural_sorted"]

ROOT = "root"

#: GTFS ``route_type`` -> mode name (basic types, then the extended Hierarchical Vehicle Types by
#: hundreds). Unknown codes become ``type_<code>``.
GTFS_MODES: dict[int, str] = {
    0: "tram",
    1: "subway",
    2: "rail",
    3: "bus",
    4: "ferry",
    5: "cable_tram",
    6: "aerial_lift",
    7: "funicular",
    11: "trolleybus",
    12: "monorail",
}
_EXTENDED_MODES: dict[int, str] = {
    1: "rail",
    2: "coach",
    4: "subway",
    5: "subway",
    6: "subway",
    7: "bus",
    8: "trolleybus",
    9: "tram",
    10: "ferry",
    12: "ferry",
    13: "aerial_lift",
    14: "funicular",
    15: "taxi",
}

_INT_RE = re.compile(r"-?\d+")


def natural_sorted(values: Iterable[str]) -> list[str]:
    """Sort ids numerically when every id is an integer literal, else lexicographically."""
    vals = list(values)
    if vals and all(_INT_RE.fullmatch(v) for v in vals):
        return sorted(vals, key=lambda v: (int(v), v))
    return sorted(vals)


def taxonomy_note(taxonomy: Taxonomy | None) -> dict[str, Any]:
    """The manifest entries of how the taxonomy was built: an implicit root, and a GTFS
    taxonomy's route rule with the routes it left without stops (``{}`` for none of these)."""
    if taxonomy is None:
        return {}
    note: dict[str, Any] = {}
    if taxonomy.gtfs_route_rule is not None:
        note["gtfs_route_rule"] = taxonomy.gtfs_route_rule
        note["gtfs_routes_without_stops"] = list(taxonomy.gtfs_routes_without_stops)
    if taxonomy.implicit_root is None:
        return note
    tops = taxonomy.implicit_root
    shown = ", ".join(tops[:10]) + (f" and {len(tops) - 10} more" if len(tops) > 10 else "")
    note["taxonomy_root"] = (
        f"implicit root '{taxonomy.root}' added above the {len(tops)} tops of "
        f"the taxonomy ({shown})"
    )
    return note


def _gtfs_mode(route_type: int) -> str:
    if route_type in GTFS_MODES:
        return GTFS_MODES[route_type]
    return _EXTENDED_MODES.get(route_type // 100, f"type_{route_type}")


class Taxonomy:
    """A rooted location tree with the queries the generators need.

    Build it with a constructor (:meth:`from_csv`, :meth:`from_gtfs`, :meth:`from_fanout`,
    :meth:`from_frame`, :meth:`from_sube_metadata`, :meth:`from_edges`, :meth:`from_spec`); they
    validate that the edges form one tree: no cycles, one parent per node, one root (several tops
    are joined under an implicit root, named by :attr:`implicit_root`), and raise
    :class:`~synth.errors.InputError` naming the offending node (and source row when there is one).
    """

    #: built from a GTFS zip's parent stations (:meth:`from_gtfs` ``use_stations``)
    gtfs_stations: bool = False

    def __init__(self, graph: nx.DiGraph, *, source: str = "taxonomy") -> None:
        self.source = source
        self._graph = graph
        roots = sorted(str(n) for n, d in graph.in_degree() if d == 0)
        if graph.number_of_nodes() == 0:
            raise InputError(f"{source}: the taxonomy is empty")
        bad = [str(n) for n, d in graph.in_degree() if d > 1]
        if bad:
            parents = sorted(str(p) for p in graph.predecessors(bad[0]))
            raise InputError(f"{source}: node '{bad[0]}' has several parents: {', '.join(parents)}")
        if not roots:
            raise InputError(f"{source}: the edges form a cycle (no root)")
        #: the tops of a forest (e.g. three modes) joined under an added root, else None
        self.implicit_root: list[str] | None = None
        #: a GTFS taxonomy's route rule and the routes left without stops (:meth:`from_gtfs`)
        self.gtfs_route_rule: str | None = None
        self.gtfs_routes_without_stops: tuple[str, ...] = ()
        if len(roots) > 1:  # a forest: one implicit root above its tops (named in manifests)
            graph = graph.copy()
            name = ROOT if ROOT not in graph else f"{ROOT}:implicit"
            graph.add_edges_from((name, r) for r in roots)
            self._graph = graph
            self.implicit_root = roots
            roots = [name]
        self.root: str = roots[0]
        depth = nx.single_source_shortest_path_length(graph, self.root)
        if len(depth) != graph.number_of_nodes():
            stray = sorted(str(n) for n in graph.nodes if n not in depth)
            raise InputError(f"{source}: cycle through node '{stray[0]}' (not reachable from root)")
        self._depth: dict[str, int] = {str(k): int(v) for k, v in depth.items()}
        self._parent: dict[str, str | None] = {self.root: None}
        self._children: dict[str, list[str]] = {}
        for node in graph.nodes:
            kids = sorted(str(c) for c in graph.successors(node))
            self._children[str(node)] = kids
            for kid in kids:
                self._parent[kid] = str(node)
        self._leaves: list[str] = sorted(n for n, kids in self._children.items() if not kids)
        self._leaf_set = frozenset(self._leaves)
        self._gen_cache: dict[int, dict[str, str]] = {}

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_edges(
        cls, edges: Iterable[tuple[str, str]], *, source: str = "edges", rows: Sequence[int] = ()
    ) -> Taxonomy:
        """Build from ``(child, parent)`` pairs. Identical duplicate edges are merged.

        ``rows`` (optional, same length as ``edges``) are the 1-based source rows used in messages.
        """
        pairs = [(str(c), str(p)) for c, p in edges]
        if not pairs:
            raise InputError(f"{source}: no edges (empty taxonomy)")
        seen: dict[str, tuple[str, int]] = {}
        graph = nx.DiGraph()
        for i, (child, parent) in enumerate(pairs):
            row = rows[i] if rows else i + 1
            if child == parent:
                raise InputError(f"{source}: row {row}: node '{child}' is its own parent (cycle)")
            if child in seen and seen[child][0] != parent:
                prev_parent, prev_row = seen[child]
                raise InputError(
                    f"{source}: row {row}: node '{child}' has two parents: '{prev_parent}' "
                    f"(row {prev_row}) and '{parent}'"
                )
            seen[child] = (parent, row)
            graph.add_edge(parent, child)
        return cls(graph, source=source)

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str]) -> Taxonomy:
        """Read a CSV (or Parquet) edge list with columns ``child,parent`` (any depth)."""
        df = read_table(path, dtype={"child": str, "parent": str})
        src = str(path)
        missing = [c for c in ("child", "parent") if c not in df.columns]
        if missing:
            raise InputError(
                f"{src}: missing column(s) {', '.join(repr(c) for c in missing)} "
                f"(an edge list needs 'child,parent'; found: {', '.join(map(str, df.columns))})"
            )
        if df.empty:
            raise InputError(f"{src}: no rows (empty taxonomy)")
        for col in ("child", "parent"):
            vals = id_strings(df[col])
            empty = vals.isna() | (vals == "")
            if empty.any():
                row = int(np.flatnonzero(empty.to_numpy())[0]) + 1
                raise InputError(f"{src}: column '{col}', row {row}: empty node id")
            df[col] = vals
        return cls.from_edges(
            zip(df["child"].tolist(), df["parent"].tolist(), strict=True),
            source=src,
            rows=range(1, len(df) + 1),
        )

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        levels: Sequence[str],
        *,
        prefixes: Sequence[str] | None = None,
        multiple_parents: str = "error",
        source: str = "frame",
    ) -> Taxonomy:
        """Build leaf -> ... -> root from columns, finest first (e.g. ``["id_ramal", "id_linea"]``).

        Leaves keep the raw values of ``levels[0]``; the value ``v`` of an inner column becomes node
        ``f"{prefix}:{v}"`` (``prefixes`` default to the column names, one per inner level), and a
        root ``root`` sits above the last column. A node seen with several parents raises InputError
        (``multiple_parents="error"``) or, with ``"lowest"``, goes under the lowest parent value in
        :func:`natural_sorted` order (numeric when all are integers) -- a public, documented rule.
        """
        if len(levels) < 1:
            raise ConfigError("from_frame needs at least one level column")
        if multiple_parents not in ("error", "lowest"):
            raise ConfigError("multiple_parents must be 'error' or 'lowest'")
        inner = list(levels[1:])
        pref = list(prefixes) if prefixes is not None else inner
        if len(pref) != len(inner):
            raise ConfigError(f"prefixes needs {len(inner)} entries, one per inner level")
        missing = [c for c in levels if c not in df.columns]
        if missing:
            raise InputError(
                f"{source}: missing column(s) {', '.join(repr(c) for c in missing)} "
                f"(found: {', '.join(map(str, df.columns))})"
            )
        if df.empty:
            raise InputError(f"{source}: no rows (empty taxonomy)")
        cols: list[pd.Series] = []
        for col in levels:
            vals = id_strings(df[col])
            empty = vals.isna() | (vals == "")
            if empty.any():
                row = int(np.flatnonzero(empty.to_numpy())[0]) + 1
                raise InputError(f"{source}: column '{col}', row {row}: empty value")
            cols.append(vals.reset_index(drop=True))
        names = [cols[0]] + [p + ":" + c for p, c in zip(pref, cols[1:], strict=True)]
        names.append(pd.Series([ROOT] * len(df), dtype=str))
        edges: list[tuple[str, str]] = []
        active: set[str] | None = None  # nodes that kept at least one child on the level below
        for lvl in range(len(names) - 1):
            raw = cols[lvl + 1] if lvl + 1 < len(cols) else names[lvl + 1]
            pair = pd.DataFrame({"child": names[lvl], "parent": names[lvl + 1], "raw": raw})
            if active is not None:
                pair = pair[pair["child"].isin(active)]
            pair = pair.drop_duplicates(["child", "parent"])
            several = pair.groupby("child")["parent"].transform("size") > 1
            if several.any() and multiple_parents == "error":
                child = pair.loc[several, "child"].iloc[0]
                parents = sorted(pair.loc[pair["child"] == child, "parent"])
                raise InputError(
                    f"{source}: '{child}' ({levels[lvl]}) has several parents: "
                    f"{', '.join(parents)} (pass multiple_parents='lowest' to keep the lowest)"
                )
            kept = list(zip(pair.loc[~several, "child"], pair.loc[~several, "parent"], strict=True))
            for child, grp in pair[several].groupby("child", sort=False):
                best = natural_sorted(grp["raw"].tolist())[0]
                kept.append((str(child), str(grp.loc[grp["raw"] == best, "parent"].iloc[0])))
            edges.extend(kept)
            active = {p for _, p in kept}
        return cls.from_edges(edges, source=source)

    @classmethod
    def from_sube_metadata(
        cls, path: str | os.PathLike[str], *, location: str = "id_ramal"
    ) -> Taxonomy:
        """SUBE (Buenos Aires) taxonomy from ``metadata_amba_2019_m1.csv``.

        ``location="id_ramal"``: branch -> ``line:<id_linea>`` -> ``mode:<modo>`` -> root;
        ``location="id_linea"``: line -> ``mode:<modo>`` -> root (leaves are then line ids, matching
        ``--location-column id_linea``). A branch listed under several lines (branch 392 is under
        lines 392 and 2512 in the 2019 metadata) goes under the lowest line id.
        """
        df = read_table(path, dtype={c: str for c in ("id_ramal", "id_linea", "modo")})
        if location == "id_ramal":
            return cls.from_frame(
                df,
                ["id_ramal", "id_linea", "modo"],
                prefixes=["line", "mode"],
                multiple_parents="lowest",
                source=str(path),
            )
        if location == "id_linea":
            return cls.from_frame(
                df,
                ["id_linea", "modo"],
                prefixes=["mode"],
                multiple_parents="lowest",
                source=str(path),
            )
        raise ConfigError("location must be 'id_ramal' (branches) or 'id_linea' (lines)")

    @classmethod
    def from_gtfs(
        cls,
        zip_path: str | os.PathLike[str],
        *,
        use_stations: bool = False,
        route_rule: str | None = None,
    ) -> Taxonomy:
        """stop -> ``route:<route_id>`` -> ``mode:<name>`` -> root from a GTFS zip.

        Leaves are the stops that at least one scheduled trip serves (``stop_times.txt``; stops no
        trip serves are left out). The mode comes from ``route_type`` (:data:`GTFS_MODES`, extended
        types by hundreds). Parent rule: ``route_rule`` (:data:`synth.gtfs.ROUTE_RULES`, default
        ``most-trips``: the route with the most scheduled trips through the stop, ties by the
        smallest ``route_id``, then every route left without stops takes its busiest stop whose
        route keeps another one; :mod:`synth.gtfs` states the rules). Routes serving stops but
        left without any are named in a warning.

        Stations vs platforms: by default ``parent_station`` is ignored and every boarding point
        (platform / stop, GTFS ``location_type`` 0) is a leaf, because that is the id taps carry.
        With ``use_stations=True`` each stop with a ``parent_station`` is replaced by its station id
        before counting, so leaves are stations (trips through any of their platforms count); a
        feed where no stop has a parent station is refused (InputError).
        """
        src = str(zip_path)
        rule = check_route_rule(route_rule)
        counts = route_trip_counts(Path(zip_path), use_stations=use_stations)
        routes = counts.attrs["routes"]
        owner, empty = route_assignment(counts, rule, list(pd.unique(routes["route_id"])))
        if empty:
            shown = ", ".join(empty[:20]) + (
                f" and {len(empty) - 20} more" if len(empty) > 20 else ""
            )
            warnings.warn(
                f"{src}: {len(empty)} route(s) serving stops get none under the GTFS route rule "
                f"'{rule}' (each of their stops went to another route): {shown}",
                TransitSynthWarning,
                stacklevel=2,
            )
        rtype = pd.to_numeric(routes["route_type"], errors="coerce")
        if rtype.isna().any():
            row = int(np.flatnonzero(rtype.isna().to_numpy())[0]) + 1
            raise InputError(f"{src}: routes.txt, column 'route_type', row {row}: not an integer")
        modes = pd.Series([_gtfs_mode(int(t)) for t in rtype], index=routes["route_id"].to_numpy())
        modes = modes[~modes.index.duplicated()]
        used = sorted(set(owner))
        edges = list(zip(owner.index, "route:" + owner, strict=True))
        edges += [(f"route:{r}", f"mode:{modes[r]}") for r in used]
        edges += [(f"mode:{m}", ROOT) for m in sorted({modes[r] for r in used})]
        tax = cls.from_edges(edges, source=src)
        tax.gtfs_stations = use_stations  # recorded in manifests (public configuration)
        tax.gtfs_route_rule, tax.gtfs_routes_without_stops = rule, tuple(empty)
        return tax

    @classmethod
    def from_fanout(cls, locations: Sequence[str], fanout: int) -> Taxonomy:
        """Balanced synthetic taxonomy: groups of ``fanout`` consecutive sorted ids, recursively.

        Locations are ordered by :func:`natural_sorted`; each run of ``fanout`` consecutive ids
        gets a parent ``fanout:1:<i>``, those parents are grouped the same way into
        ``fanout:2:<i>``, and so on until at most ``fanout`` nodes remain, which go under
        ``root``. ``locations`` must be a public list (never derived from private records).
        """
        if isinstance(fanout, bool) or not isinstance(fanout, int | np.integer) or fanout < 2:
            raise ConfigError(f"fan-out must be an integer >= 2, got {fanout!r}")
        locs = natural_sorted(dict.fromkeys(str(x) for x in locations))
        if not locs:
            raise ConfigError("fan-out taxonomy needs a non-empty public list of locations")
        edges: list[tuple[str, str]] = []
        current, k = locs, 1
        while len(current) > fanout:
            parents = []
            for i in range(0, len(current), fanout):
                name = f"fanout:{k}:{i // fanout}"
                edges.extend((c, name) for c in current[i : i + fanout])
                parents.append(name)
            current, k = parents, k + 1
        edges.extend((c, ROOT) for c in current)
        return cls.from_edges(edges, source=f"fanout:{fanout}")

    @classmethod
    def from_spec(
        cls,
        spec: str,
        *,
        locations: Sequence[str] | None = None,
        use_stations: bool = False,
        route_rule: str | None = None,
    ) -> Taxonomy:
        """From a CLI/config spec: a ``.csv``/``.parquet`` edge list, GTFS ``.zip`` or ``fanout:N``.

        ``fanout:N`` needs the public ``locations`` list (ConfigError without it);
        ``use_stations``: a GTFS zip's parent stations as the leaves, ``route_rule``: the parent
        route of a stop on several routes (:meth:`from_gtfs`; both only for a GTFS zip).
        """
        spec = str(spec).strip()
        if use_stations and not spec.lower().endswith(".zip"):
            raise ConfigError(
                f"GTFS parent stations (--gtfs-stations, gtfs_stations in a config) need a GTFS "
                f".zip taxonomy, got {spec!r}"
            )
        if route_rule is not None and not spec.lower().endswith(".zip"):
            raise ConfigError(
                f"a GTFS route rule (--gtfs-route-rule, gtfs_route_rule in a config) needs a "
                f"GTFS .zip taxonomy, got {spec!r}"
            )
        if spec.lower().startswith("fanout:"):
            value = spec.split(":", 1)[1]
            if not _INT_RE.fullmatch(value.strip()):
                raise ConfigError(f"taxonomy spec {spec!r}: fan-out must be an integer")
            if locations is None:
                raise ConfigError(
                    f"taxonomy spec {spec!r} needs the public list of locations "
                    "(it is never derived from the private data)"
                )
            return cls.from_fanout(locations, int(value))
        if spec.lower().endswith(".zip"):
            if not Path(spec).is_file():
                raise InputError(f"{spec}: file not found")
            return cls.from_gtfs(spec, use_stations=use_stations, route_rule=route_rule)
        if table_format(spec) is not None:
            return cls.from_csv(spec)
        raise ConfigError(
            f"taxonomy spec {spec!r}: expected a .csv edge list, a GTFS .zip or 'fanout:N'"
        )

    # ------------------------------------------------------------------ queries
    @property
    def graph(self) -> nx.DiGraph:
        """The underlying tree (edges parent -> child). Do not mutate it."""
        return self._graph

    @cached_property
    def height(self) -> int:
        """Number of levels below the root (the depth of the deepest leaf)."""
        return max(self._depth.values())

    def leaves(self) -> list[str]:
        """All locations (leaves), sorted."""
        return list(self._leaves)

    def nodes(self) -> list[str]:
        """All nodes, sorted."""
        return sorted(self._depth)

    def __contains__(self, node: object) -> bool:
        """True for any node of the tree (use :meth:`is_leaf` for locations)."""
        return node in self._depth

    def __len__(self) -> int:
        return len(self._depth)

    def __repr__(self) -> str:
        return (
            f"Taxonomy(source={self.source!r}, leaves={len(self._leaves)}, "
            f"nodes={len(self._depth)}, height={self.height})"
        )

    def _check(self, node: str) -> str:
        if node not in self._depth:
            raise InputError(f"{self.source}: unknown node '{node}'")
        return node

    def is_leaf(self, node: str) -> bool:
        """True when ``node`` is a location (a leaf)."""
        return node in self._leaf_set

    def level(self, node: str) -> int:
        """Depth of ``node`` (root = 0)."""
        return self._depth[self._check(node)]

    def parent(self, node: str) -> str | None:
        """Parent of ``node`` (``None`` for the root)."""
        return self._parent[self._check(node)]

    def children(self, node: str) -> list[str]:
        """Children of ``node``, sorted (empty for a leaf)."""
        return list(self._children[self._check(node)])

    def ancestors(self, node: str) -> list[str]:
        """Path from the root down to ``node`` (both included)."""
        path = [self._check(node)]
        while (p := self._parent[path[-1]]) is not None:
            path.append(p)
        return path[::-1]

    def leaves_under(self, node: str) -> list[str]:
        """Leaves of the subtree rooted at ``node``, sorted (``[node]`` for a leaf)."""
        if self._check(node) in self._leaf_set:
            return [node]
        out: list[str] = []
        stack = [node]
        while stack:
            n = stack.pop()
            kids = self._children[n]
            if kids:
                stack.extend(kids)
            else:
                out.append(n)
        return sorted(out)

    def generalize(self, location: str, level: int) -> str:
        """Ancestor of ``location`` at ``level``; a node at or above ``level`` is returned as is."""
        if isinstance(level, bool) or not isinstance(level, int | np.integer) or level < 0:
            raise ConfigError(f"level must be a non-negative integer, got {level!r}")
        path = self.ancestors(location)
        return path[min(int(level), len(path) - 1)]

    def generalization_map(self, level: int) -> dict[str, str]:
        """``{leaf: generalize(leaf, level)}`` for every leaf (cached); for ``Series.map``."""
        if level not in self._gen_cache:
            self._gen_cache[level] = {leaf: self.generalize(leaf, level) for leaf in self._leaves}
        return dict(self._gen_cache[level])

    def nodes_at_level(self, level: int) -> list[str]:
        """Nodes whose depth is exactly ``level``, sorted."""
        return sorted(n for n, d in self._depth.items() if d == level)

    def fanout_stats(self) -> dict[str, object]:
        """Fan-out (number of children) of inner nodes, per level and overall.

        Returns ``{"per_level": {level: {"nodes", "mean", "min", "max"}}, "mean", "min", "max",
        "leaves", "height"}``; ``per_level`` is keyed by the level of the parent nodes.
        """
        per: dict[int, list[int]] = {}
        for node, kids in self._children.items():
            if kids:
                per.setdefault(self._depth[node], []).append(len(kids))
        allf = [f for fs in per.values() for f in fs]
        return {
            "per_level": {
                lvl: {
                    "nodes": len(fs),
                    "mean": float(np.mean(fs)),
                    "min": int(min(fs)),
                    "max": int(max(fs)),
                }
                for lvl, fs in sorted(per.items())
            },
            "mean": float(np.mean(allf)) if allf else 0.0,
            "min": int(min(allf)) if allf else 0,
            "max": int(max(allf)) if allf else 0,
            "leaves": len(self._leaves),
            "height": self.height,
        }

    def unknown(self, locations: Iterable[str]) -> list[str]:
        """Distinct values of ``locations`` that are not leaves, in first-seen order."""
        return [x for x in dict.fromkeys(locations) if x not in self._leaf_set]

    # ------------------------------------------------------------------ export
    def to_frame(self) -> pd.DataFrame:
        """Edge list ``child,parent`` (breadth-first from the root, children sorted)."""
        rows: list[tuple[str, str]] = []
        queue = [self.root]
        while queue:
            nxt: list[str] = []
            for node in queue:
                for kid in self._children[node]:
                    rows.append((kid, node))
                    nxt.append(kid)
            queue = nxt
        return pd.DataFrame(rows, columns=["child", "parent"], dtype=str)

    def to_csv(self, path: str | os.PathLike[str]) -> Path:
        """Write the edge list atomically (readable back with :meth:`from_csv`)."""
        from synth.io import write_table

        return write_table(self.to_frame(), path)
