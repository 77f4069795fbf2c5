"""Exports: OD matrices per named period of the day (see :mod:`synth.export`).

Periods are public configuration (``--periods``), never read from a release. The default,
:data:`DEFAULT_PERIODS`, follows the usual split of a weekday in transport planning: early
(00:00-06:00), AM peak (06:00-09:00), midday (09:00-16:00), PM peak (16:00-19:00) and evening
(19:00-24:00). A spec is ``name=HH:MM-HH:MM`` items separated by commas; a period may wrap past
midnight (``night=22:00-05:00``). The periods must tile the day (every minute in exactly one
period), so every leg of a timed release falls in one period and the matrices sum to the
release's leg count. A leg belongs to the period holding its departure minute (for a release whose
times are bin starts, the start of its bin).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from synth.errors import ConfigError
from synth.export.releases import MINUTES_PER_DAY, Release

#: The default periods of ``export --to od`` (name, start minute, end minute).
DEFAULT_PERIODS: tuple[tuple[str, int, int], ...] = (
    ("early", 0, 6 * 60),
    ("am_peak", 6 * 60, 9 * 60),
    ("midday", 9 * 60, 16 * 60),
    ("pm_peak", 16 * 60, 19 * 60),
    ("evening", 19 * 60, 24 * 60),
)

_ITEM = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*=\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


def _minute(hours: str, minutes: str, item: str) -> int:
    h, m = int(hours), int(minutes)
    if m > 59 or h * 60 + m > MINUTES_PER_DAY:
        raise ConfigError(f"periods: {item.strip()!r}: times are HH:MM in 00:00..24:00")
    return h * 60 + m


def parse_periods(spec: str | None) -> tuple[tuple[str, int, int], ...]:
    """``name=HH:MM-HH:MM,...`` as (name, start, end) minutes; ``None`` or ``"default"``: the
    default periods. ConfigError when an item is malformed, a name repeats, or the periods do not
    tile the day."""
    if spec is None or spec.strip().lower() == "default":
        return DEFAULT_PERIODS
    out: list[tuple[str, int, int]] = []
    for item in spec.split(","):
        match = _ITEM.match(item)
        if match is None:
            raise ConfigError(
                f"periods: {item.strip()!r} is not name=HH:MM-HH:MM (e.g. am_peak=06:00-09:00)"
            )
        name = match.group(1)
        if any(name == n for n, _, _ in out):
            raise ConfigError(f"periods: the name {name!r} is given twice")
        start = _minute(match.group(2), match.group(3), item)
        end = _minute(match.group(4), match.group(5), item)
        if start == end:
            raise ConfigError(f"periods: {item.strip()!r} is empty")
        out.append((name, start, end))
    check_tiling(out)
    return tuple(out)


def _hhmm(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def _minutes_of(start: int, end: int) -> np.ndarray:
    if start < end:
        return np.arange(start, end)
    return np.r_[np.arange(start, MINUTES_PER_DAY), np.arange(0, end)]  # past midnight


def check_tiling(periods: list[tuple[str, int, int]] | tuple[tuple[str, int, int], ...]) -> None:
    """ConfigError naming the first minute of the day covered by no period, or by two."""
    cover = np.zeros(MINUTES_PER_DAY, dtype=np.int64)
    for _, start, end in periods:
        cover[_minutes_of(start % MINUTES_PER_DAY, end % MINUTES_PER_DAY)] += 1
    for what, bad in (("no period", cover == 0), ("two periods", cover > 1)):
        if bad.any():
            m = int(np.flatnonzero(bad)[0])
            raise ConfigError(
                f"periods must cover the day once: {m // 60:02d}:{m % 60:02d} is in {what}"
            )


def period_labels(minutes: np.ndarray, periods: tuple[tuple[str, int, int], ...]) -> np.ndarray:
    """The period name of each time of day (minutes after midnight, taken modulo a day)."""
    lookup = np.empty(MINUTES_PER_DAY, dtype=object)
    for name, start, end in periods:
        lookup[_minutes_of(start % MINUTES_PER_DAY, end % MINUTES_PER_DAY)] = name
    m = np.floor(np.asarray(minutes, dtype=float)).astype(np.int64) % MINUTES_PER_DAY
    return lookup[m]


def od_by_period(
    release: Release, periods: tuple[tuple[str, int, int], ...] = DEFAULT_PERIODS
) -> pd.DataFrame:
    """Trips per (origin, destination, period) over a timed release's ``pt`` legs (long format
    ``origin, destination, period, start, end, count``; periods in the given order, then origin,
    destination). Counts sum to the number of legs."""
    if release.bin_width is None:
        raise ConfigError(f"{release.path}: the release has no times, so no periods")
    check_tiling(periods)
    steps = release.steps
    pt = np.flatnonzero(steps["mode"].to_numpy(dtype=object) == "pt")
    loc = steps["location"].to_numpy(dtype=object)
    names = [n for n, _, _ in periods]
    legs = pd.DataFrame(
        {
            "origin": loc[pt],
            "destination": loc[pt + 1],
            "period": pd.Categorical(
                period_labels(steps["start"].to_numpy(dtype=float)[pt], periods),
                categories=names,
                ordered=True,
            ),
        }
    )
    counts = legs.groupby(["period", "origin", "destination"], sort=True, observed=True).size()
    out = counts[counts > 0].rename("count").reset_index()
    label = {
        n: (f"{s // 60:02d}:{s % 60:02d}", f"{e // 60:02d}:{e % 60:02d}") for n, s, e in periods
    }
    out["period"] = out["period"].astype(str)
    out.insert(3, "start", out["period"].map(lambda n: label[n][0]))
    out.insert(4, "end", out["period"].map(lambda n: label[n][1]))
    out["count"] = out["count"].astype(np.int64)
    return out[["origin", "destination", "period", "start", "end", "count"]]
