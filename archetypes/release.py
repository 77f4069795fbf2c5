"""Fit archetypes on private trips and write the release directory (the library side of
``transit-synth trips``, ``run`` and ``demo``; GMM archetypes after the NIST temporal map
challenge)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from archetypes.datasets import chicago_taxi_schema, chicago_taxi_trips, sube_schema, sube_trips
from archetypes.reading import read_private_trips, read_public_trips
from archetypes.schema import TripSchema
from archetypes.synthesizer import ArchetypeSynthesizer
from synth.errors import ConfigError
from synth.privacy import check_budget
from synth.progress import Progress
from synth.provenance import private_inputs, write_provenance
from synth.release import check_format, warn_if_underspent

__all__ = [
    "ALLOWED_INPUTS",
    "INPUT_FORMATS",
    "check_inputs",
    "load_inputs",
    "normalize_params",
    "public_inputs",
    "release_trips",
    "resolve_path",
]


INPUT_FORMATS = ("trips", "chicago-taxi", "sube-taps")


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


def load_inputs(
    private_path: str | os.PathLike[str],
    public_path: str | os.PathLike[str] | None,
    inputs: Mapping[str, Any],
    base: Path | None,
    schema_file: str | os.PathLike[str] | None = None,
    *,
    id_column: str | None = None,
) -> tuple[pd.DataFrame | None, pd.DataFrame, TripSchema | None]:
    """Public (None without ``public_path``: the domains then come from the schema), private
    trips and schema, every format read value by value (:mod:`archetypes.reading`: no column's
    type guessed from the private values; ``id_column`` by the identifier rule, in the public
    trips too)."""
    fmt = inputs.get("format", "trips")
    if fmt not in INPUT_FORMATS:
        raise ConfigError(f"[input] format must be one of {', '.join(INPUT_FORMATS)}, got {fmt!r}")
    schema: TripSchema | None = None
    public: pd.DataFrame | None = None
    sep = inputs.get("sep")  # the CSV delimiter (public configuration; default comma)
    if fmt == "chicago-taxi":
        private = chicago_taxi_trips(private_path, years=inputs.get("private_years"), sep=sep)
        if public_path is not None:
            public = chicago_taxi_trips(public_path, years=inputs.get("public_years"), sep=sep)
        # no public trips: the companies' domain is "Unknown" only unless a schema lists them
        schema = chicago_taxi_schema(private.iloc[:0] if public is None else public)
    elif fmt == "sube-taps":
        private = sube_trips(private_path, sep=sep)
        if public_path is not None:  # without: the schema file must give the domains
            public = sube_trips(public_path, sep=sep)
            metadata = inputs.get("metadata")
            schema = sube_schema(public, None if metadata is None else resolve_path(metadata, base))
    else:
        private = read_private_trips(private_path, id_column=id_column, sep=sep)
        public = (
            None
            if public_path is None
            else read_public_trips(public_path, id_column=id_column, sep=sep)
        )
    schema_path = schema_file or (
        None if inputs.get("schema") is None else resolve_path(inputs["schema"], base)
    )
    if schema_path is not None:
        given = TripSchema.from_json(Path(schema_path))
        if schema is not None:  # the file's columns win; its groups too, when it has some
            given = TripSchema({**schema.columns, **given.columns}, given.groups or schema.groups)
        schema = given
    return public, private, schema


def public_inputs(
    public: str | os.PathLike[str] | None,
    inputs: Mapping[str, Any] | None,
    base: Path | None,
    schema: str | os.PathLike[str] | None,
) -> dict[str, str | os.PathLike[str]]:
    """The public files of a trips release (fingerprinted in its manifest): public trips, schema
    and line metadata; never the private trips."""
    table = dict(inputs or {})
    out: dict[str, str | os.PathLike[str]] = {}
    if public is not None:
        out["public"] = public
    for key in ("metadata", "schema"):
        if table.get(key) is not None:
            out[key] = resolve_path(table[key], base)
    if schema is not None:
        out["schema"] = schema
    return out


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
    check_budget(params["epsilon"], params["delta"], need_delta=True)
    check_format(format)
    provenance = (
        None if provenance_key is None else private_inputs(provenance_key, {"private": private})
    )
    with progress.steps("trips", 3) as step:
        step("load")
        public_trips, private_trips, trip_schema = load_inputs(
            private,
            public,
            dict(inputs or {}),
            base,
            schema,
            id_column=params.get("id_column", "individual_id"),
        )
        step("fit")
        synthesizer = ArchetypeSynthesizer(**params, schema=trip_schema, random_state=seed).fit(
            private_trips, public_trips
        )
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
        f"delta {ledger.spent_delta:g}"
    )
