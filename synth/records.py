"""Records: taps, long-format sequences and trips (design.md section 2), loaded and validated.

Formats (CSV or Parquet, by extension):

* **Taps**: one row per card tap: ``card_id``, ``time`` (ISO 8601; or a date column plus an hour
  and optionally a minute column), a location column (``stop_id`` by default); optional ``mode``,
  ``line``, ``tap`` (``on``/``off``). Known aliases are recognised so that the SUBE files load as
  they are: ``id_tarjeta`` for ``card_id``, ``fecha``/``hora``/``minuto`` for
  ``date``/``hour``/``minute`` (dates in ISO form or day-first ``dd/mm/yyyy``), and
  ``tipo_trx_tren`` (``CHECK OUT...`` = ``off``) when there is no ``tap`` column.
* **Sequences** (long format): ``seq_id`` (str), ``pos`` (int, 0-based, contiguous), ``location``
  (str; a categorical of str when loaded from a file) and optionally ``time``; sorted by
  ``seq_id`` (string order), then ``pos``. One sequence = one card (the privacy unit), or one
  card-day with ``per_day=True``.
* **Trips**: one row per trip: ``card_id``, ``on_time`` and any other columns (``date``, ``mode``,
  ``on_stop``, ``off_time``, ``off_stop``, fare, ...).

Every validation failure raises :class:`~synth.errors.InputError` with one line naming the file, the
column and the row (1-based data row, header not counted). Unknown locations (not leaves of the
taxonomy) either raise (``on_unknown="error"``) or are dropped (``on_unknown="drop"``): then an
:class:`UnknownLocationWarning` says how many rows went, and the returned frame carries the count in
``df.attrs["dropped_unknown"]``.

Contribution bounding is deterministic (paper 004 section 3; design.md section 4): the first ``h``
locations of a sequence (:func:`truncate_sequences`) and the first ``k`` trips of a card by time
(:func:`bound_trips`), ties broken by input row order.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from synth.errors import ConfigError, InputError
from synth.io import DOT_ZERO, ID_SPACE, id_strings, read_arrow, read_table, table_columns
from synth.times import check_timezone, parse_times

if TYPE_CHECKING:
    from synth.taxonomy import Taxonomy

__all__ = [
    "SEQUENCE_COLUMNS",
    "TAP_ALIASES",
    "UnknownLocationWarning",
    "bound_trips",
    "check_counts",
    "encode_sequences",
    "load_sequences",
    "load_taps",
    "load_trips",
    "sequences_from_taps",
    "truncate_sequences",
]

SEQUENCE_COLUMNS = ("seq_id", "pos", "location")

_BLOCK = 1 << 22  # rows per block when filling the sequence matrix

_STR = pd.StringDtype("pyarrow", na_value=np.nan)  # pandas' default ``str`` dtype

#: canonical role -> column names tried in order when the caller does not name the column.
TAP_ALIASES: dict[str, tuple[str, ...]] = {
    "card_id": ("card_id", "id_tarjeta"),
    "date": ("date", "fecha"),
    "hour": ("hour", "hora"),
    "minute": ("minute", "minuto"),
}

#: ``tap`` values that mark a tap-off (the DuckDB engine matches them too)
OFF_VALUES = ("off", "out", "check out", "check_out", "checkout", "alight", "alighting")

_TAP_OPTIONS = (
    "card_column",
    "time_column",
    "date_column",
    "hour_column",
    "minute_column",
    "date_format",
)

PathOrFrame = str | os.PathLike[str] | pd.DataFrame


class UnknownLocationWarning(UserWarning):
    """Rows whose location is not in the taxonomy were dropped (``on_unknown="drop"``)."""


# ---------------------------------------------------------------------------- helpers
def _source(data: PathOrFrame) -> str:
    return "input DataFrame" if isinstance(data, pd.DataFrame) else str(data)


#: time and date columns: read from CSV as text (the type of a column is never guessed from its
#: values: one odd value would change how the others are read)
_TIME_COLUMNS = ("time", "on_time", "off_time", "date", "fecha")


def _read(
    data: PathOrFrame, id_columns: Sequence[str], time_columns: Sequence[str | None] = ()
) -> pd.DataFrame:
    if isinstance(data, pd.DataFrame):
        return data.reset_index(drop=True)
    times = [c for c in (*time_columns, *_TIME_COLUMNS) if c]
    return read_table(data, dtype={c: str for c in id_columns}, text=times)


def _require(df: pd.DataFrame | Sequence[str], columns: Sequence[str], src: str) -> None:
    names = list(df.columns) if isinstance(df, pd.DataFrame) else list(df)
    missing = [c for c in columns if c not in names]
    if missing:
        found = ", ".join(map(str, names)) or "none"
        raise InputError(
            f"{src}: missing column(s) {', '.join(repr(c) for c in missing)} (found: {found})"
        )


def _nonempty(df: pd.DataFrame, src: str) -> None:
    if len(df) == 0:
        raise InputError(f"{src}: no rows (empty input)")


def _show(value: object) -> str:
    """A value for a message: ``'text'`` for strings, plain numbers for numbers."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _first_row(mask: pd.Series | np.ndarray) -> int:
    return int(np.flatnonzero(np.asarray(mask))[0]) + 1


def _ids(df: pd.DataFrame, column: str, src: str) -> pd.Series:
    return _checked_ids(df[column], column, src)


def _checked_ids(values: pd.Series, column: str, src: str) -> pd.Series:
    vals = id_strings(values, column=column, source=src)
    bad = vals.isna() | (vals == "")
    if bad.any():
        raise InputError(f"{src}: column '{column}', row {_first_row(bad)}: empty value")
    return vals.astype(str)


def _resolve(df: pd.DataFrame, role: str, given: str | None) -> str | None:
    if given is not None:
        return given
    return next((c for c in TAP_ALIASES[role] if c in df.columns), None)


def _parse_dates(raw: pd.Series, column: str, src: str, date_format: str | None) -> pd.Series:
    """Dates, each value on its own (parsed once per distinct value): ``date_format`` when
    declared, else ISO ``YYYY-MM-DD``, else day-first ``dd/mm/yyyy``."""
    if raw.isna().any():
        raise InputError(f"{src}: column '{column}', row {_first_row(raw.isna())}: empty date")
    if pd.api.types.is_datetime64_any_dtype(raw):
        return raw.dt.normalize()
    codes, uniques = pd.factorize(raw.astype(str).str.strip())
    u = pd.Series(uniques, dtype=object)
    if date_format:
        parsed = pd.to_datetime(u, format=date_format, errors="coerce")
    else:  # per value: ISO if it is ISO, else day-first
        parsed = pd.to_datetime(u, format="ISO8601", errors="coerce")
        other = parsed.isna()
        if other.any():
            parsed[other] = pd.to_datetime(u[other], format="%d/%m/%Y", errors="coerce")
    if parsed.isna().any():
        bad = u[parsed.isna()].iloc[0]
        row = _first_row(raw.astype(str).str.strip() == bad)
        expected = date_format or "YYYY-MM-DD or dd/mm/yyyy"
        raise InputError(
            f"{src}: column '{column}', row {row}: cannot parse {bad!r} as a date ({expected})"
        )
    return pd.Series(parsed.to_numpy(dtype="datetime64[ns]")[codes], index=raw.index)


def _int_column(raw: pd.Series, column: str, src: str, lo: int, hi: int | None) -> np.ndarray:
    vals = pd.to_numeric(raw, errors="coerce")
    arr = vals.to_numpy(dtype=float, na_value=np.nan)
    bad = np.isnan(arr) | (arr != np.round(arr)) | (arr < lo)
    if hi is not None:
        bad |= arr > hi
    if bad.any():
        row = _first_row(bad)
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        value = _show(raw.iloc[row - 1])
        raise InputError(f"{src}: column '{column}', row {row}: {value} is not an integer {rng}")
    return arr.astype(np.int64)


def check_counts(df: pd.DataFrame, columns: Sequence[str], *, source: str = "input") -> None:
    """Raise InputError unless every value of ``columns`` is a non-negative integer."""
    _require(df, columns, source)
    for col in columns:
        _int_column(df[col], col, source, 0, None)


def _check_locations(
    df: pd.DataFrame, column: str, taxonomy: Taxonomy | None, on_unknown: str, src: str
) -> pd.DataFrame:
    """Apply the unknown-location policy; returns ``df`` (possibly filtered) with attrs set."""
    if on_unknown not in ("error", "drop"):
        raise ConfigError(f"on_unknown must be 'error' or 'drop', got {on_unknown!r}")
    if taxonomy is None:
        return df
    known = _in_set(df[column], taxonomy.leaves())
    if known.all():
        df.attrs["dropped_unknown"] = 0
        return df
    unknown = df.loc[~known, column]
    n, k = int((~known).sum()), unknown.nunique()
    if on_unknown == "error":
        row = _first_row(~known)
        raise InputError(
            f"{src}: column '{column}', row {row}: location {unknown.iloc[0]!r} is not in the "
            f"taxonomy {taxonomy.source} ({n} rows, {k} distinct unknown locations; "
            "pass on_unknown='drop' to drop them)"
        )
    warnings.warn(
        f"{src}: dropped {n} rows ({k} distinct locations) of column '{column}' not in the "
        f"taxonomy {taxonomy.source}",
        UnknownLocationWarning,
        stacklevel=3,
    )
    out = df[known].reset_index(drop=True)
    out.attrs["dropped_unknown"] = n
    return out


def _arrow_text(series: pd.Series) -> pa.Array | pa.ChunkedArray:
    """The values as pyarrow strings (zero-copy, chunks kept, for pandas' arrow-backed ``str``)."""
    return pa.array(series.array) if series.dtype != object else pa.array(series, type=pa.string())


def _arrow_strings(series: pd.Series) -> pa.Array:
    """The values as one pyarrow string array (zero-copy for pandas' arrow-backed ``str``)."""
    arr = _arrow_text(series)
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _codes(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques) of a string column in first-seen order (arrow hashing: fast)."""
    enc = pc.dictionary_encode(_arrow_strings(series))
    uniques = np.asarray(enc.dictionary.to_pylist(), dtype=object)
    return enc.indices.to_numpy(zero_copy_only=False), uniques


def _in_set(series: pd.Series, allowed: Sequence[str]) -> np.ndarray:
    """Boolean mask: value is in ``allowed`` (hashes the distinct values only)."""
    if len(series) == 0:
        return np.zeros(0, dtype=bool)
    codes, uniques = _codes(series)
    return np.isin(uniques, np.asarray(list(allowed), dtype=object))[codes]


def _int_dtype(n: int, smallest: type[np.signedinteger] = np.int8) -> type[np.signedinteger]:
    """The narrowest signed integer type, at least ``smallest``, holding values below ``n``
    (row/sequence indices start at int32; category codes at int8)."""
    for dtype in (np.int8, np.int16, np.int32):
        if np.iinfo(dtype).bits >= np.iinfo(smallest).bits and n < np.iinfo(dtype).max:
            return dtype
    return np.int64


def _sorted_codes(series: pd.Series) -> np.ndarray:
    """Codes of a string column that follow its sorted order (like ``pd.factorize(sort=True)``).

    Input already sorted (the usual case for files this library wrote) costs one comparison of
    adjacent values, then one of adjacent runs; otherwise the distinct values are hashed (arrow)
    and only they are sorted. int32 when the column has fewer than 2**31 rows.
    """
    n = len(series)
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    arr = _chunked(_arrow_text(series))
    run, starts = _runs(arr)
    first = _take_sorted(arr, starts)
    k = len(first)
    if k < 2 or pc.all(pc.less(first.slice(0, k - 1), first.slice(1))).as_py():
        return run
    del run
    return _rank_codes(arr)[0]


def _rank_codes(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """(code of each value = rank of its distinct value in sorted order, the sorted distinct
    values): hashes the values once (arrow), sorts the distinct ones only."""
    enc = pc.dictionary_encode(values)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.unify_dictionaries()
        dictionary = enc.chunk(0).dictionary if enc.num_chunks else pa.array([], pa.string())
        indices = _numpy(pa.chunked_array([c.indices for c in enc.chunks], type=pa.int32()))
    else:
        dictionary, indices = enc.dictionary, _numpy(enc.indices)
    order = pc.sort_indices(dictionary).to_numpy()
    rank = np.empty(len(order), dtype=_int_dtype(len(values), np.int32))
    rank[order] = np.arange(len(order), dtype=rank.dtype)
    return rank[indices], dictionary.take(pa.array(order))


def _numpy(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A null-free arrow array as numpy (zero-copy when it is one chunk)."""
    if isinstance(values, pa.ChunkedArray) and values.num_chunks == 1:
        values = values.chunk(0)
    return values.to_numpy(zero_copy_only=False)


def _numbered(pos: np.ndarray, sorted_codes: np.ndarray) -> bool:
    """Whether ``pos`` already equals ``_group_positions(sorted_codes)`` (checked by blocks):
    0 where a run of codes starts, else one more than the row before."""
    n = pos.size
    if n and pos[0] != 0:
        return False
    for start in range(1, n, _BLOCK):
        stop = min(start + _BLOCK, n)
        new = sorted_codes[start:stop] != sorted_codes[start - 1 : stop - 1]
        if np.any(pos[start:stop][new]):
            return False
        # a run start has a step <= 0: the steps other than 1 must be exactly the run starts
        step = pos[start:stop] - pos[start - 1 : stop - 1]
        if np.count_nonzero(step != 1) != np.count_nonzero(new):
            return False
    return True


def _group_positions(sorted_codes: np.ndarray) -> np.ndarray:
    """0-based position of each element within its run of equal (sorted) codes."""
    n = sorted_codes.size
    out = np.ones(n, dtype=np.int64)
    if n == 0:
        return out
    starts = np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1
    out[0] = 0
    out[starts] = 1 - np.diff(starts, prepend=0)  # back to 0 at each run start
    return np.cumsum(out, out=out)


def _times(
    df: pd.DataFrame,
    src: str,
    default: str,
    time_column: str | None,
    date_column: str | None,
    hour_column: str | None,
    minute_column: str | None,
    date_format: str | None,
    timezone: str | None = None,
) -> pd.Series:
    """One time column (ISO 8601, datetimes, unix seconds; :func:`synth.times.parse_times`, per
    value, ``timezone``) or date + hour [+ minute] columns (wall clock as written)."""
    tcol = time_column or (default if default in df.columns else None)
    if tcol is not None:
        _require(df, [tcol], src)
        return pd.Series(
            parse_times(df[tcol], timezone=timezone, column=tcol, source=src).to_numpy(),
            index=df.index,
        )
    dcol = _resolve(df, "date", date_column)
    hcol = _resolve(df, "hour", hour_column)
    if dcol is None or hcol is None or dcol not in df.columns or hcol not in df.columns:
        raise InputError(
            f"{src}: no time: need a '{default}' column (ISO 8601) or date + hour columns "
            f"(e.g. date_column='fecha', hour_column='hora'); found: {', '.join(df.columns)}"
        )
    time = _parse_dates(df[dcol], dcol, src, date_format)
    time = time + pd.to_timedelta(_int_column(df[hcol], hcol, src, 0, 23), unit="h")
    mcol = _resolve(df, "minute", minute_column)
    if mcol is not None and mcol in df.columns:
        time = time + pd.to_timedelta(_int_column(df[mcol], mcol, src, 0, 59), unit="m")
    elif minute_column is not None:
        _require(df, [minute_column], src)
    return time


# ---------------------------------------------------------------------------- taps
def load_taps(
    data: PathOrFrame,
    *,
    location_column: str = "stop_id",
    card_column: str | None = None,
    time_column: str | None = None,
    date_column: str | None = None,
    hour_column: str | None = None,
    minute_column: str | None = None,
    date_format: str | None = None,
    taxonomy: Taxonomy | None = None,
    on_unknown: str = "error",
    timezone: str | None = None,
) -> pd.DataFrame:
    """Load and validate taps; returns all input columns plus canonical ``card_id``, ``time``.

    ``time`` is taken from ``time_column`` (default ``time``) as ISO 8601 (datetimes and unix
    seconds accepted too; each value on its own, see :mod:`synth.times`: the wall clock as
    written, or converted to ``timezone``), or, when there is no such column, built from
    ``date_column`` + ``hour_column`` [+ ``minute_column``] (defaults: the
    :data:`TAP_ALIASES`). Ids and locations are normalised per value
    (:func:`synth.io.id_strings`) and, with a ``taxonomy``, locations are checked against its
    leaves (``on_unknown``). A ``tap`` column is normalised to ``on``/``off``. Row order is
    preserved (it breaks ties between equal times).
    """
    src = _source(data)
    id_cols = [c for c in (card_column, location_column, *TAP_ALIASES["card_id"]) if c]
    return _taps_from_frame(
        _read(data, id_cols, (time_column, date_column)),
        src,
        location_column=location_column,
        card_column=card_column,
        time_column=time_column,
        date_column=date_column,
        hour_column=hour_column,
        minute_column=minute_column,
        date_format=date_format,
        taxonomy=taxonomy,
        on_unknown=on_unknown,
        timezone=check_timezone(timezone),
    )


def _taps_from_frame(
    df: pd.DataFrame,
    src: str,
    *,
    location_column: str,
    card_column: str | None,
    time_column: str | None,
    date_column: str | None,
    hour_column: str | None,
    minute_column: str | None,
    date_format: str | None,
    taxonomy: Taxonomy | None,
    on_unknown: str,
    timezone: str | None = None,
) -> pd.DataFrame:
    card_col = _resolve(df, "card_id", card_column) or "card_id"
    _require(df, [card_col, location_column], src)
    _nonempty(df, src)
    out = df.copy()
    out["card_id"] = _ids(df, card_col, src)
    out[location_column] = _ids(df, location_column, src)
    out["time"] = _times(
        df,
        src,
        "time",
        time_column,
        date_column,
        hour_column,
        minute_column,
        date_format,
        timezone,
    )
    if "tap" in df.columns:
        tap = df["tap"].astype(str).str.strip(ID_SPACE).str.lower()
        out["tap"] = np.where(tap.isin(OFF_VALUES), "off", "on")
    elif "tipo_trx_tren" in df.columns:  # SUBE: rail check-outs are alightings
        kind = df["tipo_trx_tren"].astype(str).str.upper()
        out["tap"] = np.where(kind.str.startswith("CHECK OUT").fillna(False), "off", "on")
    return _check_locations(out, location_column, taxonomy, on_unknown, src)


def sequences_from_taps(
    taps: pd.DataFrame,
    *,
    location_column: str = "stop_id",
    per_day: bool = False,
    boardings_only: bool = True,
    card_column: str = "card_id",
    time_column: str = "time",
) -> pd.DataFrame:
    """Long-format sequences from (loaded) taps: one per card, or per card and day.

    Taps are ordered by time within a card; equal times keep input row order (a stable sort).
    With ``boardings_only`` (default) taps whose ``tap`` column is ``off`` are left out, so a
    sequence lists boardings. ``seq_id`` is the card id, or ``"<card_id>|<YYYY-MM-DD>"`` with
    ``per_day``: then each sequence is one card-day and ``attrs["privacy_unit"]`` says
    ``"card-day"`` (the prefix tree records it as the manifest's unit: a card active on ``d``
    days is protected with ``d`` times the epsilon).
    Returns ``seq_id, pos, location, time`` sorted by ``seq_id``, ``pos``.
    """
    src = "taps"
    _require(taps, [card_column, time_column, location_column], src)
    if boardings_only and "tap" in taps.columns:
        taps = taps[taps["tap"].astype(str) != "off"]
    time = taps[time_column]
    if len(taps):  # each value on its own (loaded taps are wall-clock datetimes already)
        time = parse_times(time, column=time_column, source=src)
    seq = _arrow_strings(taps[card_column].astype(str))
    if per_day:  # format each distinct day once
        day_codes, days = pd.factorize(time.dt.normalize())
        labels = pa.array(pd.DatetimeIndex(days).strftime("%Y-%m-%d").tolist(), type=seq.type)
        sep = pa.scalar("|", type=seq.type)
        seq = pc.binary_join_element_wise(seq, labels.take(pa.array(day_codes)), sep)
    codes = _sorted_codes(pd.Series(pd.arrays.ArrowStringArray(seq)))
    t = time.to_numpy(dtype="datetime64[ns]").view(np.int64)
    order = np.lexsort((t, codes))
    sorted_codes = codes[order]
    take = pa.array(order)
    out = pa.table(
        {
            "seq_id": seq.take(take),
            "pos": _group_positions(sorted_codes),
            "location": _arrow_strings(taps[location_column].astype(str)).take(take),
        }
    ).to_pandas()
    out["time"] = time.to_numpy()[order]
    out.attrs.update(taps.attrs)
    if per_day:  # one sequence per card and day: the privacy unit is the card-day, not the card
        out.attrs["privacy_unit"] = "card-day"
    return out


# ---------------------------------------------------------------------------- sequences
def load_sequences(
    data: PathOrFrame,
    *,
    taxonomy: Taxonomy | None = None,
    on_unknown: str = "error",
    location_column: str | None = None,
    per_day: bool = False,
    timezone: str | None = None,
    **tap_options: str | None,
) -> pd.DataFrame:
    """Load long-format sequences, or taps turned into sequences.

    A table with ``seq_id, pos, location`` is long format (``location_column`` may name another
    location column; ``pos`` must hold non-negative integers without duplicates per sequence; gaps
    are closed by renumbering in ``pos`` order). Otherwise it is read as taps with
    :func:`load_taps` (``location_column`` default ``stop_id``; ``tap_options`` are its column
    options; times per value, wall clock as written or converted to ``timezone``) and grouped by
    :func:`sequences_from_taps` (``per_day``: one sequence per card and day, so the privacy unit
    is the card-day). A long-format ``time`` column is kept as given (its readers parse each value
    on its own, :func:`synth.times.times_of_day`). Unknown locations follow ``on_unknown``;
    dropped rows are counted in ``attrs["dropped_unknown"]`` and positions renumbered.

    Long format read from a file (or given with a categorical location column) comes back with
    ``location`` as a pandas categorical of str (sorted categories: one byte per row instead of
    one string); from a DataFrame with str locations, as str. Ids are handled as arrow text and
    integer codes throughout (no Python string per row).
    """
    src = _source(data)
    timezone = check_timezone(timezone)
    unknown_opts = sorted(set(tap_options) - set(_TAP_OPTIONS))
    if unknown_opts:
        raise ConfigError(f"load_sequences: unknown option(s) {', '.join(unknown_opts)}")
    loc = location_column or "location"
    wanted = ("seq_id", "pos", loc, "time")
    if isinstance(data, pd.DataFrame):
        df = data.reset_index(drop=True)
        if {"seq_id", "pos"}.issubset(df.columns):
            _require(df, [loc], src)
            cols: dict[str, pa.ChunkedArray | pd.Series] = {c: df[c] for c in wanted if c in df}
            categorical = isinstance(df[loc].dtype, pd.CategoricalDtype)
            return _long_format(cols, loc, src, taxonomy, on_unknown, categorical=categorical)
    else:
        names = table_columns(data)
        if {"seq_id", "pos"}.issubset(names):
            _require(names, [loc], src)
            table = read_arrow(
                data, wanted, strings=("seq_id", loc), dictionary=(loc,), text=("time",)
            )
            cols = {c: table.column(c) for c in table.column_names}
            del table
            return _long_format(cols, loc, src, taxonomy, on_unknown, categorical=True)
        ids = ("seq_id", loc, location_column or "stop_id", tap_options.get("card_column"))
        df = read_table(
            data,
            dtype={c: str for c in (*ids, *TAP_ALIASES["card_id"]) if c},
            text=[
                c
                for c in (
                    tap_options.get("time_column"),
                    tap_options.get("date_column"),
                    *_TIME_COLUMNS,
                )
                if c
            ],
        )
    stop_col = location_column or "stop_id"
    taps = _taps_from_frame(
        df,
        src,
        location_column=stop_col,
        card_column=tap_options.get("card_column"),
        time_column=tap_options.get("time_column"),
        date_column=tap_options.get("date_column"),
        hour_column=tap_options.get("hour_column"),
        minute_column=tap_options.get("minute_column"),
        date_format=tap_options.get("date_format"),
        taxonomy=taxonomy,
        on_unknown=on_unknown,
        timezone=timezone,
    )
    return sequences_from_taps(taps, location_column=stop_col, per_day=per_day)


Column: TypeAlias = pa.ChunkedArray | pd.Series


def _str_array(values: pa.Array | pa.ChunkedArray) -> pd.api.extensions.ExtensionArray:
    """Arrow text as pandas' default ``str`` array, sharing the arrow buffers."""
    return pd.array(_chunked(values), dtype=_STR)


def _fallback_series(values: Column) -> pd.Series:
    """The column as pandas, numbers kept as numbers (:func:`synth.io.id_strings` turns each
    integral one into its integer text and refuses the others) (slow path)."""
    if isinstance(values, pd.Series):
        return values.reset_index(drop=True)
    return values.to_pandas()


def _chunked(values: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    return values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])


def _id_text(values: Column, column: str, src: str) -> pa.ChunkedArray:
    """An id column as arrow text without nulls, not yet normalised (see :func:`_normalized`).

    Strings (and arrow-backed ``str`` columns) are used as they are, without a copy; integers
    become their decimal text; anything else, and any column with missing values, goes through
    :func:`synth.io.id_strings` (which raises on a missing value).
    """
    arr: pa.Array | pa.ChunkedArray | None = None
    if isinstance(values, pd.Series):
        if isinstance(values.dtype, pd.StringDtype):
            arr = pa.array(values.array)
    elif pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        arr = values
    elif pa.types.is_integer(values.type) and not pa.types.is_uint64(values.type):
        arr = pc.cast(values, pa.string())
    elif pa.types.is_dictionary(values.type) and (
        pa.types.is_string(values.type.value_type)
        or pa.types.is_large_string(values.type.value_type)
    ):
        arr = pc.cast(values, values.type.value_type)
    if arr is None or arr.null_count:
        arr = pa.array(_checked_ids(_fallback_series(values), column, src).array)
    return _chunked(arr)


def _normalized(values: pa.Array | pa.ChunkedArray, column: str, src: str, rows: Any) -> pa.Array:
    """:func:`synth.io.id_strings` applied to the distinct (or run) values of an id column.

    Each value is normalised alone; ``rows(i)`` is the first 1-based row holding ``values[i]``:
    an empty value raises InputError naming it.
    """
    norm = id_strings(pd.Series(_str_array(values)), column=column, source=src)
    bad = (norm.isna() | (norm == "")).to_numpy()
    if bad.any():
        row = rows(np.flatnonzero(bad))
        raise InputError(f"{src}: column '{column}', row {row}: empty value")
    out = pa.array(norm.array)
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


def _take_sorted(values: pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    """``values.take(rows)`` for increasing ``rows``, chunk by chunk (arrow's take on a chunked
    array first concatenates all the chunks)."""
    parts, offset = [], 0
    bounds = np.searchsorted(rows, np.cumsum([len(c) for c in values.chunks]))
    lo = 0
    for chunk, hi in zip(values.chunks, bounds, strict=True):
        parts.append(chunk.take(pa.array(rows[lo:hi] - offset)))
        offset, lo = offset + len(chunk), hi
    return pa.concat_arrays(parts) if parts else pa.array([], values.type)


def _plain_ids(values: pa.Array) -> bool:
    """True when :func:`synth.io.id_strings` leaves every value as it is and none is empty: none
    has white space to strip (:data:`synth.io.ID_SPACE`) and none is of the form
    ``-?digits.0+`` (each value is looked at alone)."""
    if len(values) == 0:
        return True
    if pc.any(pc.match_substring_regex(values, DOT_ZERO)).as_py():
        return False
    length = pc.binary_length(values)
    if pc.any(pc.equal(length, 0)).as_py():
        return False
    return bool(
        pc.all(
            pc.equal(pc.binary_length(pc.utf8_trim(values, characters=ID_SPACE)), length)
        ).as_py()
    )


def _runs(values: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(run number of each row, first row of each run) for runs of equal adjacent values."""
    n = len(values)
    run = np.zeros(n, dtype=_int_dtype(n, np.int32))
    if n < 2:
        return run, np.zeros(min(n, 1), dtype=np.int64)
    change = pc.not_equal(values.slice(0, n - 1), values.slice(1)).to_numpy(zero_copy_only=False)
    np.cumsum(change, dtype=run.dtype, out=run[1:])
    starts = np.flatnonzero(change)
    del change
    starts += 1
    return run, np.concatenate(([0], starts))


def _seq_codes(values: pa.ChunkedArray, src: str) -> tuple[np.ndarray, pa.Array, bool]:
    """(sorted-order code of each row, the sorted distinct normalised ids, whether normalising
    changed nothing). Only the runs of equal adjacent ids are looked at: for input sorted by
    ``seq_id`` nothing is hashed."""
    run, starts = _runs(values)
    first = _take_sorted(values, starts)
    if _plain_ids(first):
        norm, same = first, True
    else:
        norm = _normalized(first, "seq_id", src, lambda bad: int(starts[bad[0]]) + 1)
        same = bool(pc.all(pc.equal(norm, first.cast(norm.type))).as_py())
    k = len(norm)
    if k < 2 or pc.all(pc.less(norm.slice(0, k - 1), norm.slice(1))).as_py():
        return run, norm, same
    codes, uniques = _rank_codes(norm)
    return codes[run], uniques, same


def _as_dictionary(values: Column) -> pa.ChunkedArray | None:
    """The column as arrow dictionary-encoded text when it is stored so already (Parquet
    dictionary pages, pandas categoricals) and has no missing value; else None."""
    if isinstance(values, pd.Series):
        if not isinstance(values.dtype, pd.CategoricalDtype):
            return None
        values = _chunked(pa.array(values.array))
    if not pa.types.is_dictionary(values.type) or values.null_count:
        return None
    kind = values.type.value_type
    return values if pa.types.is_string(kind) or pa.types.is_large_string(kind) else None


def _location_codes(values: Column, column: str, src: str) -> tuple[np.ndarray, pa.Array]:
    """(code of each row, the sorted distinct normalised locations).

    A dictionary-encoded column is used chunk by chunk as it is; others are hashed once (arrow).
    Only the distinct values are normalised; the codes are as narrow as the categories allow.
    """
    encoded = _as_dictionary(values)
    if encoded is None:
        encoded = pc.dictionary_encode(_id_text(values, column, src))
    chunks = [c for c in encoded.chunks if len(c)]
    del values, encoded
    # the distinct values of every chunk's dictionary
    parts = []
    for c in chunks:
        used = np.flatnonzero(np.bincount(c.indices.to_numpy(zero_copy_only=False)))
        parts.append(c.dictionary.take(pa.array(used)))
    kind = chunks[0].dictionary.type if chunks else pa.string()
    union = pc.unique(pa.chunked_array(parts, type=kind))

    def slots(chunk: pa.DictionaryArray) -> np.ndarray:
        """Position in ``union`` of each entry of the chunk's dictionary (unused ones: 0)."""
        found = pc.index_in(chunk.dictionary, value_set=union).fill_null(0)
        return found.to_numpy(zero_copy_only=False)

    def first_row(bad: np.ndarray) -> int:
        offset = 0
        for c in chunks:
            rows = np.flatnonzero(np.isin(slots(c), bad)[c.indices.to_numpy(zero_copy_only=False)])
            if rows.size:
                return offset + int(rows[0]) + 1
            offset += len(c)
        raise AssertionError("no row holds the bad value")

    norm = _normalized(union, column, src, first_row)
    codes, uniques = _rank_codes(norm)
    codes = codes.astype(_int_dtype(len(uniques)))
    out = np.empty(sum(len(c) for c in chunks), dtype=codes.dtype)
    offset = 0
    for c in chunks:
        out[offset : offset + len(c)] = codes[slots(c)][c.indices.to_numpy(zero_copy_only=False)]
        offset += len(c)
    return out, uniques


def _positions(values: Column, src: str) -> np.ndarray:
    """``pos`` as int64 (non-negative integers; errors name the row as :func:`_int_column`)."""
    arr: np.ndarray | None = None
    if isinstance(values, pd.Series):
        if isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu":
            arr = values.to_numpy()
    elif pa.types.is_integer(values.type) and values.null_count == 0:
        arr = _numpy(values)
    if arr is None or arr.dtype == np.uint64 or (arr.size and arr.min() < 0):
        series = values if isinstance(values, pd.Series) else values.to_pandas()
        return _int_column(series.reset_index(drop=True), "pos", src, 0, None)
    return arr.astype(np.int64, copy=False)


def _long_format(
    cols: dict[str, Column],
    loc: str,
    src: str,
    taxonomy: Taxonomy | None,
    on_unknown: str,
    *,
    categorical: bool,
) -> pd.DataFrame:
    """Validate, sort and renumber long-format columns (see :func:`load_sequences`).

    Ids are never turned into Python strings: runs of ``seq_id`` and the dictionary of the
    location column are worked on, codes are int32 (or narrower), and the frame is built from
    arrow buffers. ``location`` comes back categorical (sorted categories) when ``categorical``.
    """
    if len(cols["seq_id"]) == 0:
        raise InputError(f"{src}: no rows (empty input)")
    seq = _id_text(cols.pop("seq_id"), "seq_id", src)
    seq_code, uniques, seq_same = _seq_codes(seq, src)
    if not seq_same:
        del seq
    pos = _positions(cols.pop("pos"), src)
    loc_code, categories = _location_codes(cols.pop(loc), loc, src)
    time = cols.get("time")
    ordered = bool(np.all(seq_code[1:] >= seq_code[:-1]))
    numbered = ordered and _numbered(pos, seq_code)  # sorted, positions 0, 1, ...: the usual
    order = None
    if not numbered and not (
        ordered and not np.any((seq_code[1:] == seq_code[:-1]) & (pos[1:] <= pos[:-1]))
    ):
        order = np.lexsort((pos, seq_code))
        seq_code, pos, loc_code = seq_code[order], pos[order], loc_code[order]
        dup = np.flatnonzero((seq_code[1:] == seq_code[:-1]) & (pos[1:] == pos[:-1]))
        if dup.size:
            row = int(order[dup[0] + 1]) + 1
            raise InputError(
                f"{src}: column 'pos', row {row}: duplicate position {int(pos[dup[0]])} "
                f"in sequence {uniques[int(seq_code[dup[0]])].as_py()!r}"
            )
    keep, dropped = _known_locations(loc_code, categories, taxonomy, on_unknown, src)
    if keep is not None:
        seq_code, pos, loc_code = seq_code[keep], pos[keep], loc_code[keep]
        present = np.bincount(loc_code, minlength=len(categories)) > 0
        loc_code = (np.cumsum(present) - 1).astype(loc_code.dtype)[loc_code]
        categories = categories.filter(pa.array(present))
    if seq_same:  # the input strings, without a copy when nothing moved
        ids = seq if order is None else seq.take(pa.array(order))
        ids = ids if keep is None else ids.filter(pa.array(keep))
        del seq
    else:
        ids = uniques.take(pa.array(seq_code))
    if not (numbered and keep is None) and not _numbered(pos, seq_code):
        del pos
        pos = _group_positions(seq_code)
    del seq_code
    labels = pd.Index(_str_array(categories))
    out = pd.DataFrame(
        {
            "seq_id": pd.Series(_str_array(ids), copy=False),
            "pos": pos,
            "location": (
                pd.Categorical.from_codes(loc_code, categories=labels)
                if categorical
                else _str_array(categories.take(pa.array(loc_code)))
            ),
        },
        copy=False,
    )
    if time is not None:
        t = time.reset_index(drop=True) if isinstance(time, pd.Series) else time.to_pandas()
        if order is not None:
            t = t.take(order).reset_index(drop=True)
        out["time"] = t if keep is None else t[keep].reset_index(drop=True)
    if dropped is not None:
        out.attrs["dropped_unknown"] = dropped
    return out


def _known_locations(
    codes: np.ndarray,
    categories: pa.Array,
    taxonomy: Taxonomy | None,
    on_unknown: str,
    src: str,
) -> tuple[np.ndarray | None, int | None]:
    """The unknown-location policy on (sorted) location codes: (rows to keep or None if all,
    number dropped or None without a taxonomy). Messages as :func:`_check_locations`."""
    if on_unknown not in ("error", "drop"):
        raise ConfigError(f"on_unknown must be 'error' or 'drop', got {on_unknown!r}")
    if taxonomy is None:
        return None, None
    names = np.asarray(categories.to_pylist(), dtype=object)
    known = np.isin(names, np.asarray(list(taxonomy.leaves()), dtype=object))
    if known.all():
        return None, 0
    keep = known[codes]
    n, k = int(keep.size - np.count_nonzero(keep)), int((~known).sum())
    if on_unknown == "error":
        row = _first_row(~keep)
        raise InputError(
            f"{src}: column 'location', row {row}: location {names[codes[row - 1]]!r} is not in "
            f"the taxonomy {taxonomy.source} ({n} rows, {k} distinct unknown locations; "
            "pass on_unknown='drop' to drop them)"
        )
    warnings.warn(
        f"{src}: dropped {n} rows ({k} distinct locations) of column 'location' not in the "
        f"taxonomy {taxonomy.source}",
        UnknownLocationWarning,
        stacklevel=4,
    )
    return keep, n


def truncate_sequences(seqs: pd.DataFrame, height: int) -> pd.DataFrame:
    """Keep the first ``height`` locations of each sequence (deterministic bounding, 004 s. 3)."""
    if isinstance(height, bool) or not isinstance(height, int | np.integer) or height < 1:
        raise ConfigError(f"height must be an integer >= 1, got {height!r}")
    _require(seqs, ["pos"], "sequences")
    out = seqs[seqs["pos"].to_numpy() < height].reset_index(drop=True)
    out.attrs.update(seqs.attrs)
    return out


def encode_sequences(
    seqs: pd.DataFrame, locations: Sequence[str], height: int | None = None
) -> np.ndarray:
    """Integer matrix of sequences: row i = i-th ``seq_id`` in sorted order, column = ``pos``.

    Codes are indices into ``locations``; ``-1`` pads shorter sequences. Width is ``height`` (longer
    sequences are truncated) or the longest sequence. Unknown locations raise InputError.
    """
    _require(seqs, list(SEQUENCE_COLUMNS), "sequences")
    if height is not None and (isinstance(height, bool) or height < 1):
        raise ConfigError(f"height must be an integer >= 1, got {height!r}")
    loc_index = pd.Index(list(locations))
    if not loc_index.is_unique:
        raise ConfigError("locations must be distinct")
    pos = seqs["pos"].to_numpy()
    if len(seqs) == 0:
        return np.full((0, int(height or 0)), -1, dtype=np.int32)
    row = _sorted_codes(seqs["seq_id"])
    n = int(row.max()) + 1
    column = seqs["location"]
    if isinstance(column.dtype, pd.CategoricalDtype):  # codes of the categories: nothing hashed
        idx = column.cat.codes.to_numpy()
        mapping = loc_index.get_indexer(column.cat.categories)
    else:
        idx, uniques = _codes(column)
        mapping = loc_index.get_indexer(pd.Index(uniques))
    mapping = np.append(mapping, -1).astype(np.int32)  # code -1 (a missing value) -> -1
    missing = (mapping < 0)[idx]
    if missing.any():
        bad = _first_row(missing)
        raise InputError(
            f"sequences: column 'location', row {bad}: {column.iloc[bad - 1]!r} "
            "is not in the location list"
        )
    del missing
    width = int(height) if height is not None else (int(pos.max()) + 1 if pos.size else 0)
    mat = np.full((n, width), -1, dtype=np.int32)
    flat = mat.reshape(-1)
    for start in range(0, pos.size, _BLOCK):  # bounded temporaries
        stop = start + _BLOCK
        p = pos[start:stop].astype(np.int64)
        keep = p < width
        cell = row[start:stop][keep] * np.int64(width) + p[keep]
        flat[cell] = mapping[idx[start:stop][keep]]
    return mat


# ---------------------------------------------------------------------------- trips
def load_trips(
    data: PathOrFrame,
    *,
    card_column: str | None = "card_id",
    time_column: str | None = None,
    date_column: str | None = None,
    hour_column: str | None = None,
    minute_column: str | None = None,
    date_format: str | None = None,
    count_columns: Sequence[str] = (),
    timezone: str | None = None,
) -> pd.DataFrame:
    """Load trips: ``card_id`` (str; none if ``card_column=None``), ``on_time`` + other columns.

    ``on_time`` comes from ``time_column`` (default ``on_time``; ISO 8601, datetimes, or numbers =
    unix seconds) or, without it, from date + hour [+ minute] columns as for taps.
    ``count_columns`` (and a ``count`` column when present) must hold non-negative integers.
    """
    src = _source(data)
    df = _read(data, [card_column] if card_column else [], (time_column, date_column))
    _require(df, [card_column] if card_column else [], src)
    _nonempty(df, src)
    out = df.copy()
    if card_column:
        out["card_id"] = _ids(df, card_column, src)
    out["on_time"] = _times(
        df,
        src,
        "on_time",
        time_column,
        date_column,
        hour_column,
        minute_column,
        date_format,
        check_timezone(timezone),
    )
    counts = list(count_columns) + (["count"] if "count" in df.columns else [])
    check_counts(df, list(dict.fromkeys(counts)), source=src)
    return out


def bound_trips(
    trips: pd.DataFrame, k: int, *, card_column: str = "card_id", time_column: str = "on_time"
) -> pd.DataFrame:
    """At most ``k`` trips per card: the first ``k`` by time, ties by row order; order kept."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ConfigError(f"k (trips per card) must be an integer >= 1, got {k!r}")
    _require(trips, [card_column, time_column], "trips")
    codes = pd.factorize(trips[card_column])[0]
    stamps = parse_times(trips[time_column], column=time_column, source="trips")
    t = stamps.to_numpy(dtype="datetime64[ns]").view(np.int64)
    order = np.lexsort((t, codes))
    rank = np.empty(len(trips), dtype=np.int64)
    rank[order] = _group_positions(codes[order])
    out = trips[rank < k].reset_index(drop=True)
    out.attrs.update(trips.attrs)
    return out
