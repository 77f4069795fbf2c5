"""The registry of release kinds (sequences, trips, marginals) and :func:`make_release`.

One entry per kind: the keys of its config table (``run``), which of them are required, the
estimator its ``parameters`` feed, and the library function that fits it on private data and writes
its release directory (:mod:`prefixtree.release`, :mod:`archetypes.release`,
:mod:`synth.marginals_release`). ``run``, ``demo`` and the per-kind commands go through it. It
lives at the command-line layer because it names the generators; their modules are imported only
when a kind is used, so ``--help`` stays fast.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from synth.cli.inputmap import INPUT_MAP_KEYS
from synth.config import TRIPS_TABLE
from synth.gtfs import ROUTE_RULES

__all__ = ["KINDS", "RELEASE_KINDS", "ReleaseKind", "make_release"]


def _prefixtree() -> Callable[..., Any]:
    from prefixtree.synthesizer import PrefixTreeSynthesizer

    return PrefixTreeSynthesizer


def _archetypes() -> Callable[..., Any]:
    from archetypes.synthesizer import ArchetypeSynthesizer

    return ArchetypeSynthesizer


def _opal() -> Callable[..., Any]:
    from synth.marginals.opal import OpalRelease

    return OpalRelease


def _make_sequences(
    out: str | os.PathLike[str], io: Mapping[str, Any], params: Mapping[str, Any], **kw: Any
) -> str:
    from prefixtree.release import release_sequences

    data = kw.pop("data", None)
    location = io.get("location_column")
    data, location, columns = _mapped(io, data, params.get("time_bin"), "time_bin")
    summary = release_sequences(
        data,
        out,
        taxonomy=io["taxonomy"],
        params=params,
        location_column=location,
        locations=io.get("locations"),
        on_unknown=io.get("on_unknown", "error"),
        gtfs_stations=io.get("gtfs_stations", False),
        gtfs_route_rule=io.get("gtfs_route_rule"),
        format=io.get("format", "csv"),
        source=io["input"],
        timezone=io.get("timezone"),
        **kw,
    )
    return summary if columns is None else f"{summary}\n  {columns}"


#: keys of a ``[trips]`` table -> keys of :func:`archetypes.release.release_trips`'s ``inputs``
_TRIP_INPUTS = (
    ("format", "input_format"),
    ("public_years", "public_years"),
    ("private_years", "private_years"),
    ("metadata", "metadata"),
    ("schema", "schema"),
    ("sep", "sep"),
)


def _make_trips(
    out: str | os.PathLike[str], io: Mapping[str, Any], params: Mapping[str, Any], **kw: Any
) -> str:
    from archetypes.release import release_trips

    kw.pop("data", None)  # the trips are read from their files (public and private)
    inputs = {key: io[source] for key, source in _TRIP_INPUTS if source in io}
    return release_trips(
        io["private"],
        io.get("public"),
        out,
        params=params,
        inputs=inputs,
        format=io.get("format", "csv"),
        **kw,
    )


def _make_marginals(
    out: str | os.PathLike[str], io: Mapping[str, Any], params: Mapping[str, Any], **kw: Any
) -> str:
    from synth.marginals_release import release_marginals

    data = kw.pop("data", None)
    settings = dict(params)
    if "timezone" in io:
        settings.setdefault("timezone", io["timezone"])
    location = io.get("location_column")
    data, location, columns = _mapped(io, data, settings.get("bin", 15), "bin")
    if settings.get("privacy_unit") is not None and not isinstance(data, str | os.PathLike):
        from synth.cli.inputmap import input_map_from_io

        if settings["privacy_unit"] == input_map_from_io(io).card_column:
            settings["privacy_unit"] = "card_id"  # the mapped card column is read as card_id
    summary = release_marginals(
        data,
        out,
        params={**settings, "on_unknown": io.get("on_unknown", "error")},
        taxonomy=io.get("taxonomy"),
        gtfs_stations=io.get("gtfs_stations", False),
        gtfs_route_rule=io.get("gtfs_route_rule"),
        location_column=location or "stop_id",
        format=io.get("format", "csv"),
        source=io["input"],
        **kw,
    )
    return summary if columns is None else f"{summary}\n  {columns}"


def _mapped(
    io: Mapping[str, Any], data: Any, time_bin: int | None, bin_key: str
) -> tuple[Any, str | None, str | None]:
    """The input of a config table (``data``: already loaded, else its ``input`` file) read with
    its input-mapping keys (:mod:`synth.cli.inputmap`)."""
    from synth.cli.inputmap import input_map_from_io, mapped_input

    return mapped_input(
        io["input"] if data is None else data,
        input_map_from_io(io),
        time_bin=time_bin,
        bin_flag=bin_key,
    )


@dataclass(frozen=True)
class ReleaseKind:
    """One kind of release: its config ``table`` (key -> "path", "spec", a type or choices), the
    ``required`` keys, the estimator parameters set elsewhere (``excluded``), the ``estimator``
    (imported on call) and ``make`` (fit on private data, write the release, return a summary)."""

    name: str
    table: Mapping[str, Any]
    required: tuple[str, ...]
    excluded: tuple[str, ...]
    estimator: Callable[[], Callable[..., Any]]
    make: Callable[..., str]


_SEQUENCES_TABLE: dict[str, Any] = {
    "input": "path",
    "taxonomy": "spec",
    "location_column": str,
    "locations": "path",
    "on_unknown": ("error", "drop"),
    "gtfs_stations": bool,
    "gtfs_route_rule": ROUTE_RULES,
    "format": ("csv", "parquet"),
    "timezone": str,
    **INPUT_MAP_KEYS,
}
_MARGINALS_TABLE: dict[str, Any] = {
    "input": "path",
    "taxonomy": "spec",
    "location_column": str,
    "on_unknown": ("error", "drop"),
    "gtfs_stations": bool,
    "gtfs_route_rule": ROUTE_RULES,
    "format": ("csv", "parquet"),
    "timezone": str,
    **INPUT_MAP_KEYS,
}

RELEASE_KINDS: dict[str, ReleaseKind] = {
    "sequences": ReleaseKind(
        "sequences",
        _SEQUENCES_TABLE,
        ("input", "taxonomy"),
        ("taxonomy", "random_state"),
        _prefixtree,
        _make_sequences,
    ),
    "trips": ReleaseKind(
        "trips", TRIPS_TABLE, ("private",), ("schema", "random_state"), _archetypes, _make_trips
    ),
    "marginals": ReleaseKind(
        "marginals",
        _MARGINALS_TABLE,
        ("input",),
        ("taxonomy", "random_state", "on_unknown", "location_column"),
        _opal,
        _make_marginals,
    ),
}
#: release kind -> the keys of its config table (other than name/parameters).
KINDS: dict[str, Mapping[str, Any]] = {name: kind.table for name, kind in RELEASE_KINDS.items()}


def make_release(
    kind: str,
    out: str | os.PathLike[str],
    *,
    io: Mapping[str, Any],
    params: Mapping[str, Any],
    data: Any = None,
    seed: int | None = None,
    progress: Any = None,
    provenance_key: bytes | None = None,
) -> str:
    """Fit the release ``kind`` on its private input and write it into ``out``; returns the
    summary line. ``io``: the keys of the kind's config table (paths, columns, format);
    ``params``: the estimator's parameters; ``data``: the input already loaded (a frame), else
    ``io``'s file is read."""
    return RELEASE_KINDS[kind].make(
        out,
        io,
        params,
        data=data,
        seed=seed,
        progress=progress,
        provenance_key=provenance_key,
    )
