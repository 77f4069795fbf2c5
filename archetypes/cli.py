"""``transit-synth trips``: GMM-archetype synthetic trips (design.md section 3).

``transit-synth trips PRIVATE --public PUBLIC --epsilon E --delta D --out DIR [--archetypes K]
[--config FILE]`` writes ``DIR/trips.csv`` (or ``.parquet``), ``DIR/schema.json`` (the public
domains used) and ``DIR/manifest.json`` (the privacy ledger) atomically. A ``--config`` file is
one ``[trips]`` table as in a ``transit-synth run`` config (:mod:`synth.run`): ``input_format`` =
``trips`` | ``chicago-taxi`` | ``sube-taps``; ``public_years`` / ``private_years`` for the Chicago
file; ``metadata`` = SUBE line metadata; ``schema`` = a schema JSON; optional ``private``,
``public`` and ``format``; and a ``[trips.parameters]`` sub-table of
:class:`~archetypes.synthesizer.ArchetypeSynthesizer` parameters (``epsilon`` and ``delta``
included). The command line overrides it. The old form (``[input]`` and ``[archetypes]`` tables)
is still read, with a deprecation note. Relative paths in a config are resolved against the
config's folder. Without public trips, ``--public`` is left out and ``--public-stand-in`` (or
``public_stand_in`` in the parameters)
learns on an SBH release of PRIVATE (:mod:`archetypes.standin`); the column domains then come from
the schema (``--schema``; for ``chicago-taxi`` the challenge domains with companies "Unknown" only).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from archetypes.datasets import chicago_taxi_schema, chicago_taxi_trips, sube_schema, sube_trips
from archetypes.schema import TripSchema
from archetypes.synthesizer import ArchetypeSynthesizer
from synth.cli import add_quiet_option, add_seed_option, warn_if_seeded, warn_if_underspent
from synth.config import TRIPS_TABLE, check_io, check_params, load_config
from synth.errors import ConfigError
from synth.io import read_table, release_dir, write_table
from synth.privacy import check_budget
from synth.progress import Progress
from synth.provenance import (
    add_provenance_option,
    private_inputs,
    provenance_key,
    write_provenance,
)

__all__ = ["check_inputs", "normalize_params", "register", "release_trips", "run"]

INPUT_FORMATS = ("trips", "chicago-taxi", "sube-taps")
ALLOWED_INPUTS = {"format", "public_years", "private_years", "metadata", "schema"}
FROM_COMMAND_LINE = ("epsilon", "delta", "random_state", "schema")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``trips`` subcommand."""
    p = subparsers.add_parser(
        "trips",
        help="synthetic trips from GMM archetypes (GooseDP, NIST 2020 challenge)",
        description="Differentially private synthetic trips: archetypes learnt on PUBLIC trips, "
        "two noisy histograms of the PRIVATE trips (discrete Gaussian, analytic calibration).",
    )
    p.add_argument("private", metavar="PRIVATE", help="private trips (CSV or Parquet)")
    p.add_argument(
        "--public",
        default=None,
        metavar="PUBLIC",
        help="public trips of the same kind (optional with --public-stand-in)",
    )
    p.add_argument(
        "--public-stand-in",
        action="store_true",
        help="without --public: learn on an SBH release of PRIVATE instead (spends the first "
        "budget_split share; public_stand_in in the --config parameters sets its options)",
    )
    p.add_argument(
        "--epsilon",
        type=float,
        default=None,
        help="total epsilon per individual (required unless the --config file gives it)",
    )
    p.add_argument(
        "--delta",
        type=float,
        default=None,
        help="total delta per individual (required unless the --config file gives it)",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="release directory")
    p.add_argument("--archetypes", type=int, default=None, metavar="K", help="number of archetypes")
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="TOML config: a [trips] table as in a `transit-synth run` config (parameters in "
        "[trips.parameters]); the flags override it. Shipped: transit-synth configs",
    )
    p.add_argument("--schema", default=None, metavar="FILE", help="public column domains (JSON)")
    p.add_argument("--input-format", choices=INPUT_FORMATS, default=None)
    p.add_argument("--id-column", default=None, help="the individual's id column")
    p.add_argument("--key-columns", default=None, help="comma-separated key columns")
    p.add_argument("--category-column", default=None, help="per-individual category column")
    p.add_argument("--n-records", type=int, default=None, help="number of synthetic trips")
    p.add_argument(
        "--format",
        choices=("csv", "parquet"),
        default=None,
        help="output format (default: the config's format, else csv)",
    )
    add_seed_option(p)
    add_quiet_option(p)
    add_provenance_option(p)
    p.set_defaults(func=run)


def _resolve(value: Any, base: Path | None) -> Path:
    path = Path(str(value))
    return path if path.is_absolute() or base is None else base / path


def _config_tables(path: str) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """The IO keys and the parameters of a ``--config`` file: a ``[trips]`` table as in a
    ``transit-synth run`` config (its ``parameters`` sub-table the constructor's), or the old
    ``[input]`` / ``[archetypes]`` form (read with a deprecation note)."""
    source = Path(path)
    config = load_config(source)
    base = source.resolve().parent
    if config and set(config) <= {"input", "archetypes"}:
        warnings.warn(  # on stderr as "warning: ..." (silenced by --quiet)
            f"{source}: [input] / [archetypes] is the old `trips --config` form (still read, "
            "deprecated); write it as a [trips] table with a [trips.parameters] sub-table, as in "
            "a `transit-synth run` config (transit-synth configs taxi-archetypes shows one)",
            FutureWarning,
            stacklevel=2,
        )
        inputs = dict(config.get("input", {}))
        check_inputs(inputs, source=source, section="input")
        params = check_params(
            ArchetypeSynthesizer.__init__,
            config.get("archetypes", {}),
            source=source,
            section="archetypes",
            exclude=FROM_COMMAND_LINE,
        )
        io = {("input_format" if k == "format" else k): v for k, v in inputs.items()}
        for key in ("metadata", "schema"):
            if key in io:
                io[key] = str(_resolve(io[key], base))
        return io, params, base
    table = config.get("trips")
    if set(config) != {"trips"} or not isinstance(table, dict):
        raise ConfigError(
            f"{source}: expected one [trips] table (as in a `transit-synth run` config) with a "
            f"[trips.parameters] sub-table; found {', '.join(sorted(config)) or 'nothing'}"
        )
    io, _ = check_io(TRIPS_TABLE, table, source=source, section="trips", base=base)
    parameters = table.get("parameters", {})
    if not isinstance(parameters, dict):
        raise ConfigError(f"{source}: key 'parameters' in [trips] must be a table")
    params = check_params(
        ArchetypeSynthesizer.__init__,
        parameters,
        source=source,
        section="trips.parameters",
        exclude=("schema", "random_state"),
    )
    return io, params, base


def _settings(
    args: argparse.Namespace,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The IO keys, the input options (:func:`release_trips` ``inputs``) and the constructor
    parameters: the config's first, the flags override."""
    io: dict[str, Any] = {}
    params: dict[str, Any] = {}
    if args.config is not None:
        io, params, _ = _config_tables(args.config)
    inputs = {
        key: io[source]
        for key, source in (
            ("format", "input_format"),
            ("public_years", "public_years"),
            ("private_years", "private_years"),
            ("metadata", "metadata"),
            ("schema", "schema"),
        )
        if source in io
    }
    if args.input_format is not None:
        inputs["format"] = args.input_format
    for flag in ("epsilon", "delta", "id_column", "category_column"):
        if getattr(args, flag) is not None:
            params[flag] = getattr(args, flag)
    if args.key_columns is not None:
        params["key_columns"] = [c.strip() for c in args.key_columns.split(",") if c.strip()]
    if args.archetypes is not None:
        params["n_archetypes"] = args.archetypes
    if args.n_records is not None:
        params["n_records"] = args.n_records
    if getattr(args, "public_stand_in", False) and not params.get("public_stand_in"):
        params["public_stand_in"] = True
    params = normalize_params(params)
    for key in ("epsilon", "delta", "key_columns", "category_column"):
        if key not in params:
            raise ConfigError(
                f"--{key.replace('_', '-')} (or {key} in the --config file's [trips.parameters]) "
                "is required"
            )
    return io, inputs, params


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


def _load(
    private_path: str | os.PathLike[str],
    public_path: str | os.PathLike[str] | None,
    inputs: Mapping[str, Any],
    base: Path | None,
    schema_file: str | os.PathLike[str] | None = None,
) -> tuple[pd.DataFrame | None, pd.DataFrame, TripSchema | None]:
    """Public (None without ``public_path``: the domains then come from the schema), private
    trips and schema."""
    fmt = inputs.get("format", "trips")
    if fmt not in INPUT_FORMATS:
        raise ConfigError(f"[input] format must be one of {', '.join(INPUT_FORMATS)}, got {fmt!r}")
    schema: TripSchema | None = None
    public: pd.DataFrame | None = None
    if fmt == "chicago-taxi":
        private = chicago_taxi_trips(read_table(private_path), years=inputs.get("private_years"))
        if public_path is not None:
            public = chicago_taxi_trips(read_table(public_path), years=inputs.get("public_years"))
        # no public trips: the companies' domain is "Unknown" only unless a schema lists them
        schema = chicago_taxi_schema(private.iloc[:0] if public is None else public)
    elif fmt == "sube-taps":
        private = sube_trips(read_table(private_path, dtype={"id_tarjeta": str}))
        if public_path is not None:  # without: the schema file must give the domains
            public = sube_trips(read_table(public_path, dtype={"id_tarjeta": str}))
            metadata = inputs.get("metadata")
            schema = sube_schema(public, None if metadata is None else _resolve(metadata, base))
    else:
        private = read_table(private_path)
        public = None if public_path is None else read_table(public_path)
    schema_path = schema_file or (
        None if inputs.get("schema") is None else _resolve(inputs["schema"], base)
    )
    if schema_path is not None:
        given = TripSchema.from_json(Path(schema_path))
        schema = given if schema is None else schema.replace(*given.columns.values())
    return public, private, schema


def _public_inputs(
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
            out[key] = _resolve(table[key], base)
    if schema is not None:
        out["schema"] = schema
    return out


def run(args: argparse.Namespace) -> int:
    """Fit on PRIVATE with PUBLIC, sample, write the release directory."""
    warn_if_seeded(args.seed)
    if args.epsilon is not None and args.delta is not None:
        check_budget(args.epsilon, args.delta, need_delta=True)
    io, inputs, params = _settings(args)
    public = args.public if args.public is not None else io.get("public")
    if public is not None and params.get("public_stand_in") and args.public is None:
        public = None  # --public-stand-in on the command line: the config's public is not used
    summary = release_trips(
        args.private,
        public,
        args.out,
        params=params,
        inputs=inputs,
        schema=args.schema,
        format=args.format or io.get("format", "csv"),
        seed=args.seed,
        progress=Progress(args.quiet),
        provenance_key=provenance_key(args.provenance_key_file),
    )
    if not args.quiet:
        print(summary, file=sys.stderr)
    return 0


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
    if format not in ("csv", "parquet"):
        raise ConfigError(f"format must be 'csv' or 'parquet', got {format!r}")
    provenance = (
        None if provenance_key is None else private_inputs(provenance_key, {"private": private})
    )
    with progress.steps("trips", 4) as step:
        step("load")
        public_trips, private_trips, trip_schema = _load(
            private, public, dict(inputs or {}), base, schema
        )
        step("fit")
        synthesizer = ArchetypeSynthesizer(**params, schema=trip_schema, random_state=seed).fit(
            private_trips, public_trips
        )
        step("sample")
        trips = synthesizer.sample()
        step("write")
        manifest = synthesizer.manifest(public_inputs=_public_inputs(public, inputs, base, schema))
        with release_dir(out) as stage:
            write_table(trips, stage / f"trips.{format}")
            (stage / "schema.json").write_text(json.dumps(synthesizer.schema_.to_dict(), indent=2))
            (stage / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))
    if provenance is not None:
        write_provenance(out, provenance, command="trips")
    ledger = synthesizer.ledger_
    warn_if_underspent(ledger, str(out))
    return (
        f"transit-synth trips: {len(trips)} synthetic trips of "
        f"{trips[synthesizer.id_column].nunique()} individuals in {out}; "
        f"epsilon {ledger.spent_epsilon:g} of {float(params['epsilon']):g}, "
        f"delta {ledger.spent_delta:g}"
    )
