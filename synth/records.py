"""Records: taps, long-format sequences and trips (design.md section 2), loaded and validated.

Formats (CSV or Parquet, by extension):

* **Taps**: one row per card tap: ``card_id``, ``time`` (ISO 8601; or a date column plus an hour
  and optionally a minute column), a location column (``stop_id`` by default); optional ``mode``,
  ``line``, ``tap`` (``on``/``off``). Known aliases are recognised so that the SUBE files load as
  they are: ``id_tarjeta`` for ``card_id``, ``fecha``/``hora``/``minuto`` for
  ``date``/``hour``/``minute`` (dates in ISO form or day-first ``dd/mm/yyyy``), and
  ``tipo_trx_tren`` (``CHECK OUT...`` = ``off``) when there is no ``tap`` column.
* **Sequences** (long format): ``seq_id`` (str), ``pos`` (int, 0-based, contiguous), ``location``
  (str) and optionally ``time``; sorted by ``seq_id`` (string order), then ``pos``. One sequence =
  one card (the privacy unit), or one card-day with ``per_day=True``.
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
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from synth.errors import ConfigError, InputError
from synth.io import id_strings, read_table

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

#: canonical role -> column names tried in order when the caller does not name the column.
TAP_ALIASES: dict[str, tuple[str, ...]] = {
    "card_id": ("card_id", "id_tarjeta"),
    "date": ("date", "fecha"),
    "hour": ("hour", "hora"),
    "minute": ("minute", "minuto"),
}

_OFF_VALUES = ("off", "out", "check out", "check_out", "checkout", "alight", "alighting")

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


def _read(data: PathOrFrame, id_columns: Sequence[str]) -> pd.DataFrame:
    if isinstance(data, pd.DataFrame):
        return data.reset_index(drop=True)
    return read_table(data, dtype={c: str for c in id_columns})


def _require(df: pd.DataFrame, columns: Sequence[str], src: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        found = ", ".join(map(str, df.columns)) or "none"
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
    vals = id_strings(df[column])
    bad = vals.isna() | (vals == "")
    if bad.any():
        raise InputError(f"{src}: column '{column}', row {_first_row(bad)}: empty value")
    return vals.astype(str)


def _resolve(df: pd.DataFrame, role: str, given: str | None) -> str | None:
    if given is not None:
        return given
    return next((c for c in TAP_ALIASES[role] if c in df.columns), None)


def _parse_times(raw: pd.Series, column: str, src: str) -> pd.Series:
    """ISO 8601 strings (or datetimes, or unix seconds) -> datetime64; errors name the row."""
    if raw.isna().any():
        raise InputError(f"{src}: column '{column}', row {_first_row(raw.isna())}: empty time")
    if pd.api.types.is_datetime64_any_dtype(raw):
        return raw
    if pd.api.types.is_numeric_dtype(raw):
        return pd.to_datetime(raw, unit="s")
    try:
        parsed = pd.to_datetime(raw, format="ISO8601", errors="coerce")
    except (ValueError, TypeError):  # mixed UTC offsets
        parsed = pd.to_datetime(raw, format="ISO8601", errors="coerce", utc=True)
    if parsed.isna().any():
        row = _first_row(parsed.isna())
        raise InputError(
            f"{src}: column '{column}', row {row}: cannot parse {_show(raw.iloc[row - 1])} as a "
            "time (ISO 8601 expected, e.g. 2019-11-27T08:15:00)"
        )
    return parsed


def _parse_dates(raw: pd.Series, column: str, src: str, date_format: str | None) -> pd.Series:
    """Dates parsed once per distinct value: ``date_format``, else ISO, else day-first d/m/Y."""
    if raw.isna().any():
        raise InputError(f"{src}: column '{column}', row {_first_row(raw.isna())}: empty date")
    if pd.api.types.is_datetime64_any_dtype(raw):
        return raw.dt.normalize()
    codes, uniques = pd.factorize(raw.astype(str).str.strip())
    u = pd.Series(uniques)
    formats = [date_format] if date_format else ["ISO8601", "%d/%m/%Y"]
    parsed = pd.Series(pd.NaT, index=u.index, dtype="datetime64[ns]")
    for fmt in formats:
        parsed = pd.to_datetime(u, format=fmt, errors="coerce")
        if parsed.notna().all():
            break
    if parsed.isna().any():
        bad = u[parsed.isna()].iloc[0]
        row = _first_row(raw.astype(str).str.strip() == bad)
        expected = date_format or "YYYY-MM-DD or dd/mm/yyyy"
        raise InputError(
            f"{src}: column '{column}', row {row}: cannot parse {bad!r} as a date ({expected})"
        )
    return pd.Series(parsed.to_numpy()[codes], index=raw.index)


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


def _arrow_strings(series: pd.Series) -> pa.Array:
    """The values as one pyarrow string array (zero-copy for pandas' arrow-backed ``str``)."""
    arr = pa.array(series.array) if series.dtype != object else pa.array(series, type=pa.string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr


def _codes(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques) of a string column in first-seen order (arrow hashing: fast)."""
    enc = pc.dictionary_encode(_arrow_strings(series))
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return codes, np.asarray(enc.dictionary.to_pylist(), dtype=object)


def _in_set(series: pd.Series, allowed: Sequence[str]) -> np.ndarray:
    """Boolean mask: value is in ``allowed`` (hashes the distinct values only)."""
    if len(series) == 0:
        return np.zeros(0, dtype=bool)
    codes, uniques = _codes(series)
    return np.isin(uniques, np.asarray(list(allowed), dtype=object))[codes]


def _sorted_codes(series: pd.Series) -> np.ndarray:
    """Codes of a string column that follow its sorted order (like ``pd.factorize(sort=True)``).

    Input already sorted (the usual case for files this library wrote) costs one comparison pass;
    otherwise the distinct values are hashed (arrow) and only they are sorted.
    """
    n = len(series)
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    arr = _arrow_strings(series)
    head, tail = arr.slice(0, n - 1), arr.slice(1)
    if pc.all(pc.less_equal(head, tail)).as_py():
        change = pc.not_equal(head, tail).to_numpy(zero_copy_only=False)
        codes = np.empty(n, dtype=np.int64)
        codes[0] = 0
        np.cumsum(change, out=codes[1:])
        return codes
    enc = pc.dictionary_encode(arr)
    order = pc.sort_indices(enc.dictionary).to_numpy()
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[enc.indices.to_numpy(zero_copy_only=False)]


def _group_positions(sorted_codes: np.ndarray) -> np.ndarray:
    """0-based position of each element within its run of equal (sorted) codes."""
    n = sorted_codes.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    idx = np.arange(n, dtype=np.int64)
    start = np.empty(n, dtype=bool)
    start[0] = True
    np.not_equal(sorted_codes[1:], sorted_codes[:-1], out=start[1:])
    return idx - np.maximum.accumulate(np.where(start, idx, 0))


def _times(
    df: pd.DataFrame,
    src: str,
    default: str,
    time_column: str | None,
    date_column: str | None,
    hour_column: str | None,
    minute_column: str | None,
    date_format: str | None,
) -> pd.Series:
    """One time column (ISO 8601, datetimes, unix seconds) or date + hour [+ minute] columns."""
    tcol = time_column or (default if default in df.columns else None)
    if tcol is not None:
        _require(df, [tcol], src)
        return _parse_times(df[tcol], tcol, src)
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
) -> pd.DataFrame:
    """Load and validate taps; returns all input columns plus canonical ``card_id``, ``time``.

    ``time`` is taken from ``time_column`` (default ``time``) as ISO 8601 (datetimes and unix
    seconds accepted too), or, when there is no such column, built from ``date_column`` +
    ``hour_column`` [+ ``minute_column``] (defaults: the :data:`TAP_ALIASES`). The location column
    is converted to strings and, with a ``taxonomy``, checked against its leaves (``on_unknown``).
    A ``tap`` column is normalised to ``on``/``off``. Row order is preserved (it breaks ties
    between equal times).
    """
    src = _source(data)
    id_cols = [c for c in (card_column, location_column, *TAP_ALIASES["card_id"]) if c]
    return _taps_from_frame(
        _read(data, id_cols),
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
) -> pd.DataFrame:
    card_col = _resolve(df, "card_id", card_column) or "card_id"
    _require(df, [card_col, location_column], src)
    _nonempty(df, src)
    out = df.copy()
    out["card_id"] = _ids(df, card_col, src)
    out[location_column] = _ids(df, location_column, src)
    out["time"] = _times(
        df, src, "time", time_column, date_column, hour_column, minute_column, date_format
    )
    if "tap" in df.columns:
        tap = df["tap"].astype(str).str.strip().str.lower()
        out["tap"] = np.where(tap.isin(_OFF_VALUES), "off", "on")
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
    ``per_day``.
    Returns ``seq_id, pos, location, time`` sorted by ``seq_id``, ``pos``.
    """
    src = "taps"
    _require(taps, [card_column, time_column, location_column], src)
    if boardings_only and "tap" in taps.columns:
        taps = taps[taps["tap"].astype(str) != "off"]
    time = pd.to_datetime(taps[time_column]) if len(taps) else taps[time_column]
    if len(taps) and time.isna().any():
        raise InputError(
            f"{src}: column '{time_column}', row {_first_row(time.isna())}: empty time"
        )
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
    return out


# ---------------------------------------------------------------------------- sequences
def load_sequences(
    data: PathOrFrame,
    *,
    taxonomy: Taxonomy | None = None,
    on_unknown: str = "error",
    location_column: str | None = None,
    per_day: bool = False,
    **tap_options: str | None,
) -> pd.DataFrame:
    """Load long-format sequences, or taps turned into sequences.

    A table with ``seq_id, pos, location`` is long format (``location_column`` may name another
    location column; ``pos`` must hold non-negative integers without duplicates per sequence; gaps
    are closed by renumbering in ``pos`` order). Otherwise it is read as taps with
    :func:`load_taps` (``location_column`` default ``stop_id``; ``tap_options`` are its column
    options) and grouped by :func:`sequences_from_taps`. Unknown locations follow ``on_unknown``;
    dropped rows are counted in ``attrs["dropped_unknown"]`` and positions renumbered.
    """
    src = _source(data)
    unknown_opts = sorted(set(tap_options) - set(_TAP_OPTIONS))
    if unknown_opts:
        raise ConfigError(f"load_sequences: unknown option(s) {', '.join(unknown_opts)}")
    loc = location_column or "location"
    if isinstance(data, pd.DataFrame):
        df = data.reset_index(drop=True)
    else:
        ids = ("seq_id", loc, location_column or "stop_id", tap_options.get("card_column"))
        df = read_table(data, dtype={c: str for c in (*ids, *TAP_ALIASES["card_id"]) if c})
    if not {"seq_id", "pos"}.issubset(df.columns):
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
        )
        return sequences_from_taps(taps, location_column=stop_col, per_day=per_day)
    _require(df, [loc], src)
    _nonempty(df, src)
    seq_id = _ids(df, "seq_id", src)
    pos = _int_column(df["pos"], "pos", src, 0, None)
    out = pd.DataFrame({"seq_id": seq_id, "pos": pos, "location": _ids(df, loc, src)})
    if "time" in df.columns:
        out["time"] = df["time"]
    codes = _sorted_codes(out["seq_id"])
    same = codes[1:] == codes[:-1]
    if np.all(codes[1:] >= codes[:-1]) and np.all(pos[1:][same] > pos[:-1][same]):  # sorted
        order = np.arange(len(out))
    else:
        order = np.lexsort((pos, codes))
    sc, sp = codes[order], pos[order]
    dup = np.flatnonzero((sc[1:] == sc[:-1]) & (sp[1:] == sp[:-1]))
    if dup.size:
        row = int(order[dup[0] + 1]) + 1
        raise InputError(
            f"{src}: column 'pos', row {row}: duplicate position {int(sp[dup[0]])} "
            f"in sequence {out['seq_id'].iloc[row - 1]!r}"
        )
    if not np.array_equal(order, np.arange(len(out))):
        out = out.iloc[order].reset_index(drop=True)
    out = _check_locations(out, "location", taxonomy, on_unknown, src)
    dropped = out.attrs.get("dropped_unknown")
    sorted_codes = _sorted_codes(out["seq_id"]) if dropped else codes[order]
    out["pos"] = _group_positions(sorted_codes)
    if dropped is not None:
        out.attrs["dropped_unknown"] = dropped
    return out


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
    pos = seqs["pos"].to_numpy(dtype=np.int64)
    if len(seqs) == 0:
        return np.full((0, int(height or 0)), -1, dtype=np.int32)
    row = _sorted_codes(seqs["seq_id"])
    n = int(row.max()) + 1
    idx, uniques = _codes(seqs["location"])
    code = loc_index.get_indexer(pd.Index(uniques))[idx]
    if (code < 0).any():
        bad = _first_row(code < 0)
        raise InputError(
            f"sequences: column 'location', row {bad}: {seqs['location'].iloc[bad - 1]!r} "
            "is not in the location list"
        )
    width = int(height) if height is not None else (int(pos.max()) + 1 if pos.size else 0)
    keep = pos < width
    mat = np.full((n, width), -1, dtype=np.int32)
    mat[row[keep], pos[keep]] = code[keep]
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
) -> pd.DataFrame:
    """Load trips: ``card_id`` (str; none if ``card_column=None``), ``on_time`` + other columns.

    ``on_time`` comes from ``time_column`` (default ``on_time``; ISO 8601, datetimes, or numbers =
    unix seconds) or, without it, from date + hour [+ minute] columns as for taps.
    ``count_columns`` (and a ``count`` column when present) must hold non-negative integers.
    """
    src = _source(data)
    df = _read(data, [card_column] if card_column else [])
    _require(df, [card_column] if card_column else [], src)
    _nonempty(df, src)
    out = df.copy()
    if card_column:
        out["card_id"] = _ids(df, card_column, src)
    out["on_time"] = _times(
        df, src, "on_time", time_column, date_column, hour_column, minute_column, date_format
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
    t = pd.to_datetime(trips[time_column]).to_numpy(dtype="datetime64[ns]").view(np.int64)
    order = np.lexsort((t, codes))
    rank = np.empty(len(trips), dtype=np.int64)
    rank[order] = _group_positions(codes[order])
    out = trips[rank < k].reset_index(drop=True)
    out.attrs.update(trips.attrs)
    return out
