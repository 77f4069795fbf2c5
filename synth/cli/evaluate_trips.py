"""``evaluate`` on trips read as the ``trips`` command reads them, and read back in the user's
own columns.

``--input-format chicago-taxi|sube-taps`` (and ``--private-years`` for Chicago) reads ORIGINAL
with the generator's own reader (:mod:`archetypes.datasets`), so the raw Chicago or SUBE file is
scored against the release in the same encoding (like with like). Where that encoding is public
the evaluation states its inverse (:func:`archetypes.decoding.decoding`: column names and value
codes) in ``private-evaluation.json`` under ``decoding``, and ``--decode`` writes each synthetic
table in the user's own columns and values (``<name>-decoded.csv``, post-processing of the
release) beside it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd

from synth.errors import ConfigError
from synth.io import check_sep, read_table

__all__ = ["add_trip_input_options", "decoded_files", "read_original_trips", "trip_decoding"]

INPUT_FORMATS = ("trips", "chicago-taxi", "sube-taps")
DECODED_SUFFIX = "-decoded.csv"


def add_trip_input_options(group: Any) -> None:
    """``--input-format``, ``--private-years`` and ``--decode`` (the trips command's reading)."""
    group.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        default="trips",
        help="how ORIGINAL is read, as the trips command read the private file: a trips table "
        "(default), the raw Chicago taxi file, or SUBE taps (one trip per boarding)",
    )
    group.add_argument(
        "--private-years",
        default=None,
        metavar="Y1,Y2",
        help="chicago-taxi: keep these years of ORIGINAL, as the trips command's --private-years",
    )
    group.add_argument(
        "--decode",
        action="store_true",
        help="also write each synthetic table in the original columns and values "
        f"(NAME{DECODED_SUFFIX}: shift as day and hours, payment names, SUBE column names)",
    )


def _years(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(y) for y in text.split(",") if y.strip()]
    except ValueError:
        raise ConfigError(f"--private-years {text!r}: expected years such as 2013,2014") from None


def read_original_trips(args: argparse.Namespace, id_column: str) -> pd.DataFrame:
    """ORIGINAL read by ``--input-format`` (the trips command's reader), value by value."""
    sep = check_sep(args.sep)
    fmt = args.input_format
    if fmt != "chicago-taxi" and args.private_years is not None:
        raise ConfigError("--private-years applies to --input-format chicago-taxi")
    if fmt == "chicago-taxi":
        from archetypes.datasets import chicago_taxi_trips

        return chicago_taxi_trips(args.original, years=_years(args.private_years), sep=sep)
    if fmt == "sube-taps":
        from archetypes.datasets import sube_trips

        return sube_trips(args.original, sep=sep)
    return read_table(args.original, dtype={id_column: str}, sep=sep)


def trip_decoding(args: argparse.Namespace) -> dict[str, Any]:
    """``{"decoding": ...}``: the public inverse mapping of the input format (empty for trips)."""
    from archetypes.decoding import decoding

    return {"decoding": decoding(args.input_format)}


def decoded_files(
    args: argparse.Namespace, tables: dict[str, Path], stage: Path, id_column: str | None
) -> list[str]:
    """With ``--decode``: each synthetic table in the user's columns, ``NAME-decoded.csv`` in
    ``stage``; returns the file names."""
    if not args.decode:
        return []
    from archetypes.decoding import decode_trips

    written = []
    for name, table in tables.items():
        frame = read_table(table, dtype={id_column: str} if id_column else None)
        file = f"{name.replace('#', '-')}{DECODED_SUFFIX}"
        decode_trips(frame, args.input_format).to_csv(stage / file, index=False)
        written.append(file)
    return written
