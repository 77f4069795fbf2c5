"""Draws per second of the exact samplers (ours and OpenDP's) at 1e6 and 1e7 draws.

Run: ``python benchmarks/bench_noise.py`` (``--sizes``; ``--opendp-max`` limits the slow OpenDP
runs; ``--processes 2`` also measures our samplers on two cores, each process drawing half).
Ours read ``os.urandom``; table construction for a new scale is timed separately (it happens once
per scale and is cached). ``--smoke`` (seconds): 10,000 draws; ``--json``: the rows, machine and
commit (``benchmarks/tables.py`` makes the README table from it).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import add_options, write_results

from synth.privacy import SecureNoise

NOISE = SecureNoise()
LAPLACE_SCALES = (1.0, 10.0, 1000.0, 1e9)
GAUSSIAN_SIGMAS = (4.22, 36.3, 1000.0)


def ours(kind: str, scale: float, n: int) -> int:
    """Draw n values with our sampler (top-level: picklable for worker processes)."""
    sampler = NOISE.discrete_laplace if kind == "laplace" else NOISE.discrete_gaussian
    return int(sampler(scale, n).size)


def opendp_sampler(kind: str, scale: float) -> Callable[[int], object]:
    # the modules, not opendp.prelude: it also imports its sklearn, polars and ibis extras (seconds)
    import opendp.measurements as m
    from opendp.domains import atom_domain, vector_domain
    from opendp.metrics import l1_distance, l2_distance
    from opendp.mod import enable_features

    enable_features("contrib")
    domain = vector_domain(atom_domain(T=int))
    if kind == "laplace":
        meas = m.make_laplace(domain, l1_distance(T=int), scale=scale)
    else:
        meas = m.make_gaussian(domain, l2_distance(T=int), scale=scale)
    return lambda n: meas([0] * n)


def rate(draw: Callable[[int], object], n: int) -> float:
    start = time.perf_counter()
    draw(n)
    return n / (time.perf_counter() - start)


def parallel_rate(pool: multiprocessing.pool.Pool, kind: str, scale: float, n: int) -> float:
    workers = pool._processes  # type: ignore[attr-defined]
    start = time.perf_counter()
    pool.starmap(ours, [(kind, scale, n // workers)] * workers)
    return n / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e6, 1e7])
    parser.add_argument("--opendp-max", type=float, default=1e7, help="largest OpenDP run")
    parser.add_argument("--processes", type=int, default=1, help="also run ours on N processes")
    add_options(parser, "10,000 draws per sampler, one process")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.processes = [1e4], 1
    sizes = [int(n) for n in args.sizes]
    for scale in LAPLACE_SCALES:  # build (and cache) the tables before any fork
        start = time.perf_counter()
        ours("laplace", scale, 1)
        print(
            f"table set-up, discrete Laplace scale {scale:g}: {time.perf_counter() - start:.3f} s"
        )
    for sigma in GAUSSIAN_SIGMAS:
        ours("gaussian", sigma, 1)
    rows: list[tuple[str, float, Callable[[int], float]]] = []
    for kind, scales in (("laplace", LAPLACE_SCALES), ("gaussian", GAUSSIAN_SIGMAS)):
        for scale in scales:
            rows.append(
                (f"ours {kind}", scale, lambda n, k=kind, s=scale: rate(lambda m: ours(k, s, m), n))
            )
    pool = None
    if args.processes > 1:
        pool = multiprocessing.get_context("fork").Pool(args.processes)
        for kind, scales in (("laplace", LAPLACE_SCALES), ("gaussian", GAUSSIAN_SIGMAS)):
            for scale in scales:
                rows.append(
                    (
                        f"ours {kind} x{args.processes}",
                        scale,
                        lambda n, k=kind, s=scale: parallel_rate(pool, k, s, n),
                    )
                )
    for kind, scale in (("laplace", 10.0), ("gaussian", 36.3)):
        draw = opendp_sampler(kind, scale)
        rows.append(
            (
                f"opendp {kind}",
                scale,
                lambda n, d=draw: rate(d, n) if n <= args.opendp_max else float("nan"),
            )
        )
    header = "".join(f"{f'{n:.0e} draws/s':>18}" for n in sizes)
    print(f"{'sampler':<22}{'scale':>8}{header}")
    results: list[dict[str, Any]] = []
    for name, scale, measure in rows:
        rates = [measure(n) for n in sizes]
        cells = "".join(f"{r:>18,.0f}" for r in rates)
        print(f"{name:<22}{scale:>8g}{cells}", flush=True)
        for n, r in zip(sizes, rates, strict=True):
            if r == r:  # not NaN (an OpenDP size over --opendp-max)
                results.append({"sampler": name, "scale": scale, "draws": n, "draws_per_s": r})
    if pool is not None:
        pool.close()
    write_results(args.json, "noise", results, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
