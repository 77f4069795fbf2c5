"""The Opal release's cells: the six tables, their dimensions and the cell grid (Asghar, Tyler and
Kaafar 2018, section 4.1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from synth.marginals.events import Events, day_label

__all__ = ["DEFAULT_SPLIT", "MINUTE_LABELS", "TABLES", "TABLE_DIMS", "Grid", "sum_to", "table_keys"]

#: The six tables of 000 section 4.1 step 6, in the paper's order (1)..(6).
TABLES: tuple[str, ...] = (
    "on_time",
    "on_location",
    "off_time",
    "off_location",
    "on_time_location",
    "off_time_location",
)
#: Relative epsilons of the six tables (000 section 4.2: 1, 1, 1, 1, 2, 2; total 8).
DEFAULT_SPLIT: tuple[int, ...] = (1, 1, 1, 1, 2, 2)
TABLE_DIMS: dict[str, tuple[str, ...]] = {
    name: tuple(d for d in ("time", "location") if d in name.split("_")) for name in TABLES
}
#: ``HH:MM`` label of each minute of the day (the time column of the released tables).
MINUTE_LABELS = np.array([f"{m // 60:02d}:{m % 60:02d}" for m in range(1440)], dtype=object)


@dataclass
class Grid:
    """The cells of every table: partitions (mode x day), time bins, locations, and labels."""

    modes: list[str]
    days: list[int]
    bins: int
    bin_minutes: int
    locations: list[str]
    public_partitions: bool
    public_locations: bool

    @property
    def partitions(self) -> int:
        return len(self.modes) * len(self.days)

    def size(self, table: str) -> int:
        dims = TABLE_DIMS[table]
        return (
            self.partitions
            * (self.bins if "time" in dims else 1)
            * (len(self.locations) if "location" in dims else 1)
        )

    def frame(self, table: str, keys: np.ndarray, values: np.ndarray) -> pd.DataFrame:
        """Decode sorted cell keys into the table's columns (lexicographic order is key order)."""
        dims = TABLE_DIMS[table]
        rest = keys
        cols: dict[str, Any] = {}
        if "location" in dims:
            rest, loc = np.divmod(rest, len(self.locations))
            cols["location"] = np.asarray(self.locations, dtype=object)[loc]
        if "time" in dims:
            rest, b = np.divmod(rest, self.bins)
            cols["time"] = MINUTE_LABELS[b * self.bin_minutes]
        mode, day = np.divmod(rest, len(self.days))
        out = pd.DataFrame(
            {
                "mode": np.asarray(self.modes, dtype=object)[mode],
                "day": np.asarray([day_label(d) for d in self.days], dtype=object)[day],
            }
        )
        for dim in ("time", "location"):
            if dim in cols:
                out[dim] = cols[dim]
        out = out.astype({c: str for c in out.columns})  # same dtype when empty
        out["count"] = np.asarray(values, dtype=np.int64)
        return out


def table_keys(
    events: Events, part: np.ndarray, loc: np.ndarray, grid: Grid, side: int
) -> dict[str, np.ndarray]:
    """Cell keys of the three tables of one side (partition-major, then time bin, then location)."""
    mask = events.side == side
    p, t, lo = part[mask], events.minute[mask] // grid.bin_minutes, loc[mask]
    name = "on" if side == 0 else "off"
    keys = {f"{name}_location": p * len(grid.locations) + lo}
    if (t >= 0).all():
        pt = p * grid.bins + t
        keys[f"{name}_time"] = pt
        keys[f"{name}_time_location"] = pt * len(grid.locations) + lo
    return keys


def sum_to(
    table: str, keys: np.ndarray, values: np.ndarray, grid: Grid
) -> tuple[np.ndarray, np.ndarray]:
    """One-way table derived from a released time x location table (post-processing, 001 s. 4)."""
    n_loc = len(grid.locations)
    if TABLE_DIMS[table] == ("time",):
        target = keys // n_loc
    else:
        target = (keys // (grid.bins * n_loc)) * n_loc + keys % n_loc
    uniq, inverse = np.unique(target, return_inverse=True)
    return uniq, np.bincount(inverse, weights=values, minlength=uniq.size).astype(np.int64)
