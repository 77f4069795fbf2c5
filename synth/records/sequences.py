"""Records: long-format sequences, their bounding and integer encoding (:mod:`synth.records`)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa

from synth.errors import ConfigError, InputError
from synth.io import read_arrow, read_table, table_columns
from synth.logs import private_message
from synth.params import spell
from synth.records.codes import (
    BLOCK_ROWS,
    Column,
    group_positions,
    id_text,
    is_numbered,
    location_codes,
    positions_of,
    seq_codes,
    sorted_id_codes,
    str_array,
)
from synth.records.common import (
    SEQUENCE_COLUMNS,
    TAP_ALIASES,
    TAP_OPTIONS,
    TIME_COLUMNS,
    PathOrFrame,
    UnknownLocationWarning,
    first_true_row,
    known_values,
    require_columns,
    series_codes,
    source_name,
)
from synth.records.positions import duplicate_position_error
from synth.records.taps import sequences_from_taps, taps_from_frame
from synth.times import check_timezone

if TYPE_CHECKING:
    from synth.taxonomy import Taxonomy


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
    src = source_name(data)
    timezone = check_timezone(timezone)
    unknown_opts = sorted(set(tap_options) - set(TAP_OPTIONS))
    if unknown_opts:
        raise ConfigError(f"load_sequences: unknown option(s) {', '.join(unknown_opts)}")
    loc = location_column or "location"
    wanted = ("seq_id", "pos", loc, "time")
    if isinstance(data, pd.DataFrame):
        df = data.reset_index(drop=True)
        if {"seq_id", "pos"}.issubset(df.columns):
            require_columns(df, [loc], src)
            cols: dict[str, pa.ChunkedArray | pd.Series] = {c: df[c] for c in wanted if c in df}
            categorical = isinstance(df[loc].dtype, pd.CategoricalDtype)
            return _long_format(cols, loc, src, taxonomy, on_unknown, categorical=categorical)
    else:
        names = table_columns(data)
        if {"seq_id", "pos"}.issubset(names):
            require_columns(names, [loc], src)
            table = read_arrow(
                data, wanted, strings=("seq_id", loc), dictionary=(loc,), text=("time",)
            )
            cols = {c: table.column(c) for c in table.column_names}
            del table
            return _long_format(cols, loc, src, taxonomy, on_unknown, categorical=True)
        df = _read_tap_file(data, loc, location_column, tap_options)
    stop_col = location_column or "stop_id"
    taps = taps_from_frame(
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


def _read_tap_file(
    data: str | os.PathLike[str],
    loc: str,
    location_column: str | None,
    tap_options: dict[str, str | None],
) -> pd.DataFrame:
    """A taps file read with its id columns as text and its time columns unparsed."""
    ids = ("seq_id", loc, location_column or "stop_id", tap_options.get("card_column"))
    times = (tap_options.get("time_column"), tap_options.get("date_column"), *TIME_COLUMNS)
    return read_table(
        data,
        dtype={c: str for c in (*ids, *TAP_ALIASES["card_id"]) if c},
        text=[c for c in times if c],
    )


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
    seq = id_text(cols.pop("seq_id"), "seq_id", src)
    seq_code, uniques, seq_same = seq_codes(seq, src)
    if not seq_same:
        del seq
    pos = positions_of(cols.pop("pos"), src)
    loc_code, categories = location_codes(cols.pop(loc), loc, src)
    time = cols.get("time")
    ordered = bool(np.all(seq_code[1:] >= seq_code[:-1]))
    numbered = ordered and is_numbered(pos, seq_code)  # sorted, positions 0, 1, ...: the usual
    order = None
    if not numbered and not (
        ordered and not np.any((seq_code[1:] == seq_code[:-1]) & (pos[1:] <= pos[:-1]))
    ):
        order = np.lexsort((pos, seq_code))
        seq_code, pos, loc_code = seq_code[order], pos[order], loc_code[order]
        dup = np.flatnonzero((seq_code[1:] == seq_code[:-1]) & (pos[1:] == pos[:-1]))
        if dup.size:
            seq_id = uniques[int(seq_code[dup[0]])].as_py()
            row = int(order[dup[0] + 1]) + 1
            raise duplicate_position_error(src, seq_id, int(pos[dup[0]]), row)
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
    if not (numbered and keep is None) and not is_numbered(pos, seq_code):
        del pos
        pos = group_positions(seq_code)
    del seq_code
    labels = pd.Index(str_array(categories))
    out = pd.DataFrame(
        {
            "seq_id": pd.Series(str_array(ids), copy=False),
            "pos": pos,
            "location": (
                pd.Categorical.from_codes(loc_code, categories=labels)
                if categorical
                else str_array(categories.take(pa.array(loc_code)))
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
    number dropped or None without a taxonomy). Messages as :func:`check_locations`."""
    if on_unknown not in ("error", "drop"):
        raise ConfigError(f"{spell('on_unknown')} must be 'error' or 'drop', got {on_unknown!r}")
    if taxonomy is None:
        return None, None
    names = np.asarray(categories.to_pylist(), dtype=object)
    known = known_values(names, taxonomy.leaves())
    if known.all():
        return None, 0
    keep = known[codes]
    n, k = int(keep.size - np.count_nonzero(keep)), int((~known).sum())
    if on_unknown == "error":
        row = first_true_row(~keep)
        counts = private_message(f"{n} rows, {k} distinct unknown locations")
        raise InputError(
            f"{src}: column 'location', row {row}: location {names[codes[row - 1]]!r} is not in "
            f"the taxonomy {taxonomy.source} ({f'{counts}; ' if counts else ''}"
            f"pass {spell('on_unknown', 'drop')} to drop them)"
        )
    text = private_message(
        f"{src}: dropped {n} rows ({k} distinct locations) of column 'location' not in the "
        f"taxonomy {taxonomy.source}"
    )
    if text is not None:
        warnings.warn(text, UnknownLocationWarning, stacklevel=4)
    return keep, n


def truncate_sequences(seqs: pd.DataFrame, height: int) -> pd.DataFrame:
    """Keep the first ``height`` locations of each sequence (deterministic bounding, 004 s. 3)."""
    if isinstance(height, bool) or not isinstance(height, int | np.integer) or height < 1:
        raise ConfigError(f"height must be an integer >= 1, got {height!r}")
    require_columns(seqs, ["pos"], "sequences")
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
    require_columns(seqs, list(SEQUENCE_COLUMNS), "sequences")
    if height is not None and (isinstance(height, bool) or height < 1):
        raise ConfigError(f"height must be an integer >= 1, got {height!r}")
    loc_index = pd.Index(list(locations))
    if not loc_index.is_unique:
        raise ConfigError("locations must be distinct")
    pos = seqs["pos"].to_numpy()
    if len(seqs) == 0:
        return np.full((0, int(height or 0)), -1, dtype=np.int32)
    row = sorted_id_codes(seqs["seq_id"])
    n = int(row.max()) + 1
    column = seqs["location"]
    if isinstance(column.dtype, pd.CategoricalDtype):  # codes of the categories: nothing hashed
        idx = column.cat.codes.to_numpy()
        mapping = loc_index.get_indexer(column.cat.categories)
    else:
        idx, uniques = series_codes(column)
        mapping = loc_index.get_indexer(pd.Index(uniques))
    mapping = np.append(mapping, -1).astype(np.int32)  # code -1 (a missing value) -> -1
    missing = (mapping < 0)[idx]
    if missing.any():
        bad = first_true_row(missing)
        raise InputError(
            f"sequences: column 'location', row {bad}: {column.iloc[bad - 1]!r} "
            "is not in the location list"
        )
    del missing
    width = int(height) if height is not None else (int(pos.max()) + 1 if pos.size else 0)
    mat = np.full((n, width), -1, dtype=np.int32)
    flat = mat.reshape(-1)
    for start in range(0, pos.size, BLOCK_ROWS):  # bounded temporaries
        stop = start + BLOCK_ROWS
        p = pos[start:stop].astype(np.int64)
        keep = p < width
        cell = row[start:stop][keep] * np.int64(width) + p[keep]
        flat[cell] = mapping[idx[start:stop][keep]]
    return mat
