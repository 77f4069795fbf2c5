"""Records: trips (one row per trip) and their deterministic bounding (see :mod:`synth.records`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from synth.errors import ConfigError
from synth.records.codes import group_positions
from synth.records.common import (
    PathOrFrame,
    check_counts,
    id_column,
    read_frame,
    require_columns,
    require_rows,
    source_name,
    tap_times,
)
from synth.times import check_timezone, parse_times


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
    timezone: str | None = None,
) -> pd.DataFrame:
    """Load trips: ``card_id`` (str; none if ``card_column=None``), ``on_time`` + other columns.

    ``on_time`` comes from ``time_column`` (default ``on_time``; ISO 8601, datetimes, or numbers =
    unix seconds) or, without it, from date + hour [+ minute] columns as for taps.
    ``count_columns`` (and a ``count`` column when present) must hold non-negative integers.
    """
    src = source_name(data)
    df = read_frame(data, [card_column] if card_column else [], (time_column, date_column))
    require_columns(df, [card_column] if card_column else [], src)
    require_rows(df, src)
    out = df.copy()
    if card_column:
        out["card_id"] = id_column(df, card_column, src)
    out["on_time"] = tap_times(
        df,
        src,
        "on_time",
        time_column,
        date_column,
        hour_column,
        minute_column,
        date_format,
        check_timezone(timezone),
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
    require_columns(trips, [card_column, time_column], "trips")
    codes = pd.factorize(trips[card_column])[0]
    stamps = parse_times(trips[time_column], column=time_column, source="trips")
    t = stamps.to_numpy(dtype="datetime64[ns]").view(np.int64)
    order = np.lexsort((t, codes))
    rank = np.empty(len(trips), dtype=np.int64)
    rank[order] = group_positions(codes[order])
    out = trips[rank < k].reset_index(drop=True)
    out.attrs.update(trips.attrs)
    return out
