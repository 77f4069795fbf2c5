"""``transit-synth configs [NAME [--out FILE]]``: the configs shipped with the package.

Without NAME, lists them (name, the command that reads it, its first comment line). With NAME,
prints the config, or with ``--out FILE`` copies it there to edit (never over an existing file).
The same files are ``configs/`` in the source repository.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from synth.errors import ConfigError, InputError

__all__ = ["find", "register", "run", "shipped"]


def shipped() -> dict[str, Traversable]:
    """Name (file name without ``.toml``) -> file of each shipped config, sorted by name."""
    folder = resources.files("synth") / "configs"
    if not folder.is_dir():
        return {}
    files = [f for f in folder.iterdir() if f.name.endswith(".toml")]
    return {f.name.removesuffix(".toml"): f for f in sorted(files, key=lambda f: f.name)}


def find(name: str) -> Traversable:
    """The shipped config called ``name`` (with or without ``.toml``)."""
    configs = shipped()
    key = name.removesuffix(".toml")
    if key not in configs:
        raise ConfigError(
            f"no shipped config named {name!r} (choose one of {', '.join(configs) or 'none'})"
        )
    return configs[key]


def _describe(text: str) -> tuple[str, str]:
    """(the command that reads a config, its first comment line)."""
    comments = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
    first = next((c for c in comments if c), "")
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        config = {}
    single_trips = set(config) == {"trips"} and isinstance(config["trips"], dict)
    command = "run, trips --config" if single_trips else "run"
    return command, first


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``configs`` subcommand."""
    p = subparsers.add_parser(
        "configs",
        help="list the shipped configs, or copy one to edit (configs NAME --out FILE)",
        description=__doc__,
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="a shipped config (see the list)")
    p.add_argument("--out", metavar="FILE", help="copy NAME to FILE (an existing file is kept)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """List, print or copy; returns the exit status."""
    if args.name is None:
        if args.out is not None:
            raise ConfigError("--out needs a NAME (transit-synth configs NAME --out FILE)")
        for name, file in shipped().items():
            command, first = _describe(file.read_text(encoding="utf-8"))
            print(f"{name:<20} {command:<20} {first}")
        print(
            "\ncopy one to edit: transit-synth configs NAME --out FILE; run it: transit-synth "
            "run FILE (or trips ... --config FILE)",
            file=sys.stderr,
        )
        return 0
    text = find(args.name).read_text(encoding="utf-8")
    if args.out is None:
        sys.stdout.write(text)
        return 0
    out = Path(args.out)
    if out.exists():
        raise InputError(f"--out {out}: the file exists; it is kept (choose another name)")
    if not out.parent.is_dir():
        raise InputError(f"--out {out}: folder {out.parent} not found")
    with out.open("x", encoding="utf-8") as handle:
        handle.write(text)
    print(f"copied {args.name} to {out}", file=sys.stderr)
    return 0
