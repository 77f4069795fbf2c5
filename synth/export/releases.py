"""Exports: a published release read as one plan per person (see :mod:`synth.export`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from synth import registry
from synth.errors import ConfigError, InputError
from synth.io import id_strings, read_json, read_table
from synth.params import spell
from synth.release import data_kinds, open_release
from synth.times import clock_parts, wall_clock_times

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


MINUTES_PER_DAY = 24 * 60


# ---------------------------------------------------------------------------- releases
@dataclass(frozen=True)
class Release:
    """A release turned into plans.

    ``steps``: one row per place of a person, in plan order: ``person`` (str), ``step`` (0-based),
    ``location`` (str), ``mode`` (the leg that follows: ``"pt"``, ``"walk"`` or ``""`` for the last
    step) and ``start`` (departure of that leg in minutes after midnight, the start of its bin when
    times are binned; NaN without times or on the last step). Persons are sorted (numerically when
    every id is an integer, else as strings). ``bin_width``: the native bin width in minutes, 0 for
    exact times, ``None`` when the release has no times. ``clock_times``: the binned times are
    clock times sampled inside their bins (a prefix-tree release whose manifest names a
    ``time_model``), used as they are; otherwise a binned time is its bin's start.
    """

    kind: str
    path: Path
    manifest: dict[str, Any]
    steps: pd.DataFrame
    bin_width: int | None
    columns: dict[str, str | None] = field(default_factory=dict)
    clock_times: bool = False

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

    The kind comes from the generator the manifest names (:mod:`synth.registry`: its data table is
    read as its spec's ``evaluation``, sequences or trips), else from the data file present. For
    trips, the person column is ``id_column``, else the ``id`` column of ``schema.json``, else the
    first of :data:`ID_COLUMNS`; origin/destination from the arguments or :data:`OD_PAIRS`; or, for
    trips without destination, the trip chain of ``location_column``. Column options do not apply to
    sequences.
    """
    release = open_release(directory)
    readable = [k for k in data_kinds() if registry.get(k).evaluation is not None]
    kind = release.data_kind(readable, what="export")
    path, manifest = release.data_file(kind), release.manifest
    if registry.get(kind).evaluation == "sequences":  # long-format sequences, else a trip table
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
    clock = width is not None and bool((manifest.get("parameters") or {}).get("time_model"))
    return Release("sequences", path, manifest, steps, width, {"person": "seq_id"}, clock)


def _pick(columns: Sequence[str], given: str | None, candidates: Sequence[str]) -> str | None:
    if given is not None:
        return given
    return next((c for c in candidates if c in columns), None)


def _schema_id(path: Path) -> str | None:
    schema = path.parent / "schema.json"
    if not schema.is_file():
        return None
    try:
        spec = read_json(schema)
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
        raise ConfigError(f"{spell('origin_column')} and {spell('destination_column')} go together")
    if location_column is not None and origin_column is not None:
        raise ConfigError("give origin/destination columns or a location column, not both")
    cols = _header(path)
    person_col = _pick(cols, id_column or _schema_id(path), ID_COLUMNS)
    if person_col is None:
        raise InputError(
            f"{src}: no person id column (looked for {', '.join(ID_COLUMNS)} and "
            f"schema.json); name it with {spell('id_column')}"
        )
    pair: tuple[str, str] | None = None
    if origin_column is not None and destination_column is not None:
        pair = (origin_column, destination_column)
    elif location_column is None:
        pair = next(((o, d) for o, d in OD_PAIRS if o in cols and d in cols), None)
        if pair is None:
            raise InputError(
                f"{src}: no origin/destination columns (looked for "
                f"{', '.join('/'.join(p) for p in OD_PAIRS)}); name them with "
                f"{spell('origin_column')} and "
                f"{spell('destination_column')}, or give {spell('location_column')} to chain a "
                f"person's trips"
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
    ident = {c: id_values(df[c], c, src) for c in dict.fromkeys([person_col, *places])}
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


def id_values(series: pd.Series, column: str, src: str) -> pd.Series:
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
