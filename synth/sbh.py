"""Stability-based histograms (SBH) and the Opal-style marginal release.

:func:`stability_histogram` is Algorithm 1 of paper 000 (section 3): only the points present in the
data are counted, each count gets discrete Laplace noise of scale ``2/epsilon``, a noisy count is
kept when it reaches ``2 ln(2/delta)/epsilon + 1``, and the output is sorted lexicographically
(section 3.3.1). With a card as the privacy unit each card is first bounded to ``k`` rows, and scale
and threshold are calibrated for the resulting sensitivities (:func:`calibrate` proves the
guarantee).

:class:`OpalRelease` is the section 4.1 pipeline (identifiers dropped, 15-minute bins, locations
collapsed to a taxonomy level, mode x day partitions, six marginal tables with epsilons
1,1,1,1,2,2 and ``delta_j = 1/8,000,000``) plus the two fixes of the assessment (paper 001):
``mode="consistent"`` (section 4: noise only the two time x location tables, derive the one-way
tables by summing them) and ``mode="pure"`` (section 3: perturb every cell of the public domain,
zeros included, for pure epsilon-DP; the empty cells are handled with the exact empty-cell shortcut,
never enumerated).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import pandas as pd

from synth.engines import SBHEvents, check_engine, get_engine
from synth.errors import ConfigError, InputError
from synth.io import id_strings
from synth.privacy import (
    DiscreteLaplace,
    LedgerBranch,
    PrivacyLedger,
    check_budget,
    exact,
    noise_source,
    threshold_delta,
)
from synth.records import UnknownLocationWarning
from synth.taxonomy import Taxonomy, taxonomy_note
from synth.times import NO_DAY, check_timezone, times_of_day

__all__ = [
    "DEFAULT_SPLIT",
    "TABLES",
    "OpalRelease",
    "SBHCalibration",
    "calibrate",
    "stability_histogram",
]

#: The six tables of 000 section 4.1 step 6, in the paper's order (1)..(6).
TABLES: tuple[str, ...] = (
    "on_time",
    "on_location",
    "off_time",
    "off_location",
    "on_time_location",
    "off_time_location",
)
#: Relative epsilons of the six tables (000 section 4.2: 1, 1, 1, 1, 2, 2; total 8).
DEFAULT_SPLIT: tuple[int, ...] = (1, 1, 1, 1, 2, 2)
_TABLE_DIMS: dict[str, tuple[str, ...]] = {
    name: tuple(d for d in ("time", "location") if d in name.split("_")) for name in TABLES
}
Mode = Literal["sbh", "consistent", "pure"]
#: What SBH uses of a noise source (:class:`synth.privacy.SecureNoise` or a test stand-in).
NOISE_METHODS = ("discrete_laplace", "empty_cells_passing", "choice")


class NoiseSource(Protocol):
    """What is used of :class:`synth.privacy.SecureNoise` (tests pass a zero-noise stand-in)."""

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray: ...

    def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray: ...

    def choice(self, n: int, k: int) -> np.ndarray: ...


# --------------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class SBHCalibration:
    """Noise scale, threshold and sensitivities of one stability histogram.

    A noisy count is kept when it is ``>= threshold`` (an integer). ``delta`` is what the release
    spends (0 in pure mode, where the threshold is post-processing).
    """

    epsilon: Fraction
    delta: Fraction
    scale: float
    threshold: int
    unit: str
    l0: int
    l1: int
    linf: int
    pure: bool

    def error_bound(self, beta: float = 0.05) -> int:
        """Per-cell error bound, holding with probability ``>= 1 - beta`` (000 Theorem 6, exact).

        With ``X ~ DLap(scale)``, ``P(|X| > m) = 2 p^(m+1)/(1+p)``, ``p = exp(-1/scale)``. Let ``m``
        be the least integer with ``P(|X| > m) <= beta``. A released cell is off by ``|X| <= m``; a
        suppressed cell had ``c + X < threshold``, so ``c <= threshold - 1 + m``. The bound is
        ``threshold - 1 + m = O(ln(1/delta)/epsilon + ln(1/beta)/epsilon)``.
        """
        if not 0.0 < beta < 1.0:
            raise ConfigError(f"beta must be in (0, 1), got {beta!r}")
        p = math.exp(-1.0 / self.scale)
        if p == 0.0:  # scale below 1/745: |X| > 0 has probability below 1e-323
            return self.threshold - 1
        m = max(0, math.ceil(math.log(beta * (1.0 + p) / 2.0) / math.log(p) - 1.0))
        while m > 0 and 2.0 * p**m / (1.0 + p) <= beta:
            m -= 1
        while 2.0 * p ** (m + 1) / (1.0 + p) > beta:
            m += 1
        return self.threshold - 1 + m

    def to_dict(self, beta: float = 0.05) -> dict[str, Any]:
        """JSON-ready fields plus the error bound at ``beta``."""
        out = asdict(self)
        out["epsilon"], out["delta"] = float(self.epsilon), float(self.delta)
        out["error_bound"] = self.error_bound(beta)
        out["error_bound_beta"] = beta
        return out


def calibrate(
    epsilon: float | Fraction,
    delta: float | Fraction,
    *,
    privacy_unit: str | None = None,
    max_contributions: int = 1,
    pure: bool = False,
) -> SBHCalibration:
    """Scale and threshold of a stability histogram.

    **Row unit** (``privacy_unit=None``; neighbours replace one row, 000 Theorem 5): Algorithm 1
    exactly, scale ``2/epsilon`` and the threshold ``2 ln(2/delta)/epsilon + 1`` (as an integer: its
    ceiling, the same test for integer counts). With the discrete Laplace the bad event of the proof
    has ``P(X >= 2 ln(2/delta)/epsilon) = p^ceil(.)/(1+p) < delta/2``, so Theorem 5 carries over.

    **Card unit** (``privacy_unit`` names the unit column; neighbours add or remove one card, whose
    rows were bounded to ``k = max_contributions``): the card changes at most ``l0 = k`` cells, each
    by at most ``linf = k``, ``l1 = k`` in total. Scale ``b = l1/epsilon``; the threshold ``tau`` is
    the least integer ``> k`` with :func:`synth.privacy.threshold_delta` ``(b, tau, k) <=
    delta``, i.e. ``max(P(X >= tau - k), k P(X >= tau - 1)) <= delta`` (the privacy core's
    threshold primitive).

    *Proof* (card unit). Let ``D = D' + card``; ``S`` = cells with a positive count in ``D'``,
    ``U`` = cells positive only in ``D`` (their count in ``D`` is the card's ``c_u >= 1``, with
    ``sum c <= l1``). Cells outside ``S u U`` are never released by either. The outputs on ``S``
    are a noisy vector whose L1 distance between ``D`` and ``D'`` is ``<= l1``, thresholded per cell
    (post-processing): ``e^(l1/b) = e^epsilon``-indistinguishable. A ``U`` cell is released from
    ``D`` only if ``c_u + X >= tau`` and never from ``D'``; by the union bound ``q = P(some U cell
    is released) <= sum_u P(X >= tau - c_u)``, a convex function of ``(c_u)`` over ``{c_u >= 1,
    sum c_u <= k}``, so it is largest at a vertex, and over the vertices ``(k - j + 1, 1, ..., 1)``
    the sum is convex in ``j``: ``q <= max(P(X >= tau - k), k P(X >= tau - 1)) <= delta``. Let
    ``M_S`` be the release without the ``U`` cells; ``M(D) = M_S(D)`` unless a ``U`` cell passes.
    For any set ``O``: ``P[M(D) in O] <= P[M_S(D) in O] + q <= e^eps P[M(D') in O] + delta``; and,
    the ``U`` noise being independent, ``(1-q) P[M(D') in O] <= e^eps P[M_S(D) in O, no U cell
    passes] <= e^eps P[M(D) in O]``, so ``P[M(D') in O] <= e^eps P[M(D) in O] + q``. Hence
    (epsilon, delta)-DP.
    ``tests/dp/test_sbh_dp.py`` checks both units with the DP harness.

    **Pure** (``pure=True``, 001 section 3): every domain cell is perturbed, so the noisy vector is
    epsilon-DP (L1 sensitivity 2 for a row swap, ``k`` for a card) and the threshold is
    post-processing; ``delta`` then only sets it (the same formula; ``delta = 0`` keeps every noisy
    count ``>= linf``, row unit ``>= 1``) and the release spends ``delta = 0``.
    """
    eps = exact(epsilon, "epsilon")
    dlt = exact(delta, "delta")
    if eps <= 0:
        raise ConfigError(f"epsilon must be > 0, got {float(eps)}")
    if not 0 <= dlt < 1 or (dlt == 0 and not pure):
        raise ConfigError(f"delta must be in (0, 1) (pure mode: [0, 1)), got {float(dlt)}")
    if isinstance(max_contributions, bool) or not isinstance(max_contributions, int | np.integer):
        raise ConfigError(f"max_contributions must be an integer >= 1, got {max_contributions!r}")
    k = int(max_contributions)
    if k < 1:
        raise ConfigError(f"max_contributions must be >= 1, got {k}")
    if privacy_unit is None:
        if k != 1:
            raise ConfigError("max_contributions needs a privacy_unit column (the unit is a row)")
        l0, l1, linf = 2, 2, 1
        scale = float(DiscreteLaplace(epsilon=float(eps), sensitivity=2).scale)
        threshold = 1 if dlt == 0 else math.ceil(1.0 + scale * math.log(2.0 / float(dlt)))
    else:
        l0 = l1 = linf = k
        scale = float(DiscreteLaplace(epsilon=float(eps), sensitivity=k).scale)
        threshold = linf + 1 if dlt == 0 else _least_threshold(scale, k, float(dlt), linf + 1)
    return SBHCalibration(
        epsilon=eps,
        delta=Fraction(0) if pure else dlt,
        scale=scale,
        threshold=int(threshold),
        unit="row" if privacy_unit is None else str(privacy_unit),
        l0=l0,
        l1=l1,
        linf=linf,
        pure=pure,
    )


def _least_threshold(scale: float, k: int, delta: float, low: int) -> int:
    """The least integer threshold >= ``low`` whose ``threshold_delta`` is <= ``delta``.

    ``threshold_delta`` decreases in the threshold, so doubling then bisection finds it in
    O(log) evaluations, whatever the scale.
    """
    high = low
    while threshold_delta(scale, high, k) > delta:
        low, high = high + 1, 2 * high
    while low < high:
        middle = (low + high) // 2
        if threshold_delta(scale, middle, k) > delta:
            low = middle + 1
        else:
            high = middle
    return high


# --------------------------------------------------------------------------- noisy cells
def _count(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys in ``[0, size)`` and their counts (bincount when the space is small)."""
    if keys.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if size <= 4 * keys.size + (1 << 20):
        counts = np.bincount(keys, minlength=size)
        present = np.flatnonzero(counts)
        return present.astype(np.int64), counts[present].astype(np.int64)
    present, counts = np.unique(keys, return_counts=True)
    return present.astype(np.int64), counts.astype(np.int64)


def _empty_positions(present: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Linear index of the ``ranks``-th empty cells, given the sorted present cells' indices."""
    gaps = present - np.arange(present.size, dtype=np.int64)  # empty cells before each present one
    return ranks + np.searchsorted(gaps, ranks, side="right")


def _noisy_cells(
    keys: np.ndarray,
    counts: np.ndarray,
    cal: SBHCalibration,
    noise: NoiseSource,
    domain_size: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1 on present cells; in pure mode also the empty domain cells (shortcut, exact).

    Returns the kept keys (sorted, so the output order never depends on the data) and noisy counts.
    """
    noisy = counts + np.asarray(noise.discrete_laplace(cal.scale, int(counts.size)), np.int64)
    keep = noisy >= cal.threshold
    out_keys, out_vals = keys[keep], noisy[keep]
    if cal.pure:
        if domain_size is None:
            raise ConfigError("pure mode needs the public domain of every table")
        n_empty = int(domain_size) - int(keys.size)
        passing = np.asarray(noise.empty_cells_passing(cal.scale, cal.threshold, n_empty), np.int64)
        if passing.size:
            ranks = np.sort(np.asarray(noise.choice(n_empty, int(passing.size)), np.int64))
            out_keys = np.concatenate([out_keys, _empty_positions(keys, ranks)])
            out_vals = np.concatenate([out_vals, passing])
            order = np.argsort(out_keys, kind="stable")
            out_keys, out_vals = out_keys[order], out_vals[order]
    return out_keys, out_vals


def _bound_rank(group_cols: Sequence[np.ndarray], order_cols: Sequence[np.ndarray]) -> np.ndarray:
    """Rank of each row within its group (``group_cols``), ordered by ``order_cols``; stable."""
    n = group_cols[0].size
    order = np.lexsort(tuple(reversed([*group_cols, *order_cols])))  # first key most significant
    new_group = np.ones(n, dtype=bool)
    if n:
        same = np.ones(n - 1, dtype=bool)
        for col in group_cols:
            s = col[order]
            same &= s[1:] == s[:-1]
        new_group[1:] = ~same
    starts = np.maximum.accumulate(np.where(new_group, np.arange(n), 0))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - starts
    return rank


# --------------------------------------------------------------------------- Algorithm 1
def stability_histogram(
    data: pd.DataFrame,
    columns: Sequence[str],
    *,
    epsilon: float,
    delta: float,
    privacy_unit: str | None = None,
    max_contributions: int = 1,
    domain: Mapping[str, Sequence[Any]] | None = None,
    random_state: int | NoiseSource | None = None,
    ledger: LedgerBranch | None = None,
    label: str = "stability histogram",
) -> pd.DataFrame:
    """Algorithm 1 of 000 (stability-based histogram) over the points ``columns`` of ``data``.

    ``privacy_unit=None``: one row is the unit (Algorithm 1 exactly, see :func:`calibrate`).
    ``privacy_unit="card_id"``: each card keeps its first ``max_contributions`` rows in input order
    (deterministic) and scale and threshold follow the card-unit calibration. ``domain`` (public
    values per column) switches to pure mode: every cell of the product domain is perturbed, zeros
    included (001 section 3); rows outside it are an ``InputError``. The spend is recorded in
    ``ledger`` (a :class:`PrivacyLedger` or branch; a fresh one when ``None``) before any noise is
    drawn.

    Returns the kept points and their noisy counts (column ``count``) sorted lexicographically by
    ``columns``; ``result.attrs["sbh"]`` holds the calibration and its error bound (Theorem 6).
    """
    columns = list(columns)
    if not columns:
        raise ConfigError("columns must name at least one column")
    missing = [c for c in [*columns, *([privacy_unit] if privacy_unit else [])] if c not in data]
    if missing:
        raise InputError(f"missing column(s): {', '.join(missing)}")
    pure = domain is not None
    cal = calibrate(
        epsilon, delta, privacy_unit=privacy_unit, max_contributions=max_contributions, pure=pure
    )
    frame = data[columns]
    for col in columns:
        nulls = np.flatnonzero(frame[col].isna().to_numpy())
        if nulls.size:
            raise InputError(f"column '{col}', row {frame.index[nulls[0]]}: missing value")
    if privacy_unit is not None:
        units = pd.factorize(data[privacy_unit])[0]
        rank = _bound_rank([units], [np.arange(len(data))])
        frame = frame.loc[rank < cal.l1]
    # Encode each column; the categories are sorted so that key order is lexicographic order.
    codes: list[np.ndarray] = []
    cats: list[np.ndarray] = []
    for col in columns:
        if pure:
            assert domain is not None
            values = np.asarray(sorted(set(domain.get(col, []))), dtype=object)
            if values.size == 0:
                raise ConfigError(f"domain has no values for column '{col}'")
            idx = pd.Index(values).get_indexer(pd.Index(frame[col].to_numpy(dtype=object)))
            bad = np.flatnonzero(idx < 0)
            if bad.size:
                row = frame.index[bad[0]]
                raise InputError(f"column '{col}', row {row}: value outside the public domain")
            codes.append(idx.astype(np.int64))
            cats.append(values)
        else:
            c, u = pd.factorize(frame[col], sort=True)
            codes.append(c.astype(np.int64))
            cats.append(np.asarray(u, dtype=object))
    sizes = [len(c) for c in cats]
    if math.prod(sizes) >= 2**62:
        raise ConfigError("the product of the column domains is too large (over 2^62 cells)")
    key = np.zeros(len(frame), dtype=np.int64)
    for c, size in zip(codes, sizes, strict=True):
        key = key * size + c
    present, counts = _count(key, math.prod(sizes))
    noise = noise_source(random_state, methods=NOISE_METHODS)
    book = ledger if ledger is not None else _fresh_ledger(cal)
    _record(book, label, cal, seeded=bool(getattr(noise, "seeded", False)))
    kept, values = _noisy_cells(present, counts, cal, noise, math.prod(sizes) if pure else None)
    out: dict[str, Any] = {}
    rest = kept
    for col, size, cat in reversed(list(zip(columns, sizes, cats, strict=True))):
        rest, code = np.divmod(rest, size)
        out[col] = cat[code]
    result = pd.DataFrame({col: out[col] for col in columns})
    result["count"] = values
    result.attrs["sbh"] = cal.to_dict()
    return result


def _fresh_ledger(cal: SBHCalibration) -> PrivacyLedger:
    neighbouring = (
        "replace one row by another"
        if cal.unit == "row"
        else f"add or remove one {cal.unit}'s rows (at most {cal.l1} kept)"
    )
    return PrivacyLedger(
        epsilon=cal.epsilon, delta=cal.delta, unit=cal.unit, neighbouring=neighbouring
    )


def _record(
    book: LedgerBranch, label: str, cal: SBHCalibration, note: str = "", *, seeded: bool = False
) -> None:
    """Record one stability histogram's spend (before any noise is drawn)."""
    if cal.pure:
        detail = "every public-domain cell perturbed, zeros included; threshold is post-processing"
    elif cal.unit == "row":
        detail = "Algorithm 1 of 000: present cells only, kept when >= threshold"
    else:
        detail = (
            f"threshold histogram: l0={cal.l0}, l1={cal.l1}, linf={cal.linf}; present cells only"
        )
    book.spend(
        label=label,
        mechanism="discrete_laplace" if cal.pure else "discrete_laplace_threshold",
        epsilon=cal.epsilon,
        delta=cal.delta,
        sensitivity=cal.l1,
        sensitivity_norm="l1",
        scale=cal.scale,
        threshold=cal.threshold,
        note="; ".join(
            x for x in (detail, note, "seeded noise: NOT private" if seeded else "") if x
        ),
    )


# --------------------------------------------------------------------------- Opal pipeline inputs
_MINUTE_LABELS = np.array([f"{m // 60:02d}:{m % 60:02d}" for m in range(1440)], dtype=object)
_NO_DAY = NO_DAY  # "no date in the input": a single day partition


@dataclass
class _Events:
    """Tap events, encoded: side 0 = on / 1 = off, codes into the category lists, minute of day."""

    side: np.ndarray
    mode: np.ndarray
    day: np.ndarray  # days since 1970-01-01, or _NO_DAY
    minute: np.ndarray  # minute of the day, -1 when the input has no times
    location: np.ndarray  # codes into `locations`
    unit: np.ndarray | None
    modes: np.ndarray
    locations: np.ndarray
    kind: str
    sides: tuple[int, ...] = (0, 1)  # the sides the input's schema has (taps without 'tap': on)


def _bad_row(column: str, mask: np.ndarray, index: pd.Index, what: str) -> InputError:
    row = index[int(np.flatnonzero(mask)[0])]
    return InputError(f"column '{column}', row {row}: {what}")


def _parse_times(
    frame: pd.DataFrame, column: str, date_column: str | None, timezone: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(minute of day, day number) of ``frame[column]``, each value on its own
    (:func:`synth.times.times_of_day`: a clock time ``HH:MM`` has no day, a timestamp is its wall
    clock as written or in ``timezone``); the day from ``date_column`` when given."""
    minute, day = times_of_day(
        frame[column], timezone=timezone, column=column, source=None, rows=frame.index
    )
    if (minute >= 1440).any():
        raise _bad_row(column, minute >= 1440, frame.index, "not a time of day")
    if date_column is not None:
        dates = pd.to_datetime(
            frame[date_column].astype("string"), errors="coerce", format="ISO8601"
        )
        if dates.isna().any():
            raise _bad_row(
                date_column, dates.isna().to_numpy(), frame.index, "not an ISO 8601 date"
            )
        day = dates.to_numpy(dtype="datetime64[ns]").astype("datetime64[D]").astype(np.int64)
    return np.asarray(minute, dtype=np.int32), day


def _factor(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Codes into the sorted distinct labels (identifier strings: ``32.0`` is ``"32"``).

    Only the distinct values are converted to strings, so a categorical or integer column of 50M
    rows costs one hash pass.
    """
    codes, uniq = pd.factorize(values)
    labels = id_strings(pd.Series(uniq)).astype(str).to_numpy()
    cats, inverse = np.unique(labels, return_inverse=True)
    return inverse.astype(np.int64)[codes], cats.astype(object)


def _merge_codes(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate coded parts whose label lists differ, onto their sorted union of labels."""
    cats = np.unique(np.concatenate([labels for _, labels in parts]))
    codes = [np.searchsorted(cats, labels)[c] for c, labels in parts]
    return np.concatenate(codes).astype(np.int64), cats.astype(object)


def _read_events(
    data: pd.DataFrame, *, unit_column: str | None, timezone: str | None = None
) -> _Events:
    """Trips (``on_time, on_stop[, off_time, off_stop]``), taps (``time, stop_id[, tap]``) or
    long-format sequences (``seq_id, location[, time]``) as tap events.

    ``mode`` and ``date`` columns are optional (one mode ``all``; the day from the times).
    Every value is read on its own: ids and locations by :func:`synth.io.id_strings`, times by
    :func:`synth.times.times_of_day` (wall clock as written, or in ``timezone``).
    """
    if unit_column is not None and unit_column not in data:
        raise InputError(f"missing privacy-unit column '{unit_column}'")
    date_col = "date" if "date" in data else None
    every = np.ones(len(data), dtype=bool)
    parts: list[tuple[int, np.ndarray, str | None, str]] = []
    if "on_stop" in data:
        kind = "trip"
        if "on_time" not in data:
            raise InputError("trips need an 'on_time' column")
        parts.append((0, every, "on_time", "on_stop"))
        if "off_stop" in data and "off_time" in data:
            has_off = data["off_stop"].notna().to_numpy() & data["off_time"].notna().to_numpy()
            parts.append((1, has_off, "off_time", "off_stop"))
    elif "stop_id" in data or "location" in data:
        loc_col = "stop_id" if "stop_id" in data else "location"
        kind = "tap" if loc_col == "stop_id" else "sequence element"
        time_col = "time" if "time" in data else None
        if kind == "tap" and time_col is None:
            raise InputError("taps need a 'time' column")
        if "tap" in data:
            codes, labels = _factor(data["tap"])
            norm = np.array([x.strip().lower() for x in labels], dtype=object)
            bad = ~np.isin(norm, ["on", "off"])
            if bad.any() or (codes < 0).any():
                rows = (codes < 0) | bad[np.maximum(codes, 0)]
                raise _bad_row("tap", rows, data.index, "expected 'on' or 'off'")
            is_off = (norm == "off")[codes]
            parts.append((0, ~is_off, time_col, loc_col))
            parts.append((1, is_off, time_col, loc_col))
        else:
            parts.append((0, every, time_col, loc_col))
    else:
        raise InputError(
            "expected trips (on_time, on_stop, ...), taps (time, stop_id, ...) "
            "or sequences (seq_id, pos, location)"
        )
    unit_codes = None
    if unit_column is not None:
        if data[unit_column].isna().any():
            raise _bad_row(unit_column, data[unit_column].isna().to_numpy(), data.index, "empty")
        unit_codes = _factor(data[unit_column])[0]
    mode = _factor(data["mode"].fillna("")) if "mode" in data else None
    factored: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    timed: dict[str | None, tuple[np.ndarray, np.ndarray]] = {}
    sides, modes, days, minutes, locs, units = [], [], [], [], [], []
    for side, mask, time_col, loc_col in parts:
        if loc_col not in factored:
            missing = data[loc_col].isna().to_numpy() & mask
            if missing.any():
                raise _bad_row(loc_col, missing, data.index, "missing location")
            factored[loc_col] = _factor(data[loc_col])
        if time_col is None:
            minute = np.full(int(mask.sum()), -1, dtype=np.int32)
            day = np.full(int(mask.sum()), _NO_DAY, dtype=np.int64)
            if date_col is not None:
                frame = data.loc[mask, [date_col]].assign(_t="00:00")
                day = _parse_times(frame, "_t", date_col, timezone)[1]
        elif mask is every or mask.all() or time_col in timed:
            if time_col not in timed:
                cols = [time_col] + ([date_col] if date_col else [])
                timed[time_col] = _parse_times(data[cols], time_col, date_col, timezone)
            minute, day = (a[mask] for a in timed[time_col])
        else:
            cols = [time_col] + ([date_col] if date_col else [])
            minute, day = _parse_times(data.loc[mask, cols], time_col, date_col, timezone)
        codes, labels = factored[loc_col]
        sides.append(np.full(minute.size, side, dtype=np.int8))
        modes.append(np.zeros(minute.size, np.int64) if mode is None else mode[0][mask])
        days.append(day)
        minutes.append(minute)
        locs.append((codes[mask], labels))
        if unit_codes is not None:
            units.append(unit_codes[mask])
    if sum(s.size for s in sides) == 0:
        raise InputError("no records")
    loc_codes, loc_cats = _merge_codes(locs)
    return _Events(
        side=np.concatenate(sides),
        mode=np.concatenate(modes),
        day=np.concatenate(days),
        minute=np.concatenate(minutes),
        location=loc_codes,
        unit=None if unit_codes is None else np.concatenate(units).astype(np.int64),
        modes=np.array(["all"], dtype=object) if mode is None else mode[1],
        locations=loc_cats,
        kind=kind,
        sides=tuple(sorted({side for side, *_ in parts})),
    )


def _day_label(day: int) -> str:
    return "all" if day == _NO_DAY else str(np.datetime64(int(day), "D"))


def _day_number(label: str) -> np.int64:
    if label == "all":
        return _NO_DAY
    try:
        return np.int64(np.datetime64(pd.Timestamp(label).date(), "D").astype(np.int64))
    except ValueError:
        raise ConfigError(f"days: {label!r} is not an ISO 8601 date") from None


# --------------------------------------------------------------------------- Opal pipeline
@dataclass
class _Grid:
    """The cells of every table: partitions (mode x day), time bins, locations, and labels."""

    modes: list[str]
    days: list[int]
    bins: int
    bin_minutes: int
    locations: list[str]
    public_partitions: bool
    public_locations: bool

    @property
    def partitions(self) -> int:
        return len(self.modes) * len(self.days)

    def size(self, table: str) -> int:
        dims = _TABLE_DIMS[table]
        return (
            self.partitions
            * (self.bins if "time" in dims else 1)
            * (len(self.locations) if "location" in dims else 1)
        )

    def frame(self, table: str, keys: np.ndarray, values: np.ndarray) -> pd.DataFrame:
        """Decode sorted cell keys into the table's columns (lexicographic order is key order)."""
        dims = _TABLE_DIMS[table]
        rest = keys
        cols: dict[str, Any] = {}
        if "location" in dims:
            rest, loc = np.divmod(rest, len(self.locations))
            cols["location"] = np.asarray(self.locations, dtype=object)[loc]
        if "time" in dims:
            rest, b = np.divmod(rest, self.bins)
            cols["time"] = _MINUTE_LABELS[b * self.bin_minutes]
        mode, day = np.divmod(rest, len(self.days))
        out = pd.DataFrame(
            {
                "mode": np.asarray(self.modes, dtype=object)[mode],
                "day": np.asarray([_day_label(d) for d in self.days], dtype=object)[day],
            }
        )
        for dim in ("time", "location"):
            if dim in cols:
                out[dim] = cols[dim]
        out = out.astype({c: str for c in out.columns})  # same dtype when empty
        out["count"] = np.asarray(values, dtype=np.int64)
        return out


def _table_keys(
    events: _Events, part: np.ndarray, loc: np.ndarray, grid: _Grid, side: int
) -> dict[str, np.ndarray]:
    """Cell keys of the three tables of one side (partition-major, then time bin, then location)."""
    mask = events.side == side
    p, t, lo = part[mask], events.minute[mask] // grid.bin_minutes, loc[mask]
    name = "on" if side == 0 else "off"
    keys = {f"{name}_location": p * len(grid.locations) + lo}
    if (t >= 0).all():
        pt = p * grid.bins + t
        keys[f"{name}_time"] = pt
        keys[f"{name}_time_location"] = pt * len(grid.locations) + lo
    return keys


def _sum_to(
    table: str, keys: np.ndarray, values: np.ndarray, grid: _Grid
) -> tuple[np.ndarray, np.ndarray]:
    """One-way table derived from a released time x location table (post-processing, 001 s. 4)."""
    n_loc = len(grid.locations)
    if _TABLE_DIMS[table] == ("time",):
        target = keys // n_loc
    else:
        target = (keys // (grid.bins * n_loc)) * n_loc + keys % n_loc
    uniq, inverse = np.unique(target, return_inverse=True)
    return uniq, np.bincount(inverse, weights=values, minlength=uniq.size).astype(np.int64)


class OpalRelease:
    """The Opal marginal release of 000 section 4.1, with the fixes of 001 as modes.

    Parameters (keyword-only): ``epsilon`` and ``delta`` are the totals per (mode, day) partition
    for a row unit (a row lies in one partition: parallel composition, 000 Theorem 7) and of the
    whole release for a card unit (a card may tap in several partitions, so each table is one
    histogram over every partition's cells and a card's events are bounded across all of them),
    split over the six tables :data:`TABLES` in proportion to ``split`` (epsilon) and equally
    (delta): the defaults reproduce 000 section 4.2 (epsilons 1,1,1,1,2,2; ``delta_j = 1/8e6``).
    ``mode``: ``"sbh"`` (Algorithm 1 per table), ``"consistent"`` (only the two time x location
    tables are released, each with the budget of itself and its two one-way tables; the one-way
    tables are their sums) or ``"pure"`` (every public-domain cell perturbed, pure epsilon-DP; needs
    ``taxonomy``, ``modes`` and ``days``). ``bin_minutes`` divides 1440. ``taxonomy``/``level``:
    locations are collapsed to that level (default: the leaves, as given). ``modes``/``days``: the
    public partition domain (rows outside are dropped); without them the partitions are those
    present in the data, which the manifest then does not list. ``privacy_unit``: ``None`` (a row,
    a trip or a tap, as in 000) or the card column, each card keeping its first
    ``max_contributions`` events (by time) per side (tap-on, tap-off) over all partitions.
    ``random_state``: ``None`` (secure), an int (reproducible, NOT private) or a noise source.
    ``engine`` (``"auto"``, the default: memory for frames and small files, DuckDB for large
    files; ``"memory"``, ``"duckdb"``, ``"spark"``) and ``engine_options``: where the bounding
    and the cell counts run (:mod:`synth.engines`); the noise is drawn here on the collected counts.
    ``on_unknown``: events at a location that is not a leaf of ``taxonomy`` fail the fit
    (``"error"``) or are dropped (``"drop"``, a per-event rule against the public taxonomy).
    ``timezone``: times are read per value as the wall clock as written (default), or converted
    to this IANA zone (:mod:`synth.times`); a public setting.

    Fitted: ``tables_`` (name -> DataFrame ``mode, day[, time][, location], count``),
    ``calibrations_`` (name -> :class:`SBHCalibration` of the noise each table carries),
    ``ledger_`` (the :class:`PrivacyLedger`), ``partitions_`` (public partition labels or ``None``).
    """

    def __init__(
        self,
        *,
        epsilon: float = 8.0,
        delta: float = 6 / 8_000_000,
        split: Sequence[float] = DEFAULT_SPLIT,
        mode: Mode = "sbh",
        bin_minutes: int = 15,
        taxonomy: Taxonomy | None = None,
        level: int | None = None,
        modes: Sequence[str] | None = None,
        days: Sequence[str] | None = None,
        privacy_unit: str | None = None,
        max_contributions: int = 1,
        random_state: int | NoiseSource | None = None,
        engine: str = "auto",
        engine_options: Mapping[str, Any] | None = None,
        on_unknown: Literal["error", "drop"] = "error",
        timezone: str | None = None,
    ) -> None:
        self.on_unknown = on_unknown
        self.timezone = timezone
        self.engine = engine
        self.engine_options = engine_options
        self.epsilon = epsilon
        self.delta = delta
        self.split = split
        self.mode = mode
        self.bin_minutes = bin_minutes
        self.taxonomy = taxonomy
        self.level = level
        self.modes = modes
        self.days = days
        self.privacy_unit = privacy_unit
        self.max_contributions = max_contributions
        self.random_state = random_state

    # ------------------------------------------------------------------ parameters
    def _table_budgets(self) -> dict[str, tuple[Fraction, Fraction]]:
        """(epsilon, delta) of each released (noised) table."""
        eps, dlt = check_budget(self.epsilon, self.delta, need_delta=self.mode != "pure")
        weights = [exact(w, "split") for w in self.split]
        if len(weights) != len(TABLES) or any(w <= 0 for w in weights):
            raise ConfigError(f"split must be {len(TABLES)} positive numbers, one per table")
        total = sum(weights, Fraction(0))
        budgets = {
            t: (eps * w / total, dlt / len(TABLES)) for t, w in zip(TABLES, weights, strict=True)
        }
        if self.mode != "consistent":
            return budgets
        out = {}
        for side in ("on", "off"):
            names = (f"{side}_time", f"{side}_location", f"{side}_time_location")
            out[names[2]] = (
                sum((budgets[n][0] for n in names), Fraction(0)),
                sum((budgets[n][1] for n in names), Fraction(0)),
            )
        return out

    def _check(self) -> None:
        check_engine(self.engine, self.engine_options)
        if self.on_unknown not in ("error", "drop"):
            raise ConfigError(f"on_unknown must be 'error' or 'drop', got {self.on_unknown!r}")
        check_timezone(self.timezone)
        if self.mode not in ("sbh", "consistent", "pure"):
            raise ConfigError(f"mode must be 'sbh', 'consistent' or 'pure', got {self.mode!r}")
        b = self.bin_minutes
        if isinstance(b, bool) or not isinstance(b, int | np.integer) or b < 1 or 1440 % b:
            raise ConfigError(
                f"bin_minutes must be a whole number of minutes dividing 1440, got {b!r}"
            )
        if self.level is not None:
            if self.taxonomy is None:
                raise ConfigError("level needs a taxonomy")
            if (
                not isinstance(self.level, int | np.integer)
                or not 0 <= self.level <= self.taxonomy.height
            ):
                raise ConfigError(
                    f"level must be in [0, {self.taxonomy.height}], got {self.level!r}"
                )
        if self.mode == "pure":
            missing = [n for n in ("taxonomy", "modes", "days") if getattr(self, n) is None]
            if missing:
                raise ConfigError(
                    "pure mode perturbs every cell of the public domain and needs "
                    + ", ".join(missing)
                )

    # ------------------------------------------------------------------ fit
    def _label_grid(
        self, mode_labels: Sequence[str], days_present: np.ndarray, loc_labels: Sequence[str]
    ) -> tuple[_Grid, np.ndarray, np.ndarray, np.ndarray]:
        """The cell grid, and the code of each mode label, present day and location label
        (-1: outside the public partitions)."""
        if self.modes is not None:
            modes = sorted({str(m) for m in self.modes})
            mode_code = pd.Index(modes).get_indexer(pd.Index(list(mode_labels)))
        else:
            modes = [str(m) for m in mode_labels]
            mode_code = np.arange(len(modes))
        if self.days is not None:
            days = sorted({int(_day_number(str(d))) for d in self.days})
            day_code = pd.Index(days).get_indexer(pd.Index(days_present))
        else:
            days = [int(d) for d in days_present]
            day_code = np.arange(len(days))
        raw = [str(x) for x in loc_labels]
        if self.taxonomy is not None:
            tax = self.taxonomy
            unknown = tax.unknown(raw)
            if unknown and self.on_unknown != "drop":
                raise InputError(
                    f"location '{unknown[0]}' is not a leaf of the taxonomy {tax.source} "
                    f"({len(unknown)} distinct unknown locations; on_unknown='drop' drops them)"
                )
            if unknown:
                warnings.warn(
                    f"dropped the events at {len(unknown)} distinct locations not in the "
                    f"taxonomy {tax.source} (e.g. '{unknown[0]}')",
                    UnknownLocationWarning,
                    stacklevel=4,
                )
            level = tax.height if self.level is None else int(self.level)
            gen_map = tax.generalization_map(level)
            domain = sorted(set(gen_map.values()))
            loc_code = pd.Index(domain).get_indexer(  # -1 (dropped): not in the taxonomy
                pd.Index([gen_map.get(x, "\0unknown") for x in raw])
            )
        else:
            domain, loc_code = raw, np.arange(len(raw))
        grid = _Grid(
            modes=modes,
            days=days,
            bins=1440 // int(self.bin_minutes),
            bin_minutes=int(self.bin_minutes),
            locations=domain,
            public_partitions=self.modes is not None and self.days is not None,
            public_locations=self.taxonomy is not None,
        )
        return (
            grid,
            np.asarray(mode_code, dtype=np.int64),
            np.asarray(day_code, dtype=np.int64),
            np.asarray(loc_code, dtype=np.int64),
        )

    def _grid(self, events: _Events) -> tuple[_Grid, np.ndarray, np.ndarray, np.ndarray]:
        """The cell grid, and per event: partition code, location code, kept mask."""
        days_present, day_index = np.unique(events.day, return_inverse=True)
        grid, mode_map, day_map, loc_map = self._label_grid(
            list(events.modes), days_present, list(events.locations)
        )
        mode_code, day_code = mode_map[events.mode], day_map[day_index]
        location = loc_map[events.location]
        keep = (mode_code >= 0) & (day_code >= 0) & (location >= 0)
        part = np.where(keep, mode_code, 0) * len(grid.days) + np.where(keep, day_code, 0)
        return grid, part.astype(np.int64), location, keep

    def fit(
        self,
        data: pd.DataFrame | str | os.PathLike[str],
        *,
        location_column: str = "stop_id",
    ) -> OpalRelease:
        """Count the tables, record the spends in the ledger, then draw the noise.

        ``data`` is a frame of trips, taps or sequences, or a trips/taps file: the DuckDB engine
        reads the usual layouts itself (out of core); otherwise the file is loaded as
        ``transit-synth marginals`` does (``location_column``: the taps' location column).
        """
        self._check()
        budgets = self._table_budgets()
        pure = self.mode == "pure"
        cals = {
            name: calibrate(
                eps,
                dlt,
                privacy_unit=self.privacy_unit,
                max_contributions=self.max_contributions,
                pure=pure,
            )
            for name, (eps, dlt) in budgets.items()
        }
        k = None if self.privacy_unit is None else int(self.max_contributions)
        counted: dict[str, tuple[np.ndarray, np.ndarray]]
        # the counting steps (bounding each card among the events of the public partitions, then
        # the cells of every table) run on the engine; the noise is drawn below, on its counts
        with get_engine(self.engine, self.engine_options, data) as engine:
            scan = None
            if not isinstance(data, pd.DataFrame):
                if self.timezone is None:  # engines read times as written only
                    scan = engine.sbh_scan(
                        data, location_column=location_column, unit_column=self.privacy_unit
                    )
                if scan is None:
                    from synth.sbh_cli import _load

                    data = _load(Path(data), location_column, self.timezone)
            if scan is not None:
                grid, mode_code, day_code, loc_code = self._label_grid(
                    scan.modes, np.asarray(scan.days, dtype=np.int64), scan.locations
                )
                counted = scan.counts(
                    mode_code,
                    day_code,
                    loc_code,
                    n_days=len(grid.days),
                    tables=list(cals),
                    n_locations=len(grid.locations),
                    n_bins=grid.bins,
                    bin_minutes=grid.bin_minutes,
                    max_contributions=k,
                )
                kind = scan.kind
            else:
                assert isinstance(data, pd.DataFrame)
                events = _read_events(data, unit_column=self.privacy_unit, timezone=self.timezone)
                grid, part, loc, keep = self._grid(events)
                if (events.minute[keep] < 0).any():
                    raise InputError(
                        "the release needs tap times (a 'time', 'on_time' or 'off_time' column)"
                    )
                counted = engine.sbh_counts(
                    SBHEvents(
                        side=events.side[keep],
                        part=part[keep],
                        minute=events.minute[keep],
                        location=loc[keep],
                        unit=None if events.unit is None else events.unit[keep],
                    ),
                    list(cals),
                    n_locations=len(grid.locations),
                    n_bins=grid.bins,
                    bin_minutes=grid.bin_minutes,
                    max_contributions=k,
                )
                kind = events.kind
        noise = noise_source(self.random_state, methods=NOISE_METHODS)
        ledger = self._ledger(cals, kind, grid, bool(getattr(noise, "seeded", False)))
        released = {
            name: _noisy_cells(
                counted[name][0],
                counted[name][1],
                cals[name],
                noise,
                grid.size(name) if pure else None,
            )
            for name in cals
        }
        if self.mode == "consistent":
            for side in ("on", "off"):
                two_way = released[f"{side}_time_location"]
                for one in (f"{side}_time", f"{side}_location"):
                    released[one] = _sum_to(one, *two_way, grid)
        self.tables_ = {name: grid.frame(name, *released[name]) for name in TABLES}
        self.calibrations_ = cals
        self.ledger_ = ledger
        self.grid_ = grid
        self.row_kind_ = kind
        self.partitions_ = (
            [f"{m} {_day_label(d)}" for m in grid.modes for d in grid.days]
            if grid.public_partitions
            else None
        )
        return self

    def _ledger(
        self, cals: dict[str, SBHCalibration], kind: str, grid: _Grid, seeded: bool
    ) -> PrivacyLedger:
        """The release's ledger.

        Row unit: one sequential branch per partition in a parallel group (000 Theorem 7: a row
        lies in exactly one partition). Card unit: the six tables in sequence, each one histogram
        over the cells of every partition, since a card may appear in several partitions.
        """
        eps = sum((c.epsilon for c in cals.values()), Fraction(0))
        dlt = sum((c.delta for c in cals.values()), Fraction(0))
        derived = (
            "; the one-way tables of this side are its sums (post-processing)"
            if self.mode == "consistent"
            else ""
        )
        if self.privacy_unit is not None:
            unit = str(self.privacy_unit)
            neighbouring = (
                f"add or remove one {unit}'s records (at most {self.max_contributions} "
                "per side kept over all partitions, first by time)"
            )
            ledger = PrivacyLedger(epsilon=eps, delta=dlt, unit=unit, neighbouring=neighbouring)
            scope = "one histogram over the cells of every (mode, day) partition"
            for name, cal in cals.items():
                note = scope + (derived if name.endswith("time_location") else "")
                _record(ledger, name, cal, note, seeded=seeded)
            return ledger
        unit, neighbouring = kind, f"replace one {kind} by another (000 Theorem 5)"
        ledger = PrivacyLedger(epsilon=eps, delta=dlt, unit=unit, neighbouring=neighbouring)
        # Every partition spends the same, so when the partitions come from the data one branch
        # stands for all of them at the same cost (listing them would leak which exist).
        if not grid.public_partitions:
            labels = ["each (mode, day) partition (not listed: derived from the data)"]
        else:
            labels = [f"{m} {_day_label(d)}" for m in grid.modes for d in grid.days]
        with ledger.parallel(
            "mode x day partitions", disjoint_by=f"each {kind} lies in exactly one (mode, day)"
        ) as par:
            for label in labels:
                branch = par.branch(label)
                for name, cal in cals.items():
                    note = derived if name.endswith("time_location") else ""
                    _record(branch, name, cal, note, seeded=seeded)
        return ledger

    # ------------------------------------------------------------------ outputs
    def release(self) -> dict[str, pd.DataFrame]:
        """The six tables (post-processing of the fitted release; copies)."""
        self._fitted()
        return {name: df.copy() for name, df in self.tables_.items()}

    def _fitted(self) -> None:
        if not hasattr(self, "tables_"):
            raise ConfigError("this OpalRelease is not fitted yet: call fit(data) first")

    def error_bounds(self, beta: float = 0.05) -> dict[str, dict[str, Any]]:
        """Per table: calibration, per-cell error bound at ``beta`` (000 Theorem 6) and provenance.

        A table derived by summing (consistent mode) reports the bound of one two-way cell and
        ``derived_from``; its cells sum ``terms`` such cells (``None``: the location domain is not
        public, so the number of terms is that of the locations compared).
        """
        self._fitted()
        out: dict[str, dict[str, Any]] = {}
        for name in TABLES:
            if name in self.calibrations_:
                out[name] = {**self.calibrations_[name].to_dict(beta), "derived_from": None}
                continue
            side = name.split("_")[0]
            source = f"{side}_time_location"
            terms = (
                self.grid_.bins
                if name.endswith("location")
                else (len(self.grid_.locations) if self.grid_.public_locations else None)
            )
            out[name] = {
                **self.calibrations_[source].to_dict(beta),
                "derived_from": source,
                "terms": terms,
            }
        return out

    def parameters(self) -> dict[str, Any]:
        """The release parameters recorded in the manifest (all public)."""
        self._fitted()
        tax = self.taxonomy
        return {
            "release": "opal-marginals",
            "mode": self.mode,
            "epsilon_per_partition": float(exact(self.epsilon, "epsilon")),
            "delta_per_partition": float(exact(self.delta, "delta")),
            "budget_scope": (
                "each (mode, day) partition (parallel composition over rows)"
                if self.privacy_unit is None
                else "the whole release (a card may appear in several partitions)"
            ),
            "split": [float(w) for w in self.split],
            "bin_minutes": int(self.bin_minutes),
            "taxonomy": None if tax is None else tax.source,
            **taxonomy_note(tax),
            **({"on_unknown": "drop"} if self.on_unknown == "drop" else {}),
            "level": None if tax is None else (tax.height if self.level is None else self.level),
            "modes": None if self.modes is None else sorted(str(m) for m in self.modes),
            "days": None if self.days is None else [_day_label(d) for d in self.grid_.days],
            "privacy_unit": self.privacy_unit or self.row_kind_,
            "max_contributions": int(self.max_contributions),
            "timezone": self.timezone or "wall clock as written",
            "tables": self.error_bounds(),
        }

    def save(
        self,
        out_dir: str | os.PathLike[str],
        *,
        format: Literal["csv", "parquet"] = "csv",
        public_inputs: Mapping[str, str | os.PathLike[str]] | None = None,
    ) -> Path:
        """Write one file per table and ``manifest.json`` atomically (``synth.io.release_dir``);
        ``public_inputs`` (role -> file, e.g. the taxonomy) are fingerprinted in the manifest,
        nothing of the private input is."""
        from synth.io import release_dir, write_table

        self._fitted()
        if format not in ("csv", "parquet"):
            raise ConfigError(f"format must be 'csv' or 'parquet', got {format!r}")
        with release_dir(out_dir) as stage:
            for name, df in self.tables_.items():
                write_table(df, stage / f"{name}.{format}")
            self.ledger_.to_json(
                stage / "manifest.json",
                parameters=self.parameters(),
                public_inputs=public_inputs,
            )
        return Path(out_dir)


def marginal_tables(
    data: pd.DataFrame,
    *,
    bin_minutes: int = 15,
    taxonomy: Taxonomy | None = None,
    level: int | None = None,
    timezone: str | None = None,
) -> dict[str, pd.DataFrame]:
    """The exact (NOT private) tables of the release, in its format, for trips, taps or sequences.

    What :func:`synth.evaluate.against_reference` compares. Time tables are absent when the data has
    no times, off tables when it has no tap-offs.
    """
    spec = OpalRelease(bin_minutes=bin_minutes, taxonomy=taxonomy, level=level)
    spec._check()
    events = _read_events(data, unit_column=None, timezone=check_timezone(timezone))
    grid, part, loc, _ = spec._grid(events)
    keys: dict[str, np.ndarray] = {}
    for side in events.sides:
        keys.update(_table_keys(events, part, loc, grid, side))
    return {
        name: grid.frame(name, *_count(keys[name], grid.size(name)))
        for name in TABLES
        if name in keys
    }
