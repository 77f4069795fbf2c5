"""Utility of timed releases (location x time trajectories): the statistics of issue 24.

Both the original and each synthetic release are long-format sequences ``seq_id, pos, location,
time`` (a clock time ``HH:MM[:SS]`` or a timestamp, each value read on its own by
:func:`synth.times.times_of_day`). Each is truncated to its first ``height`` points per sequence
(as a release of height ``h`` would be) and each time is floored to the release's bin of
``bin_minutes`` (and to its hour). The statistics are those of the shared scorer
``tools/trajmetrics.py`` (a unit test checks they are equal on a fixture):

* distributions, compared by their total variation (TV) distance: sequence length, hour of day
  of all points, hour of the first point, gap in bins between consecutive points (floored at 0,
  capped at :data:`GAP_CAP`);
* top-k sets (``k`` = :data:`TOP`), compared by how many of the original's top k a release shares:
  location -> location transitions, timed transitions (location, bin) -> (location, bin), and
  (location, bin) tokens. Ties at the k-th place are broken by first occurrence, sequences in the
  string order of their ids and points in position order (as ``collections.Counter.most_common``
  does in the scorer).

The measures follow the trajectory synthesis literature's usual ones (Chen et al. 2012, section
4.4, on the prefix tree of (location, time) nodes; the hour-of-day and trip-length distributions
and their TV distances of synthetic trajectory work such as He et al. 2015, DPT).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from synth.errors import InputError
from synth.times import times_of_day

__all__ = ["GAP_CAP", "TOP", "evaluate_trajectories", "trajectory_points", "trajectory_stats"]

#: gaps of more bins than this are counted as this many (the scorer's cap)
GAP_CAP = 12
#: the k of the top-k transition and token sets
TOP = 50


def trajectory_points(frame: pd.DataFrame, height: int, bin_minutes: int) -> pd.DataFrame:
    """One row per kept point: ``seq`` (0.. in the string order of the ids), ``location`` (str),
    ``bin``, ``hour``, in sequence then position order, at most ``height`` per sequence."""
    missing = {"seq_id", "pos", "location", "time"} - set(frame.columns)
    if missing:
        raise InputError(f"timed sequences need the columns {', '.join(sorted(missing))}")
    minutes, _ = times_of_day(frame["time"], column="time", source=None)
    seq, _ = pd.factorize(frame["seq_id"].astype(str), sort=True)
    pos = frame["pos"].to_numpy(dtype=np.int64)
    order = np.lexsort((pos, seq))
    seq = seq[order]
    new = np.r_[True, seq[1:] != seq[:-1]] if seq.size else np.zeros(0, dtype=bool)
    idx = np.arange(seq.size)
    rank = idx - np.maximum.accumulate(np.where(new, idx, 0)) if seq.size else idx
    keep = rank < height
    m = np.asarray(minutes, dtype=np.int64)[order][keep]
    return pd.DataFrame(
        {
            "seq": seq[keep],
            "location": frame["location"].astype(str).to_numpy(dtype=object)[order][keep],
            "bin": m // int(bin_minutes),
            "hour": m // 60,
        }
    )


def _shares(values: np.ndarray) -> dict[int, float]:
    vals, counts = np.unique(values, return_counts=True)
    total = counts.sum() or 1
    return {int(v): float(c) / total for v, c in zip(vals, counts, strict=True)}


def _top(keys: Mapping[str, np.ndarray], k: int) -> list[tuple[Any, ...]]:
    """The ``k`` most frequent key tuples, ties by first occurrence (``Counter.most_common``)."""
    frame = pd.DataFrame(dict(keys))
    if frame.empty:
        return []
    counts = frame.groupby(list(keys), sort=False).size()  # groups in order of first appearance
    counts = counts.sort_values(ascending=False, kind="stable")
    return [tuple(x) if isinstance(x, tuple) else (x,) for x in counts.index[:k]]


def trajectory_stats(points: pd.DataFrame, k: int = TOP) -> dict[str, Any]:
    """The distributions (value -> share) and top-``k`` sets of :func:`trajectory_points`."""
    seq = points["seq"].to_numpy()
    n = seq.size
    first = np.r_[True, seq[1:] != seq[:-1]] if n else np.zeros(0, dtype=bool)
    lengths = np.diff(np.r_[np.flatnonzero(first), n]) if n else np.zeros(0, dtype=np.int64)
    loc = points["location"].to_numpy(dtype=object)
    b = points["bin"].to_numpy(dtype=np.int64)
    nxt = ~np.r_[first[1:], True] if n else np.zeros(0, dtype=bool)  # a next point in the sequence
    a = np.flatnonzero(nxt)
    gaps = np.clip(b[a + 1] - b[a], 0, GAP_CAP)
    return {
        "n_sequences": int(first.sum()),
        "mean_length": float(lengths.mean()) if lengths.size else 0.0,
        "length": _shares(lengths),
        "hour": _shares(points["hour"].to_numpy()),
        "first_hour": _shares(points["hour"].to_numpy()[first]),
        "gap": _shares(gaps),
        "transitions": _top({"from": loc[a], "to": loc[a + 1]}, k),
        "timed_transitions": _top(
            {"from": loc[a], "from_bin": b[a], "to": loc[a + 1], "to_bin": b[a + 1]}, k
        ),
        "tokens": _top({"location": loc, "bin": b}, k),
    }


def tv_distance(p: Mapping[int, float], q: Mapping[int, float]) -> float:
    """Total variation distance of two distributions given as value -> share."""
    return float(0.5 * sum(abs(p.get(x, 0.0) - q.get(x, 0.0)) for x in set(p) | set(q)))


def _shared(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> int:
    return len({tuple(map(str, x)) for x in a} & {tuple(map(str, x)) for x in b})


def _profile(dist: Mapping[int, float]) -> list[list[float]]:
    return [[int(v), round(s, 6)] for v, s in sorted(dist.items())]


def evaluate_trajectories(
    original: pd.DataFrame,
    synthetic: Mapping[str, pd.DataFrame],
    *,
    height: int,
    bin_minutes: int,
    k: int = TOP,
) -> dict[str, Any]:
    """The time statistics of each timed release against ``original`` (JSON-ready; module
    docstring). Releases without a ``time`` column are left out (named under ``untimed``)."""
    orig = trajectory_stats(trajectory_points(original, height, bin_minutes), k)

    def dists(s: dict[str, Any]) -> dict[str, Any]:
        return {d: _profile(s[d]) for d in ("length", "hour", "first_hour", "gap")}

    out: dict[str, Any] = {
        "parameters": {"height": height, "bin_minutes": bin_minutes, "top": k, "gap_cap": GAP_CAP},
        "original": {
            "n_sequences": orig["n_sequences"],
            "mean_length": orig["mean_length"],
            **dists(orig),
            "top_timed_transitions": [list(map(str, t)) for t in orig["timed_transitions"][:10]],
        },
        "releases": {},
        "untimed": [n for n, f in synthetic.items() if "time" not in f.columns],
    }
    for name, frame in synthetic.items():
        if "time" not in frame.columns:
            continue
        s = trajectory_stats(trajectory_points(frame, height, bin_minutes), k)
        out["releases"][name] = {
            "n_sequences": s["n_sequences"],
            "mean_length": s["mean_length"],
            **dists(s),
            "tv_length": tv_distance(orig["length"], s["length"]),
            "tv_hour": tv_distance(orig["hour"], s["hour"]),
            "tv_first_hour": tv_distance(orig["first_hour"], s["first_hour"]),
            "tv_gap": tv_distance(orig["gap"], s["gap"]),
            "transitions_kept": _shared(orig["transitions"], s["transitions"]),
            "timed_transitions_kept": _shared(orig["timed_transitions"], s["timed_transitions"]),
            "tokens_kept": _shared(orig["tokens"], s["tokens"]),
        }
    return out
