"""The input of the SBH marginal release: trips or taps, read through :mod:`synth.records`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from synth.io import read_table, table_columns, table_format
from synth.records import load_taps, load_trips

__all__ = ["load_marginal_input"]


_ID_COLUMNS = ("card_id", "on_stop", "off_stop", "mode")


def load_marginal_input(
    path: Path | pd.DataFrame, location_column: str, timezone: str | None = None
) -> pd.DataFrame:
    """Trips (an ``on_stop`` column) or taps, through :mod:`synth.records` (SUBE loads as is)."""
    if isinstance(path, pd.DataFrame):
        columns = set(path.columns)
    elif path.is_file() and table_format(path) is not None:
        columns = set(table_columns(path))  # a bad header is an InputError naming the file
    else:
        columns = set()  # load_taps names the problem (missing file, unsupported type)
    if "on_stop" in columns:
        trips = (
            path
            if isinstance(path, pd.DataFrame)
            else read_table(
                path, dtype={c: str for c in _ID_COLUMNS}, text=("on_time", "off_time", "date")
            )
        )
        return load_trips(
            trips, card_column="card_id" if "card_id" in columns else None, timezone=timezone
        )
    taps = load_taps(path, location_column=location_column, timezone=timezone)
    if location_column != "stop_id":
        taps = taps.drop(columns=["stop_id"], errors="ignore")
        taps = taps.rename(columns={location_column: "stop_id"})
    if "mode" not in taps and "modo" in taps:  # SUBE
        taps = taps.rename(columns={"modo": "mode"})
    return taps
