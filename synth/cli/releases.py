"""How a config table becomes a release: :func:`make_release` and the shipped adapters.

``run``, ``demo`` and the per-kind commands fit a generator on its private input and write its
release through :func:`make_release`, which reads the generator's spec (:mod:`synth.registry`): its
``release`` function (the adapters below, from a config table's keys to :mod:`prefixtree.release`,
:mod:`archetypes.release` and :mod:`synth.marginals.release`), else :func:`default_release` (the
estimator fitted on ``input``, then :meth:`~synth.generator.Generator.write`). :func:`config_table`
is a kind's config table with the input-mapping keys of :mod:`synth.cli.inputmap` and the GTFS keys
when its spec takes them. Generator modules are imported only when a kind is used, so ``--help``
stays fast.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any, TypedDict, Unpack

from synth import registry
from synth.cli.inputmap import INPUT_MAP_KEYS

__all__ = [
    "NO_OPTIONS",
    "ReleaseOptions",
    "config_table",
    "default_release",
    "make_marginals",
    "make_release",
    "make_sequences",
    "make_trips",
    "trip_inputs",
]


def make_sequences(
    out: str | os.PathLike[str], io: Mapping[str, Any], params: Mapping[str, Any], **kw: Any
) -> str:
    """A ``[sequences]`` table's release (:func:`prefixtree.release.release_sequences`)."""
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
        names=io.get("names"),
        location_names=io.get("location_names", False),
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


def trip_inputs(io: Mapping[str, Any]) -> dict[str, Any]:
    """The ``inputs`` of :func:`archetypes.release.release_trips` given in a ``[trips]`` table."""
    return {key: io[source] for key, source in _TRIP_INPUTS if source in io}


def make_trips(
    out: str | os.PathLike[str], io: Mapping[str, Any], params: Mapping[str, Any], **kw: Any
) -> str:
    """A ``[trips]`` table's release (:func:`archetypes.release.release_trips`)."""
    from archetypes.release import release_trips

    kw.pop("data", None)  # the trips are read from their files (public and private)
    inputs = trip_inputs(io)
    return release_trips(
        io["private"],
        io.get("public"),
        out,
        params=params,
        inputs=inputs,
        format=io.get("format", "csv"),
        **kw,
    )


def make_marginals(
    out: str | os.PathLike[str], io: Mapping[str, Any], params: Mapping[str, Any], **kw: Any
) -> str:
    """A ``[marginals]`` table's release (:func:`synth.marginals.release.release_marginals`)."""
    from synth.marginals.release import release_marginals

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
        names=io.get("names"),
        location_names=io.get("location_names", False),
        **kw,
    )
    return summary if columns is None else f"{summary}\n  {columns}"


def _mapped(
    io: Mapping[str, Any], data: Any, time_bin: int | None, bin_key: str
) -> tuple[Any, str | None, str | None]:
    """The input of a config table (``data``: already loaded, else its ``input`` file) with its
    input-mapping keys (:mod:`synth.cli.inputmap`): the file or frame, or a
    :class:`~synth.records.mapped_source.MappedSource` that the estimator's ``fit`` reads."""
    from synth.cli.inputmap import input_map_from_io, mapped_input

    return mapped_input(
        io["input"] if data is None else data,
        input_map_from_io(io),
        time_bin=time_bin,
        bin_flag=bin_key,
        read=False,  # an active mapping: a MappedSource that fit reads (issue 27)
    )


def config_table(kind: str) -> dict[str, Any]:
    """The keys of a ``[kind]`` config table (besides ``name`` and ``parameters``) and their rules
    (:func:`synth.config.check_io`): the spec's, with the GTFS and input-mapping keys when it
    takes them."""
    from synth.gtfs import ROUTE_RULES

    spec = registry.get(kind)
    gtfs = {"gtfs_stations": bool, "gtfs_route_rule": ROUTE_RULES} if spec.gtfs else {}
    return {**spec.table, **gtfs, **(INPUT_MAP_KEYS if spec.input_map else {})}


class ReleaseOptions(TypedDict, total=False):
    """The keyword options of every release function (a spec's ``release``, :func:`make_release`,
    :func:`default_release`), each None when not given: ``data``, the input already loaded (a
    frame; else ``io``'s file is read); ``seed``; ``progress``; ``provenance_key``."""

    data: Any
    seed: int | None
    progress: Any
    provenance_key: bytes | None


#: every option, unset
NO_OPTIONS: ReleaseOptions = {"data": None, "seed": None, "progress": None, "provenance_key": None}


def default_release(
    kind: str,
    out: str | os.PathLike[str],
    io: Mapping[str, Any],
    params: Mapping[str, Any],
    **options: Unpack[ReleaseOptions],
) -> str:
    """A release of a generator whose spec names no ``release`` function: its estimator with
    ``params`` (``random_state`` from ``seed``) fitted on ``data`` (else the ``input`` file, passed
    as a path: ``fit`` reads it), then written with ``write(out, format=...)``; ``progress`` is
    not used (one step: nothing to report)."""
    from synth.provenance import input_provenance, write_provenance
    from synth.release import warn_if_underspent

    data = options.get("data")
    source = io.get("input")
    provenance = input_provenance(options.get("provenance_key"), source)
    estimator = registry.get(kind).estimator_class()(**params, random_state=options.get("seed"))
    estimator.fit(source if data is None else data)
    written = estimator.write(out, format=io.get("format", "csv"))
    if provenance is not None:
        write_provenance(out, provenance, command=kind)
    warn_if_underspent(estimator.ledger_, str(out))
    counts = ", ".join(f"{v} {k}" for k, v in written.counts.items())
    return f"{kind}: {counts or 'released'}, epsilon {estimator.ledger_.spent_epsilon:g} -> {out}"


def make_release(
    kind: str,
    out: str | os.PathLike[str],
    *,
    io: Mapping[str, Any],
    params: Mapping[str, Any],
    **options: Unpack[ReleaseOptions],
) -> str:
    """Fit the release ``kind`` on its private input and write it into ``out``; returns the
    summary line. ``io``: the keys of the kind's config table (paths, columns, format);
    ``params``: the estimator's parameters; ``options``: :class:`ReleaseOptions` (the spec's
    ``release`` function gets every one, None when not given)."""
    spec = registry.get(kind)
    release = (
        functools.partial(default_release, kind)
        if spec.release is None
        else registry.load(spec.release)
    )
    given: ReleaseOptions = {**NO_OPTIONS, **options}
    return str(release(out, io, params, **given))
