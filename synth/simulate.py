"""SIMULATED passenger sequences and taps on a real network, for scale benchmarks and tests.

Nothing produced here is real data, and it is not private data either: every frame carries
``attrs["simulated"] = True`` and every file written here carries ``transit_synth.simulated = true``
in its Parquet metadata (CSV files get no marker: name them accordingly). The random numbers come
from numpy's ``Generator`` (PCG64): this is not privacy noise and needs no secure source.

The model (deliberately simple, documented so that benchmark figures can be interpreted):

* **Network**: the leaves of a taxonomy, by default the 68-station Montreal metro of the KDD 2012
  paper (Chen et al., paper 004 section 5), with station coordinates when known (Montreal, a GTFS
  ``stops.txt`` via :func:`gtfs_coordinates`, or any ``location, lat, lon`` frame).
* **Popularity**: each station gets a heavy-tailed weight ``w ~ LogNormal(0, popularity_sigma)``,
  multiplied by the number of lines serving it when that is known (transfer stations are busier).
* **Trip chains**: a card's first tap is at its home station, drawn with probability proportional to
  ``w``. Each following tap is where the previous trip ended: back home with probability
  ``home_return`` (when not at home), otherwise a gravity-model destination
  ``P(d | o) ∝ w_d exp(-dist(o, d) / distance_scale)``, ``d != o``, with great-circle distances in
  km (or the number of taxonomy edges between the two leaves when there are no coordinates).
  With ``regularity > 0`` each card also has an anchor (a gravity destination from home, e.g. its
  work station), and a trip that does not return home goes to the anchor with that probability
  (habitual travel, as smart-card studies of the STM network report); 0 (the default) is the
  model above, unchanged.
* **Lengths**: ``1 + NegativeBinomial`` with mean ``mean_length`` (4.21 in the STM Metro data of the
  paper, Table 2) and shape ``dispersion`` (a long tail), capped at ``max_length`` (90 in the
  paper).
* **Time of day** (``with_time=True``): the first tap from a morning-peak / midday / evening-peak
  mixture; gaps of 20 minutes plus an exponential with mean 150 minutes, compressed when needed so
  that a card's taps stay within the service day (non-decreasing times, one day).

Generation is vectorised over blocks of :data:`BLOCK` sequences; block ``b`` uses its own
``SeedSequence`` child, so a result depends only on ``(seed, n)`` and not on how it is chunked:
:func:`write_simulated_sequences` writes exactly the rows :func:`simulate_sequences` returns.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from synth.errors import ConfigError, InputError
from synth.gtfs import read_gtfs
from synth.io import atomic_path, table_format
from synth.taxonomy import Taxonomy

__all__ = [
    "BLOCK",
    "NetworkModel",
    "gtfs_coordinates",
    "network_model",
    "simulate_sequences",
    "simulate_taps",
    "write_simulated_sequences",
]

#: sequences generated per block (each block has its own seed child).
BLOCK = 1 << 18
_EARTH_KM = 6371.0088
_DAY_START, _DAY_END = 5 * 60 + 30, 23 * 60 + 59  # service day, minutes after midnight
_SIMULATED_META = {b"transit_synth.simulated": b"true"}


@dataclass(frozen=True)
class NetworkModel:
    """Stations, their popularity and the gravity transition table of the simulator."""

    locations: np.ndarray  # station ids (str), sorted as in the taxonomy's leaves()
    popularity: np.ndarray  # normalised start distribution
    transition: np.ndarray  # (S, S) row-stochastic, zero diagonal

    @property
    def start_cdf(self) -> np.ndarray:
        return np.cumsum(self.popularity)

    @property
    def flat_cdf(self) -> np.ndarray:
        """Row ``s`` cumulative distribution shifted by ``s`` (one ``searchsorted`` for all)."""
        cdf = np.cumsum(self.transition, axis=1)
        cdf[:, -1] = 1.0
        return (cdf + np.arange(len(cdf))[:, None]).ravel()


def gtfs_coordinates(zip_path: str | os.PathLike[str]) -> pd.DataFrame:
    """``location, lat, lon`` of a GTFS zip's ``stops.txt``, for :func:`network_model`."""
    stops = read_gtfs(Path(zip_path), {"stops.txt": ["stop_id", "stop_lat", "stop_lon"]})
    df = stops["stops.txt"]
    return pd.DataFrame(
        {
            "location": df["stop_id"].astype(str),
            "lat": pd.to_numeric(df["stop_lat"], errors="coerce"),
            "lon": pd.to_numeric(df["stop_lon"], errors="coerce"),
        }
    )


def _montreal() -> tuple[Taxonomy, pd.DataFrame]:
    from synth import datasets

    net = datasets.montreal_network()
    coords = (
        net.groupby("station", sort=True)
        .agg(lat=("lat", "first"), lon=("lon", "first"), lines=("line_id", "size"))
        .reset_index()
        .rename(columns={"station": "location"})
    )
    return datasets.montreal_taxonomy(), coords


def _haversine_km(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    la, lo = np.radians(lat), np.radians(lon)
    dlat = la[:, None] - la[None, :]
    dlon = lo[:, None] - lo[None, :]
    a = np.sin(dlat / 2) ** 2 + np.cos(la[:, None]) * np.cos(la[None, :]) * np.sin(dlon / 2) ** 2
    return 2 * _EARTH_KM * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))


def _tree_distance(tax: Taxonomy, leaves: Sequence[str]) -> np.ndarray:
    """Number of edges between leaves (through their lowest common ancestor)."""
    paths = [tax.ancestors(leaf) for leaf in leaves]
    depth = np.array([len(p) - 1 for p in paths])
    height = int(depth.max())
    # ancestor id at every depth (padded with the leaf itself) -> common prefix length
    ids = {node: i for i, node in enumerate(tax.nodes())}
    anc = np.array([[ids[p[min(d, len(p) - 1)]] for d in range(height + 1)] for p in paths])
    same = anc[:, None, :] == anc[None, :, :]
    for d in range(height + 1):  # an ancestor at depth d exists only up to the node's own depth
        same[:, :, d] &= (depth[:, None] >= d) & (depth[None, :] >= d)
    common = np.cumprod(same, axis=2).sum(axis=2) - 1  # depth of the lowest common ancestor
    return (depth[:, None] + depth[None, :] - 2 * common).astype(float)


def network_model(
    taxonomy: Taxonomy | None = None,
    coordinates: pd.DataFrame | None = None,
    *,
    popularity_sigma: float = 1.0,
    distance_scale: float | None = None,
    seed: int | np.random.SeedSequence | None = None,
) -> NetworkModel:
    """Build the simulator's network: stations, popularity and gravity transitions.

    ``taxonomy=None`` uses the embedded Montreal metro (coordinates included). ``coordinates`` is an
    optional frame ``location, lat, lon`` [``, lines``] covering every leaf. ``distance_scale``
    defaults to 3 km with coordinates and 1 edge without.
    """
    if taxonomy is None:
        taxonomy, default_coords = _montreal()
        coordinates = default_coords if coordinates is None else coordinates
    if popularity_sigma < 0:
        raise ConfigError("popularity_sigma must be >= 0")
    leaves = taxonomy.leaves()
    if len(leaves) < 2:
        raise ConfigError("the simulator needs a network with at least two locations")
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    rng = np.random.default_rng(ss)
    weight = rng.lognormal(0.0, popularity_sigma, len(leaves))
    if coordinates is not None:
        missing_cols = {"location", "lat", "lon"} - set(coordinates.columns)
        if missing_cols:
            raise InputError(f"coordinates: missing column(s) {', '.join(sorted(missing_cols))}")
        by_loc = coordinates.assign(location=coordinates["location"].astype(str)).drop_duplicates(
            "location"
        )
        by_loc = by_loc.set_index("location").reindex(leaves)
        if by_loc[["lat", "lon"]].isna().any().any():
            bad = by_loc.index[by_loc[["lat", "lon"]].isna().any(axis=1)][0]
            raise InputError(f"coordinates: no lat/lon for location {bad!r}")
        dist = _haversine_km(by_loc["lat"].to_numpy(float), by_loc["lon"].to_numpy(float))
        scale = 3.0 if distance_scale is None else distance_scale
        if "lines" in by_loc.columns:
            weight = weight * by_loc["lines"].fillna(1).to_numpy(float)
    else:
        dist = _tree_distance(taxonomy, leaves)
        scale = 1.0 if distance_scale is None else distance_scale
    if scale <= 0:
        raise ConfigError("distance_scale must be > 0")
    trans = weight[None, :] * np.exp(-dist / scale)
    np.fill_diagonal(trans, 0.0)
    trans /= trans.sum(axis=1, keepdims=True)
    return NetworkModel(
        locations=np.asarray(leaves, dtype=object),
        popularity=weight / weight.sum(),
        transition=trans,
    )


def _check(
    n: int, mean_length: float, max_length: int, dispersion: float, home: float, regular: float
) -> None:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise ConfigError(f"n must be a non-negative integer, got {n!r}")
    if not 1.0 <= mean_length <= max_length:
        raise ConfigError("mean_length must be between 1 and max_length")
    if max_length < 1 or dispersion <= 0 or not 0.0 <= home <= 1.0:
        raise ConfigError("need max_length >= 1, dispersion > 0 and 0 <= home_return <= 1")
    if not 0.0 <= regular <= 1.0:
        raise ConfigError(f"regularity must be in [0, 1], got {regular!r}")


def _block(
    model: NetworkModel,
    cdfs: tuple[np.ndarray, np.ndarray],
    rng: np.random.Generator,
    n: int,
    *,
    mean_length: float,
    max_length: int,
    dispersion: float,
    home_return: float,
    regularity: float,
    with_time: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One block: (lengths, flat location codes in (sequence, pos) order, flat minutes or None)."""
    start_cdf, flat_cdf = cdfs
    n_loc = len(model.locations)
    p = dispersion / (dispersion + mean_length - 1.0)
    lengths = np.minimum(1 + rng.negative_binomial(dispersion, p, n), max_length).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    codes = np.empty(int(lengths.sum()), dtype=np.int32)
    home = np.minimum(np.searchsorted(start_cdf, rng.random(n), side="right"), n_loc - 1)
    by_len = np.argsort(-lengths, kind="stable")  # active sequences form a prefix of by_len
    cur, home_s, off_s = home[by_len], home[by_len], offsets[by_len]

    def gravity_from(origin: np.ndarray) -> np.ndarray:
        draw = np.searchsorted(flat_cdf, origin + rng.random(origin.size), side="right")
        return np.minimum(draw - origin * n_loc, n_loc - 1)

    anchor_s = gravity_from(home_s) if regularity > 0 else home_s
    # active_counts[k] = number of sequences longer than k
    active_counts = np.searchsorted(-lengths[by_len], -np.arange(int(lengths.max())), side="left")
    codes[off_s] = cur
    for k in range(1, int(lengths.max())):
        na = int(active_counts[k])
        cur = cur[:na]
        gravity = gravity_from(cur)
        if regularity > 0:
            to_anchor = (rng.random(na) < regularity) & (cur != anchor_s[:na])
            gravity = np.where(to_anchor, anchor_s[:na], gravity)
        back = (rng.random(na) < home_return) & (cur != home_s[:na])
        cur = np.where(back, home_s[:na], gravity)
        codes[off_s[:na] + k] = cur
    if not with_time:
        return lengths, codes, None
    seq = np.repeat(np.arange(n), lengths)
    peak = rng.choice(3, n, p=[0.5, 0.25, 0.25])
    mu = np.array([465.0, 750.0, 1005.0])[peak]
    sd = np.array([50.0, 120.0, 60.0])[peak]
    t0 = np.clip(rng.normal(mu, sd), _DAY_START, _DAY_END - 30)
    gaps = 20.0 + rng.exponential(150.0, codes.size)
    gaps[offsets] = 0.0
    total = np.add.reduceat(gaps, offsets) if n else np.zeros(0)
    room = _DAY_END - t0
    factor = np.where(total > room, room / np.maximum(total, 1e-9), 1.0)
    scaled = gaps * factor[seq]
    csum = np.cumsum(scaled)
    within = csum - np.repeat(csum[offsets] - scaled[offsets], lengths)
    minutes = np.floor(t0[seq] + within).astype(np.int64)
    return lengths, codes, minutes


def _tables(
    n: int,
    *,
    taxonomy: Taxonomy | None,
    coordinates: pd.DataFrame | None,
    mean_length: float,
    max_length: int,
    dispersion: float,
    home_return: float,
    regularity: float,
    popularity_sigma: float,
    distance_scale: float | None,
    with_time: bool,
    seed: int | None,
    date: str,
) -> Iterator[pa.Table]:
    """Arrow tables of consecutive blocks (seq_id, pos, location[, time])."""
    _check(n, mean_length, max_length, dispersion, home_return, regularity)
    root = np.random.SeedSequence(seed)
    children = root.spawn(1 + (n + BLOCK - 1) // BLOCK)
    model = network_model(
        taxonomy,
        coordinates,
        popularity_sigma=popularity_sigma,
        distance_scale=distance_scale,
        seed=children[0],
    )
    cdfs = (model.start_cdf, model.flat_cdf)
    names = pa.array(model.locations.tolist(), type=pa.string())
    width = max(1, len(str(max(n - 1, 0))))
    day = np.datetime64(date, "m")
    for b in range((n + BLOCK - 1) // BLOCK):
        size = min(BLOCK, n - b * BLOCK)
        rng = np.random.default_rng(children[b + 1])
        lengths, codes, minutes = _block(
            model,
            cdfs,
            rng,
            size,
            mean_length=mean_length,
            max_length=max_length,
            dispersion=dispersion,
            home_return=home_return,
            regularity=regularity,
            with_time=with_time,
        )
        ids = pc.utf8_lpad(
            pa.array(np.arange(b * BLOCK, b * BLOCK + size)).cast(pa.string()), width, "0"
        )
        seq = np.repeat(np.arange(size), lengths)
        offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        cols: dict[str, Any] = {
            "seq_id": ids.take(pa.array(seq)),
            "pos": pa.array(np.arange(codes.size) - np.repeat(offsets, lengths)),
            "location": names.take(pa.array(codes)),
        }
        if minutes is not None:
            cols["time"] = pa.array(
                (day + minutes.astype("timedelta64[m]")).astype("datetime64[s]")
            )
        yield pa.table(cols).replace_schema_metadata(_SIMULATED_META)


def _to_frame(tables: list[pa.Table], with_time: bool, params: dict[str, Any]) -> pd.DataFrame:
    if tables:
        df = pa.concat_tables(tables).to_pandas()
    else:
        cols = {
            "seq_id": pd.Series(dtype=str),
            "pos": pd.Series(dtype=np.int64),
            "location": pd.Series(dtype=str),
        }
        if with_time:
            cols["time"] = pd.Series(dtype="datetime64[s]")
        df = pd.DataFrame(cols)
    df.attrs["simulated"] = True
    df.attrs["simulation"] = params
    return df


def simulate_sequences(
    n: int,
    *,
    taxonomy: Taxonomy | None = None,
    coordinates: pd.DataFrame | None = None,
    mean_length: float = 4.21,
    max_length: int = 90,
    dispersion: float = 1.5,
    home_return: float = 0.5,
    regularity: float = 0.0,
    popularity_sigma: float = 1.0,
    distance_scale: float | None = None,
    with_time: bool = False,
    seed: int | None = None,
    date: str = "2012-01-04",
) -> pd.DataFrame:
    """``n`` SIMULATED passenger sequences in long format (``seq_id, pos, location[, time]``).

    Default network: the Montreal metro (68 stations). ``seq_id`` are zero-padded row numbers
    (``"0000042"``), so string order is numeric order. See the module docstring for the model.
    The frame has ``attrs["simulated"] = True`` and the parameters in ``attrs["simulation"]``.
    """
    params = {
        "n": n,
        "mean_length": mean_length,
        "max_length": max_length,
        "dispersion": dispersion,
        "home_return": home_return,
        "regularity": regularity,
        "popularity_sigma": popularity_sigma,
        "distance_scale": distance_scale,
        "seed": seed,
        "network": "montreal-metro" if taxonomy is None else taxonomy.source,
    }
    tables = list(
        _tables(
            n,
            taxonomy=taxonomy,
            coordinates=coordinates,
            mean_length=mean_length,
            max_length=max_length,
            dispersion=dispersion,
            home_return=home_return,
            regularity=regularity,
            popularity_sigma=popularity_sigma,
            distance_scale=distance_scale,
            with_time=with_time,
            seed=seed,
            date=date,
        )
    )
    return _to_frame(tables, with_time, params)


def write_simulated_sequences(
    path: str | os.PathLike[str],
    n: int,
    *,
    taxonomy: Taxonomy | None = None,
    coordinates: pd.DataFrame | None = None,
    with_time: bool = False,
    seed: int | None = None,
    **options: Any,
) -> Path:
    """Write ``simulate_sequences(n, ...)`` block by block (bounded memory) to Parquet or CSV.

    The write is atomic; Parquet files carry ``transit_synth.simulated = true`` in their metadata.
    ``options`` are the other keyword arguments of :func:`simulate_sequences`.
    """
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    target = Path(path)
    fmt = table_format(target)
    if fmt is None:
        raise ConfigError(f"{target}: use a .parquet or .csv file name")
    given = ("n", "taxonomy", "coordinates", "with_time", "seed")
    defaults: dict[str, Any] = {  # the model options of simulate_sequences, with its defaults
        name: p.default
        for name, p in inspect.signature(simulate_sequences).parameters.items()
        if name not in given
    }
    unknown = set(options) - set(defaults)
    if unknown:
        raise ConfigError(f"unknown simulation option(s): {', '.join(sorted(unknown))}")
    defaults.update(options)
    tables = _tables(
        n, taxonomy=taxonomy, coordinates=coordinates, with_time=with_time, seed=seed, **defaults
    )
    with atomic_path(target) as tmp:
        writer: Any = None
        try:
            for table in tables:
                if writer is None:
                    writer = (
                        pq.ParquetWriter(tmp, table.schema, compression="zstd")
                        if fmt == "parquet"
                        else pacsv.CSVWriter(str(tmp), table.schema)
                    )
                writer.write_table(table)
            if writer is None:  # n == 0: header / empty schema only
                empty = _to_frame([], with_time, {})
                if fmt == "parquet":
                    empty.to_parquet(tmp, index=False)
                else:
                    empty.to_csv(tmp, index=False)
        finally:
            if writer is not None:
                writer.close()
    return target


def simulate_taps(
    n_cards: int,
    *,
    order: str = "time",
    seed: int | None = None,
    **options: Any,
) -> pd.DataFrame:
    """SIMULATED taps ``card_id, time, stop_id`` of ``n_cards`` cards (one service day).

    Built from :func:`simulate_sequences` with times; ``order="time"`` sorts rows by time (stable,
    like an operator's log), ``"card"`` keeps them grouped by card. ``options`` go to
    :func:`simulate_sequences`. ``attrs["simulated"] = True``.
    """
    if order not in ("time", "card"):
        raise ConfigError("order must be 'time' or 'card'")
    seqs = simulate_sequences(n_cards, with_time=True, seed=seed, **options)
    taps = pd.DataFrame(
        {"card_id": seqs["seq_id"], "time": seqs["time"], "stop_id": seqs["location"]}
    )
    if order == "time":
        idx = np.argsort(taps["time"].to_numpy().view(np.int64), kind="stable")
        taps = taps.iloc[idx].reset_index(drop=True)
    taps.attrs = {"simulated": True, "simulation": seqs.attrs["simulation"]}
    return taps
