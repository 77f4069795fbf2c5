"""Reference check: synthetic microdata against an SBH marginal release of the private data.

The SBH release (:class:`synth.marginals.opal.OpalMarginals`) is the reference output
(docs/design.md section 5): its cells are within a known per-cell error bound of the true counts
with probability ``1 - beta`` (Asghar et al. 2018, Theorem 6, made exact in
:meth:`synth.marginals.sbh_calibration.SBHCalibration.error_bound`). A synthetic dataset whose
recomputed table differs from the release by more than that bound in a cell disagrees with the
private data there (up to the ``beta`` chance that the release itself is off).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from synth import registry
from synth.errors import ConfigError, InputError
from synth.io import read_json, read_table
from synth.marginals import TABLES, OpalMarginals, SBHCalibration, marginal_tables
from synth.taxonomy import Taxonomy

__all__ = ["MAX_ONE_WAY_TVD", "MIN_WITHIN", "against_reference"]

_KEYS = ("mode", "day", "time", "location")
_CAL_FIELDS = ("epsilon", "delta", "scale", "threshold", "unit", "l0", "l1", "linf", "pure")


def _load(
    release: OpalMarginals | str | os.PathLike[str], taxonomy: Taxonomy | None
) -> tuple[dict[str, pd.DataFrame], dict[str, Any], Taxonomy | None]:
    """Tables, parameters and taxonomy of a fitted release or of a release directory."""
    if isinstance(release, OpalMarginals):
        return release.release(), release.parameters(), taxonomy or release.taxonomy
    path = Path(release)
    manifest = path / "manifest.json"
    if not manifest.is_file():
        raise InputError(f"{path}: not a release directory (no manifest.json)")
    try:
        content = read_json(manifest)
    except (OSError, ValueError) as exc:
        raise InputError(f"{manifest}: not a readable JSON manifest ({exc})") from exc
    content = content if isinstance(content, dict) else {}
    params = content.get("parameters") or {}
    if registry.for_manifest(content) is not registry.get("marginals"):
        raise InputError(f"{manifest}: not a marginals release")
    tables = {}
    for name in TABLES:
        files = [path / f"{name}.{ext}" for ext in ("csv", "parquet")]
        found = [f for f in files if f.is_file()]
        if not found:
            raise InputError(f"{path}: table {name} is missing")
        tables[name] = read_table(found[0], dtype={k: str for k in _KEYS})
    if taxonomy is None and params.get("taxonomy") is not None:
        spec = str(params["taxonomy"])
        if not Path(spec).exists():
            raise ConfigError(f"the release used taxonomy {spec!r}: pass it as taxonomy=")
        taxonomy = Taxonomy.from_spec(spec)
    return tables, params, taxonomy


def _collapse(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Sum a table over one partition column (post-processing), labelling it ``all``."""
    dims = [c for c in _KEYS if c in frame.columns and c != column]
    out = pd.DataFrame(frame.groupby(dims, as_index=False, sort=True)["count"].sum())
    out.insert(0, column, "all")
    return out[[c for c in _KEYS if c in frame.columns] + ["count"]]


def _tvd(a: np.ndarray, b: np.ndarray) -> float:
    """Total variation distance between the shares (normalised tables) ``a`` and ``b``."""
    sa, sb = a.sum(), b.sum()
    if sa == 0 or sb == 0:
        return float("nan") if sa == sb else 1.0
    return float(0.5 * np.abs(a / sa - b / sb).sum())


#: The pass rule of the check: at least this share of cells within the bound ...
MIN_WITHIN = 0.95
#: ... and the one-way tables' TV distance (over the release's cells) at most this.
MAX_ONE_WAY_TVD = 0.05


def _unit_column(microdata: pd.DataFrame, params: Mapping[str, Any]) -> str | None:
    """The column the release's per-unit bounding applies to in ``microdata`` (a card-unit release
    bounds its ``privacy_unit`` column; synthetic sequences are one card each, ``seq_id``)."""
    unit = params.get("privacy_unit")
    if unit is None or unit in ("tap", "trip", "sequence element", "row"):
        return None
    if unit in microdata.columns:
        return str(unit)
    return "seq_id" if "seq_id" in microdata.columns else None


def _bounded_tables(
    microdata: pd.DataFrame, params: Mapping[str, Any], tax: Taxonomy | None
) -> dict[str, pd.DataFrame]:
    """The microdata's exact tables, through the release's own steps (partitions, bins,
    location collapse and, for a card-unit release, its bounding rule: releases older than the
    ``bounding`` parameter kept the earliest events; a uniform choice is counted in
    expectation, with its variance per cell)."""
    unit = _unit_column(microdata, params)
    return marginal_tables(
        microdata,
        bin_minutes=int(params["bin_minutes"]),
        taxonomy=tax,
        level=None if tax is None else params.get("level"),
        modes=params.get("modes"),
        days=params.get("days"),
        unit_column=unit,
        max_contributions=None if unit is None else int(params.get("max_contributions", 1)),
        bounding=params.get("bounding", "earliest"),
        expected=True,
    )


def _released_share(
    merged: pd.DataFrame, dims: list[str], kept: pd.DataFrame | None
) -> tuple[np.ndarray, np.ndarray]:
    """(release, microdata) counts of the cells the release published.

    A cell the release suppressed (below its threshold) carries no share; the microdata's share is
    compared over the same cells. A one-way table derived from a two-way table (``kept``: the
    microdata two-way cells the release kept) sums only those two-way cells.
    """
    release = merged["count_release"].to_numpy(float)
    if kept is None:
        on = release > 0
        return release[on], merged["count_synthetic"].to_numpy(float)[on]
    summed = kept.groupby(dims, as_index=False, sort=True)["count"].sum()
    both = merged[[*dims, "count_release"]].merge(summed, on=dims, how="left").fillna({"count": 0})
    return both["count_release"].to_numpy(float), both["count"].to_numpy(float)


def _row(
    name: str, merged: pd.DataFrame, bound: np.ndarray, shown: tuple[np.ndarray, np.ndarray]
) -> dict[str, Any]:
    """The check of one table: ``merged`` cells (release and microdata counts), their bounds, and
    the (release, microdata) counts of the published cells."""
    release_counts = merged["count_release"].to_numpy(float)
    micro_counts = merged["count_synthetic"].to_numpy(float)
    diff = np.abs(release_counts - micro_counts)
    outside = int((diff > bound).sum())
    tvd = _tvd(*shown)
    within = 1 - outside / len(merged) if len(merged) else 1.0
    one_way = not name.endswith("time_location")
    total = micro_counts.sum()
    return {
        "table": name,
        "compared": True,
        "cells": len(merged),
        "within_bound": within,
        "tvd": tvd,
        "tvd_all": _tvd(release_counts, micro_counts),
        "coverage": float(shown[1].sum() / total) if total else float("nan"),
        "passes": bool(within >= MIN_WITHIN and (not one_way or tvd <= MAX_ONE_WAY_TVD)),
        "error_bound": float(bound.max()) if bound.size else float("nan"),
        "outside_bound": outside,
        "outside_fraction": outside / len(merged) if len(merged) else 0.0,
        "max_abs_error": float(diff.max()) if diff.size else 0.0,
        "release_total": float(release_counts.sum()),
        "microdata_total": float(total),
    }


def against_reference(
    microdata: pd.DataFrame,
    release: OpalMarginals | str | os.PathLike[str],
    *,
    beta: float = 0.05,
    taxonomy: Taxonomy | None = None,
) -> pd.DataFrame:
    """Per table: whether ``microdata`` lies within the SBH release's error bound.

    ``microdata``: synthetic trips, taps or long-format sequences (sequences are tap-ons; without
    times only the location tables are compared), or the original data (the release's own error).
    ``release``: a fitted :class:`OpalMarginals` or its directory.

    Like with like: the microdata goes through the release's own steps before its tables are
    counted: the same public partitions, bins and location collapse and, for a card-unit release,
    the same bounding (each card's ``max_contributions`` events per side, by the release's
    ``bounding`` rule; a synthetic sequence counts as one card). For ``"earliest"`` (and releases
    older than the rule) the microdata keeps each card's first events by time, as the release
    did. For ``"uniform"`` the release kept a random choice whose key is secret: the microdata is
    counted in expectation over that choice (each of a card's ``n > k`` events weighs ``k/n``)
    and each cell's bound grows by ``z sqrt(v)``, ``v`` the choice's variance in the cell
    (hypergeometric per card, summed) and ``z`` the normal quantile of ``1 - beta/2``: the
    release differs from the expectation by its noise and by its draw.
    When the microdata has no ``mode`` or no date, the release is summed over that partition
    column and the bound grows with the number of partitions summed. For a one-way table derived
    by summing (consistent mode) the bound is the two-way bound times the number of cells summed
    (the public domain size, or the locations seen in either table when it is not public).

    Returns one row per table: ``table, compared, cells, within_bound`` (share of cells whose
    difference is within the bound, at confidence ``1 - beta`` per cell), ``tvd`` (TV distance
    between the shares over the cells the release published: a suppressed cell says only "below
    the threshold", which the bound covers), ``tvd_all`` (over every cell), ``coverage`` (the
    microdata's share in published cells), ``passes`` (``within_bound >=`` :data:`MIN_WITHIN`, and
    for a one-way table ``tvd <=`` :data:`MAX_ONE_WAY_TVD`), ``error_bound`` (the largest per-cell
    bound), ``outside_bound, outside_fraction, max_abs_error, release_total, microdata_total``.
    """
    tables, params, tax = _load(release, taxonomy)
    truth = _bounded_tables(microdata, params, tax)
    z = NormalDist().inv_cdf(1 - beta / 2)
    rows: list[dict[str, Any]] = []
    kept: dict[str, pd.DataFrame] = {}
    for name in sorted(TABLES, key=lambda t: not t.endswith("time_location")):
        info = params["tables"][name]
        cal = SBHCalibration(**{k: info[k] for k in _CAL_FIELDS})
        alpha = cal.error_bound(beta)
        if name not in truth:
            rows.append({"table": name, "compared": False, "cells": 0})
            continue
        ref, syn = tables[name].copy(), truth[name]
        dims = [c for c in _KEYS if c in ref.columns]
        ref[dims] = ref[dims].astype(str)
        partitions = 1
        for col in ("mode", "day"):
            if set(syn[col]) == {"all"} and set(ref[col]) != {"all"}:
                partitions *= max(1, ref[col].nunique())
                ref = _collapse(ref, col)
        merged = ref.merge(syn, on=dims, how="outer", suffixes=("_release", "_synthetic"))
        merged = merged.fillna({"count_release": 0, "count_synthetic": 0, "variance": 0})
        if name.endswith("time_location"):
            published = merged[merged["count_release"] > 0]
            kept[name] = published[dims].assign(count=published["count_synthetic"])
        bound = np.full(len(merged), float(alpha * partitions))
        derived = info.get("derived_from")
        if derived:
            terms = info.get("terms")
            if terms is None:  # locations are not public: those seen in either two-way table
                seen = set(tables[derived]["location"].astype(str))
                seen |= set(truth[derived]["location"]) if derived in truth else set()
                terms = max(1, len(seen))
            bound *= float(terms)
        if "variance" in merged:  # the release's own uniform draw
            bound += z * np.sqrt(merged["variance"].to_numpy(float))
        shown = _released_share(merged, dims, kept.get(derived) if derived else None)
        rows.append(_row(name, merged, bound, shown))
    by_name = {str(row["table"]): row for row in rows}
    return pd.DataFrame([by_name[name] for name in TABLES])
