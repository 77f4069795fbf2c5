"""SBH / Opal release speed and memory against the bare pandas group-by of the same six tables.

Issue 5 target: ``OpalRelease.fit`` within 2x the time of the floor (the six tables counted with
pandas on the same typed input: taps with ``time`` as datetime64, categorical stops and modes),
measured in the same run. Peak memory is the tracemalloc peak of each step (numpy and pandas
buffers are traced), in a separate run from the timing.

    python benchmarks/bench_sbh.py --sizes 10000000 50000000 \
        [--sube ../shared/data/sube-buenos-aires]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from synth.marginals.opal import OpalRelease


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
    return OpalRelease(bin_minutes=bin_minutes).fit(taps).release()


def measure(fn: Callable[[], Any]) -> dict[str, float]:
    """Wall time (best of one untraced run) and tracemalloc peak (a second, traced run)."""
    gc.collect()
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    gc.collect()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"seconds": round(seconds, 3), "peak_mib": round(peak / 2**20, 1)}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000_000, 50_000_000])
    parser.add_argument("--sube", type=Path, default=None, help="SUBE folder (optional)")
    parser.add_argument("--bin", type=int, default=15)
    args = parser.parse_args()
    inputs: list[tuple[str, Callable[[], pd.DataFrame], int]] = [
        (f"simulated {n:,}", lambda n=n: simulate_taps(n), args.bin) for n in args.sizes
    ]
    if args.sube is not None:
        inputs.append(("SUBE 2 days", lambda: sube_taps(args.sube), 60))
    results = []
    for name, make, bin_minutes in inputs:
        taps = make()
        floor = measure(partial(groupby_floor, taps, bin_minutes))
        sbh = measure(partial(sbh_release, taps, bin_minutes))
        row = {
            "input": name,
            "rows": len(taps),
            "floor": floor,
            "sbh": sbh,
            "time_ratio": round(sbh["seconds"] / floor["seconds"], 2),
            "memory_ratio": round(sbh["peak_mib"] / max(floor["peak_mib"], 1e-9), 2),
        }
        results.append(row)
        print(json.dumps(row), flush=True)
        taps = pd.DataFrame()  # free before the next input
        gc.collect()


if __name__ == "__main__":
    main()
