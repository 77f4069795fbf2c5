"""GTFS feeds read safely: members of a zip, size- and ratio-checked before reading, as text.

Identifier columns keep every value as written (only an empty cell is missing: ``NA`` and ``None``
are stop ids like any other), the rule of :mod:`synth.io` for private inputs too.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from synth.errors import InputError

__all__ = ["GTFS_MEMBER_LIMIT", "GTFS_RATIO_LIMIT", "read_gtfs"]


#: Largest uncompressed size of one GTFS member read (1 GiB; the largest public feeds' stop_times
#: are a few hundred MB) and largest compression ratio (GTFS text compresses 5-30 times; a zip
#: bomb, thousands). Checked from the zip directory before reading, and again while reading.
GTFS_MEMBER_LIMIT = 1 << 30
GTFS_RATIO_LIMIT = 200


def read_member(zf: zipfile.ZipFile, name: str, src: str) -> bytes:
    """One zip member's bytes, refused (InputError) beyond the size and ratio limits."""
    info = zf.getinfo(name)
    limit = GTFS_MEMBER_LIMIT
    if info.file_size > limit:
        raise InputError(
            f"{src}: {name} unpacks to {info.file_size / 2**20:.0f} MiB, above the limit of "
            f"{limit >> 20} MiB per GTFS file"
        )
    if info.file_size > (1 << 20) and info.file_size > GTFS_RATIO_LIMIT * max(
        info.compress_size, 1
    ):
        raise InputError(
            f"{src}: {name} has a compression ratio of "
            f"{info.file_size / max(info.compress_size, 1):.0f}:1, above the limit of "
            f"{GTFS_RATIO_LIMIT}:1 (a zip bomb?)"
        )
    with zf.open(name) as fh:
        raw = fh.read(limit + 1)
    if len(raw) > limit or len(raw) > GTFS_RATIO_LIMIT * max(info.compress_size, 1) + (1 << 20):
        raise InputError(f"{src}: {name} unpacks beyond what its zip directory declares")
    return raw


def read_gtfs(zip_path: Path, wanted: dict[str, list[str]]) -> dict[str, pd.DataFrame]:
    """Read GTFS members (all as strings) from a zip, also when they sit in a sub-folder."""
    src = str(zip_path)
    if not zip_path.is_file():
        raise InputError(f"{src}: file not found")
    try:
        zf = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"{src}: not a readable zip file ({exc})") from exc
    out: dict[str, pd.DataFrame] = {}
    with zf:
        names = {Path(n).name: n for n in zf.namelist() if not n.endswith("/")}
        for member, cols in wanted.items():
            if member not in names:
                raise InputError(f"{src}: GTFS file {member} is missing")
            raw = read_member(zf, names[member], src)
            try:
                df = pd.read_csv(
                    io.BytesIO(raw),
                    dtype=str,
                    encoding="utf-8-sig",
                    keep_default_na=False,
                    na_values=[""],
                )
            except Exception as exc:
                raise InputError(f"{src}: {member}: cannot parse CSV ({exc})") from exc
            df.columns = [c.strip() for c in df.columns]
            miss = [c for c in cols if c not in df.columns]
            if miss:
                raise InputError(f"{src}: {member}: missing column(s) {', '.join(miss)}")
            for c in cols:
                df[c] = df[c].str.strip()
                bad = df[c].isna() | (df[c] == "")
                if bad.any():
                    row = int(np.flatnonzero(bad.to_numpy())[0]) + 1
                    raise InputError(f"{src}: {member}, column '{c}', row {row}: empty value")
            out[member] = df
    return out
