"""Which k taps a card-unit SBH release keeps: the hour and location profiles of the kept taps
against all taps, per bounding rule (synth.marginals.bounding) and k, on the embedded SUBE taps.

The reason for the default rule: "earliest" (each card's first k taps by time) reshapes the hour
profile when k is below many cards' tap counts; "uniform" (a uniform random k) keeps it in
expectation at any k. Exact tables (no noise): marginal_tables with the release's bounding.

    python benchmarks/bench_bounding.py [--day tuesday|wednesday] [--ks 1 2 3 7] [--seed 0]
        [--smoke] [--json FILE]

``--smoke``: the first 2,000 cards of the day, k = 1 and 7 (seconds).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import add_options, emit, write_results

from synth import datasets
from synth.marginals import marginal_tables
from synth.records import load_taps


def _tv(a: pd.DataFrame, b: pd.DataFrame, key: str) -> float:
    pa, pb = (t.groupby(key)["count"].sum() for t in (a, b))
    pa, pb = pa / pa.sum(), pb / pb.sum()
    both = pd.concat([pa, pb], axis=1).fillna(0.0).to_numpy()
    return float(0.5 * np.abs(both[:, 0] - both[:, 1]).sum())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--day", default="tuesday", choices=("tuesday", "wednesday"))
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2, 3, 7])
    parser.add_argument("--seed", type=int, default=0)
    add_options(parser, "the first 2,000 cards of the day, k = 1 and 7")
    args = parser.parse_args(argv)
    raw = datasets.sube_taps(args.day)
    raw = raw[raw["id_tarjeta"].notna()]
    if args.smoke:
        cards = raw["id_tarjeta"].drop_duplicates().iloc[:2000]
        raw, args.ks = raw[raw["id_tarjeta"].isin(cards)], [1, 7]
    taps = load_taps(raw, location_column="id_linea")
    taps = taps.rename(columns={"id_linea": "stop_id", "modo": "mode"})
    full = marginal_tables(taps, bin_minutes=60)
    print(f"SUBE {args.day}: {int(full['on_time']['count'].sum())} tap-ons")
    rows = []
    for k in args.ks:
        for rule in ("earliest", "uniform"):
            kept = marginal_tables(
                taps,
                bin_minutes=60,
                unit_column="card_id",
                max_contributions=k,
                bounding=rule,  # type: ignore[arg-type]
                random_state=args.seed,
            )
            share = kept["on_time"]["count"].sum() / full["on_time"]["count"].sum()
            rows.append(
                emit(
                    {
                        "rule": rule,
                        "k": k,
                        "kept_share": round(float(share), 4),
                        "tv_hour": round(_tv(full["on_time"], kept["on_time"], "time"), 4),
                        "tv_location": round(
                            _tv(full["on_location"], kept["on_location"], "location"), 4
                        ),
                    }
                )
            )
    write_results(args.json, "bounding", rows, vars(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
