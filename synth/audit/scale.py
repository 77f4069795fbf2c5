"""Noise-scale recovery from paired counts (paper 001 section 2 and Appendix D).

Two released counts that started from one raw value (the tap-ons of a point-to-point service and
the tap-offs at its other end, its duration later, or any pair the user names) differ by the
difference of two independent noises. Maximum likelihood on those differences recovers the scale:

- ``"laplace"``: continuous Laplace(b) noise, density of the difference ``(|u| + b) e^(-|u|/b) /
  (4 b^2)`` (Appendix D);
- ``"discrete"``: discrete Laplace noise ``P(x) ∝ p^|x|``, ``p = e^(-1/b)`` (what this library
  draws); the difference has the exact pmf ``((1-p)/(1+p))^2 p^|d| (|d| + (1+p^2)/(1-p^2))``;
- ``"gaussian"``: Gaussian noise of standard deviation sigma (the difference is N(0, 2 sigma^2)).

The confidence interval is the profile-likelihood interval (Wilks: ``2 (l_max - l(b)) <=
chi2_1(confidence)``); for the Gaussian model the exact chi-square interval.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from synth.audit.release import AuditedRelease
from synth.errors import ConfigError, InputError
from synth.times import clock_parts

__all__ = [
    "ScaleEstimate",
    "difference_logpmf",
    "fit_scale",
    "named_pairs",
    "paired_counts",
    "route_pairs",
]

Model = Literal["laplace", "discrete", "gaussian"]
MODELS: tuple[str, ...] = ("laplace", "discrete", "gaussian")
_KEYS = ("mode", "day", "time", "location")
_LOG_LO, _LOG_HI = math.log(1e-3), math.log(1e5)


def difference_logpmf(d: np.ndarray, scale: float, model: Model) -> np.ndarray:
    """Log density (``laplace``, ``gaussian``) or log pmf (``discrete``) of a noise difference."""
    u = np.abs(np.asarray(d, dtype=float))
    if model == "laplace":
        return np.log(u + scale) - u / scale - 2.0 * math.log(2.0 * scale)
    if model == "discrete":
        p = math.exp(-1.0 / scale)
        c = 2.0 * (math.log1p(-p) - math.log1p(p))
        return c + u * (-1.0 / scale) + np.log(u + (1.0 + p * p) / (1.0 - p * p))
    if model == "gaussian":
        var = 2.0 * scale * scale
        return -0.5 * math.log(2.0 * math.pi * var) - u * u / (2.0 * var)
    raise ConfigError(f"model must be one of {MODELS}, got {model!r}")


@dataclass(frozen=True)
class ScaleEstimate:
    """Maximum-likelihood scale with its confidence interval, from ``n`` paired differences."""

    scale: float
    lower: float
    upper: float
    confidence: float
    n: int
    model: str
    log_likelihood: float

    def covers(self, scale: float) -> bool:
        """True when ``scale`` lies inside the confidence interval."""
        return self.lower <= scale <= self.upper

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return asdict(self)


def _loglik(d: np.ndarray, log_scale: float, model: Model) -> float:
    return float(difference_logpmf(d, math.exp(log_scale), model).sum())


def _maximise(d: np.ndarray, model: Model) -> float:
    """Log-scale maximising the likelihood (golden section on a grid-bracketed unimodal curve)."""
    from scipy.optimize import minimize_scalar

    grid = np.linspace(_LOG_LO, _LOG_HI, 161)
    values = np.array([_loglik(d, g, model) for g in grid])
    i = int(np.argmax(values))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    if lo == hi:
        return float(lo)
    res = minimize_scalar(
        lambda s: -_loglik(d, s, model), bounds=(lo, hi), method="bounded", options={"xatol": 1e-9}
    )
    return float(res.x)


def fit_scale(
    differences: np.ndarray, *, model: Model = "discrete", confidence: float = 0.95
) -> ScaleEstimate:
    """Maximum-likelihood noise scale from differences of paired counts (001 Appendix D)."""
    from scipy.optimize import brentq
    from scipy.stats import chi2

    if model not in MODELS:
        raise ConfigError(f"model must be one of {MODELS}, got {model!r}")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be in (0, 1), got {confidence!r}")
    d = np.asarray(differences, dtype=float).ravel()
    if d.size < 2 or not np.all(np.isfinite(d)):
        raise InputError("scale recovery needs at least 2 finite paired differences")
    if model == "gaussian":
        ss = float(np.sum(d * d)) / 2.0
        sigma = math.sqrt(ss / d.size)
        a = (1 - confidence) / 2
        lower = math.sqrt(ss / chi2.ppf(1 - a, d.size))
        upper = math.sqrt(ss / chi2.ppf(a, d.size))
        return ScaleEstimate(
            sigma, lower, upper, confidence, int(d.size), model, _loglik(d, math.log(sigma), model)
        )
    best = _maximise(d, model)
    top = _loglik(d, best, model)
    cut = top - chi2.ppf(confidence, 1) / 2.0

    def gap(s: float) -> float:
        return _loglik(d, s, model) - cut

    lower = _LOG_LO if gap(_LOG_LO) >= 0 else brentq(gap, _LOG_LO, best, xtol=1e-10)
    upper = _LOG_HI if gap(_LOG_HI) >= 0 else brentq(gap, best, _LOG_HI, xtol=1e-10)
    return ScaleEstimate(
        math.exp(best), math.exp(lower), math.exp(upper), confidence, int(d.size), model, top
    )


# --------------------------------------------------------------------------- pairs
def _minutes(labels: pd.Series) -> np.ndarray:
    hm = clock_parts(labels)
    if hm[["hour", "minute"]].isna().any().any():
        raise InputError("time column: expected HH:MM labels")
    return (hm["hour"].astype(int) * 60 + hm["minute"].astype(int)).to_numpy()


def _table(release: AuditedRelease, name: str) -> pd.DataFrame:
    if name not in release.tables:
        raise InputError(f"{release.path}: the release has no table '{name}'")
    df = release.tables[name]
    if "count" not in df:
        raise InputError(f"{release.path}: table '{name}' has no 'count' column")
    return df


def route_pairs(
    release: AuditedRelease,
    origin: str,
    destination: str,
    minutes: int,
    *,
    on_table: str = "on_time_location",
    off_table: str = "off_time_location",
) -> pd.DataFrame:
    """Pairs of a point-to-point service (001 section 2, the Manly ferry).

    Every tap-on at ``origin`` in a time bin is a tap-off at ``destination`` ``minutes`` later (a
    whole number of bins), so the two released counts share one raw value. Returns one row per
    (mode, day, time) where both are released: ``mode, day, time, a`` (tap-ons), ``b`` (tap-offs),
    plus ``attrs["missing"]``: how many of the tap-on cells had no released partner.
    """
    on, off = _table(release, on_table), _table(release, off_table)
    bin_minutes = int(release.parameters.get("bin_minutes") or 0)
    if bin_minutes and minutes % bin_minutes:
        raise ConfigError(
            f"route duration {minutes} min is not a whole number of {bin_minutes}-minute bins"
        )
    a = on.loc[on["location"].astype(str) == origin, ["mode", "day", "time", "count"]].copy()
    b = off.loc[off["location"].astype(str) == destination, ["mode", "day", "time", "count"]]
    arrive = _minutes(a["time"]) + int(minutes) if len(a) else np.zeros(0, dtype=int)
    a = a.loc[arrive < 1440].copy()  # a trip past midnight ends on the next day: not paired
    arrive = arrive[arrive < 1440]
    a["time"] = [f"{m // 60:02d}:{m % 60:02d}" for m in arrive]
    b = b.assign(time=[f"{m // 60:02d}:{m % 60:02d}" for m in _minutes(b["time"])])
    merged = a.merge(b, on=["mode", "day", "time"], suffixes=("_a", "_b"))
    out = merged.rename(columns={"count_a": "a", "count_b": "b"})
    out["pair"] = f"{origin} -> {destination} ({minutes} min)"
    out.attrs["missing"] = len(a) - len(out)
    return out[["pair", "mode", "day", "time", "a", "b"]]


def named_pairs(release: AuditedRelease, pairs: pd.DataFrame) -> pd.DataFrame:
    """Pairs the user names: columns ``table_a, table_b`` and key columns ``<key>_a``, ``<key>_b``.

    Each row names one cell of each table by its key columns (``mode, day, time, location``, those
    the table has). Returns ``pair, a, b`` for the rows whose two cells are both released;
    ``attrs["missing"]`` counts the others.
    """
    for col in ("table_a", "table_b"):
        if col not in pairs:
            raise InputError(f"pairs file: missing column '{col}'")
    spec = pairs.reset_index(drop=True)
    values = {}
    for side in ("a", "b"):
        found = pd.Series(np.nan, index=spec.index)
        for name, rows in spec.groupby(spec[f"table_{side}"].astype(str), sort=True):
            df = _table(release, str(name))
            keys = [k for k in _KEYS if k in df]
            for k in keys:
                if f"{k}_{side}" not in spec:
                    raise InputError(f"pairs file: table '{name}' needs a column '{k}_{side}'")
            if df.duplicated(keys).any():
                raise InputError(f"table '{name}': its key columns do not identify its cells")
            wanted = rows[[f"{k}_{side}" for k in keys]].astype(str)
            wanted.columns = keys
            cells = df[[*keys, "count"]].astype({k: str for k in keys})
            hit = wanted.reset_index().merge(cells, on=keys, how="left").set_index("index")
            found.loc[hit.index] = hit["count"].to_numpy(dtype=float)
        values[side] = found
    both = values["a"].notna() & values["b"].notna()
    out = pd.DataFrame(
        {
            "pair": [f"row {i}" for i in spec.index[both]],
            "a": values["a"][both].astype(np.int64).to_numpy(),
            "b": values["b"][both].astype(np.int64).to_numpy(),
        }
    )
    out.attrs["missing"] = int((~both).sum())
    return out


def paired_counts(frames: list[pd.DataFrame], min_count: int | None = None) -> pd.DataFrame:
    """Concatenate pair frames; with ``min_count`` keep pairs whose two counts are ``>= min_count``.

    Pairs near a suppression threshold bias the estimate down (a pair survives only when both
    noises were not too negative: 001 Appendix D, Figure 3); ``min_count`` trades pairs for bias.
    """
    if not frames:
        return pd.DataFrame(columns=["pair", "a", "b"])
    out = pd.concat(frames, ignore_index=True)
    missing = sum(int(f.attrs.get("missing", 0)) for f in frames)
    if min_count is not None:
        keep = (out["a"] >= min_count) & (out["b"] >= min_count)
        missing += int((~keep).sum())
        out = out.loc[keep].reset_index(drop=True)
    out.attrs["missing"] = missing
    return out
