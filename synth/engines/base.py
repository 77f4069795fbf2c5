"""The engine interface: counting steps only (no noise, no data-dependent output order)."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

__all__ = [
    "ENGINES",
    "Engine",
    "PrefixCounter",
    "SBHEvents",
    "event_columns",
    "table_spec",
]

ENGINES: tuple[str, ...] = ("auto", "memory", "duckdb", "spark")

IntArray = npt.NDArray[np.int64]
Counts = tuple[IntArray, IntArray]


class PrefixCounter(Protocol):
    """Level-by-level cell counts of the prefix tree (Procedure 1's only contact with the data).

    Cell key of a sequence at level ``i``: ``(node * n_bins + time_bin) * n_locations + location``
    with ``node`` the index, within level ``i``, of the tree node its first ``i`` steps fell under
    (0 under the root). Sequences shorter than ``i + 1`` steps, or whose prefix cell did not
    survive, are no longer counted.
    """

    n_sequences: int

    def length_counts(self) -> IntArray:
        """Sequences by number of locations (index = length ``0 .. height``); called before the
        first :meth:`advance` (the length histogram of :mod:`prefixtree.lengths`)."""
        ...

    def level_counts(self, level: int, n_nodes: int) -> Counts:
        """Sorted distinct cell keys of level ``level`` (0-based) and their counts."""
        ...

    def advance(self, level: int, keys: IntArray, node: IntArray) -> None:
        """Cell ``keys[k]`` (exactly the keys :meth:`level_counts` returned) became node
        ``node[k]`` of the next level, or ``-1``: its sequences stop."""
        ...

    def close(self) -> None:
        """Release temporary state."""
        ...


@dataclass
class SBHEvents:
    """Tap events of an SBH release, encoded; row order is the input's (the last tie-break).

    ``side`` 0 = on, 1 = off; ``part`` the (mode, day) partition code; ``minute`` of the day;
    ``location`` the code into the release's location domain; ``unit`` the privacy unit code (card)
    or ``None`` (row unit: no bounding).
    """

    side: np.ndarray
    part: np.ndarray
    minute: np.ndarray
    location: np.ndarray
    unit: np.ndarray | None = None


def event_columns(events: SBHEvents, max_contributions: int | None) -> dict[str, np.ndarray]:
    """The columns an engine counts SBH tables from: ``side, part, minute, loc``, plus ``unit``
    and the input row ``idx`` (the last bounding tie-break) when contributions are bounded."""
    cols: dict[str, np.ndarray] = {
        "side": np.asarray(events.side, dtype=np.int32),
        "part": np.asarray(events.part, dtype=np.int64),
        "minute": np.asarray(events.minute, dtype=np.int32),
        "loc": np.asarray(events.location, dtype=np.int64),
    }
    if events.unit is not None and max_contributions is not None:
        cols["unit"] = np.asarray(events.unit, dtype=np.int64)
        cols["idx"] = np.arange(len(events.side), dtype=np.int64)
    return cols


def table_spec(name: str) -> tuple[int, bool, bool]:
    """(side, has time, has location) of an SBH table name such as ``on_time_location``."""
    words = name.split("_")
    return (0 if words[0] == "on" else 1), "time" in words, "location" in words


class Engine(ABC):
    """A counting engine. Subclasses count; the driver draws the noise on what they return."""

    name: str = ""

    # ------------------------------------------------------------------ prefix tree
    @abstractmethod
    def prefix_counter(
        self,
        codes: npt.NDArray[np.integer],
        time_bins: npt.NDArray[np.integer] | None,
        *,
        n_bins: int,
        n_locations: int,
    ) -> PrefixCounter:
        """Counter over an encoded sequence matrix (``-1`` pads; time bins non-decreasing)."""

    def prefix_counter_from_file(
        self,
        path: str | os.PathLike[str],
        *,
        locations: Sequence[str],
        height: int,
        time_bin_minutes: int | None,
        on_unknown: str = "error",
        location_column: str | None = None,
    ) -> PrefixCounter | None:
        """Counter reading the sequences (or taps) of a Parquet/CSV file itself, or ``None`` when
        this engine does not read that file (the caller then loads it in memory)."""
        return None

    # ------------------------------------------------------------------ SBH
    def sbh_scan(
        self,
        path: str | os.PathLike[str],
        *,
        location_column: str = "stop_id",
        unit_column: str | None = None,
    ) -> Any:
        """An engine-side event table of a trips/taps file (``modes``, ``days``, ``locations``
        label lists and ``counts(mode_code, day_code, loc_code, ...)``), or ``None`` when this
        engine does not read that file (the caller then loads it in memory)."""
        return None

    @abstractmethod
    def sbh_counts(
        self,
        events: SBHEvents,
        tables: Sequence[str],
        *,
        n_locations: int,
        n_bins: int,
        bin_minutes: int,
        max_contributions: int | None,
    ) -> dict[str, Counts]:
        """Sorted present cell keys and counts of each table.

        With ``events.unit``, each (unit, side) first keeps its first ``max_contributions`` events
        ordered by (minute, partition, location, input row): deterministic. Keys are
        ``partition``-major, then time bin (``minute // bin_minutes``), then location.
        """

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:  # noqa: B027 - engines without resources need not override it
        """Release the engine's resources (connections, temporary files, sessions)."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
