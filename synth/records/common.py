"""Records: shared constants, column checks and time columns (see :mod:`synth.records`)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from synth.errors import ConfigError, InputError, TransitSynthWarning
from synth.io import id_strings, read_table
from synth.logs import private_message
from synth.params import spell
from synth.times import parse_times

if TYPE_CHECKING:
    from synth.taxonomy import Taxonomy


SEQUENCE_COLUMNS = ("seq_id", "pos", "location")


#: canonical role -> column names tried in order when the caller does not name the column.
TAP_ALIASES: dict[str, tuple[str, ...]] = {
    "card_id": ("card_id", "id_tarjeta"),
    "date": ("date", "fecha"),
    "hour": ("hour", "hora"),
    "minute": ("minute", "minuto"),
}


#: ``tap`` values that mark a tap-off (the DuckDB engine matches them too)
OFF_VALUES = ("off", "out", "check out", "check_out", "checkout", "alight", "alighting")


TAP_OPTIONS = (
    "card_column",
    "time_column",
    "date_column",
    "hour_column",
    "minute_column",
    "date_format",
)

PathOrFrame = str | os.PathLike[str] | pd.DataFrame


class UnknownLocationWarning(TransitSynthWarning):
    """Rows whose location is not in the taxonomy were dropped (``on_unknown="drop"``)."""


# ---------------------------------------------------------------------------- helpers
def source_name(data: PathOrFrame) -> str:
    return "input DataFrame" if isinstance(data, pd.DataFrame) else str(data)


#: time and date columns: read from CSV as text (the type of a column is never guessed from its
#: values: one odd value would change how the others are read)
TIME_COLUMNS = ("time", "on_time", "off_time", "date", "fecha")


def read_frame(
    data: PathOrFrame, id_columns: Sequence[str], time_columns: Sequence[str | None] = ()
) -> pd.DataFrame:
    if isinstance(data, pd.DataFrame):
        return data.reset_index(drop=True)
    times = [c for c in (*time_columns, *TIME_COLUMNS) if c]
    return read_table(data, dtype={c: str for c in id_columns}, text=times)


#: a canonical taps column -> the input-mapping option that names the user's own (issue 29)
ROLE_OPTIONS = {
    "card_id": "card_column",
    "stop_id": "location_column",
    "location": "location_column",
    "time": "time_column",
}


def require_columns(
    df: pd.DataFrame | Sequence[str],
    columns: Sequence[str],
    src: str,
    *,
    hint: Callable[[Sequence[str], Sequence[str]], str] | None = None,
) -> None:
    """InputError naming the missing columns and those found, then ``hint(missing, names)``
    (for a taps file: :func:`synth.records.mapping.mapping_hint`)."""
    names = list(df.columns) if isinstance(df, pd.DataFrame) else list(df)
    missing = [c for c in columns if c not in names]
    if missing:
        found = ", ".join(map(str, names)) or "none"
        raise InputError(
            f"{src}: missing column(s) {', '.join(repr(c) for c in missing)} (found: {found})"
            + (hint(missing, names) if hint is not None else "")
        )


def require_rows(df: pd.DataFrame, src: str) -> None:
    if len(df) == 0:
        raise InputError(f"{src}: no rows (empty input)")


def _show(value: object) -> str:
    """A value for a message: ``'text'`` for strings, plain numbers for numbers."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def first_true_row(mask: pd.Series | np.ndarray) -> int:
    return int(np.flatnonzero(np.asarray(mask))[0]) + 1


def id_column(df: pd.DataFrame, column: str, src: str) -> pd.Series:
    return checked_ids(df[column], column, src)


def checked_ids(values: pd.Series, column: str, src: str) -> pd.Series:
    vals = id_strings(values, column=column, source=src)
    bad = vals.isna() | (vals == "")
    if bad.any():
        raise InputError(f"{src}: column '{column}', row {first_true_row(bad)}: empty value")
    return vals.astype(str)


def resolve_column(df: pd.DataFrame, role: str, given: str | None) -> str | None:
    if given is not None:
        return given
    return next((c for c in TAP_ALIASES[role] if c in df.columns), None)


def _parse_dates(raw: pd.Series, column: str, src: str, date_format: str | None) -> pd.Series:
    """Dates, each value on its own (parsed once per distinct value): ``date_format`` when
    declared, else ISO ``YYYY-MM-DD``, else day-first ``dd/mm/yyyy``."""
    if raw.isna().any():
        raise InputError(f"{src}: column '{column}', row {first_true_row(raw.isna())}: empty date")
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
        row = first_true_row(raw.astype(str).str.strip() == bad)
        expected = date_format or "YYYY-MM-DD or dd/mm/yyyy"
        raise InputError(
            f"{src}: column '{column}', row {row}: cannot parse {bad!r} as a date ({expected})"
        )
    return pd.Series(parsed.to_numpy(dtype="datetime64[ns]")[codes], index=raw.index)


def int_column(raw: pd.Series, column: str, src: str, lo: int, hi: int | None) -> np.ndarray:
    vals = pd.to_numeric(raw, errors="coerce")
    arr = vals.to_numpy(dtype=float, na_value=np.nan)
    bad = np.isnan(arr) | (arr != np.round(arr)) | (arr < lo)
    if hi is not None:
        bad |= arr > hi
    if bad.any():
        row = first_true_row(bad)
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        value = _show(raw.iloc[row - 1])
        raise InputError(f"{src}: column '{column}', row {row}: {value} is not an integer {rng}")
    return arr.astype(np.int64)


def check_counts(df: pd.DataFrame, columns: Sequence[str], *, source: str = "input") -> None:
    """Raise InputError unless every value of ``columns`` is a non-negative integer."""
    require_columns(df, columns, source)
    for col in columns:
        int_column(df[col], col, source, 0, None)


def check_locations(
    df: pd.DataFrame, column: str, taxonomy: Taxonomy | None, on_unknown: str, src: str
) -> pd.DataFrame:
    """Apply the unknown-location policy; returns ``df`` (possibly filtered) with attrs set."""
    if on_unknown not in ("error", "drop"):
        raise ConfigError(f"{spell('on_unknown')} must be 'error' or 'drop', got {on_unknown!r}")
    if taxonomy is None:
        return df
    known = in_set(df[column], taxonomy.leaves())
    if known.all():
        df.attrs["dropped_unknown"] = 0
        return df
    unknown = df.loc[~known, column]
    n, k = int((~known).sum()), unknown.nunique()
    if on_unknown == "error":
        row = first_true_row(~known)
        counts = private_message(f"{n} rows, {k} distinct unknown locations")
        raise InputError(
            f"{src}: column '{column}', row {row}: location {unknown.iloc[0]!r} is not in the "
            f"taxonomy {taxonomy.source} ({f'{counts}; ' if counts else ''}"
            f"pass {spell('on_unknown', 'drop')} to drop them)"
        )
    text = private_message(
        f"{src}: dropped {n} rows ({k} distinct locations) of column '{column}' not in the "
        f"taxonomy {taxonomy.source}"
    )
    if text is not None:
        warnings.warn(text, UnknownLocationWarning, stacklevel=3)
    out = df[known].reset_index(drop=True)
    out.attrs["dropped_unknown"] = n
    return out


def arrow_text(series: pd.Series) -> pa.Array | pa.ChunkedArray:
    """The values as pyarrow strings (zero-copy, chunks kept, for pandas' arrow-backed ``str``)."""
    return pa.array(series.array) if series.dtype != object else pa.array(series, type=pa.string())


def arrow_strings(series: pd.Series) -> pa.Array:
    """The values as one pyarrow string array (zero-copy for pandas' arrow-backed ``str``)."""
    arr = arrow_text(series)
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def series_codes(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, uniques) of a string column in first-seen order (arrow hashing: fast)."""
    enc = pc.dictionary_encode(arrow_strings(series))
    uniques = np.asarray(enc.dictionary.to_pylist(), dtype=object)
    return enc.indices.to_numpy(zero_copy_only=False), uniques


def known_values(values: np.ndarray, allowed: Sequence[str]) -> np.ndarray:
    """Boolean mask: each of ``values`` (distinct strings) is in ``allowed``. A hash lookup:
    ``np.isin`` on object arrays sorts them (6 s at 100,000 stops)."""
    known = pd.Index(pd.unique(np.asarray(list(allowed), dtype=object)))
    return np.asarray(known.get_indexer(pd.Index(values, dtype=object)) >= 0)


def in_set(series: pd.Series, allowed: Sequence[str]) -> np.ndarray:
    """Boolean mask: value is in ``allowed`` (hashes the distinct values only)."""
    if len(series) == 0:
        return np.zeros(0, dtype=bool)
    codes, uniques = series_codes(series)
    return known_values(uniques, allowed)[codes]


def tap_times(
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
        require_columns(df, [tcol], src)
        return pd.Series(
            parse_times(df[tcol], timezone=timezone, column=tcol, source=src).to_numpy(),
            index=df.index,
        )
    dcol = resolve_column(df, "date", date_column)
    hcol = resolve_column(df, "hour", hour_column)
    if dcol is None or hcol is None or dcol not in df.columns or hcol not in df.columns:
        raise InputError(
            f"{src}: no time: need a '{default}' column (ISO 8601) or date + hour columns "
            f"(e.g. {spell('date_column', 'fecha')}, {spell('hour_column', 'hora')}); found: "
            f"{', '.join(df.columns)}"
        )
    time = _parse_dates(df[dcol], dcol, src, date_format)
    time = time + pd.to_timedelta(int_column(df[hcol], hcol, src, 0, 23), unit="h")
    mcol = resolve_column(df, "minute", minute_column)
    if mcol is not None and mcol in df.columns:
        time = time + pd.to_timedelta(int_column(df[mcol], mcol, src, 0, 59), unit="m")
    elif minute_column is not None:
        require_columns(df, [minute_column], src)
    return time
