"""The Opal marginal release (Asghar, Tyler and Kaafar 2018, section 4.1) with the fixes of
Culnane, Rubinstein and Teague (2017) as modes.

``mode="consistent"`` (Culnane et al. section 4: noise only the two time x location tables, derive
the one-way tables by summing them) and ``mode="pure"`` (section 3: perturb every cell of the public
domain, zeros included, for pure epsilon-DP; the empty cells are handled with the exact empty-cell
shortcut, never enumerated).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import pandas as pd

from synth.engines import SBHEvents, check_engine, get_engine
from synth.engines.kernels import count_keys
from synth.errors import ConfigError, InputError, TransitSynthWarning
from synth.generator import Generator
from synth.logs import private_message
from synth.marginals.bounding import Bounding, check_bounding, expected_tables, keep_bounded
from synth.marginals.cells import noisy_cells
from synth.marginals.events import (
    NO_DAY,
    Events,
    day_label,
    day_number,
    load_input,
    read_events,
)
from synth.marginals.grid import DEFAULT_SPLIT, TABLES, Grid, sum_to, table_keys
from synth.marginals.params import PARAMS
from synth.marginals.sbh_calibration import (
    NOISE_METHODS,
    NoiseSource,
    SBHCalibration,
    calibrate,
    record_spend,
)
from synth.params import Constraint, ParamTable, spell
from synth.privacy import PrivacyLedger, check_budget, exact, noise_source
from synth.records import UnknownLocationWarning
from synth.records.mapped_source import MappedSource
from synth.release import recorded_path
from synth.taxonomy import Taxonomy, taxonomy_note
from synth.times import check_timezone

if TYPE_CHECKING:
    from synth.release import ReleaseWriter

__all__ = ["Mode", "OpalMarginals", "marginal_tables"]

Mode = Literal["sbh", "consistent", "pure"]


class OpalMarginals(Generator):
    """The Opal marginal release of 000 section 4.1, with the fixes of 001 as modes.

    Parameters (keyword-only): ``epsilon`` and ``delta`` are the totals per (mode, day) partition
    for a row unit (a row lies in one partition: parallel composition, 000 Theorem 7) and of the
    whole release for a card unit (a card may tap in several partitions, so each table is one
    histogram over every partition's cells and a card's events are bounded across all of them),
    split over the six tables :data:`TABLES` in proportion to ``split`` (epsilon) and equally
    (delta): the defaults reproduce 000 section 4.2 (epsilons 1,1,1,1,2,2; ``delta_j = 1/8e6``).
    ``mode``: ``"sbh"`` (Algorithm 1 per table), ``"consistent"`` (only the two time x location
    tables are released, each with the budget of itself and its two one-way tables; the one-way
    tables are their sums) or ``"pure"`` (every public-domain cell perturbed, pure epsilon-DP; needs
    ``taxonomy``, ``modes`` and ``days``). ``bin`` (minutes) divides 1440. ``taxonomy``/``level``:
    locations are collapsed to that level (default: the leaves, as given). ``modes``/``days``: the
    public partition domain (rows outside are dropped); without them the partitions are those
    present in the data, which the manifest then does not list. ``privacy_unit``: ``None`` (a row,
    a trip or a tap, as in 000) or the card column, each card keeping ``max_contributions``
    events per side (tap-on, tap-off) over all partitions by ``bounding`` (``"uniform"``, the
    default, or ``"earliest"``: :mod:`synth.marginals.bounding`).
    ``random_state``: ``None`` (secure), an int (reproducible, NOT private) or a noise source.
    ``engine`` (``"auto"``, the default: memory for frames and small files, DuckDB for large
    files; ``"memory"``, ``"duckdb"``, ``"spark"``) and ``engine_options``: where the bounding
    and the cell counts run (:mod:`synth.engines`); the noise is drawn here on the collected counts.
    ``on_unknown``: events at a location that is not a leaf of ``taxonomy`` fail the fit
    (``"error"``) or are dropped (``"drop"``, a per-event rule against the public taxonomy).
    ``timezone``: times are read per value as the wall clock as written (default), or converted
    to this IANA zone (:mod:`synth.times`); a public setting. ``location_column``: the location
    column of a taps file given to :meth:`fit` (e.g. ``id_linea`` for SUBE lines).

    The generator contract (:class:`synth.generator.Generator`): ``sklearn.base.clone`` works,
    :meth:`sample` (alias :meth:`release`) is post-processing of the fit, and a method needing a
    fit raises :class:`~synth.errors.NotFittedError`.

    Fitted: ``tables_`` (name -> DataFrame ``mode, day[, time][, location], count``),
    ``calibrations_`` (name -> :class:`SBHCalibration` of the noise each table carries),
    ``ledger_`` (the :class:`PrivacyLedger`), ``partitions_`` (public partition labels or ``None``).
    """

    def __init__(
        self,
        *,
        epsilon: float = 8.0,
        delta: float = 6 / 8_000_000,
        split: Sequence[float] = DEFAULT_SPLIT,
        mode: Mode = "sbh",
        bin: int = 15,
        taxonomy: Taxonomy | None = None,
        level: int | None = None,
        modes: Sequence[str] | None = None,
        days: Sequence[str] | None = None,
        privacy_unit: str | None = None,
        max_contributions: int = 1,
        random_state: int | NoiseSource | None = None,
        engine: str = "auto",
        engine_options: Mapping[str, Any] | None = None,
        on_unknown: Literal["error", "drop"] = "error",
        timezone: str | None = None,
        location_column: str = "stop_id",
        bounding: Bounding = "uniform",
        **renamed: Any,
    ) -> None:
        self.bounding = bounding
        self.location_column = location_column
        self.on_unknown = on_unknown
        self.timezone = timezone
        self.engine = engine
        self.engine_options = engine_options
        self.epsilon = epsilon
        self.delta = delta
        self.split = split
        self.mode = mode
        self.bin = bin
        self.taxonomy = taxonomy
        self.level = level
        self.modes = modes
        self.days = days
        self.privacy_unit = privacy_unit
        self.max_contributions = max_contributions
        self.random_state = random_state
        for name, value in PARAMS.renamed(renamed).items():  # bin_minutes=
            setattr(self, name, value)

    #: one row per parameter (:mod:`synth.marginals.params`): validator, config keys, flags
    parameter_table: ClassVar[ParamTable] = PARAMS
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = PARAMS.constraints()

    # ------------------------------------------------------------------ parameters
    def _table_budgets(self) -> dict[str, tuple[Fraction, Fraction]]:
        """(epsilon, delta) of each released (noised) table."""
        eps, dlt = check_budget(self.epsilon, self.delta, need_delta=self.mode != "pure")
        weights = [exact(w, "split") for w in self.split]
        if len(weights) != len(TABLES) or any(w <= 0 for w in weights):
            raise ConfigError(f"split must be {len(TABLES)} positive numbers, one per table")
        total = sum(weights, Fraction(0))
        budgets = {
            t: (eps * w / total, dlt / len(TABLES)) for t, w in zip(TABLES, weights, strict=True)
        }
        if self.mode != "consistent":
            return budgets
        out = {}
        for side in ("on", "off"):
            names = (f"{side}_time", f"{side}_location", f"{side}_time_location")
            out[names[2]] = (
                sum((budgets[n][0] for n in names), Fraction(0)),
                sum((budgets[n][1] for n in names), Fraction(0)),
            )
        return out

    def _check(self) -> None:
        """Every parameter check (:meth:`Generator._validate_params`), before any data is read."""
        self._validate_params()

    def _check_params(self) -> None:
        """The rules between parameters that the table (one row each) cannot state."""
        check_engine(self.engine, self.engine_options)
        check_timezone(self.timezone)
        if self.level is not None:
            if self.taxonomy is None:
                raise ConfigError(f"{spell('level')} needs a taxonomy")
            if not 0 <= self.level <= self.taxonomy.height:
                raise ConfigError(
                    f"{spell('level')} must be in [0, {self.taxonomy.height}], got {self.level!r}"
                )
        if self.mode == "pure":
            missing = [n for n in ("taxonomy", "modes", "days") if getattr(self, n) is None]
            if missing:
                raise ConfigError(
                    f"pure mode ({spell('mode', 'pure')}) perturbs every cell of the public "
                    "domain and needs " + ", ".join(spell(n) for n in missing)
                )

    # ------------------------------------------------------------------ fit
    def _label_grid(
        self, mode_labels: Sequence[str], days_present: np.ndarray, loc_labels: Sequence[str]
    ) -> tuple[Grid, np.ndarray, np.ndarray, np.ndarray]:
        """The cell grid, and the code of each mode label, present day and location label
        (-1: outside the public partitions)."""
        if self.modes is not None:
            modes = sorted({str(m) for m in self.modes})
            mode_code = pd.Index(modes).get_indexer(pd.Index(list(mode_labels)))
        else:
            modes = [str(m) for m in mode_labels]
            mode_code = np.arange(len(modes))
        if self.days is not None:
            days = sorted({int(day_number(str(d))) for d in self.days})
            day_code = pd.Index(days).get_indexer(pd.Index(days_present))
        else:
            days = [int(d) for d in days_present]
            day_code = np.arange(len(days))
        raw = [str(x) for x in loc_labels]
        if self.taxonomy is not None:
            tax = self.taxonomy
            unknown = tax.unknown(raw)
            if unknown and self.on_unknown != "drop":
                counts = private_message(f"{len(unknown)} distinct unknown locations")
                raise InputError(
                    f"location '{unknown[0]}' is not a leaf of the taxonomy {tax.source} "
                    f"({f'{counts}; ' if counts else ''}{spell('on_unknown', 'drop')} drops them)"
                )
            text = unknown and private_message(
                f"dropped the events at {len(unknown)} distinct locations not in the "
                f"taxonomy {tax.source} (e.g. '{unknown[0]}')"
            )
            if text:
                warnings.warn(text, UnknownLocationWarning, stacklevel=4)
            level = tax.height if self.level is None else int(self.level)
            gen_map = tax.generalization_map(level)
            domain = sorted(set(gen_map.values()))
            loc_code = pd.Index(domain).get_indexer(  # -1 (dropped): not in the taxonomy
                pd.Index([gen_map.get(x, "\0unknown") for x in raw])
            )
        else:
            domain, loc_code = raw, np.arange(len(raw))
        grid = Grid(
            modes=modes,
            days=days,
            bins=1440 // int(self.bin),
            bin_minutes=int(self.bin),
            locations=domain,
            public_partitions=self.modes is not None and self.days is not None,
            public_locations=self.taxonomy is not None,
        )
        return (
            grid,
            np.asarray(mode_code, dtype=np.int64),
            np.asarray(day_code, dtype=np.int64),
            np.asarray(loc_code, dtype=np.int64),
        )

    def _grid(self, events: Events) -> tuple[Grid, np.ndarray, np.ndarray, np.ndarray]:
        """The cell grid, and per event: partition code, location code, kept mask."""
        days_present, day_index = np.unique(events.day, return_inverse=True)
        grid, mode_map, day_map, loc_map = self._label_grid(
            list(events.modes), days_present, list(events.locations)
        )
        mode_code, day_code = mode_map[events.mode], day_map[day_index]
        location = loc_map[events.location]
        keep = (mode_code >= 0) & (day_code >= 0) & (location >= 0)
        part = np.where(keep, mode_code, 0) * len(grid.days) + np.where(keep, day_code, 0)
        return grid, part.astype(np.int64), location, keep

    def fit(
        self,
        data: pd.DataFrame | str | os.PathLike[str] | MappedSource,
        *,
        location_column: str | None = None,
    ) -> OpalMarginals:
        """Count the tables, record the spends in the ledger, then draw the noise.

        ``data`` is a frame of trips, taps or sequences, or a trips/taps file: the DuckDB engine
        reads the usual layouts itself (out of core); otherwise the file is loaded as
        ``transit-synth marginals`` does; a :class:`~synth.records.mapped_source.MappedSource`
        is read here, after the checks, and loaded so too. ``fit(location_column=...)`` is
        deprecated (removed in 0.3.0): pass it to the constructor.
        """
        self._check()
        location = self._deprecated_fit_args({"location_column": location_column})
        cals = self._calibrations()
        source = data if isinstance(data, MappedSource) else None
        with source.naming() if source is not None else nullcontext():  # the user's terms
            if isinstance(data, MappedSource):  # fit is the only reader (issue 27)
                data = load_input(data.read(), location["location_column"], self.timezone)
            grid, counted, kind = self._counts(data, cals, location["location_column"])
        noise = noise_source(self.random_state, methods=NOISE_METHODS)
        ledger = self._ledger(cals, kind, grid, bool(getattr(noise, "seeded", False)))
        pure = self.mode == "pure"
        released = {
            name: noisy_cells(
                counted[name][0],
                counted[name][1],
                cals[name],
                noise,
                grid.size(name) if pure else None,
            )
            for name in cals
        }
        if self.mode == "consistent":
            for side in ("on", "off"):
                two_way = released[f"{side}_time_location"]
                for one in (f"{side}_time", f"{side}_location"):
                    released[one] = sum_to(one, *two_way, grid)
        self.tables_ = {name: grid.frame(name, *released[name]) for name in TABLES}
        self.calibrations_ = cals
        self.ledger_ = ledger
        self.grid_ = grid
        self.row_kind_ = kind
        self.partitions_ = (
            [f"{m} {day_label(d)}" for m in grid.modes for d in grid.days]
            if grid.public_partitions
            else None
        )
        return self

    def _calibrations(self) -> dict[str, SBHCalibration]:
        """The calibration of every noised table (its privacy map, before any data is read)."""
        return {
            name: calibrate(
                eps,
                dlt,
                privacy_unit=self.privacy_unit,
                max_contributions=self.max_contributions,
                pure=self.mode == "pure",
            )
            for name, (eps, dlt) in self._table_budgets().items()
        }

    def _counts(
        self,
        data: pd.DataFrame | str | os.PathLike[str],
        cals: Mapping[str, SBHCalibration],
        location_column: str,
    ) -> tuple[Grid, dict[str, tuple[np.ndarray, np.ndarray]], str]:
        """The grid, the exact cell counts of every table and the row kind.

        The counting steps (bounding each card among the events of the public partitions, then
        the cells of every table) run on the engine; the noise is drawn by the caller, on them.
        """
        k = None if self.privacy_unit is None else int(self.max_contributions)
        with get_engine(self.engine, self.engine_options, data) as engine:
            scan = None
            uniform = k is not None and self.bounding == "uniform"
            if not isinstance(data, pd.DataFrame):
                # engines read times as written only; a uniform choice is drawn here, in memory
                if self.timezone is None and not uniform:
                    scan = engine.sbh_scan(
                        data, location_column=location_column, unit_column=self.privacy_unit
                    )
                if scan is None:
                    if uniform and self.engine in ("duckdb", "spark"):
                        warnings.warn(
                            f"{spell('bounding', 'uniform')} draws each card's taps in memory: "
                            f"the file is loaded whole ({spell('bounding', 'earliest')} keeps "
                            f"{spell('engine', self.engine)} out of core)",
                            TransitSynthWarning,
                            stacklevel=2,
                        )
                    data = load_input(Path(data), location_column, self.timezone)
            if scan is not None:
                grid, mode_code, day_code, loc_code = self._label_grid(
                    scan.modes, np.asarray(scan.days, dtype=np.int64), scan.locations
                )
                counted = scan.counts(
                    mode_code,
                    day_code,
                    loc_code,
                    n_days=len(grid.days),
                    tables=list(cals),
                    n_locations=len(grid.locations),
                    n_bins=grid.bins,
                    bin_minutes=grid.bin_minutes,
                    max_contributions=k,
                )
                return grid, counted, scan.kind
            assert isinstance(data, pd.DataFrame)
            events = read_events(data, unit_column=self.privacy_unit, timezone=self.timezone)
            grid, part, loc, keep = self._grid(events)
            if (events.minute[keep] < 0).any():
                raise InputError(
                    "the release needs tap times (a 'time', 'on_time' or 'off_time' column)"
                )
            if uniform and events.unit is not None:  # bounded here; the engine only counts
                keep = keep_bounded(keep, events, self.max_contributions, self.random_state)
                events.unit, k = None, None
            counted = engine.sbh_counts(
                SBHEvents(
                    side=events.side[keep],
                    part=part[keep],
                    minute=events.minute[keep],
                    location=loc[keep],
                    unit=None if events.unit is None else events.unit[keep],
                ),
                list(cals),
                n_locations=len(grid.locations),
                n_bins=grid.bins,
                bin_minutes=grid.bin_minutes,
                max_contributions=k,
            )
            return grid, counted, events.kind

    def _ledger(
        self, cals: dict[str, SBHCalibration], kind: str, grid: Grid, seeded: bool
    ) -> PrivacyLedger:
        """The release's ledger.

        Row unit: one sequential branch per partition in a parallel group (000 Theorem 7: a row
        lies in exactly one partition). Card unit: the six tables in sequence, each one histogram
        over the cells of every partition, since a card may appear in several partitions.
        """
        eps = sum((c.epsilon for c in cals.values()), Fraction(0))
        dlt = sum((c.delta for c in cals.values()), Fraction(0))
        derived = (
            "; the one-way tables of this side are its sums (post-processing)"
            if self.mode == "consistent"
            else ""
        )
        if self.privacy_unit is not None:
            unit = str(self.privacy_unit)
            neighbouring = (
                f"add or remove one {unit}'s records (at most {self.max_contributions} "
                "per side kept over all partitions, "
                + ("a uniform random choice)" if self.bounding == "uniform" else "first by time)")
            )
            ledger = PrivacyLedger(epsilon=eps, delta=dlt, unit=unit, neighbouring=neighbouring)
            scope = "one histogram over the cells of every (mode, day) partition"
            for name, cal in cals.items():
                note = scope + (derived if name.endswith("time_location") else "")
                record_spend(ledger, name, cal, note, seeded=seeded)
            return ledger
        unit, neighbouring = kind, f"replace one {kind} by another (000 Theorem 5)"
        ledger = PrivacyLedger(epsilon=eps, delta=dlt, unit=unit, neighbouring=neighbouring)
        # Every partition spends the same, so when the partitions come from the data one branch
        # stands for all of them at the same cost (listing them would leak which exist).
        if not grid.public_partitions:
            labels = ["each (mode, day) partition (not listed: derived from the data)"]
        else:
            labels = [f"{m} {day_label(d)}" for m in grid.modes for d in grid.days]
        with ledger.parallel(
            "mode x day partitions", disjoint_by=f"each {kind} lies in exactly one (mode, day)"
        ) as par:
            for label in labels:
                branch = par.branch(label)
                for name, cal in cals.items():
                    note = derived if name.endswith("time_location") else ""
                    record_spend(branch, name, cal, note, seeded=seeded)
        return ledger

    # ------------------------------------------------------------------ outputs
    def sample(self) -> dict[str, pd.DataFrame]:
        """The six tables (post-processing of the fitted release; copies)."""
        self._check_fitted()
        return {name: df.copy() for name, df in self.tables_.items()}

    def release(self) -> dict[str, pd.DataFrame]:
        """The six tables: :meth:`sample` under the name of earlier versions."""
        return self.sample()

    def error_bounds(self, beta: float = 0.05) -> dict[str, dict[str, Any]]:
        """Per table: calibration, per-cell error bound at ``beta`` (000 Theorem 6) and provenance.

        A table derived by summing (consistent mode) reports the bound of one two-way cell and
        ``derived_from``; its cells sum ``terms`` such cells (``None``: the location domain is not
        public, so the number of terms is that of the locations compared).
        """
        self._check_fitted()
        out: dict[str, dict[str, Any]] = {}
        for name in TABLES:
            if name in self.calibrations_:
                out[name] = {**self.calibrations_[name].to_dict(beta), "derived_from": None}
                continue
            side = name.split("_")[0]
            source = f"{side}_time_location"
            terms = (
                self.grid_.bins
                if name.endswith("location")
                else (len(self.grid_.locations) if self.grid_.public_locations else None)
            )
            out[name] = {
                **self.calibrations_[source].to_dict(beta),
                "derived_from": source,
                "terms": terms,
            }
        return out

    def parameters(self) -> dict[str, Any]:
        """The release parameters recorded in the manifest (all public)."""
        self._check_fitted()
        tax = self.taxonomy
        return {
            "generator": self.manifest_name(),
            "mode": self.mode,
            "epsilon_per_partition": float(exact(self.epsilon, "epsilon")),
            "delta_per_partition": float(exact(self.delta, "delta")),
            "budget_scope": (
                "each (mode, day) partition (parallel composition over rows)"
                if self.privacy_unit is None
                else "the whole release (a card may appear in several partitions)"
            ),
            "split": [float(w) for w in self.split],
            "bin_minutes": int(self.bin),
            "taxonomy": None if tax is None else recorded_path(tax.source),
            **({"gtfs_stations": True} if getattr(tax, "gtfs_stations", False) else {}),
            **taxonomy_note(tax),
            **({"on_unknown": "drop"} if self.on_unknown == "drop" else {}),
            "level": None if tax is None else (tax.height if self.level is None else self.level),
            "modes": None if self.modes is None else sorted(str(m) for m in self.modes),
            "days": None if self.days is None else [day_label(d) for d in self.grid_.days],
            "privacy_unit": self.privacy_unit or self.row_kind_,
            "max_contributions": int(self.max_contributions),
            **({"bounding": self.bounding} if self.privacy_unit is not None else {}),
            "timezone": self.timezone or "wall clock as written",
            "tables": self.error_bounds(),
        }

    def public_inputs(self) -> dict[str, str | os.PathLike[str]]:
        """The taxonomy file the grid's locations came from, when it is one (fingerprinted)."""
        source = None if self.taxonomy is None else Path(str(self.taxonomy.source))
        return {"taxonomy": source} if source is not None and source.is_file() else {}

    def _write_data(self, release: ReleaseWriter, format: str) -> dict[str, int]:
        """One file per table; returns the number of cells of each."""
        for name, df in self.tables_.items():
            release.table(df, name, format)
        return {name: len(df) for name, df in self.tables_.items()}


def marginal_tables(
    data: pd.DataFrame,
    *,
    bin_minutes: int = 15,
    taxonomy: Taxonomy | None = None,
    level: int | None = None,
    timezone: str | None = None,
    modes: Sequence[str] | None = None,
    days: Sequence[str] | None = None,
    unit_column: str | None = None,
    max_contributions: int | None = None,
    bounding: Bounding = "earliest",
    random_state: object = None,
    expected: bool = False,
) -> dict[str, pd.DataFrame]:
    """The exact (NOT private) tables of the release, in its format, for trips, taps or sequences.

    What :func:`synth.evaluate.against_reference` compares. Time tables are absent when the data has
    no times, off tables when it has no tap-offs. With ``unit_column`` and ``max_contributions``
    the events go through the release's own bounding first (the memory engine's rule, the same
    in every engine): events outside the public ``modes``/``days`` partitions are dropped, then
    each (unit, side) keeps ``max_contributions`` events by the release's ``bounding`` rule
    (:mod:`synth.marginals.bounding`): ``"earliest"``, the first by (time, partition, location,
    input order; data without times, e.g. sequences: the first in input order), or
    ``"uniform"``, a uniform random choice (``random_state``: None secure, an int seed) or, with
    ``expected``, its expectation with a ``variance`` column (:func:`~synth.marginals.bounding.
    expected_tables`), so a card-unit release is compared with data bounded as it was.
    """
    bounded = unit_column is not None and max_contributions is not None
    events = read_events(
        data, unit_column=unit_column if bounded else None, timezone=check_timezone(timezone)
    )
    spec = OpalMarginals(
        bin=bin_minutes,
        taxonomy=taxonomy,
        level=level,  # a data without modes or days is compared with the release summed over them
        modes=None if "mode" not in data.columns else modes,
        days=None if (events.day == NO_DAY).all() else days,
    )
    spec._check()
    grid, part, loc, keep = spec._grid(events)
    if bounded:
        assert events.unit is not None
        timed = bool((events.minute >= 0).all())  # untimed sequences: the first k positions
        order = [events.minute, part, loc] if timed else []
        rule, k = check_bounding(bounding), int(max_contributions)  # type: ignore[arg-type]
        if expected and rule == "uniform":
            return expected_tables(events, part, loc, grid, keep, k)
        keep = keep_bounded(keep, events, k, random_state, rule=rule, order=order)
    if not keep.all():
        events = _subset(events, keep)
        part, loc = part[keep], loc[keep]
    keys: dict[str, np.ndarray] = {}
    for side in events.sides:
        keys.update(table_keys(events, part, loc, grid, side))
    return {
        name: grid.frame(name, *count_keys(keys[name], grid.size(name)))
        for name in TABLES
        if name in keys
    }


def _subset(events: Events, keep: np.ndarray) -> Events:
    """The events ``keep`` (same category lists and sides)."""
    arrays = {f: getattr(events, f)[keep] for f in ("side", "mode", "day", "minute", "location")}
    unit = None if events.unit is None else events.unit[keep]
    units = events.units
    return dataclasses.replace(events, **arrays, unit=unit, units=units)
