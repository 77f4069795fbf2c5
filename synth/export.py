"""Exports of a release for simulation models: OD matrices per time bin and MATSim populations.

Both exports are post-processing of a published release (the synthetic data of
``transit-synth sequences`` or ``transit-synth trips``): they never read private data and do not
change the privacy guarantee of the release (design.md section 4).

**Plans.** A release is first turned into one plan per person (:class:`Release`, column ``steps``):
the places the person is at, in order, each followed by a leg, except the last one.

* *Sequences* (prefix tree, paper 004): a sequence is a person (``seq_id``); its locations in
  ``pos`` order are the steps and each pair of consecutive locations is one ``pt`` leg. A
  sequence of one location is a person without legs.
* *Trips with origin and destination* (``on_stop``/``off_stop``, ``origin``/``destination``, or
  the taxi ``pickup_community_area``/``dropoff_community_area``): each trip is one ``pt`` leg; a
  person's trips are chained in time order, and when a trip starts elsewhere than the previous
  one ended, a ``walk`` leg joins the two places (it is not counted in OD matrices).
* *Trips without destination* (boardings, e.g. the SUBE archetype release): with
  ``location_column``, a person's trips in time order are a trip chain like a sequence.

**Times.** The departure of a leg is the time of its first step: the sequence's ``time`` (bin
labels ``HH:MM`` of a trajectory release, ``HH:MM[:SS]`` or ISO timestamps, reduced to the time of
day), or a trip's ``on_time`` / ``time`` (same forms), ``hour`` (0..23) or ``shift`` (NIST sprint 3:
``3 * weekday + hour // 8``; its start hour of day is used, the weekday is dropped because a
MATSim plan covers one day). A release with time bins has a native bin width (the prefix tree's
``time_bin_minutes``, 60 for ``hour``, 480 for ``shift``; exact times have none).

**OD matrices** (:func:`od_matrix`): long format ``origin, destination, bin, count`` over the
``pt`` legs, ``bin`` = the start ``HH:MM`` of the leg's departure bin (``bin_minutes``, default the
native width, else 60), or the single bin ``"all"`` when the release has no times. Sorted by
origin, destination, bin (string order); counts sum to the number of legs.

**MATSim** (:func:`write_population`): a population v6 file (``population_v6.dtd``): one person per
plan, one selected plan of activities (type ``activity_type``) at the coordinates of their
location, with the location id in an activity attribute ``stop_id``, and legs of mode ``pt``
(``walk`` for the joins above). Activity end times: a leg that departs in a bin of width ``w`` is
placed inside its bin, the ``m`` legs of one person in one bin at ``start + (j + 1/2) w / m``,
``j = 0..m-1`` (times of one person made non-decreasing by a running maximum first); exact times
are used as they are; without times the first activity ends at ``default_start`` and each next one
``default_gap`` later (documented defaults 08:00 and 60 minutes). The last activity has no end
time. The population's ``coordinateReferenceSystem`` attribute names the CRS (MATSim reprojects on
reading when its ``global.coordinateSystem`` differs).

**Coordinates** (:func:`load_coordinates`): a GTFS zip (``stops.txt``), the embedded Montreal metro
(``"montreal"``: MTM zone 8 ``x_mtm8``/``y_mtm8``, EPSG:32188, keyed by station name as in its
taxonomy), or a CSV/Parquet table ``stop_id`` (or ``location``) with ``x, y`` (projected, CRS
given by ``crs``) or ``lat, lon``. Geographic coordinates are projected to UTM (zone of the mean
longitude of the coordinate file, WGS 84, EPSG:326zz/327zz) because MATSim measures distances in
the plane, unless ``crs="wgs84"`` keeps degrees (EPSG:4326).

The XML is assembled from escaped strings with vectorised pandas operations (one string per step,
formatted once per distinct location), not with ``matsim-tools``: its ``PopulationWriter`` writes
ids and types into the XML without escaping, imports protobuf through ``matsim/__init__``, and
loops in Python per activity. Tests parse every export back with :mod:`xml.etree.ElementTree`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.io import atomic_path, id_strings, read_table, release_dir, write_table
from synth.release import open_release
from synth.times import clock_parts, wall_clock_times

__all__ = [
    "DEFAULT_GAP",
    "DEFAULT_START",
    "OD_PAIRS",
    "Coordinates",
    "Release",
    "export_release",
    "load_coordinates",
    "od_matrix",
    "plan_end_times",
    "population_chunks",
    "read_release",
    "transverse_mercator",
    "utm",
    "write_od",
    "write_population",
]

#: (origin, destination) column pairs recognised in trip releases, in the order tried.
OD_PAIRS: tuple[tuple[str, str], ...] = (
    ("on_stop", "off_stop"),
    ("origin", "destination"),
    ("pickup_community_area", "dropoff_community_area"),
)
#: person id columns tried in trip releases without a ``schema.json`` naming one.
ID_COLUMNS = ("card_id", "taxi_id", "individual_id", "person_id", "card")
#: time columns tried in trip releases, in order.
TIME_COLUMNS = ("on_time", "time", "hour", "shift")
#: MATSim defaults when a release has no times: first departure (minutes after midnight), gap.
DEFAULT_START = 8 * 60
DEFAULT_GAP = 60
MINUTES_PER_DAY = 24 * 60
#: rows per block of the XML writer (bounds memory for large releases).
XML_BLOCK = 200_000
_WGS84 = (6378137.0, 1 / 298.257223563)


# ---------------------------------------------------------------------------- releases
@dataclass(frozen=True)
class Release:
    """A release turned into plans.

    ``steps``: one row per place of a person, in plan order: ``person`` (str), ``step`` (0-based),
    ``location`` (str), ``mode`` (the leg that follows: ``"pt"``, ``"walk"`` or ``""`` for the last
    step) and ``start`` (departure of that leg in minutes after midnight, the start of its bin when
    times are binned; NaN without times or on the last step). Persons are sorted (numerically when
    every id is an integer, else as strings). ``bin_width``: the native bin width in minutes, 0 for
    exact times, ``None`` when the release has no times.
    """

    kind: str
    path: Path
    manifest: dict[str, Any]
    steps: pd.DataFrame
    bin_width: int | None
    columns: dict[str, str | None] = field(default_factory=dict)

    @property
    def n_persons(self) -> int:
        """Number of persons (plans)."""
        return int((self.steps["step"].to_numpy() == 0).sum())

    @property
    def n_legs(self) -> int:
        """Number of ``pt`` legs (the trips an OD matrix counts)."""
        return int((self.steps["mode"].to_numpy() == "pt").sum())


def read_release(
    directory: str | os.PathLike[str],
    *,
    id_column: str | None = None,
    origin_column: str | None = None,
    destination_column: str | None = None,
    location_column: str | None = None,
    time_column: str | None = None,
) -> Release:
    """Read a release directory (``manifest.json`` + ``sequences.*`` or ``trips.*``) into plans.

    The kind comes from the manifest's ``parameters.generator`` (``prefixtree`` -> sequences,
    ``archetypes`` -> trips), else from the data file present. For trips, the person column is
    ``id_column``, else the ``id`` column of ``schema.json``, else the first of
    :data:`ID_COLUMNS`; origin/destination from the arguments or :data:`OD_PAIRS`; or, for trips
    without destination, the trip chain of ``location_column``. Column options do not apply to
    sequences.
    """
    release = open_release(directory)
    kind = release.data_kind(what="export")
    path, manifest = release.data_file(kind), release.manifest
    if kind == "sequences":
        given = [
            n
            for n, v in (
                ("id_column", id_column),
                ("origin_column", origin_column),
                ("destination_column", destination_column),
                ("location_column", location_column),
                ("time_column", time_column),
            )
            if v is not None
        ]
        if given:
            raise ConfigError(
                f"{', '.join(given)}: only for trip releases ({path} holds sequences)"
            )
        return _sequence_release(path, manifest)
    return _trip_release(
        path, manifest, id_column, origin_column, destination_column, location_column, time_column
    )


def _sort_key(person: pd.Series) -> np.ndarray:
    """Ranks that sort persons numerically when all ids are integers, else as strings."""
    codes, uniq = pd.factorize(person)
    values = pd.Series(np.asarray(uniq, dtype=object))
    if values.str.fullmatch(r"\d{1,18}").all():
        order = np.argsort(values.astype(np.int64).to_numpy(), kind="stable")
    else:
        order = np.argsort(values.to_numpy(dtype=object), kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return rank[codes]


def _last_in_person(person: np.ndarray) -> np.ndarray:
    last = np.ones(person.size, dtype=bool)
    if person.size:
        last[:-1] = person[1:] != person[:-1]
    return last


def _chain_steps(person: pd.Series, location: pd.Series, start: np.ndarray) -> pd.DataFrame:
    """Steps of trip chains (rows already in plan order): a ``pt`` leg between consecutive rows."""
    p = person.to_numpy(dtype=object)
    last = _last_in_person(p)
    first = np.r_[True, last[:-1]] if p.size else np.zeros(0, dtype=bool)
    idx = np.arange(p.size)
    step = idx - np.maximum.accumulate(np.where(first, idx, 0))
    return pd.DataFrame(
        {
            "person": p,
            "step": step.astype(np.int64),
            "location": location.to_numpy(dtype=object),
            "mode": np.where(last, "", "pt").astype(object),
            "start": np.where(last, np.nan, start),
        }
    )


def _minutes(raw: pd.Series, column: str, src: str) -> tuple[np.ndarray, int]:
    """Time of day in minutes and the column's native bin width (0 = exact) (module docstring).

    Each distinct value is parsed once; errors name the first row holding the bad value."""
    if raw.isna().any():
        row = int(np.flatnonzero(raw.isna().to_numpy())[0]) + 1
        raise InputError(f"{src}: column '{column}', row {row}: empty time")
    codes, uniq = pd.factorize(raw)
    values = pd.Series(np.asarray(uniq))

    def row_of(i: int) -> int:
        return int(np.flatnonzero(codes == i)[0]) + 1

    minutes, width = _distinct_minutes(values, column, src, row_of)
    return minutes[codes], width


def _distinct_minutes(
    raw: pd.Series, column: str, src: str, row_of: Callable[[int], int]
) -> tuple[np.ndarray, int]:
    if column in ("hour", "shift"):
        vals = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
        hi = 23 if column == "hour" else 20
        bad = np.isnan(vals) | (vals != np.round(vals)) | (vals < 0) | (vals > hi)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"{src}: column '{column}', row {row_of(i)}: {raw.iloc[i]!r} is "
                f"not an integer 0..{hi}"
            )
        if column == "hour":
            return vals * 60.0, 60
        return (vals % 3) * 480.0, 480
    if pd.api.types.is_datetime64_any_dtype(raw):
        t = pd.DatetimeIndex(raw)
        return (t.hour * 60 + t.minute + t.second / 60).to_numpy(dtype=float), 0
    text = raw.astype(str).str.strip()
    parts = clock_parts(text)  # each value on its own (synth.times): HH:MM[:SS] or a timestamp
    clock = parts["hour"].notna().to_numpy()
    h, m, s = parts["hour"], parts["minute"], parts["second"].fillna(0.0)
    bad = clock & ~((h < 48) & (m < 60) & (s < 60)).to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{src}: column '{column}', row {row_of(i)}: bad time {text.iloc[i]!r}")
    minutes = ((h * 60 + m + s / 60) % MINUTES_PER_DAY).to_numpy(dtype=float, copy=True)
    if not clock.all():
        stamps = wall_clock_times(text[~clock])  # wall clock as written (an offset is dropped)
        if stamps.isna().any():
            i = int(np.flatnonzero(~clock)[int(np.flatnonzero(stamps.isna().to_numpy())[0])])
            raise InputError(
                f"{src}: column '{column}', row {row_of(i)}: cannot parse "
                f"{text.iloc[i]!r} as a time (HH:MM or ISO 8601)"
            )
        t = pd.DatetimeIndex(stamps)
        minutes[~clock] = (t.hour * 60 + t.minute + t.second / 60).to_numpy(dtype=float)
    return minutes, 0


def _sequence_release(path: Path, manifest: dict[str, Any]) -> Release:
    from synth.records import load_sequences

    seqs = load_sequences(path)
    src = str(path)
    width: int | None = None
    start = np.full(len(seqs), np.nan)
    if "time" in seqs.columns:
        start, width = _minutes(seqs["time"], "time", src)
        declared = (manifest.get("parameters") or {}).get("time_bin_minutes")
        if declared:
            width = int(declared)
    order = np.lexsort((seqs["pos"].to_numpy(), _sort_key(seqs["seq_id"])))
    seqs = seqs.iloc[order].reset_index(drop=True)
    steps = _chain_steps(seqs["seq_id"], seqs["location"], start[order])
    return Release("sequences", path, manifest, steps, width, {"person": "seq_id"})


def _pick(columns: Sequence[str], given: str | None, candidates: Sequence[str]) -> str | None:
    if given is not None:
        return given
    return next((c for c in candidates if c in columns), None)


def _schema_id(path: Path) -> str | None:
    schema = path.parent / "schema.json"
    if not schema.is_file():
        return None
    try:
        spec = json.loads(schema.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise InputError(f"{schema}: cannot read ({exc})") from exc
    ids = [name for name, col in spec.items() if isinstance(col, dict) and col.get("kind") == "id"]
    return ids[0] if len(ids) == 1 else None


def _trip_release(
    path: Path,
    manifest: dict[str, Any],
    id_column: str | None,
    origin_column: str | None,
    destination_column: str | None,
    location_column: str | None,
    time_column: str | None,
) -> Release:
    src = str(path)
    if (origin_column is None) != (destination_column is None):
        raise ConfigError("origin_column and destination_column go together")
    if location_column is not None and origin_column is not None:
        raise ConfigError("give origin/destination columns or a location column, not both")
    cols = _header(path)
    person_col = _pick(cols, id_column or _schema_id(path), ID_COLUMNS)
    if person_col is None:
        raise InputError(
            f"{src}: no person id column (looked for {', '.join(ID_COLUMNS)} and "
            "schema.json); name it with id_column"
        )
    pair: tuple[str, str] | None = None
    if origin_column is not None and destination_column is not None:
        pair = (origin_column, destination_column)
    elif location_column is None:
        pair = next(((o, d) for o, d in OD_PAIRS if o in cols and d in cols), None)
        if pair is None:
            raise InputError(
                f"{src}: no origin/destination columns (looked for "
                f"{', '.join('/'.join(p) for p in OD_PAIRS)}); name them with origin_column and "
                "destination_column, or give location_column to chain a person's trips"
            )
    tcol = _pick(cols, time_column, TIME_COLUMNS)
    places = list(pair) if pair is not None else [str(location_column)]
    need = list(dict.fromkeys([person_col, *places, *([tcol] if tcol else [])]))
    missing = [c for c in need if c not in cols]
    if missing:
        raise InputError(
            f"{src}: missing column(s) {', '.join(map(repr, missing))} (found: {', '.join(cols)})"
        )
    df = read_table(path, columns=need, dtype={c: str for c in [person_col, *places]})
    if len(df) == 0:
        raise InputError(f"{src}: no trips")
    ident = {c: _ids(df[c], c, src) for c in dict.fromkeys([person_col, *places])}
    width: int | None = None
    start = np.zeros(len(df))
    if tcol is not None:
        start, width = _minutes(df[tcol], tcol, src)
    person = ident[person_col]
    order = np.lexsort((np.arange(len(df)), start, _sort_key(person)))
    person = person.iloc[order].reset_index(drop=True)
    start = start[order] if tcol is not None else np.full(len(df), np.nan)
    used = {"person": person_col, "time": tcol}
    if pair is None:
        loc = ident[str(location_column)].iloc[order].reset_index(drop=True)
        steps = _chain_steps(person, loc, start)
        return Release("trips", path, manifest, steps, width, {**used, "location": location_column})
    origin = ident[pair[0]].iloc[order].to_numpy(dtype=object)
    dest = ident[pair[1]].iloc[order].to_numpy(dtype=object)
    steps = _od_steps(person.to_numpy(dtype=object), origin, dest, start)
    return Release(
        "trips", path, manifest, steps, width, {**used, "origin": pair[0], "destination": pair[1]}
    )


def _header(path: Path) -> list[str]:
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            names = pq.read_schema(path).names
        else:
            names = list(pd.read_csv(path, nrows=0).columns)
    except Exception as exc:  # parser errors of pandas / pyarrow, corrupt files
        raise InputError(f"{path}: cannot read the header ({type(exc).__name__}: {exc})") from exc
    return [str(c).strip() for c in names]


def _ids(series: pd.Series, column: str, src: str) -> pd.Series:
    vals = id_strings(series)
    bad = vals.isna() | (vals == "")
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0]) + 1
        raise InputError(f"{src}: column '{column}', row {row}: empty value")
    return vals.astype(str).reset_index(drop=True)


def _od_steps(
    person: np.ndarray, origin: np.ndarray, dest: np.ndarray, start: np.ndarray
) -> pd.DataFrame:
    """Steps of OD trips (rows in plan order): origin (when the chain breaks) and destination."""
    n = person.size
    last = _last_in_person(person)
    first = np.r_[True, last[:-1]]
    joined = np.zeros(n, dtype=bool)
    joined[1:] = ~first[1:] & (origin[1:] == dest[:-1])
    with_origin = ~joined  # first trip of a person, or a trip starting elsewhere
    next_start = np.r_[start[1:], np.nan]
    next_breaks = np.r_[with_origin[1:], False]
    dest_mode = np.where(last, "", np.where(next_breaks, "walk", "pt"))
    o_idx = np.flatnonzero(with_origin)
    key = np.r_[2 * o_idx, 2 * np.arange(n) + 1]
    order = np.argsort(key, kind="stable")
    frame = pd.DataFrame(
        {
            "person": np.r_[person[o_idx], person][order],
            "location": np.r_[origin[o_idx], dest][order],
            "mode": np.r_[np.full(o_idx.size, "pt", dtype=object), dest_mode.astype(object)][order],
            "start": np.r_[start[o_idx], np.where(last, np.nan, next_start)][order],
        }
    )
    p = frame["person"].to_numpy(dtype=object)
    is_first = np.r_[True, p[1:] != p[:-1]]
    idx = np.arange(p.size)
    frame.insert(1, "step", idx - np.maximum.accumulate(np.where(is_first, idx, 0)))
    return frame


# ---------------------------------------------------------------------------- OD matrices
def _check_bin(release: Release, bin_minutes: int | None) -> int | None:
    if release.bin_width is None:
        return None
    if bin_minutes is None:
        return release.bin_width or 60
    if (
        isinstance(bin_minutes, bool)
        or not isinstance(bin_minutes, int | np.integer)
        or not (1 <= bin_minutes <= MINUTES_PER_DAY)
    ):
        raise ConfigError(f"bin must be minutes in 1..1440, got {bin_minutes!r}")
    if release.bin_width and bin_minutes % release.bin_width:
        raise ConfigError(
            f"bin must be a multiple of the release's own time bins "
            f"({release.bin_width} minutes), got {bin_minutes}"
        )
    return int(bin_minutes)


def _label(minutes: np.ndarray) -> np.ndarray:
    m = minutes.astype(np.int64)
    uniq, inv = np.unique(m, return_inverse=True)
    labels = np.array([f"{u // 60:02d}:{u % 60:02d}" for u in uniq], dtype=object)
    return labels[inv]


def od_matrix(release: Release, *, bin_minutes: int | None = None) -> pd.DataFrame:
    """Trips per (origin, destination, time bin) over the release's ``pt`` legs (long format).

    ``bin`` is ``HH:MM``, the start of the departure's bin of ``bin_minutes`` (a multiple of the
    release's own bins; default: those bins, or 60 for exact times), or ``"all"`` when the release
    has no times. Rows sorted by origin, destination, bin; zero cells are not listed.
    """
    width = _check_bin(release, bin_minutes)
    steps = release.steps
    mode = steps["mode"].to_numpy(dtype=object)
    pt = np.flatnonzero(mode == "pt")
    loc = steps["location"].to_numpy(dtype=object)
    legs = pd.DataFrame({"origin": loc[pt], "destination": loc[pt + 1]})
    if width is None:
        legs["bin"] = "all"
    else:
        start = steps["start"].to_numpy(dtype=float)[pt]
        legs["bin"] = _label(np.floor(start / width) * width)
    if legs.empty:
        return pd.DataFrame(
            {
                "origin": pd.Series(dtype=object),
                "destination": pd.Series(dtype=object),
                "bin": pd.Series(dtype=object),
                "count": pd.Series(dtype=np.int64),
            }
        )
    counts = legs.groupby(["origin", "destination", "bin"], sort=True).size()
    out = counts.rename("count").reset_index()
    out["count"] = out["count"].astype(np.int64)
    return out


def write_od(od: pd.DataFrame, path: str | os.PathLike[str], *, csv_escape: bool = True) -> Path:
    """Write an OD matrix as CSV or Parquet (by extension), atomically.

    ``csv_escape`` (CSV only, on by default: OD tables are opened in spreadsheets): origin and
    destination cells that a spreadsheet would run as a formula get a leading ``'``
    (:func:`spreadsheet_safe`).
    """
    frame = od.astype({"origin": str, "destination": str, "bin": str, "count": np.int64})
    if csv_escape and str(path).lower().endswith(".csv"):
        frame = frame.assign(
            origin=spreadsheet_safe(frame["origin"]),
            destination=spreadsheet_safe(frame["destination"]),
        )
    return write_table(frame, path)


# ---------------------------------------------------------------------------- coordinates
def transverse_mercator(
    lat: np.ndarray,
    lon: np.ndarray,
    *,
    lon0: float,
    k0: float,
    false_easting: float,
    false_northing: float,
    ellipsoid: tuple[float, float] = _WGS84,
) -> tuple[np.ndarray, np.ndarray]:
    """Transverse Mercator (Krüger's series to third order in n: millimetre accuracy within
    the usual zone widths) of degrees ``lat``/``lon``; ``ellipsoid`` = (a, f)."""
    a, f = ellipsoid
    n = f / (2 - f)
    big_a = a / (1 + n) * (1 + n**2 / 4 + n**4 / 64)
    alpha = (n / 2 - 2 * n**2 / 3 + 5 * n**3 / 16, 13 * n**2 / 48 - 3 * n**3 / 5, 61 * n**3 / 240)
    phi = np.radians(np.asarray(lat, dtype=float))
    dlam = np.radians(np.asarray(lon, dtype=float) - lon0)
    c = 2 * math.sqrt(n) / (1 + n)
    t = np.sinh(np.arctanh(np.sin(phi)) - c * np.arctanh(c * np.sin(phi)))
    xi = np.arctan2(t, np.cos(dlam))
    eta = np.arctanh(np.sin(dlam) / np.sqrt(1 + t**2))
    x, y = eta.copy(), xi.copy()
    for j, aj in enumerate(alpha, start=1):
        x += aj * np.cos(2 * j * xi) * np.sinh(2 * j * eta)
        y += aj * np.sin(2 * j * xi) * np.cosh(2 * j * eta)
    return false_easting + k0 * big_a * x, false_northing + k0 * big_a * y


def utm(
    lat: np.ndarray, lon: np.ndarray, zone: int | None = None, *, south: bool | None = None
) -> tuple[np.ndarray, np.ndarray, str]:
    """WGS 84 / UTM coordinates and their EPSG code; the zone (and hemisphere) default to those of
    the mean longitude (latitude)."""
    lat, lon = np.asarray(lat, dtype=float), np.asarray(lon, dtype=float)
    if zone is None:
        zone = int(np.clip(np.floor((np.mean(lon) + 180) / 6) + 1, 1, 60))
    if south is None:
        south = bool(np.mean(lat) < 0)
    x, y = transverse_mercator(
        lat,
        lon,
        lon0=zone * 6 - 183,
        k0=0.9996,
        false_easting=500_000.0,
        false_northing=10_000_000.0 if south else 0.0,
    )
    return x, y, f"EPSG:{32700 + zone if south else 32600 + zone}"


@dataclass(frozen=True)
class Coordinates:
    """Stop coordinates: ``table`` indexed by location id (str) with float columns ``x``, ``y``;
    ``crs`` (e.g. ``EPSG:32188``) or ``None`` when unknown; ``source``: where they came from."""

    table: pd.DataFrame
    crs: str | None
    source: str

    def lookup(self, locations: Sequence[str] | np.ndarray) -> pd.DataFrame:
        """``x, y`` of each location (in order); InputError naming a location without them."""
        wanted = pd.Index(pd.unique(np.asarray(locations, dtype=object)))
        known = wanted.isin(self.table.index)
        if not known.all():
            missing = sorted(wanted[~known].astype(str))
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise InputError(f"no coordinates for location {missing[0]!r}{more} in {self.source}")
        return self.table.loc[wanted]


def _geographic(ids: pd.Series, lat: pd.Series, lon: pd.Series, crs: str, src: str) -> Coordinates:
    la = pd.to_numeric(lat, errors="coerce").to_numpy(dtype=float)
    lo = pd.to_numeric(lon, errors="coerce").to_numpy(dtype=float)
    bad = np.isnan(la) | np.isnan(lo) | (np.abs(la) > 90) | (np.abs(lo) > 180)
    if bad.any():
        row = int(np.flatnonzero(bad)[0]) + 1
        raise InputError(f"{src}: row {row}: no valid lat/lon for stop {ids.iloc[row - 1]!r}")
    if crs == "wgs84":
        x, y, code = lo, la, "EPSG:4326"
    elif crs == "auto":
        x, y, code = utm(la, lo)
    else:
        raise ConfigError(
            f"crs must be 'auto' or 'wgs84' for geographic coordinates ({src}), got {crs!r}"
        )
    return _table(ids, x, y, code, src)


def _table(ids: pd.Series, x: np.ndarray, y: np.ndarray, crs: str | None, src: str) -> Coordinates:
    table = pd.DataFrame(
        {"x": np.asarray(x, dtype=float), "y": np.asarray(y, dtype=float)},
        index=pd.Index(ids.astype(str).to_numpy(), name="location"),
    )
    table = table[~table.index.duplicated(keep="first")]
    return Coordinates(table, crs, src)


def load_coordinates(spec: str | os.PathLike[str], *, crs: str = "auto") -> Coordinates:
    """Stop coordinates from a GTFS zip, ``"montreal"`` (embedded) or a CSV/Parquet table.

    ``crs``: ``"auto"`` (projected coordinates kept; latitude/longitude projected to UTM),
    ``"wgs84"`` (latitude/longitude kept in degrees), or for a table with ``x, y`` the CRS label to
    declare (e.g. ``"EPSG:2950"``; ``"auto"`` declares none).
    """
    text = str(spec)
    if text == "montreal":
        from synth import datasets

        both = datasets.montreal_network().rename(columns={"station": "key"})
        src = "the embedded Montreal metro network"
        if crs == "wgs84":
            return _geographic(both["key"], both["lat"], both["lon"], crs, src)
        if crs != "auto":
            raise ConfigError(f"crs must be 'auto' or 'wgs84' for {src}, got {crs!r}")
        return _table(
            both["key"], both["x_mtm8"].to_numpy(), both["y_mtm8"].to_numpy(), "EPSG:32188", src
        )
    path = Path(text)
    if path.suffix.lower() == ".zip":
        from synth.simulate import gtfs_coordinates

        stops = gtfs_coordinates(path)
        return _geographic(
            stops["location"], stops["lat"], stops["lon"], crs, f"{path} (stops.txt)"
        )
    df = read_table(path, dtype={"stop_id": str, "location": str})
    id_col = next((c for c in ("stop_id", "location") if c in df.columns), None)
    if id_col is None:
        raise InputError(f"{path}: needs a 'stop_id' (or 'location') column")
    ids = _ids(df[id_col], id_col, str(path))
    lat_col = next((c for c in ("lat", "stop_lat") if c in df.columns), None)
    lon_col = next((c for c in ("lon", "stop_lon") if c in df.columns), None)
    if {"x", "y"} <= set(df.columns):
        xy = df[["x", "y"]].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
        bad = np.isnan(xy).any(axis=1)
        if bad.any():
            row = int(np.flatnonzero(bad)[0]) + 1
            raise InputError(
                f"{path}: row {row}: x/y of stop {ids.iloc[row - 1]!r} are not numbers"
            )
        if crs == "wgs84":
            raise ConfigError(f"{path}: crs 'wgs84' needs lat/lon columns, the file has x/y")
        return _table(ids, xy[:, 0], xy[:, 1], None if crs == "auto" else crs, str(path))
    if lat_col is not None and lon_col is not None:
        return _geographic(ids, df[lat_col], df[lon_col], crs, str(path))
    raise InputError(f"{path}: needs x, y or lat, lon columns (found: {', '.join(df.columns)})")


# ---------------------------------------------------------------------------- MATSim
def plan_end_times(
    release: Release, *, default_start: float = DEFAULT_START, default_gap: float = DEFAULT_GAP
) -> np.ndarray:
    """End time (seconds after midnight, NaN for a last step) of every step's activity.

    Binned departures are spread inside their bins, exact ones kept, and without times the
    defaults apply (module docstring); times of one person never decrease.
    """
    steps = release.steps
    person = steps["person"].to_numpy(dtype=object)
    has_leg = steps["mode"].to_numpy(dtype=object) != ""
    rows = np.flatnonzero(has_leg)
    out = np.full(len(steps), np.nan)
    if rows.size == 0:
        return out
    p = person[rows]
    new = np.r_[True, p[1:] != p[:-1]]
    idx = np.arange(rows.size)
    k = idx - np.maximum.accumulate(np.where(new, idx, 0))
    if release.bin_width is None:
        minutes = default_start + k * default_gap
    else:
        start = steps["start"].to_numpy(dtype=float)[rows]
        # running maximum within each person: persons are lifted by growing multiples of ten
        # days (times of day are below one day), so no maximum leaks into the next person
        offset = np.cumsum(new) * 10.0 * MINUTES_PER_DAY
        start = np.maximum.accumulate(start + offset) - offset
        width = float(release.bin_width)
        if width > 0:
            run = np.r_[True, new[1:] | (start[1:] != start[:-1])]
            j = idx - np.maximum.accumulate(np.where(run, idx, 0))
            run_id = np.cumsum(run) - 1
            m = np.bincount(run_id)[run_id]
            start = start + (j + 0.5) * width / m
        minutes = start
    out[rows] = np.round(np.asarray(minutes, dtype=float) * 60.0)
    return out


def _hms(seconds: np.ndarray) -> np.ndarray:
    s = seconds.astype(np.int64)
    uniq, inv = np.unique(s, return_inverse=True)
    labels = np.array(
        [f"{u // 3600:02d}:{u % 3600 // 60:02d}:{u % 60:02d}" for u in uniq], dtype=object
    )
    return labels[inv]


def _attr(value: str) -> str:
    return escape(value, {'"': "&quot;"})


#: Characters XML 1.0 cannot carry, even escaped (control characters other than tab, newline and
#: carriage return; surrogates; U+FFFE, U+FFFF).
XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def check_xml_text(values: Iterable[object], what: str) -> None:
    """ConfigError naming the first value holding a character XML 1.0 cannot carry.

    The MATSim export refuses such ids rather than altering them (a changed id would no longer
    match the release or the stop table); rename them in the input.
    """
    for value in values:
        bad = XML_INVALID.search(str(value))
        if bad:
            raise InputError(
                f"{what} {str(value)!r} holds U+{ord(bad.group()):04X}, a character XML cannot "
                "carry: the MATSim export refuses it (rename the id in the input)"
            )


#: Cell starts a spreadsheet reads as a formula (OWASP "CSV injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def spreadsheet_safe(series: pd.Series) -> pd.Series:
    """Text cells starting with ``= + - @``, tab or carriage return get a leading ``'`` (shown,
    not evaluated, by spreadsheets); plain numbers such as ``-12`` are left alone."""
    text = series.astype(str)
    risky = text.str.startswith(FORMULA_START) & ~text.str.fullmatch(_PLAIN_NUMBER)
    return text.where(~risky, "'" + text)


def population_chunks(
    release: Release,
    coordinates: Coordinates,
    *,
    activity_type: str = "other",
    default_start: float = DEFAULT_START,
    default_gap: float = DEFAULT_GAP,
) -> Iterator[str]:
    """The MATSim population v6 XML of ``release`` as text chunks (module docstring)."""
    steps = release.steps
    if not activity_type or not activity_type.strip():
        raise ConfigError("activity_type must be a non-empty string")
    loc = steps["location"].to_numpy(dtype=object)
    codes, uniq = pd.factorize(loc)
    check_xml_text(uniq, f"{release.path}: location")
    check_xml_text(pd.unique(steps["person"].astype(str)), f"{release.path}: person id")
    check_xml_text(pd.unique(steps["mode"].astype(str)), f"{release.path}: mode")
    check_xml_text([activity_type, coordinates.crs or "", release.path.parent.name], "name")
    xy = coordinates.lookup(uniq)
    digits = 7 if coordinates.crs == "EPSG:4326" else 3
    open_act = np.array(
        [
            f'<activity type={quoteattr(activity_type)} x="{x:.{digits}f}" y="{y:.{digits}f}"'
            for x, y in zip(xy["x"].to_numpy(), xy["y"].to_numpy(), strict=True)
        ],
        dtype=object,
    )
    attrs = np.array(
        [
            '><attributes><attribute name="stop_id" class="java.lang.String">'
            f"{escape(str(u))}</attribute></attributes></activity>\n"
            for u in uniq
        ],
        dtype=object,
    )
    ends = plan_end_times(release, default_start=default_start, default_gap=default_gap)
    yield '<?xml version="1.0" encoding="utf-8"?>\n'
    yield '<!DOCTYPE population SYSTEM "http://www.matsim.org/files/dtd/population_v6.dtd">\n'
    desc = (
        f"transit-synth export of the synthetic {release.kind} release {release.path.parent.name}"
    )
    yield f"<population desc={quoteattr(desc)}>\n"
    if coordinates.crs is not None:
        yield (
            '<attributes><attribute name="coordinateReferenceSystem" class="java.lang.String">'
            f"{escape(coordinates.crs)}</attribute></attributes>\n"
        )
    person = steps["person"].to_numpy(dtype=object)
    mode = steps["mode"].to_numpy(dtype=object)
    n = len(steps)
    for lo in range(0, n, XML_BLOCK):
        hi = min(n, lo + XML_BLOCK)
        sl = slice(lo, hi)
        first = steps["step"].to_numpy()[sl] == 0
        head = np.full(hi - lo, "", dtype=object)
        pids = pd.Series(person[sl][first], dtype=object).map(_attr).to_numpy(dtype=object)
        head[first] = '<person id="' + pids + '"><plan selected="yes">\n'
        end = ends[sl]
        timed = ~np.isnan(end)
        end_attr = np.full(hi - lo, "", dtype=object)
        if timed.any():
            end_attr[timed] = ' end_time="' + _hms(end[timed]) + '"'
        m = mode[sl]
        m = pd.Series(m, dtype=object).astype(str).map(_attr).to_numpy(dtype=object)
        tail = np.where(m == "", "</plan></person>\n", '<leg mode="' + m + '"/>\n')
        text = head + open_act[codes[sl]] + end_attr + attrs[codes[sl]] + tail
        yield "".join(text.tolist())
    yield "</population>\n"


def write_population(
    release: Release,
    coordinates: Coordinates,
    path: str | os.PathLike[str],
    *,
    activity_type: str = "other",
    default_start: float = DEFAULT_START,
    default_gap: float = DEFAULT_GAP,
) -> Path:
    """Write the MATSim population XML (``.xml``, or gzip-compressed ``.xml.gz``) atomically."""
    p = Path(path)
    chunks = population_chunks(
        release,
        coordinates,
        activity_type=activity_type,
        default_start=default_start,
        default_gap=default_gap,
    )
    first = next(chunks)  # fails (missing coordinates) before any file is created
    with atomic_path(p) as tmp:
        if p.name.lower().endswith(".gz"):
            import gzip

            fh: Any = gzip.open(tmp, "wt", encoding="utf-8")
        else:
            fh = tmp.open("w", encoding="utf-8")
        with fh:
            fh.write(first)
            for chunk in chunks:
                fh.write(chunk)
    return p


# ---------------------------------------------------------------------------- one call
def export_release(
    directory: str | os.PathLike[str],
    *,
    to: str,
    out: str | os.PathLike[str] | None = None,
    stops: str | os.PathLike[str] | None = None,
    bin_minutes: int | None = None,
    fmt: str = "csv",
    crs: str = "auto",
    csv_escape: bool = True,
    **columns: str | None,
) -> dict[str, Any]:
    """Export a release directory (``to`` = ``"od"`` or ``"matsim"``) into ``out`` (default: the
    release directory): ``od.csv``/``od.parquet`` or ``population.xml``, plus ``export-<to>.json``
    describing the export. Written through :func:`synth.io.release_dir` (all or nothing).
    ``csv_escape``: see :func:`write_od`.
    ``columns``: the trip column options of :func:`read_release`. Returns that JSON's dict.
    """
    if to not in ("od", "matsim"):
        raise ConfigError(f"to must be 'od' or 'matsim', got {to!r}")
    if fmt not in ("csv", "parquet"):
        raise ConfigError(f"format must be 'csv' or 'parquet', got {fmt!r}")
    if to == "matsim" and stops is None:
        raise ConfigError(
            "a MATSim export needs stop coordinates (--stops: a GTFS zip, 'montreal' "
            "or a CSV of stop_id,x,y)"
        )
    if to == "od" and stops is not None:
        raise ConfigError("stop coordinates (--stops) are only used by the MATSim export")
    if to == "matsim" and bin_minutes is not None:
        raise ConfigError(
            "time bins (--bin) are only used by the OD export; MATSim plans keep "
            "the release's times"
        )
    unknown = sorted(
        set(columns)
        - {"id_column", "origin_column", "destination_column", "location_column", "time_column"}
    )
    if unknown:
        raise ConfigError(f"unknown option(s): {', '.join(unknown)}")
    release = read_release(directory, **columns)
    target = Path(out) if out is not None else Path(directory)
    info: dict[str, Any] = {
        "export": to,
        "release": str(Path(directory)),
        "kind": release.kind,
        "columns": release.columns,
        "persons": release.n_persons,
        "legs": release.n_legs,
        "privacy": "post-processing of the release: its manifest.json guarantee applies unchanged",
        "privacy_unit": release.manifest.get("privacy_unit"),
        "spent": release.manifest.get("spent"),
    }
    beside = target.resolve() == Path(directory).resolve()  # into the release: add, never replace
    with release_dir(target, add=beside) as stage:
        if to == "od":
            od = od_matrix(release, bin_minutes=bin_minutes)
            name = f"od.{fmt}"
            write_od(od, stage / name, csv_escape=csv_escape)
            width = _check_bin(release, bin_minutes)
            info.update(
                file=name,
                rows=len(od),
                bin_minutes=width,
                bins="all" if width is None else "HH:MM start of each bin",
                csv_escape="cells starting with = + - @ (not plain numbers) prefixed with '"
                if csv_escape and fmt == "csv"
                else "none",
            )
        else:
            coords = load_coordinates(str(stops), crs=crs)
            name = "population.xml"
            write_population(release, coords, stage / name)
            info.update(
                file=name,
                crs=coords.crs,
                coordinates=coords.source,
                times="binned departures spread inside bins"
                if release.bin_width
                else "exact departures"
                if release.bin_width == 0
                else f"defaults: first end {DEFAULT_START // 60:02d}:00, "
                f"then every {DEFAULT_GAP} minutes",
                synthetic_times=release.bin_width is None,
            )
        with atomic_path(stage / f"export-{to}.json") as tmp:
            tmp.write_text(json.dumps(info, indent=2, default=str), encoding="utf-8")
    return info
