"""Marginal metrics of trip tables (NIST temporal map challenge scoring, docs/design.md section 6).

Both tables are first discretised on a common domain (:func:`discretise`): categorical columns keep
their values, numeric columns with many distinct values get equal-width bins over the original's
range, timestamps become hours of the day. Then:

- total variation distance ``TV = 0.5 * sum |p - q|`` over the union of cells, for every one- and
  two-way marginal (:func:`marginal_tvd`);
- the challenge's k-marginal score: ``(1 - mean TV) * 1000`` over 50 random column pairs drawn with
a
  fixed seed (:func:`k_marginal_score`);
- the origin-destination matrix error per time bin (:func:`od_error`), and the distributions of trip
  counts per individual (:func:`trips_per_individual`) and of the time of day (:func:`time_of_day`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.times import clock_parts, wall_clock_times

__all__ = [
    "discretise",
    "k_marginal_score",
    "marginal_tv",
    "marginal_tvd",
    "od_error",
    "time_axis",
    "time_of_day",
    "trips_per_individual",
]

MISSING = "<missing>"


def _check_schema(original: pd.DataFrame, synthetic: pd.DataFrame, columns: Sequence[str]) -> None:
    lacking = [c for c in columns if c not in synthetic.columns]
    extra = [c for c in columns if c not in original.columns]
    if lacking or extra:
        parts = []
        if lacking:
            parts.append(f"synthetic table lacks column(s) {', '.join(map(str, lacking))}")
        if extra:
            parts.append(f"original table lacks column(s) {', '.join(map(str, extra))}")
        raise InputError("schemas differ: " + "; ".join(parts))


def _as_hours(values: pd.Series) -> pd.Series | None:
    """Hour of day (0-23) of a datetime or ISO-timestamp column; ``None`` if it is neither.

    Strings count as timestamps only when every present value has a time part (``HH:MM``).
    """
    if pd.api.types.is_datetime64_any_dtype(values):
        return values.dt.hour
    present = values.dropna()
    if (values.dtype == object or pd.api.types.is_string_dtype(values)) and (
        len(present) and present.astype(str).str.contains(":", regex=False).all()
    ):
        # each value on its own (synth.times): a clock time HH:MM or a timestamp's wall clock
        clock = clock_parts(present)["hour"]
        stamps = wall_clock_times(present[clock.isna()]).dt.hour
        if stamps.notna().all():
            hours = (clock.fillna(stamps) % 24).reindex(values.index)
            return hours if hours.isna().any() else hours.astype(np.int32)  # as Series.dt.hour
    return None


def discretise(
    original: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    columns: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    n_bins: int = 10,
    max_categories: int = 50,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Integer cell codes ``(n_rows, n_columns)`` of both tables on a common domain, and the
    columns.

    ``columns`` defaults to the original's columns minus ``exclude``; both tables must have them
    (else :class:`InputError`). Timestamps become hour of day; numeric columns with more than
    ``max_categories`` distinct original values are cut into ``n_bins`` equal-width bins over the
    original's range (values outside go to the end bins); everything else is categorical. Missing
    values form their own cell.
    """
    if n_bins < 1 or max_categories < 1:
        raise ConfigError("n_bins and max_categories must be positive")
    cols = [c for c in (original.columns if columns is None else columns) if c not in set(exclude)]
    if not cols:
        raise InputError("no columns left to compare")
    _check_schema(original, synthetic, cols)
    out_o = np.empty((len(original), len(cols)), dtype=np.int64)
    out_s = np.empty((len(synthetic), len(cols)), dtype=np.int64)
    for j, col in enumerate(cols):
        a, b = original[col], synthetic[col]
        hours_a, hours_b = _as_hours(a), _as_hours(b)
        if hours_a is not None and hours_b is not None:
            a, b = hours_a, hours_b
        numeric = [
            pd.api.types.is_numeric_dtype(v) and not pd.api.types.is_bool_dtype(v) for v in (a, b)
        ]
        if all(numeric):  # one label per value whether a column came out int or float
            a, b = a.astype(float), b.astype(float)
            if a.nunique() > max_categories:
                edges = np.linspace(float(a.min()), float(a.max()), n_bins + 1)[1:-1]
                a, b = (
                    pd.Series(
                        np.searchsorted(edges, v, side="right"), index=v.index, dtype=float
                    ).where(v.notna())
                    for v in (a, b)
                )
        labels_a = a.astype(str).where(a.notna(), MISSING)
        labels_b = b.astype(str).where(b.notna(), MISSING)
        cats = pd.Index(pd.concat([labels_a, labels_b]).unique())
        out_o[:, j] = cats.get_indexer(labels_a)
        out_s[:, j] = cats.get_indexer(labels_b)
    return out_o, out_s, cols


def marginal_tv(original: np.ndarray, synthetic: np.ndarray) -> float:
    """TV distance ``0.5 * sum |p - q|`` of the joint distributions of two code arrays ``(n, c)``.

    Cells are the union of the cells present in either table.
    """
    if original.shape[0] == 0 or synthetic.shape[0] == 0:
        raise InputError("cannot compare marginals of an empty table")
    both = np.concatenate([np.atleast_2d(original.T).T, np.atleast_2d(synthetic.T).T])
    cell = np.zeros(len(both), dtype=np.int64)
    n_cells = 1
    for col in both.T:  # mixed-radix cell key, re-numbered densely after each column
        cell = cell * (int(col.max()) + 1) + col
        _, cell = np.unique(cell, return_inverse=True)
        n_cells = int(cell.max()) + 1
    p = np.bincount(cell[: len(original)], minlength=n_cells) / len(original)
    q = np.bincount(cell[len(original) :], minlength=n_cells) / len(synthetic)
    return float(0.5 * np.abs(p - q).sum())


def marginal_tvd(
    original: np.ndarray, synthetic: np.ndarray, columns: Sequence[str]
) -> dict[str, Any]:
    """TV distance of every one-way and two-way marginal of discretised tables."""
    one = {c: marginal_tv(original[:, [j]], synthetic[:, [j]]) for j, c in enumerate(columns)}
    two = {
        f"{columns[i]} x {columns[j]}": marginal_tv(original[:, [i, j]], synthetic[:, [i, j]])
        for i, j in itertools.combinations(range(len(columns)), 2)
    }
    return {
        "one_way": one,
        "two_way": two,
        "mean_one_way": float(np.mean(list(one.values()))),
        "mean_two_way": float(np.mean(list(two.values()))) if two else None,
        "max_two_way": float(max(two.values())) if two else None,
    }


def k_marginal_score(
    original: np.ndarray,
    synthetic: np.ndarray,
    columns: Sequence[str],
    *,
    k: int = 2,
    n_marginals: int = 50,
    seed: int = 0,
) -> dict[str, Any]:
    """The temporal map challenge score ``(1 - mean TV) * 1000`` over random k-column marginals.

    ``n_marginals`` column sets of size ``k`` are drawn independently (each without repetition) with
    ``numpy.random.default_rng(seed)``; 1000 means every sampled marginal matches exactly.
    """
    n_cols = len(columns)
    if not 1 <= k <= n_cols or n_marginals < 1:
        raise ConfigError(f"k-marginal score: need 1 <= k <= {n_cols} columns and n_marginals >= 1")
    rng = np.random.default_rng(seed)
    picks = [np.sort(rng.choice(n_cols, size=k, replace=False)) for _ in range(n_marginals)]
    tvs = [marginal_tv(original[:, p], synthetic[:, p]) for p in picks]
    return {
        "score": float((1.0 - np.mean(tvs)) * 1000.0),
        "k": k,
        "seed": seed,
        "marginals": [
            {"columns": [columns[i] for i in p], "tv": tv} for p, tv in zip(picks, tvs, strict=True)
        ],
    }


def _hour_of_day(values: pd.Series, name: str) -> pd.Series:
    hours = _as_hours(values)
    if hours is None:
        if not pd.api.types.is_numeric_dtype(values):
            raise InputError(f"column {name}: expected timestamps or hours of day")
        hours = values
    return hours


def _histogram_tv(a: pd.Series, b: pd.Series) -> dict[str, Any]:
    pa = a.value_counts(normalize=True)
    pb = b.value_counts(normalize=True)
    cells = pa.index.union(pb.index).sort_values()
    pa, pb = pa.reindex(cells, fill_value=0.0), pb.reindex(cells, fill_value=0.0)
    return {
        "values": [v.item() if hasattr(v, "item") else v for v in cells],
        "original": pa.tolist(),
        "synthetic": pb.tolist(),
        "tv": float(0.5 * np.abs(pa.to_numpy() - pb.to_numpy()).sum()),
    }


def trips_per_individual(
    original: pd.DataFrame, synthetic: pd.DataFrame, *, id_column: str = "card_id"
) -> dict[str, Any]:
    """Distribution of the number of trips per individual in both tables, and its TV distance."""
    _check_schema(original, synthetic, [id_column])
    return _histogram_tv(original.groupby(id_column).size(), synthetic.groupby(id_column).size())


def time_of_day(
    original: pd.DataFrame, synthetic: pd.DataFrame, *, time_column: str = "on_time"
) -> dict[str, Any]:
    """Distribution of trips over the hours of the day (timestamps, or numbers read as hours)."""
    _check_schema(original, synthetic, [time_column])
    result = _histogram_tv(
        _hour_of_day(original[time_column], time_column).dropna().astype(int),
        _hour_of_day(synthetic[time_column], time_column).dropna().astype(int),
    )
    return {**result, **time_axis(original[time_column], time_column)}


def time_axis(values: pd.Series, column: str) -> dict[str, Any]:
    """How a time column is read: ``column``, ``from_timestamps`` and the axis ``label`` of plots.

    Timestamps give the hour of day; a numeric column (a shift number, an hour) is used as given
    and labelled with its own name.
    """
    stamps = _as_hours(values) is not None
    label = f"hour of day (from {column})" if stamps else column
    return {"column": column, "from_timestamps": stamps, "label": label}


def od_error(
    original: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    origin: str = "on_stop",
    destination: str = "off_stop",
    time_column: str = "on_time",
    bin_hours: int = 1,
) -> list[dict[str, Any]]:
    """Origin-destination matrix error per time-of-day bin of ``bin_hours`` hours.

    Per bin: the trip counts of both tables, the TV distance between the two OD distributions of
    the bin, and the relative L1 error of the counts ``sum |s - o| / sum o`` over the union of OD
    cells.
    """
    if not 1 <= bin_hours <= 24:
        raise ConfigError("bin_hours must be between 1 and 24")
    _check_schema(original, synthetic, [origin, destination, time_column])

    def counts(df: pd.DataFrame) -> pd.Series:
        bins = (_hour_of_day(df[time_column], time_column) // bin_hours).rename("bin")
        keys = [bins, df[origin].astype(str), df[destination].astype(str)]
        return df.groupby(keys, dropna=True).size()

    co, cs = counts(original), counts(synthetic)
    cells = co.index.union(cs.index)
    co, cs = co.reindex(cells, fill_value=0), cs.reindex(cells, fill_value=0)
    rows = []
    for b in sorted(cells.get_level_values(0).unique()):
        o, s = co.xs(b, level=0).to_numpy(float), cs.xs(b, level=0).to_numpy(float)
        tv = 0.5 * np.abs(o / o.sum() - s / s.sum()).sum() if o.sum() and s.sum() else 1.0
        rows.append(
            {
                "bin_start_hour": int(b) * bin_hours,
                "original_trips": int(o.sum()),
                "synthetic_trips": int(s.sum()),
                "tv": float(tv),
                "relative_l1": float(np.abs(s - o).sum() / o.sum()) if o.sum() else None,
            }
        )
    return rows
