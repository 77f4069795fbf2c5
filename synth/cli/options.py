"""Options shared by several commands (``--seed``, ``--quiet``, engine, provenance, names)."""

from __future__ import annotations

import argparse
import warnings

from synth.cli.params import add_param_flags
from synth.errors import ConfigError, SeededWarning
from synth.params import ParamTable
from synth.provenance import ENV_VAR, SUFFIX

__all__ = [
    "SEEDED_WARNING",
    "add_engine_options",
    "add_provenance_option",
    "add_quiet_option",
    "add_seed_option",
    "engine_options",
    "warn_if_seeded",
]


SEEDED_WARNING = (
    "--seed makes the noise reproducible; a seeded release is NOT differentially private "
    "and must not be published"
)


def add_seed_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--seed`` (reproducible, non-private noise for tests and debugging)."""
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed the noise for reproducible runs (tests, debugging); a seeded release is NOT "
        "differentially private and must not be published",
    )


def add_quiet_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--quiet`` (no progress bars or summaries on stderr) and ``--log-private``
    (:mod:`synth.logs`: messages stating exact private quantities shown, labelled, or hidden)."""
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="print errors only: no progress, summary, note or warning",
    )
    parser.add_argument(
        "--log-private",
        choices=("show", "hide"),
        default="show",
        help="messages stating exact counts of the private input (labelled 'private: for the "
        "data holder'): show them (default) or hide them, for logs meant to be shared; "
        "--quiet prints none",
    )


def warn_if_seeded(seed: int | None) -> None:
    """Warn (on stderr, as ``warning: ...``; silenced by ``--quiet``) when a seed was given."""
    if seed is not None:
        warnings.warn(SEEDED_WARNING, SeededWarning, stacklevel=2)


def add_engine_options(parser: argparse.ArgumentParser, table: ParamTable) -> None:
    """``--engine`` (from the generator's ``table``) and the flags of its ``engine_options``
    (:mod:`synth.engines`; only the counting steps run there)."""
    group = parser.add_argument_group("counting engine (the release does not depend on it)")
    add_param_flags(group, table, only=("engine",))
    group.add_argument(
        "--engine-temp-dir", metavar="DIR", help="duckdb/spark: directory for spilled data"
    )
    group.add_argument(
        "--engine-memory-limit", metavar="SIZE", help="duckdb/spark: memory limit, e.g. 2GB"
    )
    group.add_argument(
        "--spark-master",
        metavar="URL",
        help="spark: master URL, e.g. spark://host:7077 or yarn (default local[*])",
    )
    group.add_argument(
        "--spark-conf",
        metavar="KEY=VALUE",
        action="append",
        help="spark: a Spark setting, e.g. spark.executor.memory=4g (repeatable)",
    )


def engine_options(args: argparse.Namespace) -> dict[str, object] | None:
    """The ``engine_options`` constructor parameter from the flags of :func:`add_engine_options`
    (None: none given)."""
    options: dict[str, object] = {
        key: value
        for key, value in (
            ("temp_directory", args.engine_temp_dir),
            ("memory_limit", args.engine_memory_limit),
            ("master", args.spark_master),
        )
        if value is not None
    }
    if args.spark_conf:
        conf = {}
        for item in args.spark_conf:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--spark-conf expects KEY=VALUE, got {item!r}")
            conf[key.strip()] = value.strip()
        options["conf"] = conf
    return options or None


def add_provenance_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--provenance-key-file FILE`` to a releasing subcommand."""
    parser.add_argument(
        "--provenance-key-file",
        default=None,
        metavar="FILE",
        help="secret key (a file of at least 16 bytes): write an operator-only record of keyed "
        f"HMAC-SHA256 hashes of the private input to OUT{SUFFIX}, beside the release, never "
        f"inside it (default: the key in ${ENV_VAR}, else no record)",
    )


def add_names_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--names FILE`` (public location names for the release's datasheet)."""
    parser.add_argument(
        "--names",
        default=None,
        metavar="FILE",
        help="public CSV location,name: the location names listed in the release's datasheet "
        "(README.md, datasheet.json); fingerprinted in the manifest (a GTFS zip --taxonomy "
        "gives its stop and route names without it)",
    )
    parser.add_argument(
        "--location-names",
        action="store_true",
        help="add a location_name column to the released files, from the public names "
        "(--names, else a GTFS zip --taxonomy); never from the private data",
    )


def add_gtfs_route_rule_option(parser: argparse.ArgumentParser) -> None:
    """``--gtfs-route-rule``: the route of a GTFS stop served by several routes."""
    from synth.gtfs import ROUTE_RULES

    parser.add_argument(
        "--gtfs-route-rule",
        choices=ROUTE_RULES,
        default=None,
        help="with a GTFS zip taxonomy: the route a stop served by several routes goes under: "
        "most-trips (default: most scheduled trips at the stop, ties by route id, then each route "
        "left empty takes its busiest stop another route can spare), most-trips-strict (most "
        "trips only), first (first in routes.txt) or lowest-id; routes left without stops are "
        "named in a warning",
    )
