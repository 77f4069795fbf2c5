"""``transit-synth trips``: GMM-archetype synthetic trips (design.md section 3).

``transit-synth trips PRIVATE --public PUBLIC --epsilon E --delta D --out DIR [--archetypes K]
[--config FILE]`` writes ``DIR/trips.csv`` (or ``.parquet``), ``DIR/schema.json`` (the public
domains used) and ``DIR/manifest.json`` (the privacy ledger) atomically. A TOML config has an
``[input]`` table (``format`` = ``trips`` | ``chicago-taxi`` | ``sube-taps``; ``public_years`` /
``private_years`` for the Chicago file; ``metadata`` = SUBE line metadata; ``schema`` = a schema
JSON) and an ``[archetypes]`` table of :class:`~archetypes.synthesizer.ArchetypeSynthesizer`
parameters. Relative paths in a config are resolved against the config's folder.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from archetypes.datasets import chicago_taxi_schema, chicago_taxi_trips, sube_schema, sube_trips
from archetypes.schema import TripSchema
from archetypes.synthesizer import ArchetypeSynthesizer
from synth.cli import add_quiet_option, add_seed_option, warn_if_seeded
from synth.config import check_params, load_config
from synth.errors import ConfigError
from synth.io import read_table, release_dir, write_table
from synth.privacy import check_budget

__all__ = ["register", "run"]

INPUT_FORMATS = ("trips", "chicago-taxi", "sube-taps")
FROM_COMMAND_LINE = ("epsilon", "delta", "random_state", "schema")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``trips`` subcommand."""
    p = subparsers.add_parser(
        "trips",
        help="synthetic trip microdata from GMM archetypes (GooseDP)",
        description="Differentially private synthetic trips: archetypes learnt on PUBLIC trips, "
        "two noisy histograms of the PRIVATE trips (discrete Gaussian, analytic calibration).",
    )
    p.add_argument("private", metavar="PRIVATE", help="private trips (CSV or Parquet)")
    p.add_argument(
        "--public", required=True, metavar="PUBLIC", help="public trips of the same kind"
    )
    p.add_argument("--epsilon", type=float, required=True, help="total epsilon per individual")
    p.add_argument("--delta", type=float, required=True, help="total delta per individual")
    p.add_argument("--out", required=True, metavar="DIR", help="release directory")
    p.add_argument("--archetypes", type=int, default=None, metavar="K", help="number of archetypes")
    p.add_argument("--config", default=None, metavar="FILE", help="TOML configuration")
    p.add_argument("--schema", default=None, metavar="FILE", help="public column domains (JSON)")
    p.add_argument("--input-format", choices=INPUT_FORMATS, default=None)
    p.add_argument("--id-column", default=None, help="the individual's id column")
    p.add_argument("--key-columns", default=None, help="comma-separated key columns")
    p.add_argument("--category-column", default=None, help="per-individual category column")
    p.add_argument("--n-records", type=int, default=None, help="number of synthetic trips")
    p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="output format")
    add_seed_option(p)
    add_quiet_option(p)
    p.set_defaults(func=run)


def _resolve(value: Any, base: Path | None) -> Path:
    path = Path(str(value))
    return path if path.is_absolute() or base is None else base / path


def _settings(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any], Path | None]:
    """The ``[input]`` and ``[archetypes]`` tables (config first, flags override)."""
    config: dict[str, Any] = {}
    base = None
    if args.config is not None:
        config = load_config(args.config)
        base = Path(args.config).resolve().parent
        unknown = sorted(set(config) - {"input", "archetypes"})
        if unknown:
            raise ConfigError(
                f"{args.config}: unknown table(s) {unknown} (allowed: archetypes, input)"
            )
    inputs = dict(config.get("input", {}))
    allowed_inputs = {"format", "public_years", "private_years", "metadata", "schema"}
    unknown = sorted(set(inputs) - allowed_inputs)
    if unknown:
        raise ConfigError(f"{args.config}: unknown key(s) {unknown} in [input]")
    params = check_params(
        ArchetypeSynthesizer.__init__,
        config.get("archetypes", {}),
        source=args.config or "command line",
        section="archetypes",
        exclude=FROM_COMMAND_LINE,
    )
    if args.input_format is not None:
        inputs["format"] = args.input_format
    for flag, key in (("id_column", "id_column"), ("category_column", "category_column")):
        if getattr(args, flag) is not None:
            params[key] = getattr(args, flag)
    if args.key_columns is not None:
        params["key_columns"] = [c.strip() for c in args.key_columns.split(",") if c.strip()]
    if args.archetypes is not None:
        params["n_archetypes"] = args.archetypes
    if args.n_records is not None:
        params["n_records"] = args.n_records
    if "completion" in params:
        params["completion"] = [(str(t), tuple(c)) for t, c in params["completion"]]
    if "budget_split" in params:
        params["budget_split"] = tuple(params["budget_split"])
    for key in ("key_columns", "category_column"):
        if key not in params:
            raise ConfigError(f"--{key.replace('_', '-')} (or [archetypes] {key}) is required")
    return inputs, params, base


def _load(
    args: argparse.Namespace, inputs: dict[str, Any], base: Path | None
) -> tuple[pd.DataFrame, pd.DataFrame, TripSchema | None]:
    fmt = inputs.get("format", "trips")
    if fmt not in INPUT_FORMATS:
        raise ConfigError(f"[input] format must be one of {', '.join(INPUT_FORMATS)}, got {fmt!r}")
    schema: TripSchema | None = None
    if fmt == "chicago-taxi":
        public = chicago_taxi_trips(read_table(args.public), years=inputs.get("public_years"))
        private = chicago_taxi_trips(read_table(args.private), years=inputs.get("private_years"))
        schema = chicago_taxi_schema(public)
    elif fmt == "sube-taps":
        public = sube_trips(read_table(args.public, dtype={"id_tarjeta": str}))
        private = sube_trips(read_table(args.private, dtype={"id_tarjeta": str}))
        metadata = inputs.get("metadata")
        schema = sube_schema(public, None if metadata is None else _resolve(metadata, base))
    else:
        public, private = read_table(args.public), read_table(args.private)
    schema_path = args.schema or (
        None if inputs.get("schema") is None else _resolve(inputs["schema"], base)
    )
    if schema_path is not None:
        given = TripSchema.from_json(schema_path)
        schema = given if schema is None else schema.replace(*given.columns.values())
    return public, private, schema


def run(args: argparse.Namespace) -> int:
    """Fit on PRIVATE with PUBLIC, sample, write the release directory."""
    warn_if_seeded(args.seed)
    check_budget(args.epsilon, args.delta, need_delta=True)
    inputs, params, base = _settings(args)
    public, private, schema = _load(args, inputs, base)
    synthesizer = ArchetypeSynthesizer(
        epsilon=args.epsilon,
        delta=args.delta,
        schema=schema,
        random_state=args.seed,
        **params,
    ).fit(private, public)
    trips = synthesizer.sample()
    manifest = synthesizer.manifest(inputs=[args.private, args.public])
    with release_dir(args.out) as stage:
        write_table(trips, stage / f"trips.{args.format}")
        (stage / "schema.json").write_text(json.dumps(synthesizer.schema_.to_dict(), indent=2))
        (stage / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))
    if not args.quiet:
        ledger = synthesizer.ledger_
        print(
            f"transit-synth trips: {len(trips)} synthetic trips of "
            f"{trips[synthesizer.id_column].nunique()} individuals in {args.out}; "
            f"epsilon {ledger.spent_epsilon:g} of {args.epsilon:g}, delta {ledger.spent_delta:g}",
            file=sys.stderr,
        )
    return 0
