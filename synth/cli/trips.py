"""``transit-synth trips``: GMM-archetype synthetic trips (docs/design.md section 3).

``transit-synth trips PRIVATE --public PUBLIC --epsilon E --delta D --out DIR [--archetypes K]
[--config FILE]`` writes ``DIR/trips.csv`` (or ``.parquet``), ``DIR/schema.json`` (the public
domains used) and ``DIR/manifest.json`` (the privacy ledger) atomically. A ``--config`` file is
one ``[trips]`` table as in a ``transit-synth run`` config (``synth.cli.run``): ``input_format`` =
``trips`` | ``chicago-taxi`` | ``sube-taps``; ``public_years`` / ``private_years`` for the Chicago
file (another layout: an error); ``metadata`` (``--metadata``) = the SUBE network metadata,
whose mode -> line -> branch rows give those domains with public trips or without (any other
layout: an error); ``schema`` = a schema JSON; optional ``private``, ``public`` and
``format``; and a ``[trips.parameters]`` sub-table of
:class:`~archetypes.synthesizer.ArchetypeSynthesizer` parameters (``epsilon`` and ``delta``
included). The command line overrides it. The old form (``[input]`` and ``[archetypes]`` tables)
is still read, with a deprecation note. Relative paths in a config are resolved against the
config's folder. Without public trips, ``--public`` is left out: the joint model (the default,
:mod:`archetypes.jointfit`) then stands in for them, or with ``joint = false`` in the parameters
``--public-stand-in`` (or ``public_stand_in``) learns on an SBH release of PRIVATE
(:mod:`archetypes.standin`); the column domains then come from the schema (``--schema``; for
``chicago-taxi`` the challenge domains with the published 2013 company list; for ``sube-taps``
with ``metadata`` the metadata's lines, branches and group, and the zones and fare products
of the embedded public Tuesday sample).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from archetypes.params import PARAMS
from archetypes.release import (
    INPUT_FORMATS,
    check_inputs,
    release_trips,
    resolve_path,
)
from synth import registry
from synth.cli.options import (
    add_provenance_option,
    add_quiet_option,
    add_seed_option,
    warn_if_seeded,
)
from synth.cli.params import add_param_flags, params_from_args
from synth.cli.releases import trip_inputs
from synth.config import EMBEDDED, check_io, load_config
from synth.errors import ConfigError
from synth.io import check_sep
from synth.progress import Progress
from synth.provenance import (
    provenance_key,
)

__all__ = ["register", "run"]

FROM_COMMAND_LINE = ("epsilon", "delta", "random_state", "schema")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``trips`` subcommand."""
    p = subparsers.add_parser(
        "trips",
        help="synthetic trips from GMM archetypes (GooseDP, NIST 2020 challenge)",
        description="Differentially private synthetic trips, (epsilon, delta) per individual: "
        "noisy one- and two-way tables of the PRIVATE trips over public domains make one joint "
        "model (McKenna, Miklau and Sheldon 2021), and two noisy counts (individuals per GMM "
        "archetype and per category) say how many individuals of which kind (discrete "
        "Gaussian). With --public the archetypes are learnt on the public trips, which also "
        "guide the model; without, the model stands in for them. --joint false: the paper's "
        "algorithm (archetypes learnt on PUBLIC trips, two noisy histograms of the PRIVATE "
        "trips).",
    )
    p.add_argument(
        "private",
        metavar="PRIVATE",
        help="private trips (CSV or Parquet), or embedded:NAME, a file of the embedded data as "
        "a config names it (e.g. embedded:chicago_taxi)",
    )
    p.add_argument(
        "--public",
        default=None,
        metavar="PUBLIC",
        help="public trips of the same kind (default: the config's public; without any, the "
        "joint model measures PRIVATE alone over the layout's or the --schema domains)",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="release directory")
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="TOML config: a [trips] table as in a `transit-synth run` config (parameters in "
        "[trips.parameters]); the flags override it. Shipped: transit-synth configs",
    )
    p.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        default=None,
        help="layout of PRIVATE and PUBLIC (default: the config's, else trips)",
    )
    p.add_argument(
        "--metadata",
        default=None,
        metavar="FILE",
        help="SUBE network metadata (metadata_amba_2019_m1.csv): the mode, line and branch "
        "domains, with --public or without (only with --input-format sube-taps; default: "
        "the config's metadata)",
    )
    p.add_argument(
        "--sep",
        default=None,
        metavar="CHAR",
        help="CSV delimiter of PRIVATE and PUBLIC, e.g. ';' or tab (default ','; sep in a config)",
    )
    p.add_argument(
        "--format",
        choices=("csv", "parquet"),
        default=None,
        help="output format (default: the config's format, else csv)",
    )
    # the constructor's parameters: one flag each, from the table (archetypes.params); none is
    # required here, as a --config file may give them
    add_param_flags(p, PARAMS)
    add_seed_option(p)
    add_quiet_option(p)
    add_provenance_option(p)
    p.set_defaults(func=run)


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
        params = PARAMS.check_config(
            config.get("archetypes", {}),
            source=source,
            section="archetypes",
            exclude=FROM_COMMAND_LINE,
        )
        io = {("input_format" if k == "format" else k): v for k, v in inputs.items()}
        for key in ("metadata", "schema"):
            if key in io:
                io[key] = str(resolve_path(io[key], base))
        return io, params, base
    table = config.get("trips")
    if set(config) != {"trips"} or not isinstance(table, dict):
        raise ConfigError(
            f"{source}: expected one [trips] table (as in a `transit-synth run` config) with a "
            f"[trips.parameters] sub-table; found {', '.join(sorted(config)) or 'nothing'}"
        )
    io, _ = check_io(registry.get("trips").table, table, source=source, section="trips", base=base)
    parameters = table.get("parameters", {})
    if not isinstance(parameters, dict):
        raise ConfigError(f"{source}: key 'parameters' in [trips] must be a table")
    params = PARAMS.check_config(parameters, source=source, section="trips.parameters")
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
    inputs = trip_inputs(io)
    if args.input_format is not None:
        inputs["format"] = args.input_format
    if args.sep is not None:
        inputs["sep"] = check_sep(args.sep)
    if args.metadata is not None:
        inputs["metadata"] = args.metadata
    given = params_from_args(args, PARAMS)
    if "schema" in given:  # a file, as the schema key of a [trips] table
        inputs["schema"] = given.pop("schema")
    if given.get("public_stand_in") and params.get("public_stand_in"):
        given.pop("public_stand_in")  # --public-stand-in keeps the config's stand-in options
    params.update(given)
    for key in PARAMS.required():
        if key not in params:
            raise ConfigError(
                f"{PARAMS[key].flag} (or key '{key}' in the --config file's "
                "[trips.parameters]) is required"
            )
    return io, inputs, params


def _embedded_or_path(value: str, where: str) -> str:
    """``embedded:NAME`` (a file of the embedded data, as the configs name it: the shipped
    configs' ``private = "embedded:chicago_taxi"``) as that file's path; any other value as is."""
    if not value.startswith(EMBEDDED):
        return value
    from synth import datasets  # the embedded data, loaded only when named

    name = value[len(EMBEDDED) :]
    if name not in datasets.FILES:
        raise ConfigError(
            f"{where} {value}: unknown embedded file {name!r} "
            f"(choose one of {', '.join(sorted(datasets.FILES))})"
        )
    return str(datasets.path(name))


def run(args: argparse.Namespace) -> int:
    """Fit on PRIVATE with PUBLIC, sample, write the release directory."""
    warn_if_seeded(args.seed)
    if args.public is not None and getattr(args, "public_stand_in", None):  # one or the other
        raise ConfigError(
            "--public and --public-stand-in exclude each other: give public trips, or let the "
            "model stand in for them"
        )
    io, inputs, params = _settings(args)
    public = args.public if args.public is not None else io.get("public")
    if public is not None and params.get("public_stand_in") and args.public is None:
        public = None  # --public-stand-in on the command line: the config's public is not used
    summary = release_trips(
        _embedded_or_path(args.private, "PRIVATE"),
        None if public is None else _embedded_or_path(str(public), "--public"),
        args.out,
        params=params,
        inputs=inputs,
        schema=inputs.pop("schema", None),
        format=args.format or io.get("format", "csv"),
        seed=args.seed,
        progress=Progress(args.quiet),
        provenance_key=provenance_key(args.provenance_key_file),
    )
    if not args.quiet:
        print(summary, file=sys.stderr)
    return 0
