"""TOML configurations: load a file, check a release table's IO keys, write a config back.

The keys of a release's ``parameters`` sub-table are checked by its generator's parameter table
(:meth:`synth.params.ParamTable.check_config`): an unknown key or a value the constructor would
refuse is a ``ConfigError`` that names the key and the file.
"""

from __future__ import annotations

import datetime
import json
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from synth.errors import ConfigError, InputError

#: the prefix of a config path naming a file of the embedded data (:data:`synth.datasets.FILES`)
EMBEDDED = "embedded:"


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a TOML file; a missing file or a syntax error is a ``ConfigError``."""
    path = Path(path)
    try:
        # utf-8-sig: a leading byte order mark is accepted, as for every other text input
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))
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


def _toml_key(key: str) -> str:
    return key if key and all(c.isalnum() or c in "-_" for c in key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    """One TOML value (inline tables for nested tables): what :func:`load_config` reads back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return (
            repr(value)
            if math.isfinite(value)
            else ("nan" if value != value else ("inf" if value > 0 else "-inf"))
        )
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ", ".join(f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def dump_config(config: Mapping[str, Any], header: str = "") -> str:
    """A run config (top-level tables or arrays of tables) as TOML text that :func:`load_config`
    reads back equal; ``header``: comment lines put first. Comments of the original are lost."""
    lines = [f"# {line}" for line in header.splitlines()]
    for kind, value in config.items():
        tables = [value] if isinstance(value, dict) else list(value)
        brackets = ("[", "]") if isinstance(value, dict) else ("[[", "]]")
        for table in tables:
            lines += ["", f"{brackets[0]}{_toml_key(kind)}{brackets[1]}"]
            lines += [f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in table.items()]
    text = "\n".join(lines).lstrip("\n") + "\n"
    if tomllib.loads(text) != dict(config):
        raise ValueError("the configuration does not read back equal as TOML")  # a bug
    return text


def resolve_path(value: str, base: Path, source: str | Path, where: str) -> str:
    """A path of the config: ``embedded:NAME``, absolute, or relative to the config's folder."""
    if value.startswith(EMBEDDED):
        from synth import datasets

        name = value[len(EMBEDDED) :]
        if name not in datasets.FILES:
            raise ConfigError(
                f"{source}: key {where}: unknown embedded file {name!r} "
                f"(choose one of {', '.join(sorted(datasets.FILES))})"
            )
        return str(datasets.path(name))
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base / path)


def check_io(
    allowed: Mapping[str, Any],
    table: Mapping[str, Any],
    *,
    source: str | Path,
    section: str,
    base: Path,
    check_files: bool = True,
    required: tuple[str, ...] = (),
) -> tuple[dict[str, Any], dict[str, str]]:
    """The IO keys of a release table (``allowed``: key -> rule, ``"path"``, ``"spec"``,
    ``"years"``, ``str``, ``bool`` or a tuple of choices): known, well typed, paths resolved
    (``embedded:NAME``, absolute, or relative to ``base``) and present; and which keys named an
    embedded file. ``name`` and ``parameters`` are left to the caller."""
    io: dict[str, Any] = {}
    embedded: dict[str, str] = {}
    for key, value in table.items():
        if key in ("name", "parameters"):
            continue
        if key not in allowed:
            raise ConfigError(
                f"{source}: unknown key '{key}' in [{section}] "
                f"(allowed: {', '.join(sorted([*allowed, 'name', 'parameters']))})"
            )
        rule = allowed[key]
        where = f"'{key}' in [{section}]"
        if rule is bool and not isinstance(value, bool):
            raise ConfigError(
                f"{source}: key {where} has the wrong type ({type(value).__name__} {value!r}; "
                "expected true or false)"
            )
        if rule is int and (not isinstance(value, int) or isinstance(value, bool)):
            raise ConfigError(
                f"{source}: key {where} has the wrong type ({type(value).__name__} {value!r}; "
                "expected an integer)"
            )
        if rule in ("path", "spec") or rule is str:
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(
                    f"{source}: key {where} has the wrong type ({type(value).__name__} "
                    f"{value!r}; expected a non-empty string)"
                )
        if rule == "years" and not (
            isinstance(value, list)
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            raise ConfigError(
                f"{source}: key {where} has the wrong type ({type(value).__name__} {value!r}; "
                "expected a list of years)"
            )
        if isinstance(rule, tuple) and value not in rule:
            raise ConfigError(
                f"{source}: key {where} must be one of {', '.join(rule)}, got {value!r}"
            )
        if rule == "spec" and not value.strip().lower().startswith("fanout:"):
            rule = "path"
        if rule == "path":
            if value.startswith(EMBEDDED):
                embedded[key] = value[len(EMBEDDED) :]
            value = resolve_path(value, base, source, where)
            if check_files and not Path(value).exists():
                raise InputError(f"{source}: key {where}: {value}: file not found")
        io[key] = value
    missing = [k for k in required if k not in io]
    if missing:
        raise ConfigError(f"{source}: missing key '{missing[0]}' in [{section}]")
    return io, embedded
