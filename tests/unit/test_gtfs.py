"""The public rule for a GTFS stop served by several routes (issue 29, GTFS part): every route that
serves a stop gets one under the default rule when it can, a warning names the routes left
without stops, the other rules, and parent stations refused on a feed without stations."""

from __future__ import annotations

import io
import json
import warnings
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from synth.errors import ConfigError, InputError
from synth.export import read_release
from synth.export.matsim import leg_modes
from synth.gtfs import DEFAULT_ROUTE_RULE, ROUTE_RULES
from synth.taxonomy import Taxonomy, taxonomy_note


def _zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


#: s1: A 3 trips, X 1; s2: A 3, X 2 (X's busiest); s3: A only; s4: B 2 (its only stop), Y 1.
FEED = {
    "routes.txt": "route_id,route_type\nY,3\nX,3\nA,3\nB,2\n",
    "trips.txt": "route_id,trip_id\nA,a1\nA,a2\nA,a3\nX,x1\nX,x2\nB,b1\nB,b2\nY,y1\n",
    "stop_times.txt": "trip_id,stop_id\n"
    + "".join(f"{t},s1\n{t},s2\n" for t in ("a1", "a2", "a3"))
    + "a1,s3\nx1,s1\nx1,s2\nx2,s2\nb1,s4\nb2,s4\ny1,s4\n",
    "stops.txt": "stop_id,parent_station\ns1,\ns2,\ns3,\ns4,\n",
}


def _parents(t: Taxonomy) -> dict[str, str | None]:
    return {leaf: t.parent(leaf) for leaf in t.leaves()}


def test_default_rule_gives_an_outvoted_route_its_busiest_stop(tmp_path: Path) -> None:
    feed = _zip(tmp_path / "feed.zip", FEED)
    with pytest.warns(UserWarning, match=r"1 route\(s\) .* 'most-trips'.*: Y$") as caught:
        t = Taxonomy.from_gtfs(feed)
    assert len(caught) == 1
    # X is outvoted by A at both of its stops; it takes s2 (2 trips there > 1 at s1). Y only
    # serves s4, the only stop of B: moving it would empty B, so Y stays empty and is named.
    assert _parents(t) == {"s1": "route:A", "s2": "route:X", "s3": "route:A", "s4": "route:B"}
    assert t.gtfs_route_rule == DEFAULT_ROUTE_RULE and t.gtfs_routes_without_stops == ("Y",)
    assert taxonomy_note(t) == {"gtfs_route_rule": "most-trips", "gtfs_routes_without_stops": ["Y"]}
    with pytest.warns(UserWarning, match=": Y$"):
        assert _parents(Taxonomy.from_spec(str(feed))) == _parents(t)


def test_ties_between_stops_go_to_the_smallest_stop_id(tmp_path: Path) -> None:
    files = dict(FEED, **{"stop_times.txt": FEED["stop_times.txt"].replace("x2,s2\n", "")})
    with pytest.warns(UserWarning):
        t = Taxonomy.from_gtfs(_zip(tmp_path / "tie.zip", files))
    assert t.parent("s1") == "route:X" and t.parent("s2") == "route:A"  # 1 trip at each: s1


@pytest.mark.parametrize(
    ("rule", "parents", "empty"),
    [
        ("most-trips-strict", {"s1": "A", "s2": "A", "s3": "A", "s4": "B"}, "X, Y"),
        ("first", {"s1": "X", "s2": "X", "s3": "A", "s4": "Y"}, "B"),  # routes.txt: Y, X, A, B
        ("lowest-id", {"s1": "A", "s2": "A", "s3": "A", "s4": "B"}, "X, Y"),
    ],
)
def test_other_rules(tmp_path: Path, rule: str, parents: dict[str, str], empty: str) -> None:
    feed = _zip(tmp_path / "feed.zip", FEED)
    with pytest.warns(UserWarning, match=rf"'{rule}'.*: {empty}$"):
        t = Taxonomy.from_spec(str(feed), route_rule=rule)
    assert _parents(t) == {s: f"route:{r}" for s, r in parents.items()}
    assert t.gtfs_route_rule == rule


def test_rule_errors(tmp_path: Path) -> None:
    feed = _zip(tmp_path / "feed.zip", FEED)
    with pytest.raises(ConfigError, match="route rule must be one of"):
        Taxonomy.from_gtfs(feed, route_rule="busiest")
    with pytest.raises(ConfigError, match="--gtfs-route-rule"):
        Taxonomy.from_spec(str(tmp_path / "edges.csv"), route_rule="first")
    broken = dict(FEED, **{"trips.txt": FEED["trips.txt"] + "Z,z1\n"})
    broken["stop_times.txt"] += "z1,s3\n"
    with pytest.raises(InputError, match=r"route_id 'Z' not in routes\.txt"):
        Taxonomy.from_gtfs(_zip(tmp_path / "z.zip", broken))


def test_parent_stations_on_a_feed_without_stations_are_refused(tmp_path: Path) -> None:
    """Before: a pandas warning, then the platforms as if nothing had been asked."""
    feed = _zip(tmp_path / "feed.zip", FEED)
    with pytest.raises(InputError, match="no stop a parent_station"):
        Taxonomy.from_gtfs(feed, use_stations=True)
    no_column = dict(FEED, **{"stops.txt": "stop_id\ns1\ns2\ns3\ns4\n"})
    with pytest.raises(InputError, match="no stop a parent_station"):
        Taxonomy.from_gtfs(_zip(tmp_path / "n.zip", no_column), use_stations=True)


# ------------------------------------------------------------------ real public feeds
def _brute_force(zip_path: Path, rule: str) -> tuple[dict[str, str], list[str]]:
    """Independent implementation of the documented rules, with plain Python counting."""
    with zipfile.ZipFile(zip_path) as zf:
        read = {
            n.rsplit("/", 1)[-1]: pd.read_csv(io.BytesIO(zf.read(n)), dtype=str)
            for n in zf.namelist()
        }
    order = list(dict.fromkeys(read["routes.txt"]["route_id"]))
    route_of = dict(zip(read["trips.txt"]["trip_id"], read["trips.txt"]["route_id"], strict=True))
    trips_at: dict[str, dict[str, set[str]]] = {}
    stop_times = read["stop_times.txt"]
    for trip, stop in zip(stop_times["trip_id"], stop_times["stop_id"], strict=True):
        trips_at.setdefault(stop, {}).setdefault(route_of[trip], set()).add(trip)
    n = {(s, r): len(ts) for s, routes in trips_at.items() for r, ts in routes.items()}

    def key(stop: str, route: str) -> tuple[object, ...]:
        if rule == "first":
            return (order.index(route),)
        if rule == "lowest-id":
            return (route,)
        return (-n[stop, route], route)

    owner = {s: min(routes, key=lambda r: key(s, r)) for s, routes in trips_at.items()}
    empty = sorted({r for _, r in n} - set(owner.values()))
    if rule != "most-trips":
        return owner, empty
    left = []
    for route in empty:
        size = {r: list(owner.values()).count(r) for r in set(owner.values())}
        spare = [s for s in trips_at if route in trips_at[s] and size[owner[s]] > 1]
        if spare:
            owner[min(spare, key=lambda s: (-n[s, route], s))] = route
        else:
            left.append(route)
    return owner, left


@pytest.mark.parametrize("feed", ["caltrain-2017-07-24.zip", "seattle-area-2017-11-16.zip"])
@pytest.mark.parametrize("rule", ROUTE_RULES)
def test_real_feeds_follow_the_documented_rules(shared_data: Path, feed: str, rule: str) -> None:
    path = shared_data / "gtfs" / feed
    owner, empty = _brute_force(path, rule)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = Taxonomy.from_gtfs(path, route_rule=rule)
    assert _parents(t) == {s: f"route:{r}" for s, r in owner.items()}
    assert list(t.gtfs_routes_without_stops) == empty
    named = [str(w.message) for w in caught if "route rule" in str(w.message)]
    assert len(named) == (1 if empty else 0)
    assert all(named[0].endswith(f": {', '.join(empty)}") for _ in named)


def test_caltrain_every_route_gets_a_stop(shared_data: Path) -> None:
    """53 of Caltrain's 64 stops serve 2-3 routes; every Baby Bullet stop sees more Local or
    Limited trips, so the most-trips rule alone gave it no stop (and a silent, empty route)."""
    path = shared_data / "gtfs" / "caltrain-2017-07-24.zip"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default rule needs no warning here
        t = Taxonomy.from_gtfs(path)
    routes = ["route:Bu-129", "route:Li-129", "route:Lo-129", "route:TaSj-129"]
    assert sorted(t.nodes_at_level(2)) == routes
    assert all(t.children(r) for r in routes)
    assert t.children("route:Bu-129") == ["70011"]  # San Francisco: 15 Baby Bullet trips
    assert t.parent("70012") == "route:Lo-129"  # the other 15-trip stops stay with Local
    with pytest.warns(UserWarning, match=r"'most-trips-strict'.*: Bu-129$"):
        strict = Taxonomy.from_gtfs(path, route_rule="most-trips-strict")
    assert "route:Bu-129" not in strict


def test_matsim_leg_modes_read_the_feed_as_the_release_did(tmp_path: Path) -> None:
    """s4 is rail under B by default, bus under Y with ``first``: the export reads the manifest."""
    feed = _zip(tmp_path / "feed.zip", FEED)
    for rule, mode in ((None, "rail"), ("first", "bus")):
        d = tmp_path / f"rel-{rule}"
        d.mkdir()
        pd.DataFrame({"seq_id": [0, 0], "pos": [0, 1], "location": ["s4", "s1"]}).to_csv(
            d / "sequences.csv", index=False
        )
        params = {"generator": "prefixtree", "taxonomy": str(feed)}
        params.update({} if rule is None else {"gtfs_route_rule": rule})
        (d / "manifest.json").write_text(json.dumps({"parameters": params}))
        modes, _ = leg_modes(read_release(d))
        assert modes is not None and modes["s4"] == mode and modes["s1"] == "bus"
