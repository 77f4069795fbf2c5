"""Reference check: synthetic microdata against an SBH marginal release of the private data.

The SBH release (:class:`synth.marginals.opal.OpalRelease`) is the reference output (docs/design.md
section 5): its cells are within a known per-cell error bound of the true counts with probability
``1 - beta`` (Asghar et al. 2018, Theorem 6, made exact in
:meth:`synth.marginals.calibration.SBHCalibration.error_bound`). A synthetic dataset whose
recomputed table differs from the release by more than that bound in a cell disagrees with the
private data there (up to the ``beta`` chance that the release itself is off).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.io import read_json, read_table
from synth.marginals import TABLES, OpalRelease, SBHCalibration, marginal_tables
from synth.taxonomy import Taxonomy

__all__ = ["against_reference"]

_KEYS = ("mode", "day", "time", "location")
_CAL_FIELDS = ("epsilon", "delta", "scale", "threshold", "unit", "l0", "l1", "linf", "pure")


def _load(
    release: OpalRelease | str | os.PathLike[str], taxonomy: Taxonomy | None
) -> tuple[dict[str, pd.DataFrame], dict[str, Any], Taxonomy | None]:
    """Tables, parameters and taxonomy of a fitted release or of a release directory."""
    if isinstance(release, OpalRelease):
        return release.release(), release.parameters(), taxonomy or release.taxonomy
    path = Path(release)
    manifest = path / "manifest.json"
    if not manifest.is_file():
        raise InputError(f"{path}: not a release directory (no manifest.json)")
    try:
        content = read_json(manifest)
    except (OSError, ValueError) as exc:
        raise InputError(f"{manifest}: not a readable JSON manifest ({exc})") from exc
    params = content.get("parameters", {}) if isinstance(content, dict) else {}
    if (params.get("generator") or params.get("release")) != "opal-marginals":
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
    sa, sb = a.sum(), b.sum()
    if sa == 0 or sb == 0:
        return float("nan") if sa == sb else 1.0
    return float(0.5 * np.abs(a / sa - b / sb).sum())


def against_reference(
    microdata: pd.DataFrame,
    release: OpalRelease | str | os.PathLike[str],
    *,
    beta: float = 0.05,
    taxonomy: Taxonomy | None = None,
) -> pd.DataFrame:
    """Per table: total variation distance and cells outside the SBH error bound.

    ``microdata``: synthetic trips, taps or long-format sequences (sequences are tap-ons; without
    times only the location tables are compared). ``release``: a fitted :class:`OpalRelease` or its
    directory. When the microdata has no ``mode`` or no date, the release is summed over that
    partition column and the bound grows with the number of partitions summed. For a one-way table
    derived by summing (consistent mode) the bound is the two-way bound times the number of cells
    summed (the public domain size, or the locations seen in either table when it is not public).

    Returns one row per table: ``table, compared, cells, tvd, error_bound, outside_bound,
    outside_fraction, max_abs_error, release_total, microdata_total`` (``error_bound`` is the
    largest per-cell bound used; the totals are the sums of the compared cells: a release that
    suppresses small cells holds less than the data).
    """
    tables, params, tax = _load(release, taxonomy)
    truth = marginal_tables(
        microdata,
        bin_minutes=int(params["bin_minutes"]),
        taxonomy=tax,
        level=None if tax is None else params.get("level"),
    )
    rows: list[dict[str, Any]] = []
    for name in TABLES:
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
        merged = merged.fillna({"count_release": 0, "count_synthetic": 0})
        bound = np.full(len(merged), float(alpha * partitions))
        if info.get("derived_from"):
            terms = info.get("terms")
            if terms is None:  # locations are not public: those seen in either two-way table
                source = info["derived_from"]
                seen = set(tables[source]["location"].astype(str))
                seen |= set(truth[source]["location"]) if source in truth else set()
                terms = max(1, len(seen))
            bound *= float(terms)
        diff = np.abs(
            merged["count_release"].to_numpy(float) - merged["count_synthetic"].to_numpy(float)
        )
        outside = int((diff > bound).sum())
        rows.append(
            {
                "table": name,
                "compared": True,
                "cells": len(merged),
                "tvd": _tvd(
                    merged["count_release"].to_numpy(float),
                    merged["count_synthetic"].to_numpy(float),
                ),
                "error_bound": float(bound.max()) if bound.size else float(alpha),
                "outside_bound": outside,
                "outside_fraction": outside / len(merged) if len(merged) else 0.0,
                "max_abs_error": float(diff.max()) if diff.size else 0.0,
                "release_total": float(merged["count_release"].sum()),
                "microdata_total": float(merged["count_synthetic"].sum()),
            }
        )
    return pd.DataFrame(rows)
