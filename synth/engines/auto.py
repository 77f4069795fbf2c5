"""``engine="auto"`` (the default): the in-memory engine for small inputs, DuckDB for large ones.

The choice looks at two facts only: the input file's size on disk (its format's in-memory
expansion applied) and the machine's memory. It never reads the file. A frame is already in
memory: the memory engine counts it. Spark is never chosen: it is asked for (``engine="spark"``).

The size of a private file is itself a fact about the private data, so the choice made here is
never written into a release: the release is byte-identical on every engine (the engine-parity
tests), and the manifest records neither the chosen engine nor the size.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "AUTO_MEMORY_CAP",
    "AUTO_MEMORY_FRACTION",
    "EXPANSION",
    "choose_engine",
    "machine_memory",
    "memory_estimate",
    "resolve_engine",
]

#: The memory engine is chosen when its estimated peak stays under this many bytes ...
AUTO_MEMORY_CAP: int = 1 << 30
#: ... and under this fraction of the machine's memory (other jobs share it).
AUTO_MEMORY_FRACTION: float = 0.25
#: Peak resident bytes of the memory engine per byte of input on disk, by format: measured on the
#: simulated sequences and taps of ``benchmarks/bench_engines.py`` (the larger of the two, rounded
#: up). Parquet is compressed (dictionary + zstd), so it expands far more than CSV text.
EXPANSION: dict[str, float] = {"parquet": 85.0, "csv": 9.0}


def machine_memory() -> int:
    """Physical memory in bytes, or the cgroup's limit when it is lower (containers)."""
    try:
        total = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # not a POSIX system: assume 8 GiB
        total = 8 << 30
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def memory_estimate(path: str | os.PathLike[str]) -> int | None:
    """The memory engine's estimated peak on a file (its size times its format's expansion), or
    ``None`` when the path is not a readable file of a known format."""
    p = Path(path)
    try:
        size = p.stat().st_size if p.is_file() else None
    except OSError:
        size = None
    if size is None:
        return None
    suffix = p.suffix.lower()
    fmt = "parquet" if suffix in (".parquet", ".pq") else "csv"
    return int(size * EXPANSION[fmt])


def choose_engine(source: object, *, memory: int | None = None) -> str:
    """``"memory"`` or ``"duckdb"`` for ``source`` (a frame, or a file path).

    ``memory``: the machine's memory in bytes (default :func:`machine_memory`).
    """
    if not isinstance(source, str | os.PathLike):
        return "memory"  # a frame: already in memory
    need = memory_estimate(source)
    if need is None:
        return "memory"  # not a file: the loader reports it
    budget = min(AUTO_MEMORY_CAP, AUTO_MEMORY_FRACTION * (memory or machine_memory()))
    return "memory" if need <= budget else "duckdb"


def resolve_engine(
    name: str, options: Mapping[str, Any] | None, source: object
) -> tuple[str, dict[str, Any] | None]:
    """The engine that runs and its options: ``"auto"`` resolved by :func:`choose_engine` (its
    DuckDB options are dropped when the memory engine is chosen); other names unchanged."""
    if name != "auto":
        return name, None if options is None else dict(options)
    chosen = choose_engine(source)
    return chosen, (dict(options) if options and chosen == "duckdb" else None)
