"""GTFS feeds read safely (members of a zip, size- and ratio-checked before reading, as text), and
the public rule that puts a stop served by several routes under one of them.

Identifier columns keep every value as written (only an empty cell is missing: ``NA`` and ``None``
are stop ids like any other), the rule of :mod:`synth.io` for private inputs too.

**Route rules** (:data:`ROUTE_RULES`, ``--gtfs-route-rule``; docs/design.md section 2). A taxonomy
is a tree, so a stop served by several routes goes under one of them. The feed is public, so the
rule reads the whole feed; it never reads the private records. "Trips of a route at a stop" are the
distinct scheduled ``trip_id`` of ``stop_times.txt`` through the stop whose ``trips.txt`` route is
that route (every service day of the feed counted once per trip).

* ``most-trips`` (default): the route with the most trips at the stop, ties by the smallest
  ``route_id`` (string order); then every route left without a stop, in ``route_id`` order, takes
  one of the stops it serves: the one where it runs the most trips (ties by the smallest
  ``stop_id``) among those whose route keeps another stop. A move never empties a route, so every
  route serving a stop keeps at least one whenever such a stop exists (Caltrain's Baby Bullet,
  whose every stop sees more Local or Limited trips, gets one); a route that still has none is
  named in a warning.
* ``most-trips-strict``: the route with the most trips only (ties by ``route_id``), the rule of
  earlier releases (issue 29 added the repair); busy routes may take every stop of a
  skip-stop service.
* ``first``: the first route of ``routes.txt`` (file order, the agency's own listing) serving it.
* ``lowest-id``: the smallest ``route_id`` (string order) serving it.

Under every rule, routes that serve stops but are left without any are named in a warning
(:func:`route_assignment` returns them).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError

__all__ = [
    "DEFAULT_ROUTE_RULE",
    "GTFS_MEMBER_LIMIT",
    "GTFS_RATIO_LIMIT",
    "ROUTE_RULES",
    "read_gtfs",
    "route_assignment",
    "route_trip_counts",
]

#: The rules for the route of a stop served by several routes (module docstring).
ROUTE_RULES = ("most-trips", "most-trips-strict", "first", "lowest-id")
DEFAULT_ROUTE_RULE = "most-trips"


#: Largest uncompressed size of one GTFS member read (1 GiB; the largest public feeds' stop_times
#: are a few hundred MB) and largest compression ratio (GTFS text compresses 5-30 times; a zip
#: bomb, thousands). Checked from the zip directory before reading, and again while reading.
GTFS_MEMBER_LIMIT = 1 << 30
GTFS_RATIO_LIMIT = 200


def read_member(zf: zipfile.ZipFile, name: str, src: str) -> bytes:
    """One zip member's bytes, refused (InputError) beyond the size and ratio limits."""
    info = zf.getinfo(name)
    limit = GTFS_MEMBER_LIMIT
    if info.file_size > limit:
        raise InputError(
            f"{src}: {name} unpacks to {info.file_size / 2**20:.0f} MiB, above the limit of "
            f"{limit >> 20} MiB per GTFS file"
        )
    if info.file_size > (1 << 20) and info.file_size > GTFS_RATIO_LIMIT * max(
        info.compress_size, 1
    ):
        raise InputError(
            f"{src}: {name} has a compression ratio of "
            f"{info.file_size / max(info.compress_size, 1):.0f}:1, above the limit of "
            f"{GTFS_RATIO_LIMIT}:1 (a zip bomb?)"
        )
    with zf.open(name) as fh:
        raw = fh.read(limit + 1)
    if len(raw) > limit or len(raw) > GTFS_RATIO_LIMIT * max(info.compress_size, 1) + (1 << 20):
        raise InputError(f"{src}: {name} unpacks beyond what its zip directory declares")
    return raw


def read_gtfs(zip_path: Path, wanted: dict[str, list[str]]) -> dict[str, pd.DataFrame]:
    """Read GTFS members (all as strings) from a zip, also when they sit in a sub-folder."""
    src = str(zip_path)
    if not zip_path.is_file():
        raise InputError(f"{src}: file not found")
    try:
        zf = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"{src}: not a readable zip file ({exc})") from exc
    out: dict[str, pd.DataFrame] = {}
    with zf:
        names = {Path(n).name: n for n in zf.namelist() if not n.endswith("/")}
        for member, cols in wanted.items():
            if member not in names:
                raise InputError(f"{src}: GTFS file {member} is missing")
            raw = read_member(zf, names[member], src)
            try:
                df = pd.read_csv(
                    io.BytesIO(raw),
                    dtype=str,
                    encoding="utf-8-sig",
                    keep_default_na=False,
                    na_values=[""],
                )
            except Exception as exc:
                raise InputError(f"{src}: {member}: cannot parse CSV ({exc})") from exc
            df.columns = [c.strip() for c in df.columns]
            miss = [c for c in cols if c not in df.columns]
            if miss:
                raise InputError(f"{src}: {member}: missing column(s) {', '.join(miss)}")
            for c in cols:
                df[c] = df[c].str.strip()
                bad = df[c].isna() | (df[c] == "")
                if bad.any():
                    row = int(np.flatnonzero(bad.to_numpy())[0]) + 1
                    raise InputError(f"{src}: {member}, column '{c}', row {row}: empty value")
            out[member] = df
    return out


def check_route_rule(rule: str | None) -> str:
    """``rule`` (``None``: the default), refused (ConfigError) unless one of :data:`ROUTE_RULES`."""
    if rule is None:
        return DEFAULT_ROUTE_RULE
    if rule not in ROUTE_RULES:
        raise ConfigError(f"GTFS route rule must be one of {', '.join(ROUTE_RULES)}, got {rule!r}")
    return rule


def station_of(stops: pd.DataFrame, src: str) -> pd.Series:
    """``stop_id -> parent_station`` of the stops that have one; InputError when none has one
    (parent stations asked of a feed without stations)."""
    if "parent_station" in stops.columns:
        parent = stops.set_index("stop_id")["parent_station"].dropna().astype(str).str.strip()
        parent = parent[parent != ""]
        if len(parent):
            return parent
    raise InputError(
        f"{src}: stops.txt gives no stop a parent_station, so there are no stations to use "
        "(--gtfs-stations, gtfs_stations in a config): leave it out to use the stops"
    )


def route_trip_counts(zip_path: Path, *, use_stations: bool = False) -> pd.DataFrame:
    """``stop_id, route_id, n``: the distinct scheduled trips of each route through each stop
    (through a station's platforms with ``use_stations``), and ``routes.txt`` as read.

    Returns the counts with ``routes.txt`` in ``counts.attrs["routes"]``; every route of the
    counts is in ``routes.txt`` (InputError otherwise)."""
    src = str(zip_path)
    tables = read_gtfs(
        zip_path,
        {
            "routes.txt": ["route_id", "route_type"],
            "trips.txt": ["trip_id", "route_id"],
            "stop_times.txt": ["trip_id", "stop_id"],
        },
    )
    routes, trips, stop_times = (
        tables["routes.txt"],
        tables["trips.txt"],
        tables["stop_times.txt"],
    )
    if use_stations:
        parent = station_of(read_gtfs(zip_path, {"stops.txt": ["stop_id"]})["stops.txt"], src)
        stop = stop_times["stop_id"].astype(str)
        stop_times = stop_times.assign(stop_id=stop.map(parent).fillna(stop).astype(str))
    served = (
        stop_times[["trip_id", "stop_id"]]
        .drop_duplicates()
        .merge(trips[["trip_id", "route_id"]].drop_duplicates("trip_id"), on="trip_id")
    )
    if served.empty:
        raise InputError(f"{src}: no stop is served by a trip of trips.txt")
    known = set(routes["route_id"])
    unknown = [r for r in pd.unique(served["route_id"]) if r not in known]
    if unknown:
        raise InputError(f"{src}: trips.txt uses route_id '{unknown[0]}' not in routes.txt")
    counts = served.groupby(["stop_id", "route_id"], sort=True).size().rename("n").reset_index()
    counts.attrs["routes"] = routes
    return counts


def route_assignment(
    counts: pd.DataFrame, rule: str, route_order: list[str]
) -> tuple[pd.Series, list[str]]:
    """The route of every stop under ``rule`` (module docstring) and the routes left without
    stops (string order). ``counts``: :func:`route_trip_counts`; ``route_order``: the route ids in
    ``routes.txt`` order (the ``first`` rule)."""
    rule = check_route_rule(rule)
    if rule == "first":
        rank = {r: i for i, r in reversed(list(enumerate(route_order)))}
        key = counts["route_id"].map(rank)
        ordered = counts.assign(_k=key).sort_values(["stop_id", "_k"], kind="stable")
    elif rule == "lowest-id":
        ordered = counts.sort_values(["stop_id", "route_id"], kind="stable")
    else:
        ordered = counts.sort_values(
            ["stop_id", "n", "route_id"], ascending=[True, False, True], kind="stable"
        )
    best = ordered.drop_duplicates("stop_id")
    owner = dict(zip(best["stop_id"], best["route_id"], strict=True))
    empty = sorted(set(counts["route_id"]) - set(owner.values()))
    if rule == "most-trips" and empty:
        empty = _give_every_route_a_stop(counts, owner, empty)
    return pd.Series(owner, name="route_id").sort_index(), empty


def _give_every_route_a_stop(
    counts: pd.DataFrame, owner: dict[str, str], empty: list[str]
) -> list[str]:
    """Each empty route (in order) takes its busiest stop whose route keeps another one; the
    routes that could take none. Updates ``owner`` in place."""
    size = pd.Series(list(owner.values())).value_counts().to_dict()
    wanted = counts[counts["route_id"].isin(empty)].sort_values(
        ["route_id", "n", "stop_id"], ascending=[True, False, True], kind="stable"
    )
    left: list[str] = []
    for route, group in wanted.groupby("route_id", sort=True):
        for stop in group["stop_id"]:
            if size[owner[stop]] > 1:
                size[owner[stop]] -= 1
                owner[stop], size[route] = str(route), 1
                break
        else:
            left.append(str(route))
    return left
