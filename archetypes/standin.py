"""An SBH release of the PRIVATE trips standing in for public data (issue 6, beyond the write-up).

When an agency has no public trips, :class:`~archetypes.synthesizer.ArchetypeSynthesizer` can spend
a first share of its budget on stability-based histograms
(:func:`synth.marginals.histogram.stability_histogram`, card-unit calibration) of the private trips
and learn archetypes, strata, trip pools and completion conditionals from the released cells
instead. Everything after the release is post-processing.

The release (``public_stand_in``: ``True`` for the defaults, or a mapping with these keys):

- ``tables``: column lists released one stability histogram each, in order. The first (the *main*
  table; default: the first two key columns) gives the pseudo-public trips: each kept cell
  becomes as many rows as its noisy count. Each later table fills the columns it adds, conditioned
  on the columns it shares with what is already there, by a
  :class:`~archetypes.column_completion.ColumnCompleter` fitted on the table's expanded cells (so
  an unseen combination falls back to coarser conditioning, down to the table's one-way
  marginal). Default later tables: ``[key column, the key column before it]`` for the other key
  columns,
  ``[category, first key column]``, ``[feature, first key column]`` for features not yet there,
  ``[target, its first conditioning column present]`` for each completion target in plan order,
  then a one-way table for any other column the model reads. A joint over many columns keeps almost
  no cell (a cell must reach a threshold of about ``ln(1/delta) / epsilon``), hence the pairs.
- ``max_records_per_individual`` (default 1): each individual's first trips (by ``order_column``,
  else input order) are kept, the same trips in every table; the card-unit calibration uses it as
  the L1 sensitivity. 1 is exact for a taxi sample where each trip is its own individual and costs a
  card's later trips otherwise.
- ``precision``: ``{column: step}`` rounds a column to multiples of ``step`` before counting (for
  float features outside the schema, e.g. ``lat``/``lon``). Numeric schema columns with more than
  :data:`GRID_MAX` values are otherwise counted on a fixed public grid (integers up to 8, then half
  octaves, mirrored for negatives) and expanded uniformly within the bin.
- ``weights``: relative shares of the tables in the stand-in's (epsilon, delta) (default: 3 for the
  main table, 2 for the other tables of key columns only, 1 for the rest; chosen on Chicago).

Budget: the stand-in's (epsilon, delta) share (the FIRST share of ``budget_split``) is split over
the tables by ``weights``, each recorded in the synthesizer's ledger before its noise is drawn; the
tables and the later noisy counts compose sequentially (each individual may appear in every table).

Individuals of the pseudo-public table: one per row (ids 0..n-1). The release does not say how
many trips an individual makes, so archetypes and strata see one-trip individuals and the sample
draws one trip per synthetic individual; pass ``n_records`` to fix the number of trips.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from archetypes.budget import budget_shares
from archetypes.column_completion import ColumnCompleter, Plan
from archetypes.measure import public_grid
from archetypes.model import bound_individuals
from archetypes.reading import measure, source_of, trip_ids
from archetypes.schema import TripSchema
from synth.errors import ConfigError, InputError
from synth.marginals import stability_histogram
from synth.params import spell
from synth.privacy import LedgerBranch

__all__ = ["GRID_MAX", "StandIn", "StandInSpec", "stand_in_spec"]

#: numeric schema columns with more values than this are counted on the half-octave grid
GRID_MAX = 64
#: code of a missing value of a ``precision`` column (decoded back to NaN)
_MISSING = np.iinfo(np.int64).min
_KEYS = ("tables", "weights", "max_records_per_individual", "precision")


@dataclass(frozen=True)
class StandInSpec:
    """The validated ``public_stand_in`` option."""

    tables: tuple[tuple[str, ...], ...]
    weights: tuple[float, ...]
    max_records_per_individual: int = 1
    precision: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Manifest form."""
        return {
            "tables": [list(t) for t in self.tables],
            "weights": list(self.weights),
            "max_records_per_individual": self.max_records_per_individual,
            "precision": dict(self.precision),
        }


def stand_in_spec(
    option: bool | Mapping[str, Any],
    *,
    key_columns: Sequence[str],
    category_column: str,
    features: Sequence[str],
    completion: Plan,
    needed: Sequence[str],
) -> StandInSpec:
    """Validate ``option`` (``True`` or a mapping of :data:`_KEYS`) and fill in default tables that
    cover every column in ``needed``."""
    if option is True:
        option = {}
    if not isinstance(option, Mapping):
        raise ConfigError(
            f"{spell('public_stand_in')} must be None, True or a table of options, got {option!r}"
        )
    unknown = sorted(set(option) - set(_KEYS))
    if unknown:
        raise ConfigError(
            f"{spell('public_stand_in')}: unknown key(s) {unknown} (allowed: {', '.join(_KEYS)})"
        )
    k = option.get("max_records_per_individual", 1)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(
            f"{spell('public_stand_in')}: {spell('max_records_per_individual')} must be a positive "
            f"integer, got {k!r}"
        )
    precision = dict(option.get("precision", {}))
    for column, step in precision.items():
        if isinstance(step, bool) or not isinstance(step, int | float) or not 0 < step < math.inf:
            raise ConfigError(
                f"{spell('public_stand_in')}: precision of '{column}' must be > 0, got {step!r}"
            )
    if "tables" in option:
        raw = option["tables"]
        if isinstance(raw, str) or not isinstance(raw, Sequence):
            raise ConfigError(f"{spell('public_stand_in')}: tables must be a list of column lists")
        tables = []
        for table in raw:
            if isinstance(table, str) or not isinstance(table, Sequence) or not table:
                raise ConfigError(
                    f"{spell('public_stand_in')}: each table must be a non-empty column list"
                )
            tables.append(tuple(dict.fromkeys(str(c) for c in table)))
    else:
        tables = _default_tables(key_columns, category_column, features, completion, needed)
    seen: set[str] = set()
    for table in tables:
        new = [c for c in table if c not in seen]
        if not new:
            raise ConfigError(f"{spell('public_stand_in')}: table {list(table)} adds no column")
        seen.update(new)
    missing = [c for c in needed if c not in seen]
    if missing:
        raise ConfigError(f"{spell('public_stand_in')}: no table releases {missing}")
    n = len(tables)
    default = [
        3 if i == 0 else 2 if set(t) <= set(key_columns) else 1 for i, t in enumerate(tables)
    ]
    weights = option.get("weights", default)
    if (
        isinstance(weights, str)
        or not isinstance(weights, Sequence)
        or len(weights) != n
        or any(isinstance(w, bool) or not isinstance(w, int | float) or not w > 0 for w in weights)
    ):
        raise ConfigError(
            f"{spell('public_stand_in')}: weights must be {n} positive numbers (one per table), "
            f"got {weights!r}"
        )
    return StandInSpec(tuple(tables), tuple(float(w) for w in weights), int(k), precision)


def _default_tables(
    keys: Sequence[str],
    category: str,
    features: Sequence[str],
    completion: Plan,
    needed: Sequence[str],
) -> list[tuple[str, ...]]:
    keys = list(dict.fromkeys(keys))
    main = tuple(keys[:2])
    tables = [main]
    seen = set(main)

    def add(target: str, cond: Sequence[str]) -> None:
        if target in seen:
            return
        given = [c for c in cond if c in seen][:1]
        tables.append((target, *given))
        seen.add(target)

    for i in range(2, len(keys)):
        add(keys[i], [keys[i - 1]])
    add(category, keys)
    for feature in features:
        add(feature, keys)
    for target, cond in completion:
        add(str(target), list(cond))
    for column in needed:
        add(column, [])
    return tables


class StandIn:
    """Release the tables of ``spec`` from the private trips and expand them into trips."""

    def __init__(
        self, spec: StandInSpec, *, schema: TripSchema, id_column: str, order_column: str | None
    ) -> None:
        self.spec = spec
        self.schema = schema
        self.id_column = id_column
        self.order_column = order_column
        self.grids_: dict[str, np.ndarray] = {}

    # -- encoding ----------------------------------------------------------------------------------
    def _check_domains(self) -> None:
        for table in self.spec.tables:
            for column in table:
                if column not in self.schema and column not in self.spec.precision:
                    raise ConfigError(
                        f"{spell('public_stand_in')}: column '{column}' has no public domain: add "
                        f"it to the "
                        "schema (or give it a precision)"
                    )

    def _grid(self, column: str) -> np.ndarray | None:
        """Lower bin edges of a wide numeric schema column (None: counted exactly)."""
        col = self.schema[column]
        assert col.minimum is not None and col.maximum is not None
        lo, hi = int(col.minimum), int(col.maximum)
        if hi - lo + 1 <= GRID_MAX:
            return None
        return public_grid(lo, hi)

    def encode(self, trips: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
        """Conformed trips with precision columns rounded and wide numeric columns binned."""
        out = trips.copy()
        for column in columns:
            if column in self.spec.precision:
                step = float(self.spec.precision[column])
                values = measure(out[column], column, "private data")  # per value
                codes = np.full(len(values), _MISSING, dtype=np.int64)
                ok = ~np.isnan(values)
                codes[ok] = np.floor(values[ok] / step + 0.5).astype(np.int64)
                out[column] = codes
            elif self.schema[column].kind == "numeric":
                grid = self._grid(column)
                if grid is not None:
                    self.grids_[column] = grid
                    values = out[column].to_numpy(dtype=np.int64)
                    out[column] = np.searchsorted(grid, values, side="right") - 1
        return out

    def decode(self, codes: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
        """Codes back to values: precision multiples, a uniform integer within each grid bin."""
        out = codes.copy()
        for column in out.columns:
            if column in self.spec.precision:
                code = out[column].to_numpy(dtype=np.int64)
                value = code.astype(float) * float(self.spec.precision[column])
                value[code == _MISSING] = np.nan
                if column in self.schema and self.schema[column].kind == "numeric":
                    col = self.schema[column]
                    value = np.clip(np.rint(value), col.minimum, col.maximum)
                out[column] = value
            elif column in self.grids_:
                grid = self.grids_[column]
                top = int(self.schema[column].maximum or 0)
                code = out[column].to_numpy(dtype=np.int64)
                lo = grid[code]
                hi = np.append(grid[1:] - 1, top)[code]
                out[column] = lo + np.floor(rng.random(len(code)) * (hi - lo + 1)).astype(np.int64)
        return out

    # -- release -----------------------------------------------------------------------------------
    def release(
        self,
        private: pd.DataFrame,
        *,
        epsilon: float,
        delta: float,
        noise: Any,
        ledger: LedgerBranch,
        rng: np.random.Generator,
    ) -> pd.DataFrame:
        """The pseudo-public trips (id column = row number): :meth:`histograms` (spends (epsilon,
        delta) in ``ledger``), then :meth:`expand` (post-processing)."""
        released = self.histograms(
            private, epsilon=epsilon, delta=delta, noise=noise, ledger=ledger
        )
        return self.expand(released, rng)

    def _prepare(self, private: pd.DataFrame) -> pd.DataFrame:
        """Private trips conformed to the schema, bounded (first trips by ``order_column``) and
        encoded: one row per counted trip, with the id column."""
        self._check_domains()
        columns = list(dict.fromkeys(c for t in self.spec.tables for c in t))
        order = self.order_column if self.order_column in private.columns else None
        need = [self.id_column, *columns, *([order] if order else [])]
        missing = [c for c in dict.fromkeys(need) if c not in private.columns]
        if missing:
            raise InputError(f"private data: missing column(s) {', '.join(map(repr, missing))}")
        source = source_of(private)
        private = trip_ids(private[list(dict.fromkeys(need))], self.id_column, source)
        private = self.schema.conform(
            private, source=source, columns=[c for c in columns if c in self.schema]
        )
        k = self.spec.max_records_per_individual
        private = bound_individuals(private, self.id_column, k, order)
        return self.encode(private, columns)

    def histograms(
        self,
        private: pd.DataFrame,
        *,
        epsilon: float,
        delta: float,
        noise: Any,
        ledger: LedgerBranch,
    ) -> list[pd.DataFrame]:
        """The stability histograms of the tables (the only use of the private data): each table's
        kept cells and noisy counts, its spend (a ``weights`` share of (epsilon, delta)) recorded
        in ``ledger`` before its noise is drawn."""
        return self._tables(
            self._prepare(private), epsilon=epsilon, delta=delta, noise=noise, ledger=ledger
        )

    def _tables(
        self,
        coded: pd.DataFrame,
        *,
        epsilon: float,
        delta: float,
        noise: Any,
        ledger: LedgerBranch,
    ) -> list[pd.DataFrame]:
        """:meth:`histograms` on the output of :meth:`_prepare`."""
        total = sum(self.spec.weights)
        shares = [w / total for w in self.spec.weights]
        budgets = zip(budget_shares(epsilon, shares), budget_shares(delta, shares), strict=True)
        out = []
        for table, (eps, dlt) in zip(self.spec.tables, budgets, strict=True):
            out.append(
                stability_histogram(
                    coded,
                    list(table),
                    epsilon=eps,
                    delta=dlt,
                    privacy_unit=self.id_column,
                    max_contributions=self.spec.max_records_per_individual,
                    random_state=noise,
                    ledger=ledger,
                    label=f"public stand-in: SBH of {', '.join(table)}",
                )
            )
        return out

    def expand(self, released: list[pd.DataFrame], rng: np.random.Generator) -> pd.DataFrame:
        """Pseudo-public trips from the released tables (post-processing, see the module)."""
        self.kept_cells_ = [len(r) for r in released]
        frame: pd.DataFrame | None = None
        for table, cells in zip(self.spec.tables, released, strict=True):
            rows = cells.loc[
                cells.index.repeat(cells["count"].to_numpy(dtype=np.int64)), list(table)
            ].reset_index(drop=True)
            if frame is None:
                if len(rows) == 0:
                    raise ConfigError(
                        f"{spell('public_stand_in')}: the SBH of {list(table)} kept no cell (no "
                        f"cell reached "
                        f"the threshold {cells.attrs['sbh']['threshold']}); release fewer "
                        "columns in the first table or give the stand-in a larger budget share"
                    )
                frame = rows
                continue
            frame = self._fill(frame, rows, table, rng)
        assert frame is not None
        out = self.decode(frame, rng).infer_objects()
        out.insert(0, self.id_column, np.arange(len(out), dtype=np.int64))
        return out

    def _fill(
        self,
        frame: pd.DataFrame,
        rows: pd.DataFrame,
        table: Sequence[str],
        rng: np.random.Generator,
    ) -> pd.DataFrame:
        """Add the columns of ``table`` that ``frame`` lacks, drawn from the table's cells
        conditionally on the shared columns; uniformly from the domain codes when none was kept."""
        given = [c for c in table if c in frame.columns]
        targets = [c for c in table if c not in frame.columns]
        if len(rows) == 0:
            out = frame.copy()
            for column in targets:
                out[column] = self._uniform(column, len(out), rng)
            return out
        plan = [(t, [*given, *targets[:i]]) for i, t in enumerate(targets)]
        completer = ColumnCompleter(plan=plan).fit(rows)
        out, _ = completer.complete(frame, rng)
        return out

    def _uniform(self, column: str, size: int, rng: np.random.Generator) -> np.ndarray:
        """Codes drawn uniformly from a column's public domain (no cell of its table was kept)."""
        if column in self.spec.precision and column not in self.schema:
            raise ConfigError(
                f"{spell('public_stand_in')}: the table adding '{column}' kept no cell and the "
                f"column has no "
                "public domain to draw from"
            )
        col = self.schema[column]
        if col.kind == "categorical":
            values = np.asarray(col.values, dtype=object)
            return values[rng.integers(len(values), size=size)]
        assert col.minimum is not None and col.maximum is not None
        if column in self.grids_:
            return rng.integers(len(self.grids_[column]), size=size)
        if column in self.spec.precision:
            step = float(self.spec.precision[column])
            lo = math.floor(col.minimum / step + 0.5)
            hi = math.floor(col.maximum / step + 0.5)
            return rng.integers(lo, hi + 1, size=size)
        return rng.integers(int(col.minimum), int(col.maximum) + 1, size=size)
