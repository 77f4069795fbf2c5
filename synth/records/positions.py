"""Records: the errors of a long-format file's positions, naming the row (:mod:`synth.records`).

:func:`synth.records.load_sequences` names the 1-based data row (header not counted) and the value
of a ``pos`` that is not an integer >= 0, and the row of a duplicate position. The engines that
read files themselves (DuckDB, Spark) find such a problem in SQL without row numbers; only then
(the error path: nothing here runs on a valid file) they call :func:`bad_position_error` and
:func:`duplicate_position_error` with :func:`duplicate_row` for the same message. Both read only
the ``seq_id`` and ``pos`` columns; :func:`duplicate_row` streams them batch by batch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from synth.errors import InputError
from synth.io import id_strings, read_arrow, table_format
from synth.records.codes import positions_of

__all__ = ["bad_position_error", "duplicate_position_error", "duplicate_row"]


def duplicate_position_error(src: str, seq_id: str, pos: int, row: int | None) -> InputError:
    """The error for a second row at position ``pos`` of sequence ``seq_id`` (``row``: its
    1-based data row in the input; ``None`` when not known)."""
    where = "" if row is None else f", row {row}"
    return InputError(
        f"{src}: column 'pos'{where}: duplicate position {pos} in sequence {seq_id!r}"
    )


def bad_position_error(path: str | os.PathLike[str], count: int | None = None) -> InputError:
    """The error :func:`~synth.records.load_sequences` raises for the file's first ``pos`` that is
    not an integer >= 0 (row and value as it reads the column); the ``count`` of such values an
    engine found when that reading finds none (a rule the engines read differently)."""
    try:
        positions_of(read_arrow(path, ["pos"]).column("pos"), str(path))
    except InputError as err:
        return err
    n = "" if count is None else f"{count} "
    return InputError(f"{path}: column 'pos': {n}value(s) that are not integers >= 0")


def duplicate_row(
    path: str | os.PathLike[str], seq_id: str, pos: int, *, batch_rows: int = 1 << 20
) -> int | None:
    """The 1-based data row :func:`~synth.records.load_sequences` names for a duplicate
    position: the second row, in file order, whose ``seq_id`` (normalised per value, as
    :func:`synth.io.id_strings`) is ``seq_id`` and whose ``pos`` is ``pos``; ``None`` when
    fewer than two rows are. Only rows at position ``pos`` have their id normalised."""
    seen, offset = 0, 0
    for ids, positions in _id_pos_batches(Path(path), batch_rows):
        num = pd.to_numeric(positions.to_pandas(), errors="coerce")
        at_pos = num.to_numpy(dtype=float, na_value=np.nan) == pos
        at_pos &= ~ids.is_null().to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(at_pos)
        if rows.size:
            text = id_strings(
                ids.take(pa.array(rows)).to_pandas(), column="seq_id", source=str(path)
            )
            rows = rows[(text == seq_id).to_numpy(dtype=bool)]
            if seen + rows.size >= 2:
                return offset + int(rows[1 - seen]) + 1
            seen += int(rows.size)
        offset += len(ids)
    return None


def _id_pos_batches(p: Path, batch_rows: int) -> Iterator[tuple[pa.Array, pa.Array]]:
    """The ``seq_id`` and ``pos`` columns, batch by batch in file order: CSV as text (``""``
    the only missing value, as identifiers are read), Parquet as stored."""
    if table_format(p) == "csv":
        import pyarrow.csv as pacsv

        raw = {str(c).strip(): str(c) for c in pd.read_csv(p, nrows=0).columns}
        cols = [raw["seq_id"], raw["pos"]]
        reader = pacsv.open_csv(
            str(p),
            convert_options=pacsv.ConvertOptions(
                include_columns=cols,
                column_types={c: pa.string() for c in cols},
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )
        for batch in reader:
            yield batch.column(cols[0]), batch.column(cols[1])
        return
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(p)
    raw = {name.strip(): name for name in parquet.schema_arrow.names}
    cols = [raw["seq_id"], raw["pos"]]
    for batch in parquet.iter_batches(batch_size=batch_rows, columns=cols):
        yield batch.column(cols[0]), batch.column(cols[1])
