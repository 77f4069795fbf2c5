"""Trip tables read value by value (README "Data formats"; issue 25).

A reader that guesses a column's type from its values reads one record according to the others:
cards ``001`` .. ``050`` and ``1`` .. ``50`` are 50 integers, but add one card ``x1`` and they are
100 strings. Here no private column's type is guessed:

- :func:`read_private_trips`: every column of a CSV file is read as text; Parquet columns keep
  their stored (declared) types. The id column then follows the identifier rule of
  :mod:`synth.records` (:func:`synth.records.common.checked_ids`: white space stripped,
  ``-?digits.0+`` -> ``-?digits``, integral numbers as their integer text, only the empty string
  missing, ``007`` and ``7`` two ids).
- Categorical values are matched to their public domain value by value
  (:meth:`archetypes.schema.TripSchema.conform`), numeric columns parsed value by value
  (:func:`measure`), the order column read per value as a time or a number
  (:func:`order_key`, :func:`synth.times.wall_clock_times`).
- :func:`read_public_trips`: the public file's id column is read by the same rule; its other
  column types are read off the PUBLIC values (a public fact: which columns are numeric features),
  and its values meet the domain, and the order column is read, value by value as above.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from synth.errors import InputError
from synth.generator import read_data
from synth.io import read_table, table_columns
from synth.records.common import checked_ids
from synth.times import wall_clock_times

__all__ = [
    "measure",
    "order_key",
    "read_private_trips",
    "read_public_trips",
    "read_trips",
    "source_of",
    "trip_ids",
]


def trip_ids(frame: pd.DataFrame, column: str, source: str) -> pd.DataFrame:
    """``frame`` with its id column as text by the identifier rule (a missing or empty id is an
    ``InputError`` naming ``source``, the column and the row); unchanged without the column."""
    if column not in frame.columns:
        return frame
    out = frame.copy()
    out[column] = checked_ids(frame[column].reset_index(drop=True), column, source).to_numpy()
    return out


def read_private_trips(
    path: str | os.PathLike[str],
    *,
    id_column: str | None,
    source: str | None = None,
    sep: str | None = None,
) -> pd.DataFrame:
    """Private trips from a CSV or Parquet file, every CSV column as text (see the module) and
    the id column by the identifier rule (``sep``: the CSV delimiter, default comma)."""
    names = table_columns(path, sep=sep)
    ids = [id_column] if id_column is not None and id_column in names else []
    text = [c for c in names if c not in ids]
    frame = read_table(path, dtype={c: str for c in ids}, text=text, sep=sep)
    frame = trip_ids(frame, id_column, source or str(path)) if id_column else frame
    frame.attrs["source"] = source or str(path)  # later messages name the file (its rows)
    return frame


def source_of(frame: pd.DataFrame, default: str = "private data") -> str:
    """The file ``frame`` was read from by :func:`read_private_trips` (rows numbered as in it),
    else ``default``."""
    return str(frame.attrs.get("source", default))


def read_public_trips(
    path: str | os.PathLike[str],
    *,
    id_column: str | None,
    text: Sequence[str | None] = (),
    source: str | None = None,
    sep: str | None = None,
) -> pd.DataFrame:
    """Public trips: the id column by the identifier rule, the ``text`` columns (times) as text,
    the others typed from the public values (``sep``: the CSV delimiter, default comma)."""
    ids = {id_column: str} if id_column is not None else {}
    frame = read_table(path, dtype=ids, text=[c for c in text if c], sep=sep)
    return trip_ids(frame, id_column, source or str(path)) if id_column else frame


def read_trips(
    data: object, what: str, id_column: str | None, *, sep: str | None = None
) -> pd.DataFrame:
    """A frame as given (:func:`synth.generator.read_data`); a path read by
    :func:`read_private_trips` when ``what`` is ``"private data"``, else by
    :func:`read_public_trips` (``sep``: the CSV delimiter, default comma)."""
    if not isinstance(data, str | os.PathLike) or str(data) == "":
        return read_data(data, what)
    if what == "private data":
        return read_private_trips(data, id_column=id_column, sep=sep)
    return read_public_trips(data, id_column=id_column, sep=sep)


def measure(values: pd.Series, column: str, source: str) -> np.ndarray:
    """A numeric column, each value on its own: a number (or text that is one) as a float, a
    missing value as NaN; any other value is an ``InputError`` naming ``source``, the column,
    the 1-based row and the value (never a reason to read the other values differently)."""
    values = values.reset_index(drop=True)
    if pd.api.types.is_bool_dtype(values):
        num = pd.Series(np.nan, index=values.index)
    else:
        num = pd.to_numeric(values, errors="coerce")
    out = num.to_numpy(dtype=float, na_value=np.nan)
    bad = np.isnan(out) & values.notna().to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{source}: column '{column}', row {row + 1}: {values.iloc[row]!r} is not a number"
        )
    return out


def order_key(values: pd.Series, column: str, source: str) -> np.ndarray:
    """Sort keys of an order column, each value on its own: numbers as they are; text and
    datetimes as times (:func:`synth.times.wall_clock_times`: ISO 8601, or unix seconds, which
    numeric text orders as numbers); missing values last. An unreadable value is an
    ``InputError``."""
    values = values.reset_index(drop=True)
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        key = values.to_numpy(dtype=float, na_value=np.nan)
        return np.where(np.isnan(key), np.inf, key)
    present = values.notna().to_numpy()
    stamps = wall_clock_times(values[present])
    if stamps.isna().any():
        row = int(np.flatnonzero(present)[int(np.flatnonzero(stamps.isna().to_numpy())[0])])
        raise InputError(
            f"{source}: column '{column}', row {row + 1}: cannot order by {values.iloc[row]!r} "
            "(a time, ISO 8601, or a number expected)"
        )
    key = np.full(len(values), np.inf)
    ns = stamps.to_numpy(dtype="datetime64[ns]").view(np.int64)
    key[present] = ns.astype(float)
    return key
