"""Input mapping: which column of an agency's file plays which role, and shipped profiles.

An :class:`InputMap` is public configuration: column names (schema facts), the delimiter, the
``tap`` values that mean a tap-off, whether rows without a card id are dropped, and the declared
time resolution. :func:`read_mapped` reads a taps file with it and renames the columns to the
canonical names the loaders of :mod:`synth.records` read (``card_id``, ``time``, ``date``,
``hour``, ``minute``, the location column, ``tap``). Every rule is per record or per schema:
the delimiter hint looks at the header line only, a row is dropped for its own empty card id, a
``tap`` value is a tap-off if it is one of the declared values, and the time resolution is
declared (``time_resolution``) or a schema fact (an hour column without a minute column is
60-minute data), never inferred from the values of other rows.

Profiles (``profiles.toml`` beside this module) are named InputMaps: ``sube`` (Buenos Aires
SUBE taps) and ``generic``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError, TransitSynthWarning
from synth.io import ID_SPACE, check_sep, read_table, table_columns
from synth.logs import private_message
from synth.params import spell
from synth.records.common import (
    ROLE_OPTIONS,
    TAP_ALIASES,
    TIME_COLUMNS,
    require_columns,
    tap_times,
)

__all__ = [
    "PROFILES",
    "InputMap",
    "MissingIdWarning",
    "TimeResolutionWarning",
    "header_roles",
    "mapping_hint",
    "profile_names",
    "read_mapped",
    "restated_error",
    "role_summary",
    "time_grain_warning",
    "time_resolution_warning",
]

_PROFILE_FILE = Path(__file__).with_name("profiles.toml")


class MissingIdWarning(TransitSynthWarning):
    """Rows without a card id were dropped (``drop_missing_ids``)."""


class TimeResolutionWarning(TransitSynthWarning):
    """The time bin is finer than the data's time resolution."""


@dataclass(frozen=True)
class InputMap:
    """How a taps file is read (see the module docstring). ``None``: the default (the
    :data:`~synth.records.common.TAP_ALIASES` and canonical names)."""

    card_column: str | None = None
    time_column: str | None = None
    date_column: str | None = None
    hour_column: str | None = None
    minute_column: str | None = None
    location_column: str | None = None
    tap_column: str | None = None
    tap_off_values: tuple[str, ...] | None = None
    sep: str | None = None
    drop_missing_ids: bool = False
    time_resolution: int | None = None
    date_format: str | None = None
    profile: str | None = None

    @classmethod
    def build(cls, profile: str | None = None, **options: Any) -> InputMap:
        """The ``profile``'s settings (if any) overridden by the ``options`` that are not None."""
        base: dict[str, Any] = {}
        if profile is not None:
            if profile not in PROFILES:
                raise ConfigError(
                    f"unknown input profile {profile!r} (choose one of {', '.join(PROFILES)})"
                )
            base = dict(PROFILES[profile])
        unknown = sorted(set(options) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ConfigError(f"unknown input option(s) {', '.join(unknown)}")
        base.update({k: v for k, v in options.items() if v is not None and v is not False})
        off = base.get("tap_off_values")
        if isinstance(off, str):
            off = [v for v in off.split(",")]
        if off is not None:
            off = tuple(v.strip(ID_SPACE) for v in off if v.strip(ID_SPACE))
            if not off:
                raise ConfigError(f"{spell('tap_off_values')}: give at least one value")
        base["tap_off_values"] = off
        base["sep"] = check_sep(base.get("sep"))
        res = base.get("time_resolution")
        if res is not None and (not isinstance(res, int) or isinstance(res, bool) or res < 1):
            raise ConfigError(
                f"{spell('time_resolution')}: expected whole minutes >= 1, got {res!r}"
            )
        return cls(**base, profile=profile)

    @property
    def active(self) -> bool:
        """Whether anything beyond the location column differs from the default reading."""
        return any(
            getattr(self, f.name) not in (None, False)
            for f in dataclasses.fields(self)
            if f.name != "location_column"
        )


def _load_profiles() -> dict[str, dict[str, Any]]:
    with _PROFILE_FILE.open("rb") as fh:
        table = tomllib.load(fh)
    return {
        name: {k: v for k, v in entry.items() if k != "description"}
        for name, entry in table.items()
    }


#: profile name -> its InputMap settings (``profiles.toml``)
PROFILES: Mapping[str, Mapping[str, Any]] = _load_profiles()


def profile_names() -> tuple[str, ...]:
    return tuple(PROFILES)


def _resolve(names: list[str], given: str | None, defaults: tuple[str, ...]) -> str | None:
    return given if given is not None else next((c for c in defaults if c in names), None)


def header_roles(names: list[str], imap: InputMap, location_default: str) -> dict[str, str | None]:
    """canonical name -> source column (None: absent), from the header names only."""
    by_parts = imap.time_column is None and (imap.date_column or imap.hour_column)
    time = None if by_parts else _resolve(names, imap.time_column, ("time",))
    roles = {
        "card_id": _resolve(names, imap.card_column, TAP_ALIASES["card_id"]),
        "time": time,
        "date": None if time else _resolve(names, imap.date_column, TAP_ALIASES["date"]),
        "hour": None if time else _resolve(names, imap.hour_column, TAP_ALIASES["hour"]),
        "minute": None if time else _resolve(names, imap.minute_column, TAP_ALIASES["minute"]),
        location_default: imap.location_column or location_default,
        "tap": _resolve(names, imap.tap_column, ("tap",)),
    }
    if imap.tap_column is not None and imap.tap_column not in names and imap.profile:
        roles["tap"] = None  # a profile's tap column is optional: all rows are then boardings
    if roles["tap"] is None and "tipo_trx_tren" in names:  # read by the loaders' SUBE rule
        roles["sube_tap"] = "tipo_trx_tren"
    return roles


def mapping_hint(missing: Sequence[str], names: Sequence[str]) -> str:
    """``: name your own columns with --card-column, --location-column, --time-column (or
    --profile generic|sube)`` for the canonical columns ``missing`` (spelled for the caller's
    context: :func:`synth.params.spell`); ``--time-column`` too when the header ``names`` hold
    no time column (``time`` nor a date alias). From the header only; "" when no role is
    missing."""
    options = [ROLE_OPTIONS[c] for c in missing if c in ROLE_OPTIONS]
    if not options:
        return ""
    if "time" not in names and not any(c in names for c in TAP_ALIASES["date"]):
        options.append("time_column")
    shown = ", ".join(spell(o) for o in dict.fromkeys(options))
    return (
        f": name your own columns with {shown} (or {spell('profile')} {'|'.join(profile_names())})"
    )


def role_summary(
    src: str, roles: Mapping[str, str | None], imap: InputMap, location_default: str
) -> str:
    """One line: which column plays which role (public schema facts only, no counts)."""
    parts = [roles["time"]] if roles["time"] else [roles["date"], roles["hour"], roles["minute"]]
    shown: dict[str, str | None] = {
        "card": roles["card_id"],
        "time": " + ".join(c for c in parts if c),
        "location": roles[location_default],
    }
    tap = roles["tap"]
    if tap and imap.tap_off_values:
        tap = f"{tap} (off: {', '.join(imap.tap_off_values)})"
    if tap is None and roles.get("sube_tap"):
        tap = f"{roles['sube_tap']} (off: CHECK OUT...)"
    shown["tap"] = tap or "none (all boardings)"
    profile = f" [profile {imap.profile}]" if imap.profile else ""
    text = ", ".join(f"{k}={v or '?'}" for k, v in shown.items())
    return f"{Path(src).name if os.sep in src else src}: columns {text}{profile}"


def read_mapped(
    path: str | os.PathLike[str] | pd.DataFrame,
    imap: InputMap,
    *,
    location_default: str = "stop_id",
) -> tuple[pd.DataFrame, str]:
    """A taps file read with ``imap`` (:func:`read_mapped_rows` without the row numbers)."""
    df, summary, _ = read_mapped_rows(path, imap, location_default=location_default)
    return df, summary


#: the rest of a loader's error line after its source: ``column 'C', row N: what``
_LOCATED = re.compile(r"column '(?P<col>[^']*)', row (?P<row>\d+): ")


def restated_error(
    error: InputError,
    read_as: str,
    source: str,
    columns: Mapping[str, str],
    rows: np.ndarray | None,
) -> InputError:
    """``error``, raised by a loader about the mapped records under the name ``read_as`` (e.g.
    ``input DataFrame: column 'time', row 20000: ...``), restated in the user's terms: the file
    ``source``, the user's own column (``columns``: canonical name -> the file's column) and the
    row as the user counts it (the file's data row, 1-based after the header: ``rows[N - 1]``
    when rows were dropped; a line without a source too). Any other error comes back as is."""
    text = str(error)
    if text.startswith(f"{read_as}: "):
        rest = text[len(read_as) + 2 :]
    elif _LOCATED.match(text):  # a loader that names no source
        rest = text
    else:
        return error
    m = _LOCATED.match(rest)
    if m is not None:
        row = int(m["row"])
        if rows is not None and 1 <= row <= rows.size:
            row = int(rows[row - 1])
        column = columns.get(m["col"], m["col"])
        rest = f"column '{column}', row {row}: {rest[m.end() :]}"
    return type(error)(f"{source}: {rest}")


def read_mapped_rows(
    path: str | os.PathLike[str] | pd.DataFrame,
    imap: InputMap,
    *,
    location_default: str = "stop_id",
) -> tuple[pd.DataFrame, str, np.ndarray | None]:
    """A taps file read with ``imap``: its columns renamed to the canonical names
    (``location_default`` for the location), ``tap`` as ``on``/``off`` when ``tap_off_values``
    are declared, rows without a card id dropped under ``drop_missing_ids`` (the count goes to
    the holder's log, :func:`synth.logs.private_message`). Returns the frame and the one-line
    summary of :func:`role_summary`, and the file's data row (1-based) of each row kept when
    rows were dropped (else None). Long-format sequences (``seq_id``, ``pos``) and trips
    (``on_stop``) come back as read (only ``sep`` applies)."""
    if isinstance(path, pd.DataFrame):
        src, names = "input DataFrame", [str(c) for c in path.columns]
    else:
        src, names = str(path), table_columns(path, sep=imap.sep)
    if {"seq_id", "pos"} <= set(names) or ("on_stop" in names and "stop_id" not in names):
        if isinstance(path, pd.DataFrame):
            return path, f"{src}: columns {', '.join(names)}", None
        frame = read_table(
            path, sep=imap.sep, dtype={c: str for c in ("seq_id", "card_id", "location") if c}
        )
        return frame, f"{Path(src).name}: columns {', '.join(names)}", None
    roles = header_roles(names, imap, location_default)
    named = (imap.card_column, imap.time_column, imap.date_column, imap.hour_column)
    given = [c for c in (*named, imap.minute_column, imap.location_column) if c is not None]
    if roles["tap"] is not None:
        given.append(roles["tap"])
    require_columns(
        names, [*given, roles[location_default] or location_default], src, hint=mapping_hint
    )
    if roles["card_id"] is None:
        require_columns(names, ["card_id"], src, hint=mapping_hint)
    ids = [c for c in (roles["card_id"], roles[location_default]) if c]
    text = [c for c in (roles["time"], roles["date"], *TIME_COLUMNS) if c]
    if isinstance(path, pd.DataFrame):
        df = path.reset_index(drop=True)
    else:
        df = read_table(path, sep=imap.sep, dtype={c: str for c in ids}, text=text)
    renamed = ("card_id", "time", location_default, "tap")
    rename = {roles[k]: k for k in renamed if roles[k] is not None and roles[k] != k}
    targets = set(rename.values())
    # a column already named like a role it does not play is left out (the mapped one wins)
    keep = [c for c in df.columns if c in rename or c not in targets]
    df = df[keep].rename(columns=rename)
    if imap.tap_off_values is not None and "tap" in df.columns:
        off = {v.lower() for v in imap.tap_off_values}
        value = df["tap"].astype("string").str.strip(ID_SPACE).str.lower()
        df["tap"] = np.where(value.isin(off).fillna(False).to_numpy(dtype=bool), "off", "on")
    rows = None
    if imap.drop_missing_ids:
        df, rows = _drop_missing_ids(df, src, roles["card_id"] or "card_id")
    if roles["time"] is None:  # date + hour [+ minute]: one time column, each row on its own
        parts = [roles[k] for k in ("date", "hour", "minute")]
        date, hour, minute = parts
        try:
            df["time"] = tap_times(df, src, "time", None, date, hour, minute, imap.date_format)
        except InputError as exc:  # its row counted among the kept rows: the file's row
            raise restated_error(exc, src, src, {}, rows) from None
        df = df.drop(columns=[c for c in parts if c and c in df.columns])
    return df, role_summary(src, roles, imap, location_default), rows


def _drop_missing_ids(
    df: pd.DataFrame, src: str, shown: str
) -> tuple[pd.DataFrame, np.ndarray | None]:
    """Rows whose own card id is missing or blank are dropped (per record); with the file's
    data row (1-based) of each row kept when some were dropped."""
    card = df["card_id"]
    missing = card.isna().to_numpy() | (
        card.astype("string").str.strip(ID_SPACE).fillna("") == ""
    ).to_numpy(dtype=bool)
    n = int(missing.sum())
    if n:
        text = private_message(f"{src}: dropped {n} rows without a card id (column '{shown}')")
        if text is not None:
            warnings.warn(text, MissingIdWarning, stacklevel=3)
        return df[~missing].reset_index(drop=True), np.flatnonzero(~missing) + 1
    return df, None


def time_resolution_warning(
    imap: InputMap, columns: list[str], bin_minutes: int | None, flag: str = "--time-bin"
) -> int | None:
    """Warn when ``bin_minutes`` is finer than the data's time resolution: the declared
    ``time_resolution``, or 60 minutes when the times are built from an hour column without a
    minute column (the file's header ``columns``: a schema fact). Never inferred from values.
    Returns that resolution (None: neither declared nor a schema fact)."""
    if bin_minutes is None:
        return None
    res, reason = imap.time_resolution, "declared (--time-resolution or the profile)"
    if res is None:
        roles = header_roles(columns, imap, "stop_id")
        if roles["time"] is None and roles["hour"] in columns and roles["minute"] is None:
            res, reason = 60, f"times from the hour column '{roles['hour']}' without minutes"
    if res is not None and bin_minutes < res:
        warnings.warn(
            f"{flag} {bin_minutes} is finer than the data's time resolution ({res} minutes: "
            f"{reason}): the finer bins split nothing real",
            TimeResolutionWarning,
            stacklevel=2,
        )
    return res


def time_grain_warning(
    times: pd.Series, bin_minutes: int | None, flag: str = "--time-bin"
) -> tuple[int, int]:
    """Each time value checked on its own against ``bin_minutes``: a value on a whole hour may
    be hourly data (its own precision coarser than a bin under 60 minutes); a value off the
    bin's grid splits a bin. Returns (values on a whole hour, values compared) and, when the
    bin is under an hour and some values lie on a whole hour, tells the data holder the counts
    (:func:`synth.logs.private_message`, a :class:`TimeResolutionWarning` in the holder's log,
    hidden by ``--log-private hide``). Nothing is decided from the counts: the release bins
    every value by the same rule, and no count reaches a release."""
    if bin_minutes is None or bin_minutes >= 60 or times.empty:
        return 0, 0
    from synth.times import times_of_day

    minute, _ = times_of_day(times.dropna(), source=None)
    hours, n = int((minute % 60 == 0).sum()), int(minute.size)
    text = hours and private_message(
        f"{flag} {bin_minutes}: {hours} of {n} time values lie on a whole hour (e.g. 08:00); "
        "a value given to the hour splits nothing real in finer bins (declare the data's "
        "resolution with --time-resolution 60 if it is hourly)"
    )
    if text:
        warnings.warn(text, TimeResolutionWarning, stacklevel=2)
    return hours, n
