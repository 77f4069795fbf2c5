"""One parameter table per generator: the constructor's validator, the config schema and the
command-line flags, all read off the same rows.

A :class:`Param` row states a generator parameter once: its name (the constructor keyword, the
config key, and the flag without dashes: ``time_bin`` / ``time_bin = 15`` / ``--time-bin 15``),
what it may be (constraints, as scikit-learn's ``_parameter_constraints``), its default, its help
text, the paper it comes from (by author and year), and, for the few parameters the command line
and the configs cannot give (a Python object, a callback, the seed), ``api_only``: why not.
A :class:`ParamTable` holds a generator's rows; from it come

- ``_parameter_constraints`` (:meth:`ParamTable.constraints`), checked by ONE validator,
  :func:`validate_params`, that the generator's ``fit`` calls before any data is read;
- the ``parameters`` sub-table of a config (:meth:`ParamTable.check_config`): known keys, values
  the validator accepts, renamed keys read with a deprecation warning;
- the flags and their ``--help`` text (:mod:`synth.cli.params`, the argparse side: this module
  imports no argparse).

A user error names a parameter as its user wrote it (:func:`spell`): the Python name in the API,
the flag on the command line (the CLI runs its commands under :func:`naming` ``"flag"``), the key
in a config. The names agree, so no translation table or pattern is needed.
"""

from __future__ import annotations

import contextlib
import numbers
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth.errors import ConfigError, RenamedParameterWarning

__all__ = [
    "COLUMNS",
    "NAMING",
    "RENAMED_REMOVED_IN",
    "REQUIRED",
    "SEQUENCE",
    "STRING",
    "Constraint",
    "InstanceOf",
    "Interval",
    "Options",
    "Param",
    "ParamTable",
    "Satisfies",
    "comma_list",
    "flag_of",
    "naming",
    "spell",
    "toml_value",
    "validate_params",
]

#: The release that drops the renamed constructor keywords and config keys (CHANGELOG.md,
#: "Deprecations"): ``time_bins``, ``coarse_time_bins``, ``bin_minutes``, ``n_archetypes``.
RENAMED_REMOVED_IN = "0.3.0"

#: How a user error names a parameter: ``"parameter"`` (the Python API: ``on_unknown='drop'``),
#: ``"flag"`` (the command line: ``--on-unknown drop``) or ``"key"`` (a config:
#: ``on_unknown = "drop"``).
NAMING: ContextVar[str] = ContextVar("transit_synth_naming", default="parameter")

_UNSET: Any = object()


@contextlib.contextmanager
def naming(style: str) -> Iterator[None]:
    """Errors raised inside name parameters in ``style`` (see :data:`NAMING`)."""
    if style not in ("parameter", "flag", "key"):
        raise ValueError(f"unknown naming style {style!r}")
    token = NAMING.set(style)
    try:
        yield
    finally:
        NAMING.reset(token)


def flag_of(name: str) -> str:
    """The command-line flag of parameter ``name``: ``time_bin`` -> ``--time-bin``."""
    return "--" + name.replace("_", "-")


def spell(name: str, value: Any = _UNSET) -> str:
    """Parameter ``name`` (set to ``value``, when given) as the user writes it under the current
    :data:`NAMING`: ``on_unknown='drop'``, ``--on-unknown drop`` or ``on_unknown = "drop"``."""
    style = NAMING.get()
    if style == "flag":
        return flag_of(name) if value is _UNSET else f"{flag_of(name)} {value}"
    if value is _UNSET:
        return name
    if style == "key":
        shown = f'"{value}"' if isinstance(value, str) else repr(value)
        return f"{name} = {shown}"
    return f"{name}={value!r}"


@dataclass(frozen=True)
class Interval:
    """Numbers in a range: ``kind`` "integer" (numpy integers included, bool never) or "real"
    (any real number, bool never); ``low``/``high`` None = unbounded; ``closed`` says which ends
    belong ("both", "left", "right", "neither")."""

    kind: str
    low: float | None = None
    high: float | None = None
    closed: str = "both"

    def accepts(self, value: object) -> bool:
        if isinstance(value, bool):
            return False
        base = numbers.Integral if self.kind == "integer" else numbers.Real
        if not isinstance(value, base):
            return False
        number = float(value)
        if number != number:  # NaN
            return False
        if self.low is not None:
            if number < self.low or (number == self.low and self.closed in ("right", "neither")):
                return False
        if self.high is not None:
            if number > self.high or (number == self.high and self.closed in ("left", "neither")):
                return False
        return True

    def describe(self) -> str:
        if self.kind == "integer" and self.high is None and self.low in (0, 1):
            return "a positive integer" if self.low == 1 else "a non-negative integer"
        noun = "an integer" if self.kind == "integer" else "a number"
        low_op = ">=" if self.closed in ("both", "left") else ">"
        high_op = "<=" if self.closed in ("both", "right") else "<"
        if self.low is not None and self.high is not None:
            left = "[" if low_op == ">=" else "("
            right = "]" if high_op == "<=" else ")"
            return f"{noun} in {left}{_num(self.low)}, {_num(self.high)}{right}"
        if self.low is not None:
            return f"{noun} {low_op} {_num(self.low)}"
        if self.high is not None:
            return f"{noun} {high_op} {_num(self.high)}"
        return noun


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values (compared with ``==``, bools never equal to 0/1)."""

    values: tuple[object, ...]

    def accepts(self, value: object) -> bool:
        return any(
            isinstance(value, bool) == isinstance(option, bool) and value == option
            for option in self.values
        )

    def describe(self) -> str:
        return "one of " + ", ".join(str(v) for v in self.values)


@dataclass(frozen=True)
class InstanceOf:
    """An instance of ``types`` (described to the user as ``what``)."""

    types: type | tuple[type, ...]
    what: str

    def accepts(self, value: object) -> bool:
        if isinstance(value, bool) and bool not in _as_tuple(self.types):
            return False
        return isinstance(value, self.types)

    def describe(self) -> str:
        return self.what


@dataclass(frozen=True)
class Satisfies:
    """Any value for which ``check`` returns True (described as ``what``)."""

    check: Callable[[object], bool]
    what: str

    def accepts(self, value: object) -> bool:
        try:
            return bool(self.check(value))
        except (TypeError, ValueError):
            return False

    def describe(self) -> str:
        return self.what


Constraint = Interval | Options | InstanceOf | Satisfies | None


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _is_sequence(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _is_columns(value: object) -> bool:
    if not isinstance(value, Sequence | set | frozenset) or isinstance(value, str | bytes):
        return False
    return all(isinstance(c, str) for c in value)


#: common constraints
STRING = InstanceOf(str, "a string")
SEQUENCE = Satisfies(_is_sequence, "a sequence")
COLUMNS = Satisfies(_is_columns, "a list of column names")


def validate_params(
    constraints: Mapping[str, Sequence[Constraint]], params: Mapping[str, Any]
) -> None:
    """Check each parameter against its constraints (one must accept it); ConfigError otherwise,
    naming the parameter, what it must be, and the value given."""
    for name, allowed in constraints.items():
        if name not in params:
            raise ConfigError(f"_parameter_constraints names an unknown parameter {name!r}")
        value = params[name]
        if not _accepted(allowed, value):
            raise ConfigError(f"{spell(name)} must be {_described(allowed)}, got {value!r}")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: the default of a parameter without one
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Param:
    """One generator parameter: constructor keyword, config key and flag (see the module).

    ``allowed``: the constraints (one must accept a value; ``None`` in it allows ``None``).
    ``source``: the paper it comes from, by author and year. ``api_only``: why the command line
    and the configs cannot give it (then it has neither flag nor key). The flag's form:
    ``metavar``; ``nargs="+"`` (several values); ``parse`` (the text after the flag -> a value;
    default from the constraints: int, float or str); ``collect`` (the parsed value(s) -> the
    parameter); ``switch`` (a flag without value, setting True); ``shorthands`` (published flags
    setting a fixed value, e.g. ``--pure`` for ``mode = "pure"``). ``from_toml``: a config value
    -> the parameter (ValueError: refused). ``renamed_from``: the old keyword and key, still read
    with a :class:`~synth.errors.RenamedParameterWarning` until :data:`RENAMED_REMOVED_IN`.
    ``no_flag``: why the command line gives it through other flags (a config key it keeps).
    ``in_table``: its config key sits in the release's own table (``[sequences]``, beside
    ``input``: a file or how the input is read), not in its ``parameters`` sub-table."""

    name: str
    allowed: tuple[Constraint, ...]
    help: str
    default: Any = REQUIRED
    source: str = ""
    api_only: str = ""
    metavar: str | None = None
    nargs: str | None = None
    parse: Callable[[str], Any] | None = None
    collect: Callable[[Any], Any] | None = None
    switch: bool = False
    shorthands: Mapping[str, Any] = field(default_factory=dict)
    from_toml: Callable[[Any], Any] | None = None
    renamed_from: str | None = None
    no_flag: str = ""
    in_table: bool = False

    @property
    def flag(self) -> str | None:
        """The flag (``None`` for an API-only parameter, or one given by other flags)."""
        return None if self.api_only or self.no_flag else flag_of(self.name)

    @property
    def key(self) -> str | None:
        """The config key (``None`` for an API-only parameter)."""
        return None if self.api_only else self.name

    def accepts(self, value: Any) -> bool:
        """Whether a constraint accepts ``value``."""
        return _accepted(self.allowed, value)

    def describe(self) -> str:
        """What a value must be: "one of a, b or None"."""
        return _described(self.allowed)

    def choices(self) -> tuple[str, ...] | None:
        """The values of a flag with a fixed set of string values, else None."""
        options = [c for c in self.allowed if isinstance(c, Options)]
        if len(options) == 1 and all(isinstance(v, str) for v in options[0].values):
            return tuple(str(v) for v in options[0].values)
        return None

    def value_type(self) -> Callable[[str], Any]:
        """The text after the flag -> a value: ``parse``, else int/float/str from the
        constraints."""
        if self.parse is not None:
            return self.parse
        kinds = {c.kind for c in self.allowed if isinstance(c, Interval)}
        if kinds == {"integer"}:
            return int
        if kinds:
            return float
        return str

    def help_text(self, show_default: bool = True) -> str:
        """The flag's ``--help`` line: the help, the default (unless the help states it, or
        ``show_default`` is false: a flag the command requires), and the paper."""
        text = self.help
        if (
            show_default
            and self.default is not REQUIRED
            and self.default is not None
            and self.default is not False
            and "default" not in text
        ):
            shown = self.default
            if isinstance(shown, tuple | list):
                shown = " ".join(map(str, shown))
            text += f" (default: {shown})"
        if self.source:
            text += f" [{self.source}]"
        return text.replace("%", "%%")


class ParamTable:
    """A generator's parameters, one :class:`Param` per constructor keyword (see the module)."""

    def __init__(self, owner: str, rows: Sequence[Param]) -> None:
        self.owner = owner
        self.rows: tuple[Param, ...] = tuple(rows)
        self._by_name = {row.name: row for row in self.rows}
        if len(self._by_name) != len(self.rows):
            raise ValueError(f"{owner}: a parameter has two rows")
        self._renamed = {row.renamed_from: row for row in self.rows if row.renamed_from}

    def __getitem__(self, name: str) -> Param:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Param]:
        return iter(self.rows)

    def names(self) -> list[str]:
        """The parameter names, in table order."""
        return [row.name for row in self.rows]

    def api_only(self) -> dict[str, str]:
        """The parameters without flag or config key -> why."""
        return {row.name: row.api_only for row in self.rows if row.api_only}

    def constraints(self) -> dict[str, list[Constraint]]:
        """scikit-learn's ``_parameter_constraints``: every parameter's constraints."""
        return {row.name: list(row.allowed) for row in self.rows}

    def renamed(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The constructor's ``**renamed`` keywords as ``{new name: value}``, each with a
        :class:`~synth.errors.RenamedParameterWarning`; an unknown keyword is a TypeError, as
        Python's own."""
        out: dict[str, Any] = {}
        for old, value in given.items():
            row = self._renamed.get(old)
            if row is None:
                raise TypeError(
                    f"{self.owner}.__init__() got an unexpected keyword argument {old!r}"
                )
            warnings.warn(
                f"{self.owner}({old}=...) is deprecated and will be removed in transit-synth "
                f"{RENAMED_REMOVED_IN}: write {row.name}= (the flag {row.flag}'s name)",
                RenamedParameterWarning,
                stacklevel=3,
            )
            out[row.name] = value
        return out

    def old_names(self) -> set[str]:
        """The renamed (deprecated) keywords and keys."""
        return set(self._renamed)

    def keys(self, exclude: Sequence[str] = ()) -> list[str]:
        """The keys of the ``parameters`` sub-table (neither API-only nor ``in_table``), less
        ``exclude``."""
        return [
            r.name for r in self.rows if not r.api_only and not r.in_table and r.name not in exclude
        ]

    def table_keys(self) -> list[str]:
        """The parameters whose config key sits in the release's own table (``in_table``)."""
        return [r.name for r in self.rows if r.in_table and not r.api_only]

    def required(self, exclude: Sequence[str] = ()) -> list[str]:
        """The config keys without a default."""
        return [n for n in self.keys(exclude) if self[n].default is REQUIRED]

    def check_config(
        self,
        params: Mapping[str, Any],
        *,
        source: str | Path,
        section: str,
        exclude: Sequence[str] = (),
    ) -> dict[str, Any]:
        """A config's ``parameters`` sub-table, checked: every key a parameter's (``exclude``:
        set by the caller, refused here), every value one the validator accepts (``from_toml``
        applied: TOML keys are strings), renamed keys read as their new name with a warning.
        A ConfigError names the file, the table and the key."""
        allowed = self.keys(exclude)
        out: dict[str, Any] = {}
        for key, value in params.items():
            row = self._renamed.get(key) or self._by_name.get(key)
            if row is None or row.name not in allowed:
                raise ConfigError(
                    f"{source}: unknown key '{key}' in [{section}] "
                    f"(allowed: {', '.join(sorted(allowed))})"
                )
            if key != row.name:
                warnings.warn(
                    f"{source}: key '{key}' in [{section}] is deprecated and will be removed in "
                    f"transit-synth {RENAMED_REMOVED_IN}: write '{row.name}'",
                    RenamedParameterWarning,
                    stacklevel=2,
                )
            if row.name in out:
                raise ConfigError(f"{source}: key '{row.name}' in [{section}] is given twice")
            if row.from_toml is not None:
                try:
                    value = row.from_toml(value)
                except (ValueError, TypeError) as exc:
                    raise ConfigError(f"{source}: key '{key}' in [{section}]: {exc}") from None
            if not row.accepts(value):
                raise ConfigError(
                    f"{source}: key '{key}' in [{section}] must be {row.describe()}, got {value!r}"
                )
            out[row.name] = value
        return out


def toml_value(text: str) -> Any:
    """A flag's text read as a TOML value (``true``, ``3``, ``[1, 2]``, ``{ rounds = 2 }``), for
    parameters that take structured values; ValueError if it is none."""
    import tomllib

    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        raise ValueError(
            f"expected a TOML value (true, 3, [1, 2], {{ a = 1 }}), got {text!r}"
        ) from None


def comma_list(text: str) -> list[str]:
    """``a,b,c`` as ``["a", "b", "c"]`` (blanks dropped)."""
    return [part.strip() for part in text.split(",") if part.strip()]


def _accepted(allowed: Sequence[Constraint], value: Any) -> bool:
    if value is None:
        return any(c is None for c in allowed)
    return any(c is not None and c.accepts(value) for c in allowed)


def _described(allowed: Sequence[Constraint]) -> str:
    whats = [c.describe() for c in allowed if c is not None]
    if any(c is None for c in allowed):
        whats.append("None")
    return " or ".join(whats)
