"""Public column domains of a trip table (the challenge's ``parameters.json``; GooseDP rounding).

A :class:`TripSchema` is a public input, never read off the private data: each categorical column
has its full list of values (including values no record shows, so that private counts cover them),
each numeric column a closed integer range. :meth:`TripSchema.conform` maps a table onto the schema
(out-of-domain categories go to the column's declared ``other`` value, numbers are rounded and
clipped) and :meth:`TripSchema.validate` checks that a table lies in the domain.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.io import read_json

__all__ = ["Column", "TripSchema"]

Kind = Literal["categorical", "numeric", "id"]


@dataclass(frozen=True)
class Column:
    """One column's public domain: categorical ``values``, numeric ``[minimum, maximum]``, or an id.

    ``other`` (categorical only) is the value that out-of-domain entries are mapped to by
    :meth:`TripSchema.conform`; without it they are an input error.
    """

    name: str
    kind: Kind
    values: tuple[Any, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    other: Any = None

    def __post_init__(self) -> None:
        if self.kind == "categorical":
            if not self.values:
                raise ConfigError(f"schema column '{self.name}': a categorical column needs values")
            if len(set(self.values)) != len(self.values):
                raise ConfigError(f"schema column '{self.name}': duplicate values")
            if self.other is not None and self.other not in self.values:
                raise ConfigError(
                    f"schema column '{self.name}': other value {self.other!r} not in its values"
                )
        elif self.kind == "numeric":
            if self.minimum is None or self.maximum is None or self.minimum > self.maximum:
                raise ConfigError(f"schema column '{self.name}': numeric needs minimum <= maximum")
        elif self.kind != "id":
            raise ConfigError(f"schema column '{self.name}': unknown kind {self.kind!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON form, in the layout of the challenge's ``parameters.json``."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.kind == "categorical":
            out["values"] = [_plain(v) for v in self.values]
            if self.other is not None:
                out["other"] = _plain(self.other)
        elif self.kind == "numeric":
            out["min"], out["max"] = self.minimum, self.maximum
        return out


def _plain(value: Any) -> Any:
    """numpy scalars as Python scalars (for JSON and stable equality)."""
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True)
class TripSchema:
    """The public domain of every column of a trip table, keyed by column name."""

    columns: Mapping[str, Column] = field(default_factory=dict)

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, spec: Mapping[str, Any], *, source: str = "schema") -> TripSchema:
        """From ``{column: {kind, values | min/max [, other]}}`` or a challenge ``parameters.json``
        (whose ``schema`` key holds that mapping)."""
        if "schema" in spec and isinstance(spec["schema"], Mapping):
            spec = spec["schema"]
        columns: dict[str, Column] = {}
        for name, col in spec.items():
            if not isinstance(col, Mapping) or "kind" not in col:
                raise ConfigError(f"{source}: column '{name}' needs a 'kind'")
            kind = col["kind"]
            if kind == "categorical":
                columns[name] = Column(
                    name, "categorical", tuple(col.get("values", ())), other=col.get("other")
                )
            elif kind == "numeric":
                columns[name] = Column(
                    name, "numeric", minimum=col.get("min"), maximum=col.get("max")
                )
            else:
                columns[name] = Column(name, kind)
        return cls(columns)

    @classmethod
    def from_json(cls, path: str | Path) -> TripSchema:
        """Read :meth:`from_dict`'s layout from a JSON file (``ConfigError`` if unreadable)."""
        p = Path(path)
        try:
            spec = read_json(p)
        except FileNotFoundError:
            raise ConfigError(f"{p}: schema file not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{p}: cannot read the schema (UTF-8 JSON): {exc}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{p}: not valid JSON: {exc}") from None
        except InputError as exc:  # beyond the size or nesting limit of synth.io.read_json
            raise ConfigError(str(exc)) from None
        return cls.from_dict(spec, source=str(p))

    @classmethod
    def from_public(
        cls,
        public: pd.DataFrame,
        *,
        categorical: Iterable[str],
        numeric: Iterable[str] = (),
        id_column: str | None = None,
        other: Mapping[str, Any] | None = None,
    ) -> TripSchema:
        """Domains read off PUBLIC data: the sorted values of each categorical column (plus its
        ``other`` value when given) and the observed range of each numeric column."""
        other = dict(other or {})
        columns: dict[str, Column] = {}
        if id_column is not None:
            columns[id_column] = Column(id_column, "id")
        for name in categorical:
            _require(public, [name], "public data")
            values = sorted({_plain(v) for v in public[name].dropna().unique()}, key=_sort_key)
            extra = other.get(name)
            if extra is not None and extra not in values:
                values.append(extra)
            columns[name] = Column(name, "categorical", tuple(values), other=extra)
        for name in numeric:
            _require(public, [name], "public data")
            col = pd.to_numeric(public[name], errors="coerce").dropna()
            lo, hi = (int(np.floor(col.min())), int(np.ceil(col.max()))) if len(col) else (0, 0)
            columns[name] = Column(name, "numeric", minimum=lo, maximum=hi)
        return cls(columns)

    def replace(self, *columns: Column) -> TripSchema:
        """A copy with the given columns added or replaced."""
        merged = dict(self.columns)
        merged.update({c.name: c for c in columns})
        return TripSchema(merged)

    # -- access ------------------------------------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        return name in self.columns

    def __getitem__(self, name: str) -> Column:
        try:
            return self.columns[name]
        except KeyError:
            raise ConfigError(f"column '{name}' is not in the schema") from None

    def values(self, name: str) -> tuple[Any, ...]:
        """The domain of a categorical column."""
        col = self[name]
        if col.kind != "categorical":
            raise ConfigError(f"schema column '{name}' is {col.kind}, not categorical")
        return col.values

    def to_dict(self) -> dict[str, Any]:
        """JSON form (readable by :meth:`from_dict`)."""
        return {name: col.to_dict() for name, col in self.columns.items()}

    # -- checking ----------------------------------------------------------------------------------
    def conform(
        self, df: pd.DataFrame, *, source: str = "input", columns: Sequence[str] | None = None
    ) -> pd.DataFrame:
        """Map ``df`` onto the schema: categorical values outside the domain become the column's
        ``other`` value (an ``InputError`` naming file, column and row when there is none), numbers
        are rounded to integers and clipped to the range; unparsable numbers are an ``InputError``.
        A per-record transformation, so it may be applied to private data before counting."""
        names = [n for n in (columns if columns is not None else self.columns) if n in self.columns]
        _require(df, names, source)
        out = df.copy()
        for name in names:
            col = self.columns[name]
            if col.kind == "categorical":
                series = _align_dtype(out[name], col.values)
                bad = ~series.isin(list(col.values))
                if bad.any():
                    if col.other is None:
                        row = int(np.flatnonzero(bad.to_numpy())[0])
                        raise InputError(
                            f"{source}: column '{name}', row {row + 1}: value "
                            f"{series.iloc[row]!r} is not in the schema domain"
                        )
                    series = series.where(~bad, col.other)
                out[name] = series
            elif col.kind == "numeric":
                num = pd.to_numeric(out[name], errors="coerce")
                bad = num.isna() & out[name].notna()
                if bad.any() or num.isna().any():
                    row = int(np.flatnonzero((bad | num.isna()).to_numpy())[0])
                    raise InputError(
                        f"{source}: column '{name}', row {row + 1}: {out[name].iloc[row]!r} "
                        "is not a number"
                    )
                out[name] = np.clip(np.rint(num.to_numpy(dtype=float)), col.minimum, col.maximum)
                out[name] = out[name].astype(np.int64)
            else:
                out[name] = out[name].astype(str)
        return out

    def validate(self, df: pd.DataFrame, *, source: str = "table") -> None:
        """Raise ``InputError`` unless every schema column of ``df`` lies in its domain."""
        for name, col in self.columns.items():
            if name not in df.columns:
                continue
            series = df[name]
            if col.kind == "categorical":
                bad = ~_align_dtype(series, col.values).isin(list(col.values))
            elif col.kind == "numeric":
                num = pd.to_numeric(series, errors="coerce")
                bad = num.isna() | (num < col.minimum) | (num > col.maximum) | (num != np.rint(num))
            else:
                bad = series.isna()
            if bad.any():
                row = int(np.flatnonzero(bad.to_numpy())[0])
                raise InputError(
                    f"{source}: column '{name}', row {row + 1}: value {series.iloc[row]!r} "
                    "is outside the schema domain"
                )


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, int | float) else (1, str(value))


def _align_dtype(series: pd.Series, values: Sequence[Any]) -> pd.Series:
    """Compare strings with strings: a column read as numbers against a string domain is cast."""
    if values and all(isinstance(v, str) for v in values) and series.dtype.kind in "iuf":
        return series.map(
            lambda v: v if pd.isna(v) else str(int(v) if float(v).is_integer() else v)
        )
    return series


def _require(df: pd.DataFrame, names: Iterable[str], source: str) -> None:
    missing = [n for n in names if n not in df.columns]
    if missing:
        raise InputError(f"{source}: missing column(s) {', '.join(map(repr, missing))}")
