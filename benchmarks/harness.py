"""The one harness of the benchmarks: timing, peak RSS of a child process, and JSON results.

Every script in ``benchmarks/`` measures through these functions and writes its rows with
:func:`write_results`: one JSON document holding the benchmark's name, its arguments, the rows, the
machine (cores, memory, Python, platform) and the git commit of the code measured, so a figure in
the README can be traced to a run (``benchmarks/tables.py`` turns the document into a markdown
table). Every script has a ``--smoke`` size that runs in seconds (``tests/unit/test_benchmarks.py``
runs each of them in the default suite); speed and memory targets are read from full-size runs,
never asserted by tests.

Memory is measured one way: the peak resident set size of a child process (``wait4``'s
``ru_maxrss``, :func:`child`, forked from a small launcher), so that a figure is that run's own and
not the benchmark driver's;
:func:`own_peak_rss_mb` is the same counter for the current process (for a script that is itself
the measured child).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------ timing
@contextmanager
def stopwatch() -> Iterator[dict[str, float]]:
    """``with stopwatch() as t: ...`` then ``t["s"]``: wall-clock seconds of the block."""
    result: dict[str, float] = {}
    start = time.perf_counter()
    try:
        yield result
    finally:
        result["s"] = time.perf_counter() - start


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[Any, float]:
    """Call ``fn`` ``repeat`` times; its last result and the median wall-clock seconds."""
    seconds = []
    out = None
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        out = fn()
        seconds.append(time.perf_counter() - start)
    return out, median(seconds)


# ------------------------------------------------------------------------------------ memory
def own_peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux ``ru_maxrss`` is in kB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


#: Runs ``argv[1:]`` and prints its wall time and ``ru_maxrss``. It is started small on purpose: on
#: Linux a child's ``ru_maxrss`` starts from the memory of the process it was forked from (``exec``
#: keeps the high-water mark of the forked copy), so a child forked straight from a large benchmark
#: driver would report the driver's size. Forked from this launcher, it starts from a few MB.
LAUNCHER = """
import json, os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
code = os.waitstatus_to_exitcode(status)
print(json.dumps({"code": code, "wall_s": wall, "maxrss_kb": usage.ru_maxrss}))
"""


def child(cmd: Sequence[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd``; its wall time, peak RSS (MB, of that child alone: ``wait4``) and stderr.

    The child is forked from a small launcher (:data:`LAUNCHER`), so its peak is its own and not
    the driver's. A failing child raises RuntimeError with its stderr. Its stdout is discarded.
    """
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *cmd], capture_output=True, text=True, env=env
    )
    try:
        got = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise RuntimeError(f"launcher failed ({proc.returncode}):\n{proc.stderr}") from None
    if got["code"] != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({got['code']}):\n{proc.stderr}")
    return {
        "wall_s": round(got["wall_s"], 2),
        "peak_rss_mb": round(got["maxrss_kb"] / 1024, 1),
        "stderr": proc.stderr,
    }


# ------------------------------------------------------------------------------------ results
def machine() -> dict[str, Any]:
    """Cores (all and usable by this process), memory, Python and platform of this machine."""
    pages, page = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    return {
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "memory_gb": round(pages * page / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def commit() -> str | None:
    """The git commit of the code measured (``+dirty`` with uncommitted changes), or None."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def results(benchmark: str, rows: list[dict[str, Any]], arguments: Any = None) -> dict[str, Any]:
    """The JSON document of a run: name, arguments, machine, commit, time and rows."""
    args = vars(arguments) if isinstance(arguments, argparse.Namespace) else arguments
    return {
        "benchmark": benchmark,
        "arguments": args or {},
        "machine": machine(),
        "commit": commit(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "rows": rows,
    }


def write_results(
    path: Path | None, benchmark: str, rows: list[dict[str, Any]], arguments: Any = None
) -> dict[str, Any]:
    """Write :func:`results` to ``path`` (if given) and return it."""
    doc = results(benchmark, rows, arguments)
    if path is not None:
        path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    return doc


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a results file (also a bare list of rows, as older runs wrote)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    return doc["rows"] if isinstance(doc, dict) else doc


def add_options(parser: argparse.ArgumentParser, smoke: str) -> None:
    """The options every benchmark has: ``--smoke`` (``smoke`` says what it runs) and ``--json``."""
    parser.add_argument("--smoke", action="store_true", help=f"seconds: {smoke}")
    parser.add_argument(
        "--json", type=Path, default=None, help="write the results (rows, machine, commit) here"
    )


def emit(row: dict[str, Any]) -> dict[str, Any]:
    """Print one row as a JSON line (progress as it comes) and return it."""
    print(json.dumps(row, default=str), flush=True)
    return row


if __name__ == "__main__":  # pragma: no cover - a quick look at what a results file records
    json.dump(results("machine", []), sys.stdout, indent=2)
    print()
