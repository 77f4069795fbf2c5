"""Records: taps (one row per card tap) and sequences made from them (see :mod:`synth.records`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from synth.io import ID_SPACE
from synth.records.codes import group_positions, sorted_id_codes
from synth.records.common import (
    OFF_VALUES,
    TAP_ALIASES,
    PathOrFrame,
    arrow_strings,
    check_locations,
    id_column,
    read_frame,
    require_columns,
    require_rows,
    resolve_column,
    source_name,
    tap_times,
)
from synth.records.mapping import mapping_hint
from synth.times import check_timezone, parse_times

if TYPE_CHECKING:
    from synth.taxonomy import Taxonomy


# ---------------------------------------------------------------------------- taps
def load_taps(
    data: PathOrFrame,
    *,
    location_column: str = "stop_id",
    card_column: str | None = None,
    time_column: str | None = None,
    date_column: str | None = None,
    hour_column: str | None = None,
    minute_column: str | None = None,
    date_format: str | None = None,
    taxonomy: Taxonomy | None = None,
    on_unknown: str = "error",
    timezone: str | None = None,
) -> pd.DataFrame:
    """Load and validate taps; returns all input columns plus canonical ``card_id``, ``time``.

    ``time`` is taken from ``time_column`` (default ``time``) as ISO 8601 (datetimes and unix
    seconds accepted too; each value on its own, see :mod:`synth.times`: the wall clock as
    written, or converted to ``timezone``), or, when there is no such column, built from
    ``date_column`` + ``hour_column`` [+ ``minute_column``] (defaults: the
    :data:`TAP_ALIASES`). Ids and locations are normalised per value
    (:func:`synth.io.id_strings`) and, with a ``taxonomy``, locations are checked against its
    leaves (``on_unknown``). A ``tap`` column is normalised to ``on``/``off``. Row order is
    preserved (it breaks ties between equal times).
    """
    src = source_name(data)
    id_cols = [c for c in (card_column, location_column, *TAP_ALIASES["card_id"]) if c]
    return taps_from_frame(
        read_frame(data, id_cols, (time_column, date_column)),
        src,
        location_column=location_column,
        card_column=card_column,
        time_column=time_column,
        date_column=date_column,
        hour_column=hour_column,
        minute_column=minute_column,
        date_format=date_format,
        taxonomy=taxonomy,
        on_unknown=on_unknown,
        timezone=check_timezone(timezone),
    )


def taps_from_frame(
    df: pd.DataFrame,
    src: str,
    *,
    location_column: str,
    card_column: str | None,
    time_column: str | None,
    date_column: str | None,
    hour_column: str | None,
    minute_column: str | None,
    date_format: str | None,
    taxonomy: Taxonomy | None,
    on_unknown: str,
    timezone: str | None = None,
) -> pd.DataFrame:
    card_col = resolve_column(df, "card_id", card_column) or "card_id"
    require_columns(df, [card_col, location_column], src, hint=mapping_hint)
    require_rows(df, src)
    out = df.copy()
    out["card_id"] = id_column(df, card_col, src)
    out[location_column] = id_column(df, location_column, src)
    out["time"] = tap_times(
        df,
        src,
        "time",
        time_column,
        date_column,
        hour_column,
        minute_column,
        date_format,
        timezone,
    )
    if "tap" in df.columns:
        tap = df["tap"].astype(str).str.strip(ID_SPACE).str.lower()
        out["tap"] = np.where(tap.isin(OFF_VALUES), "off", "on")
    elif "tipo_trx_tren" in df.columns:  # SUBE: rail check-outs are alightings
        kind = df["tipo_trx_tren"].astype(str).str.upper()
        out["tap"] = np.where(kind.str.startswith("CHECK OUT").fillna(False), "off", "on")
    return check_locations(out, location_column, taxonomy, on_unknown, src)


def sequences_from_taps(
    taps: pd.DataFrame,
    *,
    location_column: str = "stop_id",
    per_day: bool = False,
    boardings_only: bool = True,
    card_column: str = "card_id",
    time_column: str = "time",
) -> pd.DataFrame:
    """Long-format sequences from (loaded) taps: one per card, or per card and day.

    Taps are ordered by time within a card; equal times keep input row order (a stable sort).
    With ``boardings_only`` (default) taps whose ``tap`` column is ``off`` are left out, so a
    sequence lists boardings. ``seq_id`` is the card id, or ``"<card_id>|<YYYY-MM-DD>"`` with
    ``per_day``: then each sequence is one card-day and ``attrs["privacy_unit"]`` says
    ``"card-day"`` (the prefix tree records it as the manifest's unit: a card active on ``d``
    days is protected with ``d`` times the epsilon).
    Returns ``seq_id, pos, location, time`` sorted by ``seq_id``, ``pos``.
    """
    src = "taps"
    require_columns(taps, [card_column, time_column, location_column], src)
    if boardings_only and "tap" in taps.columns:
        taps = taps[taps["tap"].astype(str) != "off"]
    time = taps[time_column]
    if len(taps):  # each value on its own (loaded taps are wall-clock datetimes already)
        time = parse_times(time, column=time_column, source=src)
    seq = arrow_strings(taps[card_column].astype(str))
    if per_day:  # format each distinct day once
        day_codes, days = pd.factorize(time.dt.normalize())
        labels = pa.array(pd.DatetimeIndex(days).strftime("%Y-%m-%d").tolist(), type=seq.type)
        sep = pa.scalar("|", type=seq.type)
        seq = pc.binary_join_element_wise(seq, labels.take(pa.array(day_codes)), sep)
    codes = sorted_id_codes(pd.Series(pd.arrays.ArrowStringArray(seq)))
    t = time.to_numpy(dtype="datetime64[ns]").view(np.int64)
    order = np.lexsort((t, codes))
    sorted_codes = codes[order]
    take = pa.array(order)
    out = pa.table(
        {
            "seq_id": seq.take(take),
            "pos": group_positions(sorted_codes),
            "location": arrow_strings(taps[location_column].astype(str)).take(take),
        }
    ).to_pandas()
    out["time"] = time.to_numpy()[order]
    out.attrs.update(taps.attrs)
    if per_day:  # one sequence per card and day: the privacy unit is the card-day, not the card
        out.attrs["privacy_unit"] = "card-day"
    return out
