"""The engine's two parameter rows (:mod:`synth.params`), shared by every generator that counts
on an engine (the prefix tree and the Opal marginals): one text, one constraint, one flag."""

from __future__ import annotations

from collections.abc import Mapping

from synth.engines.base import ENGINES
from synth.params import InstanceOf, Options, Param

__all__ = ["ENGINE_ROWS"]

ENGINE_ROWS: tuple[Param, ...] = (
    Param(
        "engine",
        (Options(ENGINES),),
        "where the counting runs: auto (default: memory for small inputs, duckdb for large "
        "ones, from the file's size and the machine's memory), memory, duckdb (out of core, "
        "spills to disk) or spark (pip install 'transit-synth[spark]'; needs Java)",
        default="auto",
    ),
    Param(
        "engine_options",
        (None, InstanceOf(Mapping, "a mapping of engine options")),
        "the engine's options (temp_directory, memory_limit, threads; Spark: master, conf)",
        default=None,
        no_flag="one flag per option instead: --engine-temp-dir, --engine-memory-limit, "
        "--spark-master, --spark-conf",
    ),
)
