"""Table IO and atomic writes.

Every file the library writes goes through :func:`atomic_path` (a temporary file in the
destination directory, renamed over the target with :func:`os.replace` only once it is complete),
and every release directory through :func:`release_dir` (:mod:`synth.outdir`: staged in a hidden
sibling directory, put in place whole only when the whole release succeeded). A failed or
interrupted run therefore leaves no partial output.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.outdir import release_dir

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "CSV_SUFFIXES",
    "PARQUET_SUFFIXES",
    "atomic_path",
    "fingerprint",
    "id_strings",
    "read_arrow",
    "read_table",
    "release_dir",
    "table_columns",
    "table_format",
    "write_table",
]

CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.zst", ".csv.xz")
PARQUET_SUFFIXES = (".parquet", ".pq")


def table_format(path: str | os.PathLike[str]) -> str | None:
    """``"csv"`` or ``"parquet"`` from the file extension (any case), ``None`` if neither."""
    name = Path(path).name.lower()
    if name.endswith(CSV_SUFFIXES):
        return "csv"
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    return None


def id_strings(series: pd.Series) -> pd.Series:
    """Identifiers as stripped strings, missing values kept missing.

    Integral floats (``32.0``, as pandas reads an integer column with gaps) become ``"32"``; so do
    strings that are all of the form ``"123.0"`` (such a CSV column was written from floats).
    """
    if pd.api.types.is_float_dtype(series):
        vals = series.to_numpy(dtype=float, na_value=np.nan)
        finite = vals[~np.isnan(vals)]
        if finite.size and np.all(finite == np.round(finite)):
            return series.astype("Int64").astype(str).where(series.notna(), None)
    out = series.astype(str).str.strip().where(series.notna(), None)
    first = out.dropna().head(1)
    if len(first) and first.iloc[0].endswith(".0"):
        present = out.dropna()
        if present.str.fullmatch(r"-?\d+\.0+").all():
            out = out.str.replace(r"\.0+$", "", regex=True)
    return out


def _checked(path: str | os.PathLike[str]) -> tuple[Path, str]:
    p = Path(path)
    fmt = table_format(p)
    if fmt is None:
        raise InputError(
            f"{p}: unsupported file type (expected {', '.join(CSV_SUFFIXES + PARQUET_SUFFIXES)})"
        )
    if not p.is_file():
        raise InputError(f"{p}: file not found")
    return p, fmt


def _bad_utf8(p: Path) -> str | None:
    """Where a plain CSV file stops being UTF-8 (line and byte), or None if it is all UTF-8."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    line, offset = 1, 0
    with p.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            try:
                decoder.decode(block)
            except UnicodeDecodeError as exc:
                bad = block[exc.start : exc.start + 1]
                line += block[: exc.start].count(b"\n")
                return f"byte 0x{bad.hex()} on line {line} (offset {offset + exc.start})"
            line += block.count(b"\n")
            offset += len(block)
    return None


def _unreadable(p: Path, fmt: str, exc: Exception) -> InputError:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if fmt == "csv" and p.is_file() and p.stat().st_size == 0:
        msg = "the file is empty (no header line)"
    elif fmt == "csv" and (isinstance(exc, UnicodeDecodeError) or "UTF8" in msg.upper()):
        where = _bad_utf8(p) if p.name.lower().endswith(".csv") else None
        msg = (
            f"not UTF-8 text{f' ({where})' if where else ''}: CSV inputs must be UTF-8 (a BOM is "
            "allowed); re-save it as UTF-8, e.g. iconv -f latin1 -t utf-8"
        )
    return InputError(f"{p}: cannot read {fmt.upper()} file: {msg}")


def _raw_names(p: Path, fmt: str) -> list[str]:
    if fmt == "csv":
        return [str(c) for c in pd.read_csv(p, nrows=0).columns]
    import pyarrow.parquet as pq

    return list(pq.read_schema(p).names)


def table_columns(path: str | os.PathLike[str]) -> list[str]:
    """The column names of a CSV or Parquet table (stripped, as :func:`read_table` gives them),
    read from its header or schema only. Raises :class:`InputError` like :func:`read_table`."""
    p, fmt = _checked(path)
    try:
        return [c.strip() for c in _raw_names(p, fmt)]
    except Exception as exc:
        raise _unreadable(p, fmt, exc) from exc


def read_arrow(
    path: str | os.PathLike[str],
    columns: Sequence[str],
    *,
    strings: Sequence[str] = (),
    dictionary: Sequence[str] = (),
) -> pa.Table:
    """Read the named columns (stripped names; absent ones are skipped) as a pyarrow Table, in
    the order asked.

    CSV is parsed as :func:`read_table` does, the ``strings`` columns as text (``007`` stays
    ``007``). Parquet columns keep their stored types (no ``str`` conversion: callers convert), and
    its string columns named in ``dictionary`` come dictionary-encoded (a small dictionary plus
    int32 indices instead of one string per row). Raises :class:`InputError` like
    :func:`read_table`.
    """
    import pyarrow as pa

    p, fmt = _checked(path)
    try:
        raw = {c.strip(): c for c in _raw_names(p, fmt)}
        use = [raw[c] for c in dict.fromkeys(columns) if c in raw]
        if fmt == "csv":
            text = {raw[c]: str for c in strings if c in raw}
            df = pd.read_csv(p, usecols=use, dtype=text, engine="pyarrow")
            table = pa.Table.from_pandas(df, preserve_index=False)
        else:
            import pyarrow.parquet as pq

            schema = pq.read_schema(p)
            as_dict = [
                raw[c]
                for c in dictionary
                if c in raw
                and (
                    pa.types.is_string(schema.field(raw[c]).type)
                    or pa.types.is_large_string(schema.field(raw[c]).type)
                )
            ]
            table = pq.read_table(p, columns=use, read_dictionary=as_dict or None)
    except Exception as exc:  # parser errors of pandas / pyarrow, permissions, corrupt files
        raise _unreadable(p, fmt, exc) from exc
    table = table.rename_columns([str(c).strip() for c in table.column_names])
    return table.select([c for c in dict.fromkeys(columns) if c in raw])


def read_table(
    path: str | os.PathLike[str],
    *,
    columns: list[str] | None = None,
    dtype: dict[str, Any] | None = None,
) -> pd.DataFrame:
    """Read a CSV or Parquet table, chosen by extension.

    ``columns`` restricts the columns read (missing ones are ignored here; callers validate);
    ``dtype`` maps column names to dtypes for CSV parsing (e.g. ``str`` for identifiers so that
    ``007`` stays ``007``) and is applied after reading for Parquet. Raises :class:`InputError`
    for a missing, unreadable or unsupported file.
    """
    p, fmt = _checked(path)
    try:
        if fmt == "csv":
            header = pd.read_csv(p, nrows=0).columns
            usecols = None if columns is None else [c for c in columns if c in header]
            dtypes = None if dtype is None else {k: v for k, v in dtype.items() if k in header}
            df = pd.read_csv(p, usecols=usecols, dtype=dtypes, engine="pyarrow")
        else:
            import pyarrow.parquet as pq

            schema_names = pq.read_schema(p).names
            use = None if columns is None else [c for c in columns if c in schema_names]
            df = pd.read_parquet(p, columns=use)
            if dtype:
                df = df.astype({k: v for k, v in dtype.items() if k in df.columns})
    except Exception as exc:  # parser errors of pandas / pyarrow, permissions, corrupt files
        raise _unreadable(p, fmt, exc) from exc
    df.columns = [str(c).strip() for c in df.columns]
    return df


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write ``df`` (no index) as CSV or Parquet (zstd), chosen by extension, atomically."""
    p = Path(path)
    fmt = table_format(p)
    if fmt is None:
        raise ConfigError(f"{p}: unsupported output file type (use .csv or .parquet)")
    with atomic_path(p) as tmp:
        if fmt == "csv":
            df.to_csv(tmp, index=False)
        else:
            df.to_parquet(tmp, index=False, compression="zstd")
    return p


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; renamed over ``path`` on success, deleted on error.

    The temporary name keeps the target's suffix (some writers pick the format from it). Missing
    parent directories are created, and removed again on error. Interrupts (``KeyboardInterrupt``)
    also clean up.
    """
    target = Path(path)
    created = [d for d in (target.parent, *target.parent.parents) if not d.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    suffix = "".join(target.suffixes[-2:]) if target.name.lower().endswith(".gz") else target.suffix
    tmp = target.with_name(f".{target.stem}.tmp-{uuid.uuid4().hex[:12]}{suffix}")
    try:
        yield tmp
        if not tmp.exists():
            raise FileNotFoundError(f"{tmp}: nothing was written to the temporary file")
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        for d in created:  # deepest first
            with contextlib.suppress(OSError):
                d.rmdir()
        raise


def _file_digest(path: Path) -> bytes:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.digest()


def fingerprint(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> str:
    """``"sha256:<hex>"`` over the contents of the given files, in the given order.

    A directory contributes its files recursively, in sorted relative-path order. File names do not
    enter the hash (renaming an input keeps its fingerprint); contents and order do.
    """
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    outer = hashlib.sha256()
    for item in items:
        p = Path(item)
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file())
        elif p.is_file():
            files = [p]
        else:
            raise InputError(f"{p}: file not found (cannot fingerprint)")
        for f in files:
            outer.update(_file_digest(f))
    return f"sha256:{outer.hexdigest()}"
