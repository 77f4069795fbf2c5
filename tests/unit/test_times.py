"""Time of day is parsed in one place (synth.times): its readers agree value by value."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.errors import InputError
from synth.evaluate import marginals as ev
from synth.export import read_release
from synth.times import clock_parts, times_of_day, wall_clock_times


def test_clock_parts_and_wall_clock() -> None:
    values = pd.Series(["08:15", " 7:05:30 ", "25:10:05.5", "2019-11-27T08:15:00+11:00", "x"])
    parts = clock_parts(values)
    assert parts["hour"].tolist()[:3] == [8.0, 7.0, 25.0]
    assert parts["minute"].tolist()[:3] == [15.0, 5.0, 10.0]
    assert np.isnan(parts.loc[0, "second"]) and parts.loc[2, "second"] == 5.5
    assert parts.loc[3:].isna().all().all()
    stamps = wall_clock_times(values[3:])
    assert stamps.iloc[0] == pd.Timestamp("2019-11-27 08:15") and pd.isna(stamps.iloc[1])
    minute, _ = times_of_day(values[:2])
    assert minute.tolist() == [8 * 60 + 15, 7 * 60 + 5]


def test_export_reads_each_time_on_its_own(tmp_path: Path) -> None:
    """A trip release mixing clock times and timestamps (with an offset: the wall clock as
    written) reads every value the way synth.times does."""
    d = tmp_path / "rel"
    d.mkdir()
    trips = pd.DataFrame(
        {
            "card_id": ["p1", "p1", "p2"],
            "on_stop": ["A", "B", "A"],
            "off_stop": ["B", "C", "C"],
            "on_time": ["07:30", "2019-11-27T09:45:00+11:00", "2019-11-27 10:05:30"],
        }
    )
    trips.to_csv(d / "trips.csv", index=False)
    manifest = {"parameters": {"generator": "archetypes"}, "privacy_unit": "card"}
    (d / "manifest.json").write_text(json.dumps(manifest))
    steps = read_release(d).steps
    starts = sorted(steps["start"].dropna().tolist())
    assert starts == pytest.approx([450.0, 585.0, 605.5])


def test_evaluate_reads_clock_times_and_timestamps_alike() -> None:
    a = pd.Series(["08:15", "2019-11-27T09:45:00+11:00", "23:59"])
    assert ev.time_axis(a, "on_time")["from_timestamps"]
    frame = pd.DataFrame({"on_time": a})
    res = ev.time_of_day(frame, frame)
    assert res["values"] == [8, 9, 23] and res["tv"] == 0.0


def test_supported_time_range_is_a_per_value_rule() -> None:
    # issue 26: outside pandas' nanosecond range was an internal OutOfBoundsDatetime
    from synth.times import parse_times as parse

    inside = ["1677-09-22T00:00:00", "2262-04-10T23:59:59", "2262-04-10T23:59:59+14:00"]
    assert parse(pd.Series(inside), timezone="Pacific/Kiritimati").notna().all()
    assert parse(pd.Series(inside)).notna().all()
    for bad in ["1677-09-21T23:59:59", "2262-04-11T00:00:00", "-9300000000", "9300000000"]:
        for zone in (None, "UTC"):
            with pytest.raises(InputError, match="outside the supported time range"):
                parse(pd.Series(["2024-01-01T00:00:00", bad]), timezone=zone, source="f.csv")
    stored = pd.Series(pd.to_datetime(["2024-01-01", "1500-01-01"]).astype("datetime64[us]"))
    with pytest.raises(InputError, match=r"row 2: '1500-01-01 00:00:00' is outside"):
        parse(stored, source="f.parquet")
    with pytest.raises(InputError, match="row 1: 1e\\+20 is outside"):
        parse(pd.Series([1e20, 0.0]), source="f.parquet")
