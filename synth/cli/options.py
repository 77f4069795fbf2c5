"""Options shared by several commands (``--seed``, ``--quiet``, engine, time zone, provenance)."""

from __future__ import annotations

import argparse
import warnings

from synth.errors import ConfigError, SeededWarning
from synth.provenance import ENV_VAR, SUFFIX

__all__ = [
    "SEEDED_WARNING",
    "add_bounding_option",
    "add_engine_options",
    "add_provenance_option",
    "add_quiet_option",
    "add_seed_option",
    "add_timezone_option",
    "engine_params",
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


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """``--engine`` and its options (:mod:`synth.engines`; only the counting steps run there)."""
    group = parser.add_argument_group("counting engine (the release does not depend on it)")
    group.add_argument(
        "--engine",
        choices=("auto", "memory", "duckdb", "spark"),
        default="auto",
        help="where the counting runs: auto (default: memory for small inputs, duckdb for large "
        "ones, from the file's size and the machine's memory), memory, duckdb (out of core, "
        "spills to disk) or spark (pip install 'transit-synth[spark]'; needs Java)",
    )
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


def engine_params(args: argparse.Namespace) -> dict[str, object]:
    """The ``engine``/``engine_options`` constructor parameters from :func:`add_engine_options`."""
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
    return {"engine": args.engine, "engine_options": options or None}


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


def add_bounding_option(parser: argparse.ArgumentParser) -> None:
    """``--bounding`` of a card-unit marginal release (:mod:`synth.marginals.bounding`)."""
    parser.add_argument(
        "--bounding",
        choices=("uniform", "earliest"),
        default="uniform",
        help="with --privacy-unit: which K events a card keeps: a uniform random choice (the "
        "default: the kept taps keep the card's profile) or the earliest by time",
    )


def add_timezone_option(parser: argparse.ArgumentParser) -> None:
    """``--timezone TZ`` for the commands that read times (README "Data formats")."""
    parser.add_argument(
        "--timezone",
        metavar="TZ",
        help="read times in this IANA time zone (e.g. Europe/Paris): values with a UTC offset are "
        "converted to it, values without one are taken as in it, unix seconds converted from UTC "
        "(default: each time is the wall clock as written, offsets dropped, unix seconds as UTC)",
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
