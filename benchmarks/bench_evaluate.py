"""Speed of the evaluation suite on SIMULATED data (issue 3 targets).

Targets: the 40,000-query count workload (paper 004, section 5.1) and top-300 frequent sequential
pattern mining, each on 1M sequences of length <= 12, in seconds. Two networks:

* ``metro``: the simulator's Montreal metro (68 stations, gravity model, heavy-tailed popularity),
  sequences capped at 12 locations;
* ``zipf``: ``--locations`` stations (default 1000) with Zipf(1) popularity, lengths uniform in
  [1, 12], locations drawn independently (a sparse, bus-like universe).

For each: index build, the uniform and the popularity workload (40,000 queries each), top-k mining,
and optionally the ``prefixspan`` package on a subsample for comparison (``--oracle-n``). Peak
resident memory of the process is printed at the end (this script is the measured process). Each
step reports wall-clock and CPU seconds.

    python benchmarks/bench_evaluate.py [--n 1000000] [--queries 40000] [--k 300] [--oracle-n 20000]
    python benchmarks/bench_evaluate.py --smoke --json results.json   # seconds
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import add_options, emit, own_peak_rss_mb, write_results

from synth.evaluate.counts import CountIndex, paper_workload
from synth.evaluate.patterns import mine_top_k
from synth.records import encode_sequences
from synth.simulate import simulate_sequences

#: ``--smoke``: seconds
SMOKE = {"n": 5_000, "locations": 100, "queries": 500, "k": 20, "oracle_n": 0}

HEIGHT = 12


def _timed(fn: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """Result, wall-clock and CPU seconds (CPU time is the steadier figure on a shared machine)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, {
        "wall": round(time.perf_counter() - wall, 3),
        "cpu": round(time.process_time() - cpu, 3),
    }


def metro_codes(n: int, seed: int) -> tuple[np.ndarray, int]:
    """SIMULATED Montreal metro sequences (68 stations), first 12 locations, encoded."""
    seqs = simulate_sequences(n, max_length=HEIGHT, seed=seed)
    locations = sorted(seqs["location"].unique())
    return encode_sequences(seqs, locations), len(locations)


def zipf_codes(n: int, n_locations: int, seed: int) -> tuple[np.ndarray, int]:
    """SIMULATED sequences over ``n_locations`` Zipf-popular stations, lengths in [1, 12]."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_locations + 1)
    codes = rng.choice(n_locations, (n, HEIGHT), p=p / p.sum()).astype(np.int32)
    codes[np.arange(HEIGHT) >= rng.integers(1, HEIGHT + 1, n)[:, None]] = -1
    return codes, n_locations


def bench(
    name: str, codes: np.ndarray, n_locations: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Time index build, both workloads, top-k mining (and the oracle on a subsample)."""
    row: dict[str, Any] = {
        "network": name,
        "n_sequences": int(codes.shape[0]),
        "n_locations": n_locations,
        "mean_length": float((codes >= 0).sum(axis=1).mean()),
    }
    index, row["index_build_s"] = _timed(lambda: CountIndex.from_codes(codes, n_locations))
    for kind, weights in (("uniform", None), ("popularity", index.support_)):
        workload, row[f"{kind}_workload_gen_s"] = _timed(
            lambda w=weights: paper_workload(
                n_locations, HEIGHT, n_queries=args.queries, weights=w, seed=args.seed
            )
        )
        answers, row[f"{kind}_queries_s"] = _timed(lambda w=workload: index.count(w.queries))
        row[f"{kind}_share_empty"] = float((answers == 0).mean())
    top, row[f"top{args.k}_mining_s"] = _timed(lambda: mine_top_k(codes, args.k))
    row[f"top{args.k}_min_support"] = int(top[-1][1])
    if args.oracle_n:
        from prefixspan import PrefixSpan

        sub = codes[: args.oracle_n]
        mine, row["subsample_mining_s"] = _timed(lambda: mine_top_k(sub, args.k))
        db = [r[r >= 0].tolist() for r in sub]

        def oracle() -> list[Any]:
            ps = PrefixSpan(db)
            ps.minlen = 2
            return list(ps.frequent(mine[-1][1]))

        found, row["subsample_prefixspan_s"] = _timed(oracle)
        row["subsample_n"] = len(sub)
        row["subsample_oracle_patterns"] = len(found)
    return row


def main(argv: list[str] | None = None) -> int:
    """Run both networks and print one JSON line each, then the peak memory."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--locations", type=int, default=1000, help="stations of the zipf network")
    parser.add_argument("--queries", type=int, default=40_000)
    parser.add_argument("--k", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--oracle-n", type=int, default=0, help="prefixspan subsample (0: skip)")
    networks = ["metro", "zipf"]
    parser.add_argument("--networks", nargs="+", default=networks, choices=networks)
    add_options(parser, f"{SMOKE['n']:,} sequences, {SMOKE['queries']} queries, top {SMOKE['k']}")
    args = parser.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)
    rows = []
    for name in args.networks:
        if name == "metro":
            codes, n_loc = metro_codes(args.n, args.seed)
        else:
            codes, n_loc = zipf_codes(args.n, args.locations, args.seed)
        rows.append(emit(bench(name, codes, n_loc, args)))
    peak = own_peak_rss_mb()
    emit({"peak_rss_mb": peak})
    for row in rows:
        row["process_peak_rss_mb"] = peak
    write_results(args.json, "evaluate", rows, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
