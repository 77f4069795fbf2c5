"""The ``transit-synth`` command line (docs/design.md section 3 is its contract).

Each subcommand lives next to the code it runs and is registered here by name: the module named in
:func:`commands` exposes ``register(subparsers)``, which adds its parser and sets ``func`` to a
callable taking the parsed arguments and returning an exit status. User errors
(``TransitSynthError``) become one line on stderr and exit status 2, with no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from synth import __version__, registry
from synth.errors import TransitSynthError
from synth.logs import private_logs
from synth.outdir import FORCE, INPUTS, Terminated, check_out, terminate_on_signals
from synth.params import naming

#: The commands of the tool (subcommand -> (module exposing ``register(subparsers)``, one-line
#: help)): those before and after the generators' own subcommands in ``--help``.
_TOOLS_FIRST: dict[str, tuple[str, str]] = {
    "demo": (
        "synth.cli.demo",
        "run every generator on the embedded real data; write releases and a report",
    ),
    "run": (
        "synth.cli.run",
        "run the releases a TOML config describes (transit-synth configs: the shipped ones)",
    ),
}
_TOOLS_LAST: dict[str, tuple[str, str]] = {
    "evaluate": (
        "synth.cli.evaluate",
        "compare synthetic releases with the original data (utility report)",
    ),
    "audit": (
        "synth.cli.audit",
        "privacy audit of a release (scale recovery, zero counts, differencing) or a mechanism",
    ),
    "export": (
        "synth.cli.export",
        "OD matrices per time bin or MATSim population plans from a release",
    ),
    "configs": (
        "synth.cli.configs",
        "list the shipped configs, or copy one to edit (configs NAME --out FILE)",
    ),
}


def commands() -> dict[str, tuple[str, str]]:
    """Subcommand -> (module exposing ``register(subparsers)``, one-line help), in ``--help``
    order: the tools, with the subcommand of each registered generator that has one
    (:mod:`synth.registry`) after ``run``. Only the module of the subcommand being run is
    imported, so ``--help`` and each command start without loading the others' dependencies."""
    own = {s.kind: s.command for s in registry.specs() if s.command is not None}
    return {**_TOOLS_FIRST, **own, **_TOOLS_LAST}


class HelpFormatter(argparse.HelpFormatter):
    """``--help`` of every command: each option's default shown (unless its help already states
    it, or it has none), and descriptions written on several lines (docstrings) kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or default == []
            or "default" in text
        ):
            return action.help
        shown = " ".join(map(str, default)) if isinstance(default, list | tuple) else default
        return f"{text} (default: {str(shown).replace('%', '%%')})"

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text.strip():
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


#: commands whose messages name config keys, not flags
NO_FLAGS = ("run", "demo", "configs")


def _speaking_flags(
    func: Callable[[argparse.Namespace], int], *, style: str
) -> Callable[[argparse.Namespace], int]:
    """``func`` run as the command line wants: no warning with ``--quiet``, and user errors that
    name parameters in ``style`` (:func:`synth.params.naming`: ``"flag"``, ``--on-unknown drop``,
    or ``"key"`` for the commands that read configs): the messages are written so, not
    rewritten."""

    def run(args: argparse.Namespace) -> int:
        if getattr(args, "quiet", False):  # --quiet: errors only
            warnings.simplefilter("ignore")
        with naming(style):
            return func(args)

    return run


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser; ``command``'s module registers its full subparser, the others are
    listed by name and help only (their modules are not imported)."""
    parser = CommandParser(
        prog="transit-synth",
        description="Differentially private synthetic public-transport data.",
        epilog="Exit status: 0 done; 2 bad input, parameters, budget or files (one line says "
        "why); 1 internal error (rerun with --debug, anywhere on the line, for the traceback).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="print the traceback of an error (any position)"
    )
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=CommandParser
    )
    subparsers.required = True
    for name, (module, summary) in commands().items():
        if name == command:
            importlib.import_module(module).register(subparsers)
            sub = subparsers.choices[name]
            _harden(sub)
            func = sub.get_default("func")
            if func is not None:
                style = "key" if name in NO_FLAGS else "flag"
                sub.set_defaults(func=_speaking_flags(func, style=style))
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


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line plus "see --help" (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


class CommandParser(OneLineParser):
    """The parser of ``transit-synth`` and its commands: one-line errors, and always
    :class:`HelpFormatter` (defaults shown)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["formatter_class"] = HelpFormatter
        super().__init__(*args, **kwargs)


def _nonempty_path(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty (name an output folder)")
    return value


def _harden(parser: argparse.ArgumentParser) -> None:
    """What every command with ``--out`` shares: ``--out`` not empty, ``--force``."""
    has_out = False
    for action in parser._actions:
        if action.dest == "out" and action.option_strings:
            has_out = True
            action.type = _nonempty_path
    if has_out:
        parser.add_argument(
            "--force",
            action="store_true",
            help="write into an --out folder holding files this tool did not write (they are "
            "kept: never deleted or replaced); without it such a folder is refused",
        )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _os_error(exc: OSError) -> str:
    """An OSError as one line naming the file (permission denied, disk full, ...)."""
    reason = exc.strerror or _one_line(exc)
    names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
    return f"{' -> '.join(names)}: {reason}" if names else reason


_ENGINE_INPUT_ERRORS = ("InvalidInputException", "ConversionException", "IOException")


def _engine_input_error(exc: Exception) -> str | None:
    """DuckDB's complaint about an input file, in one line naming the file (else None)."""
    if "duckdb" not in type(exc).__module__ or type(exc).__name__ not in (_ENGINE_INPUT_ERRORS):
        return None
    text = _one_line(exc)
    file = re.search(r"\bfile = (\S+)", text)
    text = re.split(r" Possible Solution| file = | LINE 1:", text)[0]
    text = re.sub(r"^(Invalid Input|Conversion|IO) Error: ", "", text)
    return f"{file.group(1)}: {text}" if file else text


def _check_out_first(args: argparse.Namespace) -> None:
    """A command that writes a new release folder (a generator's subcommand, ``run``) refuses an
    output folder that would lose the user's files before it reads or fits anything."""
    out = getattr(args, "out", None)
    releases = {s.kind for s in registry.specs() if s.command is not None} | {"run"}
    if out is not None and args.command in releases:
        check_out(out, force=FORCE.get())


def _run(args: argparse.Namespace) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = _show_warning
        FORCE.set(getattr(args, "force", False))
        show = getattr(args, "log_private", "show") == "show" and not getattr(args, "quiet", False)
        INPUTS.of(args)  # an output folder never loses the command's input
        _check_out_first(args)
        try:
            with terminate_on_signals(), private_logs(show):
                return int(args.func(args) or 0)
        finally:
            FORCE.set(False)
            INPUTS.set(())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status.

    Exit status 0: done; 2: the input, parameters, budget or environment (a file that cannot be
    read or written, a full disk) is at fault, said in one line; 1: an internal error (a bug), one
    line plus the hint to rerun with ``--debug``, which prints the traceback; 130/143/129: stopped
    by Ctrl-C/SIGTERM/SIGHUP, after cleaning up.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in arguments
    arguments = [a for a in arguments if a != "--debug"]
    command = next((a for a in arguments if not a.startswith("-")), None)
    parser = build_parser(command)
    args = parser.parse_args(arguments)
    prefix = f"transit-synth {args.command}"
    try:
        return _run(args)
    except Terminated as exc:
        print(f"{prefix}: stopped by {exc}; no output was written", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted; no output was written", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            traceback.print_exc()
        if isinstance(exc, TransitSynthError):
            message, code = _one_line(exc), 2
        elif isinstance(exc, OSError):
            message, code = _os_error(exc), 2
        elif _engine_input_error(exc) is not None:
            message, code = str(_engine_input_error(exc)), 2
        elif isinstance(exc, MemoryError):
            message, code = "out of memory (try --engine duckdb, or a smaller input)", 2
        else:
            message = (
                f"internal error: {type(exc).__name__}: {_one_line(exc)} (a bug: rerun with "
                "--debug for the traceback and report it)"
            )
            code = 1
        print(f"{prefix}: error: {message}", file=sys.stderr)
        return code
