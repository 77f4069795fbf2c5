"""Exports: origin-destination matrices per time bin (see :mod:`synth.export`)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from synth.errors import ConfigError
from synth.export.releases import MINUTES_PER_DAY, Release
from synth.io import write_table


# ---------------------------------------------------------------------------- OD matrices
def check_bin_minutes(release: Release, bin_minutes: int | None) -> int | None:
    if release.bin_width is None:
        return None
    if bin_minutes is None:
        return release.bin_width or 60
    if (
        isinstance(bin_minutes, bool)
        or not isinstance(bin_minutes, int | np.integer)
        or not (1 <= bin_minutes <= MINUTES_PER_DAY)
    ):
        raise ConfigError(f"bin must be minutes in 1..1440, got {bin_minutes!r}")
    if release.bin_width and bin_minutes % release.bin_width:
        raise ConfigError(
            f"bin must be a multiple of the release's own time bins "
            f"({release.bin_width} minutes), got {bin_minutes}"
        )
    return int(bin_minutes)


def _label(minutes: np.ndarray) -> np.ndarray:
    m = minutes.astype(np.int64)
    uniq, inv = np.unique(m, return_inverse=True)
    labels = np.array([f"{u // 60:02d}:{u % 60:02d}" for u in uniq], dtype=object)
    return labels[inv]


def od_matrix(release: Release, *, bin_minutes: int | None = None) -> pd.DataFrame:
    """Trips per (origin, destination, time bin) over the release's ``pt`` legs (long format).

    ``bin`` is ``HH:MM``, the start of the departure's bin of ``bin_minutes`` (a multiple of the
    release's own bins; default: those bins, or 60 for exact times), or ``"all"`` when the release
    has no times. Rows sorted by origin, destination, bin; zero cells are not listed.
    """
    width = check_bin_minutes(release, bin_minutes)
    steps = release.steps
    mode = steps["mode"].to_numpy(dtype=object)
    pt = np.flatnonzero(mode == "pt")
    loc = steps["location"].to_numpy(dtype=object)
    legs = pd.DataFrame({"origin": loc[pt], "destination": loc[pt + 1]})
    if width is None:
        legs["bin"] = "all"
    else:
        start = steps["start"].to_numpy(dtype=float)[pt]
        legs["bin"] = _label(np.floor(start / width) * width)
    if legs.empty:
        return pd.DataFrame(
            {
                "origin": pd.Series(dtype=object),
                "destination": pd.Series(dtype=object),
                "bin": pd.Series(dtype=object),
                "count": pd.Series(dtype=np.int64),
            }
        )
    counts = legs.groupby(["origin", "destination", "bin"], sort=True).size()
    out = counts.rename("count").reset_index()
    out["count"] = out["count"].astype(np.int64)
    return out


def write_od(od: pd.DataFrame, path: str | os.PathLike[str], *, csv_escape: bool = True) -> Path:
    """Write an OD matrix as CSV or Parquet (by extension), atomically.

    ``csv_escape`` (CSV only, on by default: OD tables are opened in spreadsheets): origin and
    destination cells that a spreadsheet would run as a formula get a leading ``'``
    (:func:`spreadsheet_safe`).
    """
    types = {"origin": str, "destination": str, "bin": str, "period": str, "count": np.int64}
    frame = od.astype({c: t for c, t in types.items() if c in od.columns})
    if csv_escape and str(path).lower().endswith(".csv"):
        frame = frame.assign(
            origin=spreadsheet_safe(frame["origin"]),
            destination=spreadsheet_safe(frame["destination"]),
        )
    return write_table(frame, path)


#: Cell starts a spreadsheet reads as a formula (OWASP "CSV injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def spreadsheet_safe(series: pd.Series) -> pd.Series:
    """Text cells starting with ``= + - @``, tab or carriage return get a leading ``'`` (shown,
    not evaluated, by spreadsheets); plain numbers such as ``-12`` are left alone."""
    text = series.astype(str)
    risky = text.str.startswith(FORMULA_START) & ~text.str.fullmatch(_PLAIN_NUMBER)
    return text.where(~risky, "'" + text)
