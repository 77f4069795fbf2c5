"""Counting engines at scale (issues 9, 20): wall time and peak RSS per engine, in one run.

SIMULATED data (``synth.simulate``, Montreal metro, 68 stations) is written to Parquet once (not
timed, cached in ``--work``): long-format sequences (``seq_id, pos, location``, grouped by
sequence, zero-padded ids increasing), optionally the same rows shuffled (``shuffled``), and taps
(``card_id, time, stop_id``, grouped by card, times non-decreasing). Then, each in its own child
process, the prefix-tree release is run end to end from the Parquet file with each engine:
``PrefixTreeSynthesizer(engine=...).fit(path)`` (read -> bound -> count -> noise) and the release
streamed chunk by chunk (``iter_sample()`` -> ``prefixtree.output.write_sequences``) into a Parquet
file in a temporary directory next to the input; ``--fit-only`` stops after ``fit()``. Plus a
baseline that only reads the file with pyarrow. Reported per child: wall time (child start to
exit, interpreter start-up included), the fit and release times measured inside, and peak RSS
(``os.wait4`` on the child: ``ru_maxrss``). Targets (2 cores): DuckDB within 1.5x of the memory
engine's time at 10M sequences, and 100M sequences with peak RSS <= 2 GB.

    python benchmarks/bench_engines.py --n 10000000 --out results.json
    python benchmarks/bench_engines.py --n 1000000 10000000 --command cli \
        --engines memory auto duckdb spark --datasets sequences taps trips
    python benchmarks/bench_engines.py --n 100000000 --engines duckdb --work /big/disk

Issue 20, the command lines with their default flags (``--command cli``: ``transit-synth
sequences`` on sequences/taps, Montreal taxonomy, h = 6, epsilon 1, taps with 60-minute bins;
``marginals`` on trips, epsilon 1, delta 1e-6; ``auto`` = no ``--engine`` flag; Spark local[2],
driver memory 2g, executors inside the driver JVM). Peak RSS: ``driver`` the Python process
(``ru_maxrss``), ``JVM`` its descendants sampled every 0.2 s (Spark's JVM), ``total`` both at once.
2 cores shared with ~7 other jobs (load average 6-9 throughout): times are noisy, +-30%.

    ====  =========  ======  ========  ==========  =======  =========
    n     input      engine  wall (s)  driver MB   JVM MB   total MB
    ====  =========  ======  ========  ==========  =======  =========
    1M    sequences  memory  5.5       553         -        553
    1M    sequences  auto    3.5       553         -        553       (memory chosen)
    1M    sequences  duckdb  4.4       460         -        460
    1M    sequences  spark   145.0     336         1,618    1,801
    1M    taps       memory  9.3       1,029       -        1,029
    1M    taps       auto    7.3       1,034       -        1,034     (memory chosen)
    1M    taps       duckdb  3.9       450         -        450
    1M    taps       spark   174.2     1,043       2,323    2,826
    1M    trips      memory  5.4       482         -        482       (marginals)
    1M    trips      auto    6.1       479         -        479       (memory chosen)
    1M    trips      duckdb  6.5       328         -        328
    1M    trips      spark   194.5     530         2,405    2,905
    10M   sequences  memory  54.4      2,300       -        2,300
    10M   sequences  auto    70.9      882         -        882       (duckdb chosen)
    10M   sequences  duckdb  57.1      904         -        904
    10M   sequences  spark   668.5     394         2,457    2,638
    12M   trips      auto    47.3      482         -        482       (marginals; duckdb chosen)
    ====  =========  ======  ========  ==========  =======  =========

Targets: default flags under 2 GB at 12M trips (482 MB; the memory engine alone: 4.1 GB, not
rerun here to stay under 4 GB per job on the shared machine) and 10M sequences (882 MB); at 1M
auto is the memory engine (its time: 0.64-1.13x of the memory rows above, which is noise). Spark
local is 26-36x slower at 1M and 12x at 10M (JVM start-up, local shuffles of 42M rows on 2
cores): it is for data on a cluster. Spark at 10M taps is not run: taps are loaded by the driver
in pandas first (the memory engine's 8 GB).

Measured end to end (read -> release written; 2 cores shared with other jobs, DuckDB
memory_limit 1GB, threads 2; Montreal, h = 6, epsilon 1; taps with 60-minute time bins).
Session 3 (DuckDB reads a file grouped by sequence in one streamed pass; the simulated files
are: ids increasing from run to run), ranges over the runs listed below:

    ====  =========  =======  =========  ===========  =============  =============
    n     input      engine   wall (s)   release (s)  peak RSS (MB)  released rows
    ====  =========  =======  =========  ===========  =============  =============
    10M   sequences  pyarrow  4.2        -            1,879          (read only)
    10M   sequences  memory   13.7-16.8  3.3-4.8      2,285-2,335    25.5M
    10M   sequences  duckdb   11.0-14.2  3.5-4.5      904-927        25.5M
    10M   taps       memory   52.0       2.6          8,289          16.1M
    10M   taps       duckdb   14.2-19.6  3.2-3.9      834-909        16.1M
    10M   shuffled   memory   89.6       4.5          3,365          25.5M
    10M   shuffled   duckdb   40.3       3.7          1,288          25.5M
    100M  sequences  duckdb   140.9      36.2         1,362          288.5M
    100M  taps       duckdb   166.6      44.2         2,384          190.8M
    100M  taps       duckdb   198.8      44.8         1,761          190.8M (lean driver)
    100M  sequences  duckdb   176.1      50.4         1,414          288.5M (lean driver)
    ====  =========  =======  =========  ===========  =============  =============

10M sequences, four runs (memory / DuckDB wall s): 16.8 / 14.2 (0.84x), 14.1 / 11.6 (0.82x),
16.0 / 11.8 (0.74x), 13.7 / 11.0 (0.80x): target <= 1.5x met (it was 1.73-1.87x). 10M taps,
DuckDB: 19.6, 18.6, 14.2 s (the last with memory at 52.0 s: 0.27x; it was 44.6-45.2 s / 1.18 GB).
``shuffled`` is the sequences file with its rows in random order (``--datasets shuffled``): not
grouped, so DuckDB groups it by SQL hash aggregation as before (0.45x; the memory engine sorts
42M string ids). Released trees and rows are identical across engines and inputs. Session 2
(before; DuckDB always grouped by hash aggregation):

    ====  =========  =======  ========  ===========  =============  =============
    n     input      engine   wall (s)  release (s)  peak RSS (MB)  released rows
    ====  =========  =======  ========  ===========  =============  =============
    10M   sequences  pyarrow  5.1       -            1,864          (read only)
    10M   sequences  memory   16.8      4.3          2,288          25.5M
    10M   sequences  duckdb   28.9      4.3          1,002          25.5M
    10M   taps       pyarrow  4.4       -            1,934          (read only)
    10M   taps       memory   54.3      3.2          8,292          16.1M
    10M   taps       duckdb   44.6      3.7          1,190          16.1M
    100M  sequences  duckdb   784.6     48.4         1,281          288.5M
    100M  taps       duckdb   1,204.1   40.3         2,366          190.8M
    100M  taps       duckdb   876.1     38.1         2,391          190.8M (bucket fix)
    100M  taps       duckdb   957.0     37.7         2,349          190.8M (memory_limit 512MB)
    ====  =========  =======  ========  ===========  =============  =============

A second session-2 10M run: sequences memory 15.2 s / 2,326 MB, DuckDB 28.4 s / 977 MB (1.87x);
taps memory 64.5 s / 8,300 MB, DuckDB 45.2 s / 1,183 MB (0.70x). DuckDB's cost then was grouping
42M rows by 10M string ids (two hash-bucket passes of 7.4 s each at 1GB) after three validation
scans. Now a Parquet file whose sequences (cards) come one after the other, ids increasing, is
checked and pivoted batch by batch in numpy while the next batch is decoded (10M sequences, one
profiled run: 5.7 s for that step, against 14.5 s), and the wide table and the per-level tables are
temporary (in-memory) tables when they surely fit in memory_limit (10M), in the database file
otherwise (100M: peak 1,362 MB, against 1,281 MB). Any other file takes the hash path, now with one
validation scan. The release is streamed (1M rows per chunk): at 100M it adds 35-50 s and does not
raise the peak. The 100M taps peak was the driver's: sampled once a second, the process stays at
1.3-1.4 GB while DuckDB reads and advances the levels, and peaked (2.4 GB, with memory_limit 512MB
still 2,349 MB) after the level-3 counts came back: with 60-minute bins the present (prefix,
location, bin) cells of level 3 number 2.0M at 10M taps, ~20M at 100M. With ``prefixtree.tree``
keying those cells in place, summing sorted cells by runs (no np.unique sort, no inverse when they
are distinct), drawing the noise in batches and holding leaf/bin codes as int32 (one 20M-cell sub-
level: 2,380 -> 1,575 MB above its inputs), the 100M taps run peaks at 1,761 MB ("lean driver";
same 190.8M released rows). The memory engine holds the whole input (8.3 GB at 10M taps): do not
run it at 100M on a small machine (``--engines duckdb``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import add_options, write_results

HEIGHT = 6

#: ``--smoke`` (seconds): 2,000 sequences, memory and DuckDB, data in a temporary folder
SMOKE = {"n": [2_000], "engines": ["memory", "duckdb"], "datasets": ["sequences"]}


def _write_inputs(work: Path, n: int, datasets: list[str]) -> dict[str, Path]:
    """Simulated sequences / taps Parquet files for ``n`` cards (cached)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from synth.simulate import write_simulated_sequences

    work.mkdir(parents=True, exist_ok=True)
    out = {}
    seqs = work / f"sequences_{n}.parquet"
    timed = work / f"sequences_timed_{n}.parquet"
    if "sequences" in datasets:
        if not seqs.exists():
            write_simulated_sequences(seqs, n, seed=0)
        out["sequences"] = seqs
    if "shuffled" in datasets:  # the same rows in random order: DuckDB groups them by hash
        shuffled = work / f"sequences_shuffled_{n}.parquet"
        if not shuffled.exists():
            if not seqs.exists():
                write_simulated_sequences(seqs, n, seed=0)
            table = pq.read_table(seqs)
            order = np.random.default_rng(0).permutation(table.num_rows)
            pq.write_table(table.take(order), shuffled, compression="zstd")
            del table
        out["shuffled"] = shuffled
    if "taps" in datasets:
        taps = work / f"taps_{n}.parquet"
        if not taps.exists():
            if not timed.exists():
                write_simulated_sequences(timed, n, with_time=True, seed=0)
            source = pq.ParquetFile(timed)
            writer = None
            for batch in source.iter_batches(batch_size=1 << 20):
                table = pa.table(
                    {
                        "card_id": batch.column("seq_id"),
                        "time": batch.column("time"),
                        "stop_id": batch.column("location"),
                    }
                )
                if writer is None:
                    writer = pq.ParquetWriter(taps, table.schema, compression="zstd")
                writer.write_table(table)
            assert writer is not None
            writer.close()
        out["taps"] = taps
    if "trips" in datasets:  # n trips: consecutive taps of a card, for `marginals`
        trips = work / f"trips_{n}.parquet"
        if not trips.exists():
            _write_trips(work, n, trips)
        out["trips"] = trips
    return out


def _write_trips(work: Path, n: int, path: Path) -> None:
    """``card_id, on_time, on_stop, off_time, off_stop``: each tap and the card's next tap, from
    the timed sequences of ``n // 3`` cards (about 3.2 trips per card), cut at ``n`` rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from synth.simulate import write_simulated_sequences

    source = work / f"sequences_timed_for_trips_{n}.parquet"
    if not source.exists():
        write_simulated_sequences(source, max(1, n // 3 + 1000), with_time=True, seed=1)
    table = pq.read_table(source)
    sid = table.column("seq_id").to_numpy()
    nxt = np.flatnonzero(sid[1:] == sid[:-1])[:n]
    cols = {"card_id": table.column("seq_id").take(nxt)}
    for side, idx in (("on", nxt), ("off", nxt + 1)):
        cols[f"{side}_time"] = table.column("time").take(idx)
        cols[f"{side}_stop"] = table.column("location").take(idx)
    pq.write_table(pa.table(cols), path, compression="zstd", row_group_size=1 << 20)


def _child(args: argparse.Namespace) -> None:
    """One measured run (in its own process): prints a JSON line."""
    started = time.perf_counter()
    if args.engine == "pyarrow":
        import pyarrow.parquet as pq

        rows = pq.read_table(args.input).num_rows
        print(json.dumps({"fit_s": time.perf_counter() - started, "rows": rows}))
        return
    if args.command in ("sequences", "marginals"):  # the user's command line, end to end
        _child_cli(args, started)
        return
    from prefixtree.synthesizer import PrefixTreeSynthesizer
    from synth.datasets import montreal_taxonomy

    synth = PrefixTreeSynthesizer(
        epsilon=1.0,
        height=HEIGHT,
        taxonomy=montreal_taxonomy(),
        time_bin=args.time_bin,
        random_state=0,
        engine=args.engine,
        engine_options=_options(args) or None,
    )
    synth.fit(args.input)
    fitted = time.perf_counter()
    if args.fit_only:
        print(json.dumps({"fit_s": fitted - started, "nodes": len(synth.tree_)}))
        return
    from prefixtree.output import write_sequences

    with tempfile.TemporaryDirectory(prefix="release-", dir=Path(args.input).parent) as tmp:
        path = Path(tmp) / "sequences.parquet"
        rows = write_sequences(synth.iter_sample(), path)
        size = path.stat().st_size
    print(
        json.dumps(
            {
                "fit_s": fitted - started,
                "release_s": time.perf_counter() - fitted,
                "nodes": len(synth.tree_),
                "released_sequences": int(synth.tree_["ending"].sum()),
                "released_rows": rows,
                "release_mb": round(size / 2**20, 1),
            }
        )
    )


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """Engine options: DuckDB's limits; Spark local[threads] with ``--spark-memory`` driver
    memory (the executors run in the driver's JVM in local mode). None for auto: its defaults."""
    options: dict[str, Any] = {}
    if args.engine == "duckdb":
        options = {"memory_limit": args.memory_limit, "threads": args.threads}
        if args.temp_dir:
            options["temp_directory"] = args.temp_dir
    elif args.engine == "spark":
        options = {"threads": args.threads, "memory_limit": args.spark_memory}
        if args.temp_dir:
            options["temp_directory"] = args.temp_dir
    return options


def _child_cli(args: argparse.Namespace, started: float) -> None:
    """``transit-synth sequences|marginals INPUT ... --engine E`` with its default flags."""
    from synth.cli import main as cli
    from synth.datasets import path as data_path

    with tempfile.TemporaryDirectory(prefix="release-", dir=Path(args.input).parent) as tmp:
        argv = [args.command, args.input, "--out", str(Path(tmp) / "out"), "--quiet"]
        if args.command == "sequences":
            argv += ["--taxonomy", str(data_path("montreal_taxonomy")), "--epsilon", "1"]
            argv += ["--height", str(HEIGHT)]
            if args.time_bin:
                argv += ["--time-bin", str(args.time_bin)]
        else:
            argv += ["--epsilon", "1", "--delta", "1e-6"]
        if args.engine != "auto":  # auto: the default, no flag
            argv += ["--engine", args.engine]
        options = _options(args)
        if "memory_limit" in options:
            argv += ["--engine-memory-limit", str(options["memory_limit"])]
        if "temp_directory" in options:
            argv += ["--engine-temp-dir", str(options["temp_directory"])]
        if args.engine == "spark":
            argv += ["--spark-master", f"local[{args.threads}]"]
        status = cli(argv)
        size = sum(p.stat().st_size for p in (Path(tmp) / "out").glob("*"))
    if status:
        raise SystemExit(status)
    print(json.dumps({"fit_s": time.perf_counter() - started, "release_mb": size / 2**20}))


def _tree_rss(root: int) -> tuple[int, int]:
    """(RSS of ``root``, summed RSS of its descendants: Spark's JVM and workers), in bytes."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * page
        except (OSError, ValueError, IndexError):
            continue
    below, todo = 0, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        below += rss.get(pid, 0)
        todo += children.get(pid, [])
    return rss.get(root, 0), below


def _measure(cmd: list[str]) -> dict[str, Any]:
    """Run ``cmd``; wall time, peak RSS of the child (``ru_maxrss``), and, sampled every 0.2 s,
    the peak RSS of its descendants (Spark: the driver JVM, whose executors run inside it in
    local mode) and of the child and descendants together."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peaks = {"jvm": 0, "total": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            own, below = _tree_rss(proc.pid)
            peaks["jvm"] = max(peaks["jvm"], below)
            peaks["total"] = max(peaks["total"], own + below)

    streams: dict[str, str] = {}

    def drain(name: str, stream: Any) -> None:
        streams[name] = stream.read()

    threads = [threading.Thread(target=sample, daemon=True)]
    threads += [
        threading.Thread(target=drain, args=(name, stream), daemon=True)
        for name, stream in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for thread in threads:
        thread.start()
    _, status, usage = os.wait4(proc.pid, 0)  # the child's own peak: ru_maxrss
    proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    for thread in threads:
        thread.join()
    out, err = streams.get("out", ""), streams.get("err", "")
    wall = time.perf_counter() - t0
    result: dict[str, Any] = {
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "jvm_peak_mb": round(peaks["jvm"] / 2**20, 1),
        "total_peak_mb": round(max(peaks["total"], usage.ru_maxrss * 1024) / 2**20, 1),
        "status": proc.returncode,
    }
    if proc.returncode == 0:
        result.update(json.loads(out.strip().splitlines()[-1]))
    else:
        lines = [line for line in err.strip().splitlines() if "Error" in line or "error" in line]
        result["error"] = (lines or err.strip().splitlines())[-3:] if err else "killed"
    return result


def _child_command(command: str, dataset: str) -> str:
    if dataset == "trips":
        return "marginals"  # only the command line counts trips
    return "sequences" if command == "cli" else "fit"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10_000_000])
    parser.add_argument(
        "--engines",
        nargs="+",
        default=["pyarrow", "memory", "duckdb"],
        choices=["pyarrow", "auto", "memory", "duckdb", "spark"],
        help="auto: the default engine choice (no --engine flag); spark: local mode",
    )
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=["sequences", "taps"],
        choices=["sequences", "shuffled", "taps", "trips"],
        help="shuffled: the sequences' rows in random order (not grouped by sequence); "
        "trips: n trips for `marginals` (--command cli)",
    )
    parser.add_argument(
        "--command",
        choices=["fit", "cli"],
        default="fit",
        help="fit: PrefixTreeSynthesizer.fit + streamed release; cli: the `transit-synth "
        "sequences` (or, on trips, `marginals`) command line with its default flags",
    )
    parser.add_argument("--spark-memory", default="2g", help="spark: driver memory (local)")
    parser.add_argument("--work", type=Path, default=Path("bench-engines-data"))
    parser.add_argument("--memory-limit", default="1GB", help="duckdb memory_limit")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--temp-dir", default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--fit-only",
        action="store_true",
        help="stop after fit(): skip writing the streamed release",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--child-command", dest="child_command", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--time-bin", type=int, default=None, help=argparse.SUPPRESS)
    add_options(parser, "2,000 sequences, memory and duckdb, in a temporary folder")
    args = parser.parse_args(argv)
    if args.child:
        args.command = args.child_command
        _child(args)
        return 0
    if args.prepare:  # in a child, so that this process stays small (fork copies its RSS)
        paths = _write_inputs(args.work, args.n[0], args.datasets)
        print(json.dumps({k: str(v) for k, v in paths.items()}))
        return 0
    if args.smoke:
        vars(args).update(SMOKE)
        with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
            args.work = Path(tmp)
            return _drive(args)
    return _drive(args)


def _drive(args: argparse.Namespace) -> int:
    """Prepare the inputs, run every engine in its own child, print and write the rows."""
    rows = []
    for n in args.n:
        t0 = time.perf_counter()
        prepared = subprocess.run(
            [
                sys.executable,
                __file__,
                "--prepare",
                "--n",
                str(n),
                "--work",
                str(args.work),
                "--datasets",
                *args.datasets,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        inputs = {
            k: Path(v) for k, v in json.loads(prepared.stdout.strip().splitlines()[-1]).items()
        }
        print(f"inputs for n={n:,}: {time.perf_counter() - t0:.0f} s (not timed)", file=sys.stderr)
        for dataset, path in inputs.items():
            for engine in args.engines:
                cmd = [
                    sys.executable,
                    __file__,
                    "--child",
                    "--engine",
                    engine,
                    "--input",
                    str(path),
                    "--memory-limit",
                    args.memory_limit,
                    "--threads",
                    str(args.threads),
                    "--spark-memory",
                    args.spark_memory,
                    "--child-command",
                    _child_command(args.command, dataset),
                ]
                if args.temp_dir:
                    cmd += ["--temp-dir", args.temp_dir]
                if dataset == "taps":
                    cmd += ["--time-bin", "60"]
                if dataset == "trips" and engine == "pyarrow":
                    continue
                if args.fit_only:
                    cmd += ["--fit-only"]
                row = {"n": n, "dataset": dataset, "engine": engine, **_measure(cmd)}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    print(
        f"{'n':>12} {'dataset':>10} {'engine':>8} {'wall s':>8} {'fit s':>8} {'release s':>9} "
        f"{'driver MB':>9} {'JVM MB':>8} {'total MB':>9}"
    )
    for r in rows:
        print(
            f"{r['n']:>12,} {r['dataset']:>10} {r['engine']:>8} {r['wall_s']:>8} "
            f"{r.get('fit_s', float('nan')):>8.1f} {r.get('release_s', float('nan')):>9.1f} "
            f"{r['peak_rss_mb']:>9} {r['jvm_peak_mb']:>8} {r['total_peak_mb']:>9}"
        )
    by = {(r["n"], r["dataset"], r["engine"]): r for r in rows}
    for (n, dataset, engine), r in by.items():
        mem = by.get((n, dataset, "memory"))
        if engine in ("duckdb", "spark", "auto") and mem and mem["status"] == 0 == r["status"]:
            print(
                f"n={n:,} {dataset}: {engine} / memory wall time = "
                f"{r['wall_s'] / mem['wall_s']:.2f}"
            )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))
    write_results(args.json, "engines", rows, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
