"""Draws per second of the exact samplers (ours and OpenDP's) at 1e6 and 1e7 draws.

Run: ``python benchmarks/bench_noise.py`` (``--sizes``, ``--opendp-max`` to limit the slow OpenDP
runs). Ours read ``os.urandom``; table construction for a new scale is timed separately (once per
scale, cached). Single process, single thread.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from synth.privacy import SecureNoise


def rate(draw: Callable[[int], object], n: int) -> float:
    start = time.perf_counter()
    draw(n)
    return n / (time.perf_counter() - start)


def opendp_sampler(kind: str, scale: float) -> Callable[[int], object]:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=int))
    if kind == "laplace":
        meas = dp.m.make_laplace(domain, dp.l1_distance(T=int), scale=scale)
    else:
        meas = dp.m.make_gaussian(domain, dp.l2_distance(T=int), scale=scale)
    return lambda n: meas([0] * n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e6, 1e7])
    parser.add_argument("--opendp-max", type=float, default=1e7, help="largest OpenDP run")
    args = parser.parse_args()
    noise = SecureNoise()
    samplers: list[tuple[str, float, Callable[[int], object]]] = []
    for scale in (1.0, 10.0, 1000.0, 1e9):
        start = time.perf_counter()
        noise.discrete_laplace(scale, 1)
        setup = time.perf_counter() - start
        print(f"table set-up, discrete Laplace scale {scale:g}: {setup:.3f} s")
        samplers.append(
            ("ours discrete_laplace", scale, lambda n, s=scale: noise.discrete_laplace(s, n))
        )
    for sigma in (4.22, 36.3, 1000.0):
        samplers.append(
            ("ours discrete_gaussian", sigma, lambda n, s=sigma: noise.discrete_gaussian(s, n))
        )
    samplers.append(("opendp discrete_laplace", 10.0, opendp_sampler("laplace", 10.0)))
    samplers.append(("opendp discrete_gaussian", 36.3, opendp_sampler("gaussian", 36.3)))
    header = "".join(f"{f'{n:.0e} draws/s':>18}" for n in args.sizes)
    print(f"{'sampler':<26}{'scale':>8}{header}")
    for name, scale, draw in samplers:
        cells = []
        for n in args.sizes:
            if name.startswith("opendp") and n > args.opendp_max:
                cells.append(f"{'skipped':>18}")
            else:
                cells.append(f"{rate(draw, int(n)):>18,.0f}")
        print(f"{name:<26}{scale:>8g}" + "".join(cells), flush=True)


if __name__ == "__main__":
    main()
