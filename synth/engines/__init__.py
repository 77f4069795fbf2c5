"""Counting engines (docs/design.md section 7): the counting steps of the releases, nothing else.

An engine counts; it never draws noise. The prefix tree asks it, level by level, for the number of
sequences in each (surviving node, time bin, location) cell and then tells it which node each cell
became (:class:`PrefixCounter`); the SBH release asks it to bound each card's events (the first
``k`` by time, with a stable tie-break) and to count the cells of every table
(:meth:`Engine.sbh_counts`). Noise is added once, in the driver, on the collected counts, so the
choice of engine never changes what is released for the same input and noise: bounding is a
deterministic function of the records (retried or speculative tasks cannot change it) and counts
come back sorted by cell key (output order never depends on the data or on the engine).

Engines: ``"auto"`` (the default: ``"memory"`` for small files and frames, ``"duckdb"`` for large
files, from the file's size on disk and the machine's memory; :mod:`synth.engines.auto`),
``"memory"`` (numpy/pandas), ``"duckdb"`` (DuckDB over Parquet or CSV, spills
to disk; ``temp_directory``, ``memory_limit`` and ``threads`` options) and ``"spark"`` (PySpark,
local mode or any cluster through ``master``; the optional extra ``transit-synth[spark]``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from synth.engines.auto import choose_engine, resolve_engine
from synth.engines.base import ENGINES, Engine, PrefixCounter, SBHEvents
from synth.errors import ConfigError

__all__ = [
    "ENGINES",
    "Engine",
    "PrefixCounter",
    "SBHEvents",
    "check_engine",
    "check_memory_size",
    "choose_engine",
    "get_engine",
    "resolve_engine",
]

_OPTIONS: dict[str, tuple[str, ...]] = {
    "auto": ("temp_directory", "memory_limit", "threads"),  # DuckDB's, used when it is chosen
    "memory": (),
    "duckdb": ("temp_directory", "memory_limit", "threads"),
    "spark": ("master", "temp_directory", "memory_limit", "threads", "conf"),
}


def check_engine(name: object, options: Mapping[str, Any] | None = None) -> str:
    """Validate an engine name and its options (ConfigError) without starting anything."""
    if name not in ENGINES:
        raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {name!r}")
    if not isinstance(options, Mapping | None):
        raise ConfigError("engine_options must be a table of option names to values")
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(_OPTIONS[str(name)]))
    if unknown:
        allowed = ", ".join(_OPTIONS[str(name)]) or "none"
        raise ConfigError(
            f"engine_options: unknown option(s) {', '.join(unknown)} for engine {name!r} "
            f"(allowed: {allowed})"
        )
    if "memory_limit" in opts:
        check_memory_size(opts["memory_limit"])
    threads = opts.get("threads")
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise ConfigError(f"engine threads must be a positive integer, got {threads!r}")
    return str(name)


_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]i?b?|b)?\s*", re.IGNORECASE)


def check_memory_size(value: object) -> str:
    """A memory size such as ``2GB``, ``512MiB`` or ``4g`` (positive; a bare number is bytes),
    else ConfigError (DuckDB would read a negative limit as no limit)."""
    match = _SIZE.fullmatch(str(value)) if isinstance(value, str | int) else None
    if match is None or isinstance(value, bool) or float(match.group(1)) <= 0:
        raise ConfigError(
            "invalid engine options: --engine-memory-limit (memory_limit) must be a positive "
            f"size such as 2GB, 512MiB or 4g, got {value!r}"
        )
    return str(value).strip()


def get_engine(
    name: str = "auto", options: Mapping[str, Any] | None = None, source: object = None
) -> Engine:
    """A started engine (close it after use, or use it as a context manager); ``"auto"`` picks
    one for ``source`` (a frame or a file path; :func:`choose_engine`)."""
    check_engine(name, options)
    name, resolved = resolve_engine(name, options, source)
    opts = dict(resolved or {})
    if name == "memory":
        from synth.engines.memory import MemoryEngine

        return MemoryEngine()
    if name == "duckdb":
        from synth.engines.duckdb_engine import DuckDBEngine

        return DuckDBEngine(**opts)
    from synth.engines.spark_engine import SparkEngine

    return SparkEngine(**opts)
