"""TOML configurations: load a file and check its keys against the constructors they feed.

A configuration's keys are the parameters of the constructor it configures
(``PrefixTreeSynthesizer``, ``ArchetypeSynthesizer``, ...). An unknown key or a value of the wrong
type is a ``ConfigError`` that names the key and the file.
"""

from __future__ import annotations

import inspect
import tomllib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from synth.errors import ConfigError


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a TOML file; a missing file or a syntax error is a ``ConfigError``."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start : exc.start + 1].hex()} at "
            f"offset {exc.start}): a TOML configuration must be UTF-8"
        ) from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a configuration file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc.strerror}") from None


def _matches(value: Any, annotation: Any) -> bool:
    """Whether a TOML value fits a type annotation (ints are accepted for floats)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(annotation))
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    if annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (tuple, list, Sequence):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return isinstance(value, list | tuple) and all(
            any(_matches(item, arg) for arg in args) if args else True for item in value
        )
    if origin in (dict, Mapping):
        return isinstance(value, dict)
    if isinstance(annotation, type):
        return isinstance(value, annotation)
    return True


def check_params(
    target: Callable[..., Any],
    params: Mapping[str, Any],
    *,
    source: str | Path,
    section: str,
    exclude: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Check ``params`` against the keyword parameters of ``target`` and return them as a dict.

    ``source`` and ``section`` name the file and table for the error message; parameters listed in
    ``exclude`` are supplied by the caller and may not appear in the file.
    """
    signature = inspect.signature(target)
    try:
        annotated = vars(target)["__init__"] if isinstance(target, type) else target
        hints = typing.get_type_hints(annotated)
    except (KeyError, NameError, TypeError):
        hints = {}
    allowed = {
        name: hints.get(name, parameter.annotation)
        for name, parameter in signature.parameters.items()
        if name not in exclude
        and name != "self"
        and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    }
    for key, value in params.items():
        if key not in allowed:
            raise ConfigError(
                f"{source}: unknown key '{key}' in [{section}] "
                f"(allowed: {', '.join(sorted(allowed))})"
            )
        if not _matches(value, allowed[key]):
            expected = getattr(allowed[key], "__name__", None) or str(allowed[key])
            raise ConfigError(
                f"{source}: key '{key}' in [{section}] has the wrong type "
                f"({type(value).__name__} {value!r}; expected {expected})"
            )
    return dict(params)
