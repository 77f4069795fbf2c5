"""SBH / Opal release speed and memory against the bare pandas group-by of the same six tables.

Issue 5 target: ``OpalMarginals.fit`` within 2x the time of the floor (the six tables counted with
pandas on the same typed input: taps with ``time`` as datetime64, categorical stops and modes),
measured on the same input. Each step runs in its own child process (:func:`harness.child`), which
builds the input, times the step and exits: its peak RSS less that of a child that only builds the
input is the step's memory (``extra_mb``; ``memory_ratio`` compares the two steps' extras).

    python benchmarks/bench_sbh.py --sizes 10000000 50000000 \
        [--sube ../shared/data/sube-buenos-aires] [--json results.json]
    python benchmarks/bench_sbh.py --smoke      # seconds: 20,000 simulated taps
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import add_options, child, emit, write_results

from synth.marginals.opal import OpalMarginals

SMOKE_SIZES = [20_000]


def simulate_taps(n: int, *, stops: int = 2000, days: int = 7, seed: int = 0) -> pd.DataFrame:
    """``n`` taps: card, time (datetime64), categorical stop and mode, on/off (Zipf-ish stops)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, stops + 1) ** 0.8
    stop_codes = rng.choice(stops, n, p=weights / weights.sum()).astype(np.int32)
    minute = rng.integers(0, days * 1440, n).astype("timedelta64[m]")
    return pd.DataFrame(
        {
            "card_id": rng.integers(0, max(1, n // 8), n),
            "time": np.datetime64("2016-07-25") + minute,
            "stop_id": pd.Categorical.from_codes(stop_codes, [f"s{i:05d}" for i in range(stops)]),
            "mode": pd.Categorical.from_codes(
                rng.choice(4, n, p=[0.5, 0.35, 0.1, 0.05]).astype(np.int8),
                ["bus", "ferry", "lightrail", "train"],
            ),
            "tap": pd.Categorical.from_codes(rng.integers(0, 2, n).astype(np.int8), ["off", "on"]),
        }
    )


def groupby_floor(taps: pd.DataFrame, bin_minutes: int = 15) -> dict[str, pd.Series]:
    """The six tables with plain pandas (day and bin derived the same way): the floor."""
    t = taps["time"]
    frame = pd.DataFrame(
        {
            "mode": taps["mode"],
            "day": t.dt.floor("D"),
            "time": t.dt.floor(f"{bin_minutes}min"),
            "location": taps["stop_id"],
            "tap": taps["tap"],
        }
    )
    out = {}
    for side, part in frame.groupby("tap", observed=True):
        for dims in (["time"], ["location"], ["time", "location"]):
            out[f"{side}_{'_'.join(dims)}"] = part.groupby(
                ["mode", "day", *dims], observed=True, sort=True
            ).size()
    return out


def sbh_release(taps: pd.DataFrame, bin_minutes: int = 15) -> dict[str, pd.DataFrame]:
    """The release itself (secure noise)."""
    return OpalMarginals(bin=bin_minutes).fit(taps).release()


def sube_taps(folder: Path) -> pd.DataFrame:
    """Both SUBE days as taps (lines as locations; one row without a card id is dropped)."""
    frames = []
    for name in ("martes_trx.csv", "miercoles_trx.csv"):
        raw = pd.read_csv(folder / name, dtype={"id_tarjeta": str, "id_linea": str})
        raw = raw[raw["id_tarjeta"].notna()]
        day = pd.to_datetime(raw["fecha"], format="%d/%m/%Y")
        frames.append(
            pd.DataFrame(
                {
                    "card_id": raw["id_tarjeta"],
                    "time": day + pd.to_timedelta(raw["hora"], unit="h"),
                    "stop_id": raw["id_linea"],
                    "mode": raw["modo"],
                    "tap": np.where(raw["tipo_trx_tren"] == "CHECK OUT", "off", "on"),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


STEPS = {"input": None, "floor": groupby_floor, "sbh": sbh_release}


def _child_step(args: argparse.Namespace) -> None:
    """In the child: build the input, run one step, report its seconds on stderr."""
    taps = simulate_taps(args.n) if args.sube is None else sube_taps(args.sube)
    step = STEPS[args.step]
    start = time.perf_counter()
    if step is not None:
        step(taps, args.bin)
    print(json.dumps({"seconds": time.perf_counter() - start}), file=sys.stderr)


def _measure(step: str, n: int, sube: Path | None, bin_minutes: int) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--step", step, "--n", str(n), "--bin", str(bin_minutes)]
    got = child([*cmd, *(["--sube", str(sube)] if sube is not None else [])])
    seconds = json.loads(got["stderr"].strip().splitlines()[-1])["seconds"]
    return {"seconds": round(seconds, 3), "peak_rss_mb": got["peak_rss_mb"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000_000, 50_000_000])
    parser.add_argument("--sube", type=Path, default=None, help="SUBE folder (optional)")
    parser.add_argument("--bin", type=int, default=15)
    parser.add_argument("--step", choices=tuple(STEPS), help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    add_options(parser, f"{SMOKE_SIZES[0]:,} simulated taps")
    args = parser.parse_args(argv)
    if args.step is not None:
        _child_step(args)
        return 0
    if args.smoke:
        args.sizes, args.sube = SMOKE_SIZES, None
    inputs: list[tuple[str, int, Path | None, int]] = [
        (f"simulated {n:,}", n, None, args.bin) for n in args.sizes
    ]
    if args.sube is not None:
        inputs.append(("SUBE 2 days", 0, args.sube, 60))
    rows = []
    for name, n, sube, bin_minutes in inputs:
        base = _measure("input", n, sube, bin_minutes)
        floor = _measure("floor", n, sube, bin_minutes)
        sbh = _measure("sbh", n, sube, bin_minutes)
        for step in (floor, sbh):
            step["extra_mb"] = round(max(step["peak_rss_mb"] - base["peak_rss_mb"], 0.1), 1)
        row = {
            "input": name,
            "rows": n if sube is None else None,
            "input_peak_rss_mb": base["peak_rss_mb"],
            "floor": floor,
            "sbh": sbh,
            "time_ratio": round(sbh["seconds"] / max(floor["seconds"], 1e-9), 2),
            "memory_ratio": round(sbh["extra_mb"] / floor["extra_mb"], 2),
        }
        rows.append(emit(row))
    write_results(args.json, "sbh", rows, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
