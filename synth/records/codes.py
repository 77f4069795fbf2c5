"""Records: id columns as arrow text and integer codes, vectorised (see :mod:`synth.records`)."""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from synth.errors import InputError
from synth.io import DOT_ZERO, ID_SPACE, id_strings
from synth.records.common import arrow_text, checked_ids, int_column

BLOCK_ROWS = 1 << 22  # rows per block when filling the sequence matrix


_STR = pd.StringDtype("pyarrow", na_value=np.nan)  # pandas' default ``str`` dtype


def _int_dtype(n: int, smallest: type[np.signedinteger] = np.int8) -> type[np.signedinteger]:
    """The narrowest signed integer type, at least ``smallest``, holding values below ``n``
    (row/sequence indices start at int32; category codes at int8)."""
    for dtype in (np.int8, np.int16, np.int32):
        if np.iinfo(dtype).bits >= np.iinfo(smallest).bits and n < np.iinfo(dtype).max:
            return dtype
    return np.int64


def sorted_id_codes(series: pd.Series) -> np.ndarray:
    """Codes of a string column that follow its sorted order (like ``pd.factorize(sort=True)``).

    Input already sorted (the usual case for files this library wrote) costs one comparison of
    adjacent values, then one of adjacent runs; otherwise the distinct values are hashed (arrow)
    and only they are sorted. int32 when the column has fewer than 2**31 rows.
    """
    n = len(series)
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    arr = _chunked(arrow_text(series))
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


def is_numbered(pos: np.ndarray, sorted_codes: np.ndarray) -> bool:
    """Whether ``pos`` already equals ``group_positions(sorted_codes)`` (checked by blocks):
    0 where a run of codes starts, else one more than the row before."""
    n = pos.size
    if n and pos[0] != 0:
        return False
    for start in range(1, n, BLOCK_ROWS):
        stop = min(start + BLOCK_ROWS, n)
        new = sorted_codes[start:stop] != sorted_codes[start - 1 : stop - 1]
        if np.any(pos[start:stop][new]):
            return False
        # a run start has a step <= 0: the steps other than 1 must be exactly the run starts
        step = pos[start:stop] - pos[start - 1 : stop - 1]
        if np.count_nonzero(step != 1) != np.count_nonzero(new):
            return False
    return True


def group_positions(sorted_codes: np.ndarray) -> np.ndarray:
    """0-based position of each element within its run of equal (sorted) codes."""
    n = sorted_codes.size
    out = np.ones(n, dtype=np.int64)
    if n == 0:
        return out
    starts = np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1
    out[0] = 0
    out[starts] = 1 - np.diff(starts, prepend=0)  # back to 0 at each run start
    return np.cumsum(out, out=out)


Column: TypeAlias = pa.ChunkedArray | pd.Series


def str_array(values: pa.Array | pa.ChunkedArray) -> pd.api.extensions.ExtensionArray:
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


def id_text(values: Column, column: str, src: str) -> pa.ChunkedArray:
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
        arr = pa.array(checked_ids(_fallback_series(values), column, src).array)
    return _chunked(arr)


def _normalized(values: pa.Array | pa.ChunkedArray, column: str, src: str, rows: Any) -> pa.Array:
    """:func:`synth.io.id_strings` applied to the distinct (or run) values of an id column.

    Each value is normalised alone; ``rows(i)`` is the first 1-based row holding ``values[i]``:
    an empty value raises InputError naming it.
    """
    norm = id_strings(pd.Series(str_array(values)), column=column, source=src)
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


def seq_codes(values: pa.ChunkedArray, src: str) -> tuple[np.ndarray, pa.Array, bool]:
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


def location_codes(values: Column, column: str, src: str) -> tuple[np.ndarray, pa.Array]:
    """(code of each row, the sorted distinct normalised locations).

    A dictionary-encoded column is used chunk by chunk as it is; others are hashed once (arrow).
    Only the distinct values are normalised; the codes are as narrow as the categories allow.
    """
    encoded = _as_dictionary(values)
    if encoded is None:
        encoded = pc.dictionary_encode(id_text(values, column, src))
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


def positions_of(values: Column, src: str) -> np.ndarray:
    """``pos`` as int64 (non-negative integers; errors name the row as :func:`int_column`)."""
    arr: np.ndarray | None = None
    if isinstance(values, pd.Series):
        if isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu":
            arr = values.to_numpy()
    elif pa.types.is_integer(values.type) and values.null_count == 0:
        arr = _numpy(values)
    if arr is None or arr.dtype == np.uint64 or (arr.size and arr.min() < 0):
        series = values if isinstance(values, pd.Series) else values.to_pandas()
        return int_column(series.reset_index(drop=True), "pos", src, 0, None)
    return arr.astype(np.int64, copy=False)
