"""The input-mapping options (``--profile``, ``--card-column`` ... ``--sep``) and config keys.

Shared by every command that reads taps (``sequences``, ``marginals``, ``evaluate``) and by the
``[sequences]``/``[marginals]`` tables of ``run`` configs; the rules are
:mod:`synth.records.mapping`. With any mapping option the file is read by that per-record loader
and its rows handed to the command as a frame: every engine then counts the same loaded rows (an
engine that reads files itself never sees the mapped file).
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

if TYPE_CHECKING:  # the loaders (pandas) are imported when a file is read: --help stays fast
    import pandas as pd

    from synth.records.mapped_source import MappedSource
    from synth.records.mapping import InputMap

#: the shipped input profiles (synth/records/profiles.toml, read without importing the loaders)
PROFILES: tuple[str, ...] = tuple(
    tomllib.loads((Path(__file__).parents[1] / "records" / "profiles.toml").read_text("utf-8"))
)

__all__ = [
    "INPUT_MAP_KEYS",
    "add_input_map_options",
    "input_map_from_args",
    "input_map_from_io",
    "mapped_input",
]

#: the input-side keys of a ``[sequences]``/``[marginals]`` config table (rules of
#: :func:`synth.config.check_io`): the input mapping (``location_column`` is declared by each
#: table) and the public location names (``names``, as ``--names``; ``location_names``, as
#: ``--location-names``)
INPUT_MAP_KEYS: dict[str, Any] = {
    "names": "path",
    "location_names": bool,
    "profile": PROFILES,
    "card_column": str,
    "time_column": str,
    "date_column": str,
    "hour_column": str,
    "minute_column": str,
    "tap_column": str,
    "tap_off_values": str,
    "sep": str,
    "drop_missing_ids": bool,
    "time_resolution": int,
}


def add_input_map_options(parser: argparse.ArgumentParser, *, skip: tuple[str, ...] = ()) -> None:
    """Add the input-mapping flags (README "Data formats": input mapping and profiles);
    ``skip``: roles whose ``--ROLE-column`` the command already has (``evaluate``'s
    ``--time-column`` names the taps' time too) and ``resolution`` (no time bin)."""
    g = parser.add_argument_group(
        "input mapping (which column plays which role; default: card_id/id_tarjeta, time or "
        "date/fecha + hour/hora, stop_id, tap)"
    )
    g.add_argument(
        "--profile",
        choices=PROFILES,
        default=None,
        help="a shipped input profile: sube (id_tarjeta, fecha + hora, id_linea, tipo_trx_tren "
        "CHECK OUT = tap-off, rows without a card id dropped) or generic (card_id, time, "
        "stop_id, tap); the flags below override it",
    )
    for role, example in (
        ("card", "card_number"),
        ("time", "tap_datetime (ISO 8601)"),
        ("date", "fecha"),
        ("hour", "hora (0-23)"),
        ("minute", "minuto"),
        ("tap", "tipo (on/off; see --tap-off-values)"),
    ):
        if role in skip:
            continue
        g.add_argument(
            f"--{role}-column",
            default=None,
            metavar="COL",
            help=f"the {role} column, e.g. {example}",
        )
    g.add_argument(
        "--tap-off-values",
        default=None,
        metavar="V1,V2",
        help="values of the tap column that mean a tap-off (compared trimmed, ignoring case), "
        "e.g. 'CHECK OUT,salida'; other values are boardings (default: off, out, check out ...)",
    )
    g.add_argument(
        "--sep", default=None, metavar="CHAR", help="CSV delimiter, e.g. ';' or tab (default ',')"
    )
    g.add_argument(
        "--drop-missing-ids",
        action="store_true",
        default=None,
        help="drop rows without a card id (each row on its own) instead of failing; the count "
        "goes to the data holder's log (private)",
    )
    if "resolution" in skip:
        return
    g.add_argument(
        "--time-resolution",
        type=int,
        default=None,
        metavar="MINUTES",
        help="the data's time resolution (e.g. 60 for hourly data): a finer time bin warns "
        "(default: 60 when the times are an hour column without minutes, else not checked)",
    )


def input_map_from_args(args: argparse.Namespace) -> InputMap:
    """The :class:`InputMap` of the parsed flags (``location_column`` when the command has it)."""
    from synth.records.mapping import InputMap

    return InputMap.build(
        args.profile,
        card_column=args.card_column,
        time_column=args.time_column,
        date_column=args.date_column,
        hour_column=args.hour_column,
        minute_column=args.minute_column,
        location_column=getattr(args, "location_column", None),
        tap_column=args.tap_column,
        tap_off_values=args.tap_off_values,
        sep=args.sep,
        drop_missing_ids=args.drop_missing_ids,
        time_resolution=getattr(args, "time_resolution", None),
    )


def input_map_from_io(io: Mapping[str, Any]) -> InputMap:
    """The :class:`InputMap` of a config table's keys."""
    from synth.records.mapping import InputMap

    keys = [k for k in INPUT_MAP_KEYS if k not in ("profile", "names", "location_names")]
    return InputMap.build(
        io.get("profile"),
        location_column=io.get("location_column"),
        **{k: io[k] for k in keys if k in io},
    )


@overload
def mapped_input(
    path: str | os.PathLike[str] | pd.DataFrame,
    imap: InputMap,
    *,
    location_default: str = ...,
    time_bin: int | None = ...,
    bin_flag: str = ...,
    read: Literal[True] = ...,
) -> tuple[str | os.PathLike[str] | pd.DataFrame, str | None, str | None]: ...


@overload
def mapped_input(
    path: str | os.PathLike[str] | pd.DataFrame,
    imap: InputMap,
    *,
    location_default: str = ...,
    time_bin: int | None = ...,
    bin_flag: str = ...,
    read: bool,
) -> tuple[str | os.PathLike[str] | pd.DataFrame | MappedSource, str | None, str | None]: ...


def mapped_input(
    path: str | os.PathLike[str] | pd.DataFrame,
    imap: InputMap,
    *,
    location_default: str = "stop_id",
    time_bin: int | None = None,
    bin_flag: str = "--time-bin",
    read: bool = True,
) -> tuple[str | os.PathLike[str] | pd.DataFrame | MappedSource, str | None, str | None]:
    """What the command reads, its location column, and the one-line column summary (None for
    long-format input): the file itself when no mapping option is set (the default reading;
    engines may count it out of core), else the rows loaded by
    :func:`~synth.records.mapping.read_mapped` with the location renamed to
    ``location_default`` (with ``read=False``, a :class:`~synth.records.mapped_source.MappedSource`
    that the estimator's ``fit`` reads: issue 27). Warns when ``time_bin`` is finer than the
    data's time resolution (declared, or a schema fact) and, for the rows it loads (or ``fit``
    loads), tells the data holder how many time values lie on a whole hour (each value checked on
    its own, counts in the holder's log only). The caller prints the summary once the release
    succeeded (an error stays one line)."""
    import pandas as pd

    from synth.io import table_columns, table_format
    from synth.records.mapped_source import MappedSource
    from synth.records.mapping import (
        header_roles,
        read_mapped,
        role_summary,
        time_grain_warning,
        time_resolution_warning,
    )

    if not read and imap.active and isinstance(path, pd.DataFrame):
        known = time_resolution_warning(imap, [str(c) for c in path.columns], time_bin, bin_flag)
        grain = None if known is not None else time_bin  # checked per value when fit reads
        source = MappedSource(path, imap, location_default, grain, bin_flag)
        location = imap.location_column if source.long_format() else location_default
        return source, location, source.summary()
    if isinstance(path, pd.DataFrame):
        if not imap.active:
            return path, imap.location_column, None
        frame, summary = read_mapped(path, imap, location_default=location_default)
        known = time_resolution_warning(imap, [str(c) for c in path.columns], time_bin, bin_flag)
        if "time" in frame.columns and known is None:  # each value on its own
            time_grain_warning(frame["time"], time_bin, bin_flag)
        taps = not ({"seq_id", "pos"} <= set(frame.columns) or "on_stop" in frame.columns)
        return frame, location_default if taps else imap.location_column, summary
    if table_format(path) is None:
        return path, imap.location_column, None  # the loader names the problem
    names = table_columns(path, sep=imap.sep)
    known = time_resolution_warning(imap, names, time_bin, bin_flag)
    long_format = {"seq_id", "pos"} <= set(names) or ("on_stop" in names and "stop_id" not in names)
    if not imap.active:
        roles = header_roles(names, imap, location_default)
        line = None if long_format else role_summary(str(path), roles, imap, location_default)
        return path, imap.location_column, line
    location = imap.location_column if long_format else location_default
    if not read:
        grain = None if known is not None else time_bin  # checked per value when fit reads
        source = MappedSource(path, imap, location_default, grain, bin_flag)
        return source, location, source.summary()
    frame, summary = read_mapped(path, imap, location_default=location_default)
    if "time" in frame.columns and known is None:  # each value on its own
        time_grain_warning(frame["time"], time_bin, bin_flag)
    return frame, location, summary
