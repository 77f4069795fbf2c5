"""Exports: stop coordinates and their projection to UTM (see :mod:`synth.export`)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.export.releases import id_values
from synth.io import read_table

_WGS84 = (6378137.0, 1 / 298.257223563)


# ---------------------------------------------------------------------------- coordinates
def transverse_mercator(
    lat: np.ndarray,
    lon: np.ndarray,
    *,
    lon0: float,
    k0: float,
    false_easting: float,
    false_northing: float,
    ellipsoid: tuple[float, float] = _WGS84,
) -> tuple[np.ndarray, np.ndarray]:
    """Transverse Mercator (Krüger's series to third order in n: millimetre accuracy within
    the usual zone widths) of degrees ``lat``/``lon``; ``ellipsoid`` = (a, f)."""
    a, f = ellipsoid
    n = f / (2 - f)
    big_a = a / (1 + n) * (1 + n**2 / 4 + n**4 / 64)
    alpha = (n / 2 - 2 * n**2 / 3 + 5 * n**3 / 16, 13 * n**2 / 48 - 3 * n**3 / 5, 61 * n**3 / 240)
    phi = np.radians(np.asarray(lat, dtype=float))
    dlam = np.radians(np.asarray(lon, dtype=float) - lon0)
    c = 2 * math.sqrt(n) / (1 + n)
    t = np.sinh(np.arctanh(np.sin(phi)) - c * np.arctanh(c * np.sin(phi)))
    xi = np.arctan2(t, np.cos(dlam))
    eta = np.arctanh(np.sin(dlam) / np.sqrt(1 + t**2))
    x, y = eta.copy(), xi.copy()
    for j, aj in enumerate(alpha, start=1):
        x += aj * np.cos(2 * j * xi) * np.sinh(2 * j * eta)
        y += aj * np.sin(2 * j * xi) * np.cosh(2 * j * eta)
    return false_easting + k0 * big_a * x, false_northing + k0 * big_a * y


def utm(
    lat: np.ndarray, lon: np.ndarray, zone: int | None = None, *, south: bool | None = None
) -> tuple[np.ndarray, np.ndarray, str]:
    """WGS 84 / UTM coordinates and their EPSG code; the zone (and hemisphere) default to those of
    the mean longitude (latitude)."""
    lat, lon = np.asarray(lat, dtype=float), np.asarray(lon, dtype=float)
    if zone is None:
        zone = int(np.clip(np.floor((np.mean(lon) + 180) / 6) + 1, 1, 60))
    if south is None:
        south = bool(np.mean(lat) < 0)
    x, y = transverse_mercator(
        lat,
        lon,
        lon0=zone * 6 - 183,
        k0=0.9996,
        false_easting=500_000.0,
        false_northing=10_000_000.0 if south else 0.0,
    )
    return x, y, f"EPSG:{32700 + zone if south else 32600 + zone}"


@dataclass(frozen=True)
class Coordinates:
    """Stop coordinates: ``table`` indexed by location id (str) with float columns ``x``, ``y``;
    ``crs`` (e.g. ``EPSG:32188``) or ``None`` when unknown; ``source``: where they came from."""

    table: pd.DataFrame
    crs: str | None
    source: str

    def lookup(self, locations: Sequence[str] | np.ndarray) -> pd.DataFrame:
        """``x, y`` of each location (in order); InputError naming a location without them."""
        wanted = pd.Index(pd.unique(np.asarray(locations, dtype=object)))
        known = wanted.isin(self.table.index)
        if not known.all():
            missing = sorted(wanted[~known].astype(str))
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise InputError(f"no coordinates for location {missing[0]!r}{more} in {self.source}")
        return self.table.loc[wanted]


def _geographic(ids: pd.Series, lat: pd.Series, lon: pd.Series, crs: str, src: str) -> Coordinates:
    la = pd.to_numeric(lat, errors="coerce").to_numpy(dtype=float)
    lo = pd.to_numeric(lon, errors="coerce").to_numpy(dtype=float)
    bad = np.isnan(la) | np.isnan(lo) | (np.abs(la) > 90) | (np.abs(lo) > 180)
    if bad.any():
        row = int(np.flatnonzero(bad)[0]) + 1
        raise InputError(f"{src}: row {row}: no valid lat/lon for stop {ids.iloc[row - 1]!r}")
    if crs == "wgs84":
        x, y, code = lo, la, "EPSG:4326"
    elif crs == "auto":
        x, y, code = utm(la, lo)
    else:
        raise ConfigError(
            f"crs must be 'auto' or 'wgs84' for geographic coordinates ({src}), got {crs!r}"
        )
    return _table(ids, x, y, code, src)


def _table(ids: pd.Series, x: np.ndarray, y: np.ndarray, crs: str | None, src: str) -> Coordinates:
    table = pd.DataFrame(
        {"x": np.asarray(x, dtype=float), "y": np.asarray(y, dtype=float)},
        index=pd.Index(ids.astype(str).to_numpy(), name="location"),
    )
    table = table[~table.index.duplicated(keep="first")]
    return Coordinates(table, crs, src)


def load_coordinates(spec: str | os.PathLike[str], *, crs: str = "auto") -> Coordinates:
    """Stop coordinates from a GTFS zip, ``"montreal"`` (embedded) or a CSV/Parquet table.

    ``crs``: ``"auto"`` (projected coordinates kept; latitude/longitude projected to UTM),
    ``"wgs84"`` (latitude/longitude kept in degrees), or for a table with ``x, y`` the CRS label to
    declare (e.g. ``"EPSG:2950"``; ``"auto"`` declares none).
    """
    text = str(spec)
    if text == "montreal":
        from synth import datasets

        both = datasets.montreal_network().rename(columns={"station": "key"})
        src = "the embedded Montreal metro network"
        if crs == "wgs84":
            return _geographic(both["key"], both["lat"], both["lon"], crs, src)
        if crs != "auto":
            raise ConfigError(f"crs must be 'auto' or 'wgs84' for {src}, got {crs!r}")
        return _table(
            both["key"], both["x_mtm8"].to_numpy(), both["y_mtm8"].to_numpy(), "EPSG:32188", src
        )
    path = Path(text)
    if path.suffix.lower() == ".zip":
        from synth.simulate import gtfs_coordinates

        stops = gtfs_coordinates(path)
        return _geographic(
            stops["location"], stops["lat"], stops["lon"], crs, f"{path} (stops.txt)"
        )
    df = read_table(path, dtype={"stop_id": str, "location": str})
    id_col = next((c for c in ("stop_id", "location") if c in df.columns), None)
    if id_col is None:
        raise InputError(f"{path}: needs a 'stop_id' (or 'location') column")
    ids = id_values(df[id_col], id_col, str(path))
    lat_col = next((c for c in ("lat", "stop_lat") if c in df.columns), None)
    lon_col = next((c for c in ("lon", "stop_lon") if c in df.columns), None)
    if {"x", "y"} <= set(df.columns):
        xy = df[["x", "y"]].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
        bad = np.isnan(xy).any(axis=1)
        if bad.any():
            row = int(np.flatnonzero(bad)[0]) + 1
            raise InputError(
                f"{path}: row {row}: x/y of stop {ids.iloc[row - 1]!r} are not numbers"
            )
        if crs == "wgs84":
            raise ConfigError(f"{path}: crs 'wgs84' needs lat/lon columns, the file has x/y")
        return _table(ids, xy[:, 0], xy[:, 1], None if crs == "auto" else crs, str(path))
    if lat_col is not None and lon_col is not None:
        return _geographic(ids, df[lat_col], df[lon_col], crs, str(path))
    raise InputError(f"{path}: needs x, y or lat, lon columns (found: {', '.join(df.columns)})")
