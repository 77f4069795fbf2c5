"""Counting engines at scale (issue 9): wall time and peak RSS per engine, in one run.

SIMULATED data (``synth.simulate``, Montreal metro, 68 stations) is written to Parquet once (not
timed, cached in ``--work``): long-format sequences (``seq_id, pos, location``) and taps
(``card_id, time, stop_id``, grouped by card, times non-decreasing). Then, each in its own child
process, the prefix-tree release is run end to end from the Parquet file with each engine:
``PrefixTreeSynthesizer(engine=...).fit(path)`` (read -> bound -> count -> noise) and the release
streamed chunk by chunk (``iter_sample()`` -> ``prefixtree.cli.write_release``) into a Parquet
file in a temporary directory next to the input; ``--fit-only`` stops after ``fit()``. Plus a
baseline that only reads the file with pyarrow. Reported per child: wall time (child start to
exit, interpreter start-up included), the fit and release times measured inside, and peak RSS
(``os.wait4`` on the child: ``ru_maxrss``). Targets (2 cores): DuckDB within 1.5x of the memory
engine's time at 10M sequences, and 100M sequences with peak RSS <= 2 GB.

    python benchmarks/bench_engines.py --n 10000000 --out results.json
    python benchmarks/bench_engines.py --n 100000000 --engines duckdb --work /big/disk

Measured end to end (read -> release written; 2 cores shared with other jobs, DuckDB
memory_limit 1GB, threads 2; Montreal, h = 6, epsilon 1; taps with 60-minute time bins):

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

A second 10M run (pass sizes from the file's row count instead of a counting query): sequences
memory 15.2 s / 2,326 MB, DuckDB 28.4 s / 977 MB (1.87x); taps memory 64.5 s / 8,300 MB, DuckDB
45.2 s / 1,183 MB (0.70x). At 10M, DuckDB takes 1.73x the memory engine's time on sequences
(it was 0.93x, 22.5 s vs 24.1 s, before the in-memory loader got 35% faster; DuckDB's
cost is grouping 42M rows by 10M string ids: two hash-bucket passes of 7.4 s each at 1GB, one
pass 10.6 s) and 0.82x on taps. The release is streamed (1M rows per chunk): at 100M it adds
40-50 s and does not raise the peak (the sequences run stays at its fit-only peak). The 100M taps
run before the bucket filter moved below the window took 1,204 s; with it, 876 s. Its peak
(2.4 GB, against 1.2 GB at 10M with passes of a similar size) does not follow DuckDB's
memory_limit (512MB: 2,349 MB): it is most likely the driver's. With 60-minute time bins the
present (prefix, location, bin) cells of level 3 number 2.0M at 10M taps (so ~20M at 100M), and
``prefixtree.tree`` holds their keys, counts and noise in numpy at once; drawing the noise over
cells streamed in batches would bound it (not built). The memory engine
holds the whole input (8.3 GB at 10M taps): do not run it at 100M on a small machine
(``--engines duckdb``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HEIGHT = 6


def _write_inputs(work: Path, n: int, datasets: list[str]) -> dict[str, Path]:
    """Simulated sequences / taps Parquet files for ``n`` cards (cached)."""
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
    return out


def _child(args: argparse.Namespace) -> None:
    """One measured run (in its own process): prints a JSON line."""
    started = time.perf_counter()
    if args.engine == "pyarrow":
        import pyarrow.parquet as pq

        rows = pq.read_table(args.input).num_rows
        print(json.dumps({"fit_s": time.perf_counter() - started, "rows": rows}))
        return
    from prefixtree.synthesizer import PrefixTreeSynthesizer
    from synth.datasets import montreal_taxonomy

    options: dict[str, Any] = {}
    if args.engine == "duckdb":
        options = {"memory_limit": args.memory_limit, "threads": args.threads}
        if args.temp_dir:
            options["temp_directory"] = args.temp_dir
    synth = PrefixTreeSynthesizer(
        epsilon=1.0,
        height=HEIGHT,
        taxonomy=montreal_taxonomy(),
        time_bins=args.time_bins,
        random_state=0,
        engine=args.engine,
        engine_options=options or None,
    )
    synth.fit(args.input)
    fitted = time.perf_counter()
    if args.fit_only:
        print(json.dumps({"fit_s": fitted - started, "nodes": len(synth.tree_)}))
        return
    from prefixtree.cli import write_release

    with tempfile.TemporaryDirectory(prefix="release-", dir=Path(args.input).parent) as tmp:
        path = Path(tmp) / "sequences.parquet"
        rows = write_release(synth.iter_sample(), path)
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


def _measure(cmd: list[str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    out = proc.stdout.read() if proc.stdout else ""
    err = proc.stderr.read() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    result: dict[str, Any] = {
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "status": proc.returncode,
    }
    if proc.returncode == 0:
        result.update(json.loads(out.strip().splitlines()[-1]))
    else:
        lines = [line for line in err.strip().splitlines() if "Error" in line or "error" in line]
        result["error"] = (lines or err.strip().splitlines())[-3:] if err else "killed"
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10_000_000])
    parser.add_argument(
        "--engines",
        nargs="+",
        default=["pyarrow", "memory", "duckdb"],
        choices=["pyarrow", "memory", "duckdb", "spark"],
    )
    parser.add_argument("--datasets", nargs="+", default=["sequences", "taps"])
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
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--time-bins", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    if args.prepare:  # in a child, so that this process stays small (fork copies its RSS)
        paths = _write_inputs(args.work, args.n[0], args.datasets)
        print(json.dumps({k: str(v) for k, v in paths.items()}))
        return
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
                ]
                if args.temp_dir:
                    cmd += ["--temp-dir", args.temp_dir]
                if dataset == "taps":
                    cmd += ["--time-bins", "60"]
                if args.fit_only:
                    cmd += ["--fit-only"]
                row = {"n": n, "dataset": dataset, "engine": engine, **_measure(cmd)}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    print(
        f"{'n':>12} {'dataset':>10} {'engine':>8} {'wall s':>8} {'fit s':>8} {'release s':>9} "
        f"{'peak MB':>9}"
    )
    for r in rows:
        print(
            f"{r['n']:>12,} {r['dataset']:>10} {r['engine']:>8} {r['wall_s']:>8} "
            f"{r.get('fit_s', float('nan')):>8.1f} {r.get('release_s', float('nan')):>9.1f} "
            f"{r['peak_rss_mb']:>9}"
        )
    by = {(r["n"], r["dataset"], r["engine"]): r for r in rows}
    for (n, dataset, engine), r in by.items():
        mem = by.get((n, dataset, "memory"))
        if engine == "duckdb" and mem and mem["status"] == 0 and r["status"] == 0:
            print(
                f"n={n:,} {dataset}: duckdb / memory wall time = {r['wall_s'] / mem['wall_s']:.2f}"
            )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
