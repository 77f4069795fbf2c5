"""Algorithm 1 of Asghar, Tyler and Kaafar (2018): the stability-based histogram of a frame."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from synth.engines.kernels import bound_rank, count_keys
from synth.errors import ConfigError, InputError
from synth.marginals.cells import noisy_cells
from synth.marginals.sbh_calibration import (
    NOISE_METHODS,
    NoiseSource,
    calibrate,
    fresh_ledger,
    record_spend,
)
from synth.privacy import LedgerBranch, noise_source

__all__ = ["stability_histogram"]


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
        rank = bound_rank([units], [np.arange(len(data))])
        frame = frame.loc[rank < cal.l1]
    key, cats = _encode(frame, columns, domain)
    sizes = [len(c) for c in cats]
    present, counts = count_keys(key, math.prod(sizes))
    noise = noise_source(random_state, methods=NOISE_METHODS)
    book = ledger if ledger is not None else fresh_ledger(cal)
    record_spend(book, label, cal, seeded=bool(getattr(noise, "seeded", False)))
    kept, values = noisy_cells(present, counts, cal, noise, math.prod(sizes) if pure else None)
    out: dict[str, Any] = {}
    rest = kept
    for col, size, cat in reversed(list(zip(columns, sizes, cats, strict=True))):
        rest, code = np.divmod(rest, size)
        out[col] = cat[code]
    result = pd.DataFrame({col: out[col] for col in columns})
    result["count"] = values
    result.attrs["sbh"] = cal.to_dict()
    return result


def _encode(
    frame: pd.DataFrame, columns: list[str], domain: Mapping[str, Sequence[Any]] | None
) -> tuple[np.ndarray, list[np.ndarray]]:
    """One int64 key per row and the categories of each column, sorted so that key order is
    lexicographic order (the public ``domain`` when given: rows outside it are an InputError)."""
    codes: list[np.ndarray] = []
    cats: list[np.ndarray] = []
    for col in columns:
        if domain is not None:
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
    return key, cats
