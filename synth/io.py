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
import json
import os
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "CSV_NA_VALUES",
    "CSV_SUFFIXES",
    "DOT_ZERO",
    "ID_SPACE",
    "JSON_DEPTH_LIMIT",
    "JSON_SIZE_LIMIT",
    "PARQUET_SUFFIXES",
    "atomic_path",
    "check_sep",
    "fingerprint",
    "id_strings",
    "read_arrow",
    "read_json",
    "read_table",
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


#: the text pandas reads as missing in a CSV file (its default ``na_values``); never in identifiers
CSV_NA_VALUES = (
    "",
    "#N/A",
    "#N/A N/A",
    "#NA",
    "-1.#IND",
    "-1.#QNAN",
    "-NaN",
    "-nan",
    "1.#IND",
    "1.#QNAN",
    "<NA>",
    "N/A",
    "NA",
    "NULL",
    "NaN",
    "None",
    "n/a",
    "nan",
    "null",
)
#: the white space stripped around an identifier (the same set in every engine)
ID_SPACE = " \t\n\r\f\x0b"
#: an identifier written from a float: ``-?digits.0+`` (group 1 is kept)
DOT_ZERO = r"^(-?[0-9]+)\.0+$"


def id_strings(series: pd.Series, *, column: str = "id", source: str = "input") -> pd.Series:
    """Identifiers as text, each value normalised on its own (never by looking at other rows).

    Per value: surrounding white space (:data:`ID_SPACE`) is stripped, and text of the form
    ``-?digits.0+`` (an integer written from a float) loses its ``.0+`` (``" 32.0 "`` -> ``"32"``;
    ``"1.5"`` and ``"007"`` stay as they are). Numbers (a float column, as Parquet or pandas
    store integers with gaps) must be integral and become their integer text; a non-integral
    number raises :class:`InputError` naming ``source``, ``column`` and the 1-based row. Missing
    values stay missing (callers decide: error or drop).
    """
    if pd.api.types.is_bool_dtype(series):
        text = series.astype(str)
    elif pd.api.types.is_numeric_dtype(series):
        text = _number_text(series, column, source)
    elif pd.api.types.is_object_dtype(series):  # a frame built by hand: numbers and text mixed
        num = series.map(_is_number)
        text = series.astype(str)
        if num.any():
            numbers = _number_text(series.where(num, np.nan).astype(float), column, source)
            text = text.where(~num, numbers)
    else:
        text = series.astype(str)
    out = text.str.strip(ID_SPACE).str.replace(DOT_ZERO, r"\1", regex=True)
    return out.where(series.notna(), None)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float | np.number) and not isinstance(value, bool | np.bool_)


def _number_text(series: pd.Series, column: str, source: str) -> pd.Series:
    """Integral numbers as their integer text (missing stay missing); others raise InputError."""
    if pd.api.types.is_integer_dtype(series) and not series.hasnans:
        return series.astype(str)
    vals = series.to_numpy(dtype=float, na_value=np.nan)
    present = ~np.isnan(vals)
    bad = present & (~np.isfinite(vals) | (vals != np.round(vals)))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{source}: column '{column}', row {row + 1}: {float(vals[row])!r} is not an "
            "identifier (a number that is not an integer)"
        )
    text = np.full(vals.size, None, dtype=object)
    small = present & (np.abs(vals) < 2.0**63)
    text[small] = vals[small].astype(np.int64).astype(str)
    for i in np.flatnonzero(present & ~small):
        text[i] = str(int(vals[i]))
    return pd.Series(text, index=series.index, dtype=object)


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


def _open_csv(p: Path) -> Any:
    """A CSV file opened for its (decompressed) bytes: plain, gzip, bz2 or xz."""
    name = p.name.lower()
    if name.endswith(".gz"):
        import gzip

        return gzip.open(p, "rb")
    if name.endswith(".bz2"):
        import bz2

        return bz2.open(p, "rb")
    if name.endswith(".xz"):
        import lzma

        return lzma.open(p, "rb")
    return p.open("rb")


def _bad_utf8(p: Path) -> str | None:
    """Where a plain CSV file stops being UTF-8 (line and byte), or None if it is all UTF-8."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    line, offset = 1, 0
    with _open_csv(p) as fh:
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
        where = _bad_utf8(p) if not p.name.lower().endswith(".zst") else None
        msg = (
            f"not UTF-8 text{f' ({where})' if where else ''}: CSV inputs must be UTF-8 (a BOM is "
            "allowed); re-save it as UTF-8, e.g. iconv -f latin1 -t utf-8"
        )
    return InputError(f"{p}: cannot read {fmt.upper()} file: {msg}")


#: delimiters a CSV header is tested for when it reads as one column (:func:`_delimiter_hint`)
_OTHER_SEPS = (";", "\t", "|")


def check_sep(sep: str | None) -> str | None:
    """``sep`` (one character; ``\\t`` or ``tab`` for a tab), or None for the comma."""
    if sep is None:
        return None
    sep = "\t" if sep in ("\\t", "tab") else sep
    if len(sep) != 1 or sep in '"\r\n':
        raise ConfigError(f"--sep {sep!r}: expected one character, e.g. ';' or tab")
    return sep


def _delimiter_hint(p: Path, names: Sequence[str], sep: str | None) -> None:
    """Refuse a CSV whose header reads as one column holding another delimiter.

    Decided from the header line only: the header is the file's schema (public), not a record,
    so no private value enters the decision.
    """
    if len(names) != 1:
        return
    for other in _OTHER_SEPS:
        if other != (sep or ",") and other in names[0]:
            shown = "\\t" if other == "\t" else other
            raise InputError(
                f"{p}: the header is one column {names[0][:60]!r}: looks like "
                f"{shown!r}-separated: pass --sep '{shown}'"
            )


def _raw_names(p: Path, fmt: str, sep: str | None = None) -> list[str]:
    if fmt == "csv":
        names = [str(c) for c in pd.read_csv(p, nrows=0, sep=sep or ",").columns]
        _delimiter_hint(p, names, sep)
        return names
    import pyarrow.parquet as pq

    return list(pq.read_schema(p).names)


def table_columns(path: str | os.PathLike[str], *, sep: str | None = None) -> list[str]:
    """The column names of a CSV or Parquet table (stripped, as :func:`read_table` gives them),
    read from its header or schema only (``sep``: the CSV delimiter, default comma). Raises
    :class:`InputError` like :func:`read_table`."""
    p, fmt = _checked(path)
    try:
        return [c.strip() for c in _raw_names(p, fmt, sep)]
    except InputError:
        raise
    except Exception as exc:
        raise _unreadable(p, fmt, exc) from exc


def read_arrow(
    path: str | os.PathLike[str],
    columns: Sequence[str],
    *,
    strings: Sequence[str] = (),
    dictionary: Sequence[str] = (),
    text: Sequence[str] = (),
) -> pa.Table:
    """Read the named columns (stripped names; absent ones are skipped) as a pyarrow Table, in
    the order asked.

    CSV is parsed as :func:`read_table` does, the ``strings`` columns as identifiers (``007``
    stays ``007``; ``NA`` is text) and the ``text`` columns as text (no type guessed from the
    other rows, e.g. times). Parquet columns keep their stored types (no ``str`` conversion:
    callers convert), and its string columns named in ``dictionary`` come dictionary-encoded (a
    small dictionary plus int32 indices instead of one string per row). Raises
    :class:`InputError` like :func:`read_table`.
    """
    import pyarrow as pa

    p, fmt = _checked(path)
    try:
        raw = {c.strip(): c for c in _raw_names(p, fmt)}
        if fmt == "csv":
            _require_utf8(p)
        use = [raw[c] for c in dict.fromkeys(columns) if c in raw]
        if fmt == "csv":
            ids = {raw[c]: str for c in strings if c in raw}
            kinds: dict[str, Any] = {raw[c]: "string" for c in text if c in raw}
            kinds |= ids
            df = pd.read_csv(p, usecols=use, dtype=kinds, engine="pyarrow")
            df = _csv_ids(p, df, ids)
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
    text: Sequence[str] = (),
    sep: str | None = None,
) -> pd.DataFrame:
    """Read a CSV or Parquet table, chosen by extension (``sep``: the CSV delimiter, default
    comma; a header that reads as one column holding ``;``, tab or ``|`` is refused with a hint).

    A CSV file must be UTF-8 in every byte, read columns or not (:func:`_require_utf8`).

    ``columns`` restricts the columns read (missing ones are ignored here; callers validate);
    ``dtype`` maps column names to dtypes for CSV parsing (e.g. ``str`` for identifiers so that
    ``007`` stays ``007``; identifiers: ``NA``, ``null`` ... are text, only the empty string is
    missing) and is applied after reading for Parquet (numbers asked as ``str``: integral ones
    become their integer text, others raise InputError). ``text``: CSV columns read as text
    whatever the other rows hold (times: no type guessed from the column; missing values as
    pandas reads them); Parquet columns keep their stored types. Raises :class:`InputError`
    for a missing, unreadable or unsupported file.
    """
    p, fmt = _checked(path)
    try:
        if fmt == "csv":
            header = _raw_names(p, fmt, sep)
            _require_utf8(p)
            usecols = None if columns is None else [c for c in columns if c in header]
            dtypes = {k: v for k, v in (dtype or {}).items() if k in header}
            dtypes |= {k: "string" for k in text if k in header and k not in dtypes}
            df = pd.read_csv(
                p, usecols=usecols, dtype=dtypes or None, engine="pyarrow", sep=sep or ","
            )
            df = _csv_ids(p, df, {k: v for k, v in dtypes.items() if v is str}, sep)
        else:
            import pyarrow.parquet as pq

            schema_names = pq.read_schema(p).names
            use = None if columns is None else [c for c in columns if c in schema_names]
            df = pd.read_parquet(p, columns=use)
            if dtype:
                asked = {k: v for k, v in dtype.items() if k in df.columns}
                df = df.astype({k: v for k, v in asked.items() if not _numeric_id(df, k, v)})
    except InputError:
        raise
    except Exception as exc:  # parser errors of pandas / pyarrow, permissions, corrupt files
        raise _unreadable(p, fmt, exc) from exc
    for k in [k for k, v in (dtype or {}).items() if k in df.columns and _numeric_id(df, k, v)]:
        df[k] = id_strings(df[k], column=k, source=str(p))  # per value: integral -> integer text
    df.columns = [str(c).strip() for c in df.columns]
    return df


def _numeric_id(df: pd.DataFrame, column: str, dtype: Any) -> bool:
    """A column asked as text (an identifier) but stored as numbers (Parquet)."""
    return dtype is str and pd.api.types.is_numeric_dtype(df[column])


def _require_utf8(p: Path) -> None:
    """Refuse a CSV file that is not UTF-8 anywhere, in the columns read or not (the parsers
    check only the columns they turn into text). The bytes are checked on their own: no rule
    depends on other rows. Plain, gzip, bz2 and xz files (zstd ones are checked by their
    parser only)."""
    if p.name.lower().endswith(".zst"):
        return
    where = _bad_utf8(p)
    if where is not None:
        raise InputError(
            f"{p}: cannot read CSV file: not UTF-8 text ({where}): CSV inputs must be UTF-8 "
            "(a BOM is allowed); re-save it as UTF-8, e.g. iconv -f latin1 -t utf-8"
        )


def _csv_ids(
    p: Path, df: pd.DataFrame, text: dict[str, Any], sep: str | None = None
) -> pd.DataFrame:
    """Identifier columns of a CSV file with the empty string as their only missing value.

    pandas reads ``NA``, ``None``, ``null``, ``nan`` ... as missing; as identifiers they are
    text like any other (the rule is per value: it does not depend on other rows). Only when such
    a column came back with missing values are the text columns read again, alone, by pyarrow
    with ``""`` as the only missing value.
    """
    names = [c for c in text if c in df.columns and df[c].hasnans]
    if not names:
        return df
    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = pacsv.read_csv(
        pa.input_stream(str(p)),
        parse_options=pacsv.ParseOptions(delimiter=sep or ","),
        convert_options=pacsv.ConvertOptions(
            include_columns=names,
            column_types={c: pa.string() for c in names},
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )
    for c in names:
        df[c] = pd.Series(table.column(c).to_pandas(), index=df.index).astype("str")
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


#: Largest JSON file read (a release manifest, a schema: a few KB; 64 MiB) and deepest nesting
#: of arrays and objects (a manifest nests about 8 deep; Python's parser recurses per level and
#: fails past about 1000). Checked before parsing, as the GTFS zip members' sizes are.
JSON_SIZE_LIMIT = 64 << 20
JSON_DEPTH_LIMIT = 100
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def read_json(path: str | os.PathLike[str]) -> Any:
    """The JSON value of a UTF-8 file, refused (InputError) beyond :data:`JSON_SIZE_LIMIT` bytes
    or :data:`JSON_DEPTH_LIMIT` levels of nesting; unreadable or invalid files raise what
    :func:`json.loads` and :meth:`Path.read_text` raise (OSError, UnicodeDecodeError,
    json.JSONDecodeError)."""
    p = Path(path)
    size = p.stat().st_size
    if size > JSON_SIZE_LIMIT:
        raise InputError(
            f"{p}: {size / 2**20:.0f} MiB of JSON, above the limit of {JSON_SIZE_LIMIT >> 20} MiB"
        )
    text = p.read_text(encoding="utf-8")
    depth = json_depth(text)
    if depth > JSON_DEPTH_LIMIT:
        raise InputError(
            f"{p}: JSON nested {depth} levels deep, above the limit of {JSON_DEPTH_LIMIT}"
        )
    return json.loads(text)


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (brackets inside strings do
    not count), by one vectorised pass over its bytes."""
    body = np.frombuffer(_JSON_STRING.sub('""', text).encode("utf-8"), dtype=np.uint8)
    step = np.isin(body, (ord("["), ord("{"))).astype(np.int64)
    step -= np.isin(body, (ord("]"), ord("}")))
    return int(np.cumsum(step).max(initial=0))
