"""Public column domains of a trip table (the challenge's ``parameters.json``; GooseDP rounding).

A :class:`TripSchema` is a public input, never read off the private data: each categorical column
has its full list of values (including values no record shows, so that private counts cover them),
each numeric column a closed integer range, each coordinate column a number read off another
column's ``"x,y"`` labels (SUBE: a zone's latitude and longitude) within a public range.
:meth:`TripSchema.conform` maps a table onto the schema (out-of-domain categories go to the
column's declared ``other`` value, numbers are rounded and clipped, coordinates are read off their
label column) and :meth:`TripSchema.validate` checks that a table lies in the domain.

Values are matched to the domain one by one, never by a column's type (issue 25): a value and a
domain value are the same when their texts are, both read by the identifier rule of README "Data
formats" (:func:`value_text`: ``" 7.0 "``, ``7.0`` and ``7`` are ``"7"``; ``"07"`` is not). A
conformed column holds the domain's own values (ints stay ints).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from archetypes.reading import measure
from synth.errors import ConfigError, InputError
from synth.io import id_strings, read_json

__all__ = ["Column", "Group", "TripSchema", "value_text"]

Kind = Literal["categorical", "numeric", "id", "coordinate"]


@dataclass(frozen=True)
class Column:
    """One column's public domain: categorical ``values``, numeric ``[minimum, maximum]``, or an id.

    A ``coordinate`` column is a public function of another: number ``part`` (0 or 1) of the
    ``"x,y"`` label of the categorical column ``source``, clipped to ``[minimum, maximum]``
    (missing when the label is not two numbers, e.g. "unknown"). SUBE's ``lat``/``lon`` without
    public trips: the centre of the trip's zone cell, so the mixture clusters on them while only
    the zone is modelled (:meth:`TripSchema.derive`); it is never a modelled column.

    ``other`` (categorical only) is the value that out-of-domain entries are mapped to by
    :meth:`TripSchema.conform`; without it they are an input error. ``coarse`` (categorical
    only, optional): a public coarser label of each value, aligned with ``values`` (SUBE: a
    coarser grid of the zones), a view the joint model can measure (issue 28).
    """

    name: str
    kind: Kind
    values: tuple[Any, ...] = ()
    minimum: int | float | None = None
    maximum: int | float | None = None
    other: Any = None
    coarse: tuple[Any, ...] = ()
    source: str | None = None
    part: int = 0

    def __post_init__(self) -> None:
        if self.coarse and (self.kind != "categorical" or len(self.coarse) != len(self.values)):
            raise ConfigError(
                f"schema column '{self.name}': coarse needs one label per categorical value"
            )
        if self.kind == "categorical":
            if not self.values:
                raise ConfigError(f"schema column '{self.name}': a categorical column needs values")
            if len(set(self.values)) != len(self.values):
                raise ConfigError(f"schema column '{self.name}': duplicate values")
            keys = _domain_keys(self.values, self.name)
            if len(set(keys)) != len(keys):
                seen: dict[str, Any] = {}
                for key, value in zip(keys, self.values, strict=True):
                    if key in seen:
                        raise ConfigError(
                            f"schema column '{self.name}': values {seen[key]!r} and {value!r} "
                            "are the same value (compared as text)"
                        )
                    seen[key] = value
            if self.other is not None and self.other not in self.values:
                raise ConfigError(
                    f"schema column '{self.name}': other value {self.other!r} not in its values"
                )
        elif self.kind in ("numeric", "coordinate"):
            if self.minimum is None or self.maximum is None or self.minimum > self.maximum:
                raise ConfigError(
                    f"schema column '{self.name}': {self.kind} needs minimum <= maximum"
                )
            if self.kind == "coordinate" and (not self.source or self.part not in (0, 1)):
                raise ConfigError(
                    f"schema column '{self.name}': a coordinate needs a source column and a "
                    "part, 0 or 1"
                )
        elif self.kind != "id":
            raise ConfigError(f"schema column '{self.name}': unknown kind {self.kind!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON form, in the layout of the challenge's ``parameters.json``."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.kind == "categorical":
            out["values"] = [_plain(v) for v in self.values]
            if self.other is not None:
                out["other"] = _plain(self.other)
            if self.coarse:
                out["coarse"] = [_plain(v) for v in self.coarse]
        elif self.kind in ("numeric", "coordinate"):
            out["min"], out["max"] = self.minimum, self.maximum
            if self.kind == "coordinate":
                out["source"], out["part"] = self.source, self.part
        return out

    def read_off(self, labels: pd.Series) -> np.ndarray:
        """A coordinate column's values from its source's labels, one by one: number ``part`` of
        an ``"x,y"`` label, clipped to the range; NaN for a label that is not two numbers."""
        parts = labels.astype(str).str.split(",", expand=True, n=1).reindex(columns=[0, 1])
        other = parts[1 - self.part]
        value = np.array(pd.to_numeric(parts[self.part], errors="coerce"), dtype=float)
        value[pd.to_numeric(other, errors="coerce").isna().to_numpy()] = np.nan
        return np.clip(value, self.minimum, self.maximum)


def _plain(value: Any) -> Any:
    """numpy scalars as Python scalars (for JSON and stable equality)."""
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True)
class Group:
    """Categorical columns whose value combinations are a PUBLIC list (a network's published
    mode -> line -> branch table, say): the joint model codes them as one column over ``values``
    (issue 28). A combination outside the list becomes (its first value, the ``other`` value of
    every later column), so every column after the first needs an ``other`` value."""

    columns: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "columns": list(self.columns),
            "values": [[_plain(v) for v in t] for t in self.values],
        }


@dataclass(frozen=True)
class TripSchema:
    """The public domain of every column of a trip table, keyed by column name; ``groups``: public
    lists of value combinations (:class:`Group`)."""

    columns: Mapping[str, Column] = field(default_factory=dict)
    groups: tuple[Group, ...] = ()

    def __post_init__(self) -> None:
        for name in self.coordinates():
            origin = self.columns.get(str(self.columns[name].source))
            if origin is None or origin.kind != "categorical":
                raise ConfigError(
                    f"schema column '{name}': its source '{self.columns[name].source}' is not a "
                    "categorical column of the schema"
                )
        for group in self.groups:
            names = ", ".join(group.columns)
            if len(group.columns) < 2 or len(set(group.columns)) != len(group.columns):
                raise ConfigError(f"schema group ({names}): needs two or more distinct columns")
            for j, name in enumerate(group.columns):
                col = self.columns.get(name)
                if col is None or col.kind != "categorical":
                    raise ConfigError(f"schema group ({names}): '{name}' is not categorical")
                if j > 0 and col.other is None:
                    raise ConfigError(f"schema group ({names}): '{name}' needs an 'other' value")
            if not group.values or len(set(group.values)) != len(group.values):
                raise ConfigError(f"schema group ({names}): needs distinct value lists")
            for combo in group.values:
                if len(combo) != len(group.columns) or any(
                    v not in self.columns[c].values
                    for c, v in zip(group.columns, combo, strict=True)
                ):
                    raise ConfigError(
                        f"schema group ({names}): {list(combo)!r} is not a combination of values "
                        "of its columns' domains"
                    )

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, spec: Mapping[str, Any], *, source: str = "schema") -> TripSchema:
        """From ``{column: {kind, values | min/max [, other]}}`` or a challenge ``parameters.json``
        (whose ``schema`` key holds that mapping; a ``groups`` key beside it: a list of
        ``{columns, values}``, see :class:`Group`)."""
        raw_groups: Any = []
        if "schema" in spec and isinstance(spec["schema"], Mapping):
            raw_groups = spec.get("groups") or []
            spec = spec["schema"]
        columns: dict[str, Column] = {}
        for name, col in spec.items():
            if not isinstance(col, Mapping) or "kind" not in col:
                raise ConfigError(f"{source}: column '{name}' needs a 'kind'")
            kind = col["kind"]
            if kind == "categorical":
                columns[name] = Column(
                    name,
                    "categorical",
                    tuple(col.get("values", ())),
                    other=col.get("other"),
                    coarse=tuple(col.get("coarse", ())),
                )
            elif kind == "numeric":
                columns[name] = Column(
                    name, "numeric", minimum=col.get("min"), maximum=col.get("max")
                )
            elif kind == "coordinate":
                columns[name] = Column(
                    name,
                    "coordinate",
                    minimum=col.get("min"),
                    maximum=col.get("max"),
                    source=col.get("source"),
                    part=col.get("part", 0),
                )
            else:
                columns[name] = Column(name, kind)
        return cls(columns, _groups(raw_groups, source))

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

    def coordinates(self) -> list[str]:
        """The coordinate columns (read off another column, never modelled)."""
        return [n for n, c in self.columns.items() if c.kind == "coordinate"]

    def derive(self, df: pd.DataFrame) -> pd.DataFrame:
        """``df`` with every coordinate column whose source it has read off that source (a
        per-record public rule: the joint model's trips get SUBE's lat/lon from their zones)."""
        names = [n for n in self.coordinates() if self.columns[n].source in df.columns]
        if not names:
            return df
        out = df.copy()
        for name in names:
            col = self.columns[name]
            out[name] = col.read_off(out[str(col.source)])
        return out

    def replace(self, *columns: Column) -> TripSchema:
        """A copy with the given columns added or replaced."""
        merged = dict(self.columns)
        merged.update({c.name: c for c in columns})
        return TripSchema(merged, self.groups)

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
        """JSON form of the columns (readable by :meth:`from_dict`; the release's ``schema.json``);
        the groups are public lists kept out of it (``{"schema": ..., "groups": [...]}`` reads
        them back)."""
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
                pos = _positions(out[name], col, source)
                bad = pos < 0
                if bad.any():
                    if col.other is None:
                        row = int(np.flatnonzero(bad)[0])
                        raise InputError(
                            f"{source}: column '{name}', row {row + 1}: value "
                            f"{out[name].iloc[row]!r} is not in the schema domain (the "
                            "public values: of --schema, else of the PUBLIC trips); list it "
                            'there, or give the column an "other" value in --schema'
                        )
                    pos[bad] = col.values.index(col.other)
                domain = pd.Series(np.asarray(col.values, dtype=object)).infer_objects()
                out[name] = domain.to_numpy()[pos]
            elif col.kind == "numeric":
                num = measure(out[name], name, source)
                if np.isnan(num).any():
                    row = int(np.flatnonzero(np.isnan(num))[0])
                    raise InputError(
                        f"{source}: column '{name}', row {row + 1}: {out[name].iloc[row]!r} "
                        "is not a number"
                    )
                out[name] = np.clip(np.rint(num), col.minimum, col.maximum).astype(np.int64)
            elif col.kind == "coordinate":  # read off its source (derive) when df has it
                if col.source in out.columns:
                    out[name] = col.read_off(out[str(col.source)])
                else:
                    out[name] = np.clip(measure(out[name], name, source), col.minimum, col.maximum)
            else:
                out[name] = id_strings(out[name], column=name, source=source).to_numpy()
        return out

    def validate(self, df: pd.DataFrame, *, source: str = "table") -> None:
        """Raise ``InputError`` unless every schema column of ``df`` lies in its domain."""
        for name, col in self.columns.items():
            if name not in df.columns:
                continue
            series = df[name]
            if col.kind == "categorical":
                bad = pd.Series(_positions(series, col, source) < 0, index=series.index)
            elif col.kind == "numeric":
                num = pd.to_numeric(series, errors="coerce")
                bad = num.isna() | (num < col.minimum) | (num > col.maximum) | (num != np.rint(num))
            elif col.kind == "coordinate":  # missing allowed (a label that is not a point)
                num = pd.to_numeric(series, errors="coerce")
                bad = (num < col.minimum) | (num > col.maximum)
            else:
                bad = series.isna()
            if bad.any():
                row = int(np.flatnonzero(bad.to_numpy())[0])
                raise InputError(
                    f"{source}: column '{name}', row {row + 1}: value {series.iloc[row]!r} "
                    "is outside the schema domain"
                )


def _groups(raw: Any, source: str) -> tuple[Group, ...]:
    if not isinstance(raw, list) or not all(
        isinstance(g, Mapping)
        and isinstance(g.get("columns"), list)
        and isinstance(g.get("values"), list)
        for g in raw
    ):
        raise ConfigError(f"{source}: groups must be a list of {{columns, values}} mappings")
    out = []
    for g in raw:
        if not all(isinstance(v, list) for v in g["values"]):
            raise ConfigError(f"{source}: group values must be lists of values")
        out.append(Group(tuple(map(str, g["columns"])), tuple(tuple(v) for v in g["values"])))
    return tuple(out)


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, int | float) else (1, str(value))


def value_text(values: pd.Series, *, column: str = "value", source: str = "input") -> pd.Series:
    """Each value as text by the identifier rule (:func:`synth.io.id_strings`: white space
    stripped, ``-?digits.0+`` -> ``-?digits``, integral numbers as their integer text), a number
    that is not an integer as Python writes it (``7.5``); missing values stay missing. Per value:
    what one value becomes never depends on the others."""
    series = pd.Series(values).reset_index(drop=True)
    if pd.api.types.is_bool_dtype(series):
        return id_strings(series, column=column, source=source)
    if pd.api.types.is_numeric_dtype(series):
        fraction = series.to_numpy(dtype=float, na_value=np.nan)
        odd = ~np.isnan(fraction) & (fraction != np.round(fraction))
        if odd.any():
            series = series.astype(object)
            series[odd] = [repr(float(v)) for v in fraction[odd]]
    elif pd.api.types.is_object_dtype(series) and pd.api.types.infer_dtype(series) != "string":
        odd = series.map(_fractional).to_numpy(dtype=bool)
        if odd.any():
            series = series.copy()
            series[odd] = [repr(float(v)) for v in series[odd]]
    return id_strings(series, column=column, source=source)


def _fractional(value: object) -> bool:
    """A number that is not an integer (NaN is missing, not a number here)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        return False
    v = float(value)
    return not np.isnan(v) and v != round(v) if np.isfinite(v) else True


def _domain_keys(values: Sequence[Any], column: str) -> list[str]:
    """:func:`value_text` of each domain value."""
    text = value_text(pd.Series(list(values), dtype=object), column=column, source="schema")
    return [str(v) for v in text]


#: object columns whose distinct values may be hashed together (no bools: ``True == 1``)
_HASHABLE = frozenset({"string", "integer", "floating", "mixed-integer-float", "empty"})


def _positions(series: pd.Series, col: Column, source: str) -> np.ndarray:
    """Index of each value's domain value (-1: outside the domain, or missing), value by value
    (:func:`value_text` of each distinct value once)."""
    index = pd.Index(_domain_keys(col.values, col.name), dtype=object)
    series = series.reset_index(drop=True)
    if pd.api.types.is_object_dtype(series) and pd.api.types.infer_dtype(series) not in _HASHABLE:
        keys = value_text(series, column=col.name, source=source)
        return np.asarray(index.get_indexer(pd.Index(keys, dtype=object)), dtype=np.int64)
    codes, uniques = pd.factorize(series)
    keys = value_text(pd.Series(uniques), column=col.name, source=source)
    found = np.asarray(index.get_indexer(pd.Index(keys, dtype=object)), dtype=np.int64)
    if len(found) == 0:  # every value missing
        return np.full(len(codes), -1, dtype=np.int64)
    return np.where(codes >= 0, found[np.maximum(codes, 0)], -1)


def _require(df: pd.DataFrame, names: Iterable[str], source: str) -> None:
    missing = [n for n in names if n not in df.columns]
    if missing:
        raise InputError(f"{source}: missing column(s) {', '.join(map(repr, missing))}")
