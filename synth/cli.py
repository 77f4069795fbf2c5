"""The ``transit-synth`` command line (design.md section 3 is its contract).

Each subcommand lives next to the code it runs and is registered here by name: the module named in
``COMMANDS`` exposes ``register(subparsers)``, which adds its parser and sets ``func`` to a callable
taking the parsed arguments and returning an exit status. User errors (``TransitSynthError``) become
one line on stderr and exit status 2, with no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Sequence

from synth import __version__
from synth.errors import ConfigError, TransitSynthError

#: Subcommand -> (module exposing ``register(subparsers)``, one-line help), in ``--help`` order.
#: Only the module of the subcommand being run is imported, so ``--help`` and each command start
#: without loading the others' dependencies.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "synth.demo",
        "run every generator on the embedded real data; write releases and a report",
    ),
    "run": (
        "synth.run",
        "run the releases a TOML config describes (configs/ reproduces the papers)",
    ),
    "sequences": (
        "prefixtree.cli",
        "DP synthetic passenger sequences (hybrid-granularity noisy prefix tree, KDD 2012)",
    ),
    "trips": ("archetypes.cli", "synthetic trip microdata from GMM archetypes (GooseDP)"),
    "marginals": (
        "synth.sbh_cli",
        "SBH marginal release (Opal style): six noisy tables per mode x day",
    ),
    "evaluate": (
        "synth.evaluate.cli",
        "compare synthetic releases with the original data (utility report)",
    ),
    "audit": (
        "synth.audit.cli",
        "privacy audit of a release (scale recovery, zero counts, differencing) or a mechanism",
    ),
    "export": (
        "synth.export_cli",
        "OD matrices per time bin or MATSim population plans from a release",
    ),
}

SEEDED_WARNING = (
    "warning: --seed makes the noise reproducible; a seeded release is NOT differentially private "
    "and must not be published"
)


def add_seed_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--seed`` (reproducible, non-private noise for tests and debugging)."""
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed the noise for reproducible runs; the output is then NOT private",
    )


def add_quiet_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--quiet`` (no progress bars or summaries on stderr)."""
    parser.add_argument("--quiet", action="store_true", help="print no progress or summary")


def warn_if_seeded(seed: int | None) -> None:
    """Print the not-private warning on stderr when a seed was given."""
    if seed is not None:
        print(SEEDED_WARNING, file=sys.stderr)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser; ``command``'s module registers its full subparser, the others are
    listed by name and help only (their modules are not imported)."""
    parser = argparse.ArgumentParser(
        prog="transit-synth",
        description="Differentially private synthetic public-transport data.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name, (module, summary) in COMMANDS.items():
        if name == command:
            importlib.import_module(module).register(subparsers)
        else:
            subparsers.add_parser(name, help=summary)
    return parser


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: object = None,
    line: str | None = None,
) -> None:
    """Warnings on the command line: one line each, no source excerpt."""
    print(f"warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in arguments if not a.startswith("-")), None)
    args = build_parser(command).parse_args(arguments)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = _show_warning
            return int(args.func(args) or 0)
    except TransitSynthError as exc:
        message = " ".join(str(exc).split())
        print(f"transit-synth {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"transit-synth {args.command}: interrupted; no output was written", file=sys.stderr)
        return 130


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
