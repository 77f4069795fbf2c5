"""The flags of a generator's parameters, generated from its table (:mod:`synth.params`).

:func:`add_param_flags` adds one flag per row (``--`` + the name with dashes; the row's type,
choices, metavar and help, its default shown from the table) and the row's published shorthands
(``--pure`` for ``--mode pure``); :func:`params_from_args` reads back the parameters given on the
command line, as the constructor wants them. A flag not given is absent from the result (its
argparse default is ``SUPPRESS``), so a config's value or the constructor's default applies.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection
from typing import Any

from synth.params import Param, ParamTable

__all__ = ["add_param_flags", "params_from_args"]


def _checked(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` with a ValueError as argparse's one-line "argument --x: <why>"."""

    def typed(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    typed.__name__ = getattr(parse, "__name__", "value")
    return typed


def _add(target: Any, row: Param, required: bool) -> None:
    assert row.flag is not None
    kwargs: dict[str, Any] = {
        "dest": row.name,
        "help": row.help_text(show_default=not required),
        "default": argparse.SUPPRESS,
    }
    if row.switch:
        kwargs["action"] = "store_true"
    else:
        parse = row.value_type()
        kwargs["type"] = parse if parse in (int, float, str) else _checked(parse)
        if row.choices() is not None:
            kwargs["choices"] = row.choices()
        if row.metavar is not None:
            kwargs["metavar"] = row.metavar
        if row.nargs is not None:
            kwargs["nargs"] = row.nargs
    if required:
        kwargs["required"] = True
    target.add_argument(row.flag, **kwargs)


def add_param_flags(
    parser: argparse.ArgumentParser | Any,
    table: ParamTable,
    *,
    only: Collection[str] | None = None,
    skip: Collection[str] = (),
    required: Collection[str] = (),
) -> None:
    """Add the flags of ``table``'s rows (``only`` these, less ``skip``; ``required`` ones must
    be given) to ``parser`` (or an argument group), in table order."""
    for row in table:
        if row.flag is None or row.name in skip or (only is not None and row.name not in only):
            continue
        if not row.shorthands:
            _add(parser, row, row.name in required)
            continue
        group = parser.add_mutually_exclusive_group(required=row.name in required)
        _add(group, row, False)
        for flag, value in row.shorthands.items():
            group.add_argument(
                flag,
                dest=row.name,
                action="store_const",
                const=value,
                default=argparse.SUPPRESS,
                help=f"the same as {row.flag} {value}",
            )


def params_from_args(
    args: argparse.Namespace, table: ParamTable, *, skip: Collection[str] = ()
) -> dict[str, Any]:
    """The parameters of ``table`` given on the command line (``collect`` applied)."""
    out: dict[str, Any] = {}
    for row in table:
        if row.flag is None or row.name in skip or not hasattr(args, row.name):
            continue
        value = getattr(args, row.name)
        out[row.name] = row.collect(value) if row.collect is not None else value
    return out
