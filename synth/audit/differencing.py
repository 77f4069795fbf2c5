"""Differencing attack across the tables of one release (paper 001 section 4 and Appendix E).

When a coarse table (tap-offs per time) and a finer one (tap-offs per time and location) are noised
independently, a coarse count minus the released fine cells of the same row estimates the total of
the fine cells that were suppressed: ``R = S - sum X_i = z + L_S - sum L_i``, a sum of ``k + 1``
independent noises around the suppressed total ``z``. An interval around ``R`` that excludes zero
says, with that confidence, that suppressed cells hold people (the "secret ferry" of section 4.1).

Two intervals are computed:

- **exact** (used for the flags): the noise sum's distribution is the convolution of the noises
  the manifest declares (discrete Laplace, rounded Laplace, discrete Gaussian), so ``R ± q`` with
  ``q`` its two-sided ``1 - alpha`` quantile covers ``z`` with probability ``>= 1 - alpha``
  (released fine cells' noise is biased up by their threshold, which lowers ``R``; a coarse
  count close to its own threshold is biased up the same way, which raises it, so the flags are
  also counted against chance and at a Bonferroni level over the rows);
- **Theorem 5** as published, ``R ± p ln(2^(1-n) / alpha)`` for ``n = k + 1`` terms (``n = 3``:
  ``p ln(1/(4 alpha))``). Its proof bounds ``P(mean >= z + a)`` from *below* by ``P(all terms >=
  z + a)``, which does not bound it from above: the interval is too narrow (for ``n = 3`` its
  coverage is about 60% at a nominal 95%) and is reported for comparison only.

A consistent release (one-way tables summed from the released two-way table) gives ``R = 0`` on
every row: nothing to recover.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import permutations

import numpy as np
import pandas as pd

from synth.audit.release import AuditedRelease, TableNoise
from synth.errors import ConfigError

__all__ = [
    "TablePair",
    "difference_tables",
    "noise_pmf",
    "sum_quantile",
    "table_pairs",
    "theorem5_halfwidth",
]

_TAIL = 1e-13


@lru_cache(maxsize=256)
def noise_pmf(kind: str, scale: float) -> np.ndarray:
    """pmf of one integer noise on ``[-m, m]`` (centre ``m``), tails below 1e-13 dropped.

    ``kind``: ``"discrete_laplace"`` (``P(x) ∝ e^(-|x|/scale)``), ``"laplace"`` (continuous
    Laplace rounded to an integer) or ``"gaussian"`` (discrete Gaussian, sigma = ``scale``).
    """
    if scale <= 0:
        raise ConfigError(f"noise scale must be > 0, got {scale!r}")
    if kind == "gaussian":
        m = math.ceil(scale * math.sqrt(2 * math.log(1 / _TAIL))) + 1
        x = np.arange(-m, m + 1, dtype=float)
        pmf = np.exp(-(x * x) / (2 * scale * scale))
    elif kind == "laplace":
        m = math.ceil(scale * math.log(1 / _TAIL)) + 1
        x = np.arange(-m, m + 1, dtype=float)
        hi, lo = np.abs(x) + 0.5, np.maximum(np.abs(x) - 0.5, 0.0)
        pmf = np.where(
            x == 0, 1 - np.exp(-0.5 / scale), 0.5 * (np.exp(-lo / scale) - np.exp(-hi / scale))
        )
    elif kind == "discrete_laplace":
        m = math.ceil(scale * math.log(1 / _TAIL)) + 1
        x = np.arange(-m, m + 1, dtype=float)
        pmf = np.exp(-np.abs(x) / scale)
    else:
        raise ConfigError(f"unknown noise kind {kind!r}")
    return pmf / pmf.sum()


def _convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from scipy.signal import fftconvolve

    out = np.clip(fftconvolve(a, b), 0.0, None)
    return out / out.sum()


@lru_cache(maxsize=1024)
def _power(kind: str, scale: float, k: int) -> np.ndarray:
    """pmf of the sum of ``k`` independent noises (repeated squaring), centred."""
    if k == 0:
        return np.ones(1)
    if k == 1:
        return noise_pmf(kind, scale)
    half = _power(kind, scale, k // 2)
    out = _convolve(half, half)
    return _convolve(out, noise_pmf(kind, scale)) if k % 2 else out


def sum_quantile(terms: tuple[tuple[str, float, int], ...], alpha: float) -> int:
    """Least integer ``q`` with ``P(|N| > q) <= alpha``, N a sum of independent symmetric noises.

    ``terms``: ``(kind, scale, how many)`` triples (see :func:`noise_pmf`).
    """
    pmf = np.ones(1)
    for kind, scale, count in terms:
        if count:
            pmf = _convolve(pmf, _power(kind, float(scale), int(count)))
    centre = (pmf.size - 1) // 2
    # P(|N| > q) = 1 - sum_{|x| <= q} pmf(x); cumulative mass of the central window
    inner = np.concatenate([[pmf[centre]], pmf[centre + 1 :] + pmf[centre - 1 :: -1][:centre]])
    covered = np.cumsum(inner)
    idx = np.flatnonzero(covered >= 1 - alpha - 1e-12)
    return int(idx[0]) if idx.size else centre


def theorem5_halfwidth(scale: float, n: int, alpha: float) -> float:
    """Theorem 5 of 001, for ``n`` i.i.d. Laplace(p) terms: ``p ln(2^(1-n)/alpha)`` (>= 0)."""
    return max(0.0, scale * (math.log(1 / alpha) + (1 - n) * math.log(2)))


def _kind(noise: TableNoise) -> str:
    if noise.gaussian:
        return "gaussian"
    return "discrete_laplace" if noise.discrete else "laplace"


@dataclass(frozen=True)
class TablePair:
    """A finer table and a coarser one of the same release (``coarse`` keys ⊂ ``fine`` keys)."""

    fine: str
    coarse: str
    keys: tuple[str, ...]  # the coarse table's key columns
    summed: tuple[str, ...]  # the fine table's columns summed out


def _key_columns(df: pd.DataFrame) -> tuple[str, ...]:
    return tuple(c for c in df.columns if c != "count")


def _measure(name: str, keys: tuple[str, ...]) -> tuple[str, ...]:
    """What a table counts: its name without the words naming its key columns (``off_time`` ->
    ``off``), so tap-ons are never differenced against tap-offs."""
    return tuple(w for w in name.split("_") if w not in keys)


def table_pairs(release: AuditedRelease) -> list[TablePair]:
    """Every (fine, coarse) pair of count tables of the same measure where the coarse keys are a
    strict subset of the fine keys (``off_time`` and ``off_location`` under ``off_time_location``).
    """
    counted = {n: df for n, df in release.tables.items() if "count" in df}
    out = []
    for fine, coarse in permutations(sorted(counted), 2):
        fk, ck = _key_columns(counted[fine]), _key_columns(counted[coarse])
        same = _measure(fine, fk) == _measure(coarse, ck)
        if ck and set(ck) < set(fk) and same:
            out.append(TablePair(fine, coarse, ck, tuple(c for c in fk if c not in ck)))
    return out


def difference_tables(
    release: AuditedRelease, *, confidence: float = 0.95, pairs: list[TablePair] | None = None
) -> pd.DataFrame:
    """One row per released coarse cell: the estimate of its suppressed fine cells' total.

    Columns: ``fine, coarse, cell`` (the coarse key), ``coarse_count``, ``released_sum``,
    ``released_cells`` (k), ``estimate`` (R), ``lower``/``upper`` (exact interval), ``t5_lower``
    / ``t5_upper`` (Theorem 5 as published), ``flagged`` (exact interval above zero),
    ``flagged_family`` (the same at the Bonferroni level over every row of the pair),
    ``derived`` (the manifest says the coarse table is summed from the fine one).
    ``attrs["skipped"]`` lists pairs whose noise the manifest does not give.
    """
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence!r}")
    alpha = 1 - confidence
    frames = []
    skipped = []
    for pair in pairs if pairs is not None else table_pairs(release):
        fine_noise, coarse_noise = release.noise(pair.fine), release.noise(pair.coarse)
        if fine_noise is None or coarse_noise is None:
            skipped.append(f"{pair.coarse} vs {pair.fine}")
            continue
        fine, coarse = release.tables[pair.fine], release.tables[pair.coarse]
        keys = list(pair.keys)
        sums = (
            fine.assign(count=fine["count"].astype(np.int64), _k=1)
            .groupby(keys, sort=False)[["count", "_k"]]
            .sum()
            .rename(columns={"count": "released_sum", "_k": "released_cells"})
            .reset_index()
        )
        rows = coarse[[*keys, "count"]].merge(sums, on=keys, how="left")
        rows = rows.rename(columns={"count": "coarse_count"})
        rows[["released_sum", "released_cells"]] = (
            rows[["released_sum", "released_cells"]].fillna(0).astype(np.int64)
        )
        rows["estimate"] = rows["coarse_count"].astype(np.int64) - rows["released_sum"]
        derived = coarse_noise.derived_from == pair.fine
        q, qf, t5 = _halfwidths(rows["released_cells"], fine_noise, coarse_noise, derived, alpha)
        k_col = rows["released_cells"].astype(int)
        half = k_col.map(q).to_numpy(dtype=float)
        half_f = k_col.map(qf).to_numpy(dtype=float)
        half_t5 = k_col.map(t5).to_numpy(dtype=float)
        est = rows["estimate"].to_numpy(dtype=float)
        rows["lower"], rows["upper"] = est - half, est + half
        rows["t5_lower"], rows["t5_upper"] = est - half_t5, est + half_t5
        rows["flagged"] = rows["lower"] > 0
        rows["flagged_family"] = est - half_f > 0
        rows["derived"] = derived
        rows["cell"] = [
            ", ".join(f"{k}={v}" for k, v in zip(keys, vals, strict=True))
            for vals in rows[keys].astype(str).itertuples(index=False)
        ]
        rows["fine"], rows["coarse"] = pair.fine, pair.coarse
        frames.append(rows.drop(columns=keys))
    columns = [
        "fine",
        "coarse",
        "cell",
        "coarse_count",
        "released_sum",
        "released_cells",
        "estimate",
        "lower",
        "upper",
        "t5_lower",
        "t5_upper",
        "flagged",
        "flagged_family",
        "derived",
    ]
    out = pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)
    out.attrs["skipped"] = skipped
    return out


def _halfwidths(
    released_cells: pd.Series,
    fine_noise: TableNoise,
    coarse_noise: TableNoise,
    derived: bool,
    alpha: float,
) -> tuple[dict[int, float], dict[int, float], dict[int, float]]:
    """Interval half-widths per number of released fine cells k: exact at ``alpha``, exact at
    the Bonferroni level over the rows, and Theorem 5 as published (all zero when derived)."""
    n_rows = max(len(released_cells), 1)
    fkind, ckind = _kind(fine_noise), _kind(coarse_noise)
    q: dict[int, float] = {}
    qf: dict[int, float] = {}
    t5: dict[int, float] = {}
    for k in released_cells.unique():
        k = int(k)
        terms = (
            ((fkind, fine_noise.scale, k),)
            if derived
            else (
                (fkind, fine_noise.scale, k),
                (ckind, coarse_noise.scale, 1),
            )
        )
        q[k] = 0 if derived else sum_quantile(terms, alpha)
        qf[k] = 0 if derived else sum_quantile(terms, alpha / n_rows)
        p = max(fine_noise.scale, coarse_noise.scale)
        t5[k] = 0.0 if derived else theorem5_halfwidth(p, k + 1, alpha)
    return q, qf, t5
