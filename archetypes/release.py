"""Fit archetypes on private trips and write the release directory (the library side of
``transit-synth trips``, ``run`` and ``demo``; GMM archetypes after the NIST temporal map
challenge)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from archetypes.datasets import SUBE_PUBLISHED
from archetypes.schema import TripSchema
from archetypes.synthesizer import ArchetypeSynthesizer
from archetypes.trip_sources import TRIP_FORMATS, TripSource
from synth import datasets
from synth.errors import ConfigError, TransitSynthWarning
from synth.params import spell
from synth.progress import Progress
from synth.provenance import private_inputs, write_provenance
from synth.release import check_format, warn_if_underspent

__all__ = [
    "ALLOWED_INPUTS",
    "INPUT_FORMATS",
    "check_inputs",
    "normalize_params",
    "public_inputs",
    "release_trips",
    "resolve_path",
    "schema_path",
    "trip_sources",
]


#: the ``--input-format`` / ``[input] format`` choices (:class:`TripSource` layouts)
INPUT_FORMATS: tuple[str, ...] = TRIP_FORMATS


ALLOWED_INPUTS = {"format", "public_years", "private_years", "metadata", "schema"}


def resolve_path(value: Any, base: Path | None) -> Path:
    path = Path(str(value))
    return path if path.is_absolute() or base is None else base / path


def normalize_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """TOML lists as the constructor wants them: ``completion`` pairs and ``budget_split``."""
    out = dict(params)
    if "completion" in out:
        out["completion"] = [(str(t), tuple(c)) for t, c in out["completion"]]
    if "budget_split" in out:
        out["budget_split"] = tuple(out["budget_split"])
    return out


def check_inputs(
    inputs: Mapping[str, Any], *, source: str | os.PathLike[str], section: str
) -> None:
    """The keys of an ``[input]`` table (see the module docstring)."""
    unknown = sorted(set(inputs) - ALLOWED_INPUTS)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key '{unknown[0]}' in [{section}] "
            f"(allowed: {', '.join(sorted(ALLOWED_INPUTS))})"
        )
    fmt = inputs.get("format", "trips")
    if fmt not in INPUT_FORMATS:
        raise ConfigError(
            f"{source}: key 'format' in [{section}] must be one of {', '.join(INPUT_FORMATS)}, "
            f"got {fmt!r}"
        )
    for key in ("public_years", "private_years"):
        value = inputs.get(key)
        if value is not None and not (
            isinstance(value, list)
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            raise ConfigError(f"{source}: key '{key}' in [{section}] must be a list of years")
    for key in ("metadata", "schema"):
        if key in inputs and not isinstance(inputs[key], str):
            raise ConfigError(f"{source}: key '{key}' in [{section}] must be a path (string)")


def trip_sources(
    private: str | os.PathLike[str],
    public: str | os.PathLike[str] | None,
    inputs: Mapping[str, Any],
    base: Path | None,
) -> tuple[TripSource, TripSource | None]:
    """The private and public :class:`~archetypes.trip_sources.TripSource` of an ``[input]``
    table (its format, years, delimiter and metadata, the latter on both: it gives the SUBE
    domains with public trips or without; paths relative to ``base``): what
    :func:`release_trips` hands to ``fit``, which reads them."""
    fmt, sep = inputs.get("format", "trips"), inputs.get("sep")
    metadata = inputs.get("metadata")  # fit refuses it for a layout that has no use for it
    meta = None if metadata is None else resolve_path(metadata, base)
    years = inputs.get("private_years")  # fit refuses years for a layout without them
    private_source = TripSource(private, format=fmt, years=years, sep=sep, metadata=meta)
    if public is None:
        return private_source, None
    years = inputs.get("public_years")
    return private_source, TripSource(public, format=fmt, years=years, sep=sep, metadata=meta)


def schema_path(
    inputs: Mapping[str, Any], base: Path | None, schema: str | os.PathLike[str] | None
) -> str | None:
    """The schema JSON of a trips release: ``schema`` (``--schema``), else the ``[input]``
    table's (relative to ``base``); read by ``fit``."""
    if schema is not None:
        return str(schema)
    return None if inputs.get("schema") is None else str(resolve_path(inputs["schema"], base))


def public_inputs(
    public: str | os.PathLike[str] | None,
    inputs: Mapping[str, Any] | None,
    base: Path | None,
    schema: str | os.PathLike[str] | None,
) -> dict[str, str | os.PathLike[str]]:
    """The public files of a trips release (fingerprinted in its manifest): public trips, schema
    and line metadata, and without public trips the embedded file whose zones and fare products
    the SUBE layout lists (:func:`~archetypes.datasets.sube_schema`); never the private trips."""
    table = dict(inputs or {})
    out: dict[str, str | os.PathLike[str]] = {}
    if public is not None:
        out["public"] = public
    for key in ("metadata", "schema"):
        if table.get(key) is not None:
            out[key] = resolve_path(table[key], base)
    if schema is not None:
        out["schema"] = schema
    if public is None and table.get("format") == "sube-taps" and "metadata" in out:
        out["zones and fare products"] = datasets.path(SUBE_PUBLISHED)  # sube_schema(None, ...)
    return out


def warn_unmodelled(schema: TripSchema | None, used: list[str]) -> None:
    """The columns of the user's schema file that the model does not read are not in the
    release: a warning names them (from the configuration and the public schema alone)."""
    left = [
        name
        for name, column in (schema.columns.items() if schema is not None else ())
        if column.kind in ("categorical", "numeric") and name not in used
    ]
    if left:
        warnings.warn(
            f"schema column(s) {', '.join(map(repr, left))} are not in the release: neither "
            f"key, category nor completion columns (add them to {spell('key_columns')} or "
            f"{spell('completion')})",
            TransitSynthWarning,
            stacklevel=3,
        )


def release_trips(
    private: str | os.PathLike[str],
    public: str | os.PathLike[str] | None,
    out: str | os.PathLike[str],
    *,
    params: Mapping[str, Any],
    inputs: Mapping[str, Any] | None = None,
    base: Path | None = None,
    schema: str | os.PathLike[str] | None = None,
    format: str = "csv",
    seed: int | None = None,
    progress: Progress | None = None,
    provenance_key: bytes | None = None,
) -> str:
    """Fit on ``private`` with ``public``, sample, write ``out`` atomically; returns a summary line.

    ``params`` are :class:`~archetypes.synthesizer.ArchetypeSynthesizer` keyword parameters (with
    ``epsilon`` and ``delta``; not ``schema`` nor ``random_state``, which is ``seed``); ``inputs``
    is an ``[input]`` table (paths in it relative to ``base``); ``schema`` a schema JSON that
    overrides the table's. What ``transit-synth trips`` and ``transit-synth run`` both call.
    The manifest fingerprints the public inputs only; with ``provenance_key`` the operator-only
    record of :mod:`synth.provenance` is written beside ``out``.
    """
    progress = Progress(quiet=True) if progress is None else progress
    params = normalize_params(params)
    missing = [key for key in ("epsilon", "delta") if key not in params]
    if missing:
        raise ConfigError(f"trips: {missing[0]} is required")
    check_format(format)
    table = dict(inputs or {})
    provenance = (
        None if provenance_key is None else private_inputs(provenance_key, {"private": private})
    )
    with progress.steps("trips", 2) as step:
        step("fit")  # fit alone validates the parameters and reads the trips and the schema
        synthesizer = ArchetypeSynthesizer(
            **params, schema=schema_path(table, base, schema), random_state=seed
        )
        synthesizer.fit(*trip_sources(private, public, table, base))
        if schema_path(table, base, schema) is not None:
            warn_unmodelled(synthesizer.given_schema_, synthesizer.used_columns_)
        step("write")
        written = synthesizer.write(
            out, format=format, public_inputs=public_inputs(public, inputs, base, schema)
        )
    if provenance is not None:
        write_provenance(out, provenance, command="trips")
    ledger = synthesizer.ledger_
    warn_if_underspent(ledger, str(out))
    return (
        f"transit-synth trips: {written.counts['rows']} synthetic trips of "
        f"{written.counts['individuals']} individuals in {out}; "
        f"epsilon {ledger.spent_epsilon:g} of {float(params['epsilon']):g}, "
        f"delta {ledger.spent_delta:g} of {float(params['delta']):g}"
    )
