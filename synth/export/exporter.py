"""Exports: one call that exports a release directory (see :mod:`synth.export`)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from synth.errors import ConfigError, TransitSynthWarning
from synth.export.coordinates import load_coordinates
from synth.export.matsim import (
    DEFAULT_GAP,
    DEFAULT_START,
    check_sample_share,
    leg_modes,
    plan_end_times,
    scaling_config,
    write_population,
)
from synth.export.od import check_bin_minutes, od_matrix, write_od
from synth.export.periods import od_by_period, parse_periods
from synth.export.plans import ACTIVITY_RULE, Plans, matsim_plans, parse_activity_types
from synth.export.releases import Release, read_release
from synth.io import atomic_path
from synth.outdir import release_dir

#: The MATSim config holding the scaling of a sample (``--sample-share``).
SCALING_FILE = "scaling-config.xml"
#: why ``legs`` and ``plan_legs`` differ in ``export-matsim.json``
LEGS_NOTE = (
    "legs: the release's pt legs (every boarding followed by another place, what the OD export "
    "counts); plan_legs: the legs of population.xml, after the rules of synth.export.plans: "
    "consecutive places at the same coordinates are one activity (a leg of length zero is not "
    "written) and, with --skip-unlocated, places without coordinates are left out. So "
    "plan_legs <= legs; the difference is those merged or skipped places, not lost trips"
)


# ---------------------------------------------------------------------------- one call
def export_release(
    directory: str | os.PathLike[str],
    *,
    to: str,
    out: str | os.PathLike[str] | None = None,
    stops: str | os.PathLike[str] | None = None,
    bin_minutes: int | None = None,
    fmt: str = "csv",
    crs: str = "auto",
    csv_escape: bool = True,
    periods: str | None = None,
    taxonomy: str | None = None,
    skip_unlocated: bool = False,
    activity_types: str | None = None,
    sample_share: float | None = None,
    **columns: str | None,
) -> dict[str, Any]:
    """Export a release directory (``to`` = ``"od"`` or ``"matsim"``) into ``out`` (default: the
    release directory): ``od.csv``/``od.parquet`` or ``population.xml``, plus ``export-<to>.json``
    describing the export. Written through :func:`synth.outdir.release_dir` (all or nothing).
    ``csv_escape``: see :func:`write_od`. A timed release's OD export also writes
    ``od-periods.csv`` (or ``.parquet``): the matrices per period of ``periods`` (a spec of
    :func:`~synth.export.periods.parse_periods`; default the five periods of
    :data:`~synth.export.periods.DEFAULT_PERIODS`). ``taxonomy``: the taxonomy spec whose
    ``mode:NAME`` ancestors give the MATSim leg modes (default: the release's, when its file
    exists; :func:`~synth.export.matsim.leg_modes`). MATSim only: ``skip_unlocated`` (places
    without coordinates left out, with a warning counting them), ``activity_types``
    (:func:`~synth.export.plans.parse_activity_types`), ``sample_share`` (the public share of the
    travellers the release stands for: ``scaling-config.xml`` and the population attribute
    ``sampleShare``; :func:`~synth.export.matsim.scaling_config`).
    ``columns``: the trip column options of :func:`read_release`. Returns that JSON's dict.
    """
    _check_options(to, fmt, stops, bin_minutes, columns)
    matsim: dict[str, Any] = {
        "skip_unlocated": skip_unlocated,
        "activity_types": activity_types,
        "sample_share": sample_share,
    }
    _check_matsim_options(to, matsim)
    if to == "matsim" and periods is not None:
        raise ConfigError("periods (--periods) are only used by the OD export")
    if to == "od" and taxonomy is not None:
        raise ConfigError("a taxonomy (--taxonomy) is only used by the MATSim export (leg modes)")
    parse_periods(periods)  # a bad spec fails before reading the release
    release = read_release(directory, **columns)
    target = Path(out) if out is not None else Path(directory)
    info: dict[str, Any] = {
        "export": to,
        "release": str(Path(directory)),
        "kind": release.kind,
        "columns": release.columns,
        "persons": release.n_persons,
        "legs": release.n_legs,
        "privacy": "post-processing of the release: its manifest.json guarantee applies unchanged",
        "privacy_unit": release.manifest.get("privacy_unit"),
        "guarantee": release.manifest.get("guarantee"),  # what counts (spent: bookkeeping)
        "spent": release.manifest.get("spent"),
    }
    beside = target.resolve() == Path(directory).resolve()  # into the release: add, never replace
    with release_dir(target, add=beside) as stage:
        if to == "od":
            info.update(_write_od(release, stage, bin_minutes, fmt, csv_escape, periods))
        else:
            info.update(_write_matsim(release, stage, stops, crs, taxonomy, **matsim))
        with atomic_path(stage / f"export-{to}.json") as tmp:
            tmp.write_text(json.dumps(info, indent=2, default=str), encoding="utf-8")
    return info


def _write_od(
    release: Release,
    stage: Path,
    bin_minutes: int | None,
    fmt: str,
    csv_escape: bool,
    periods: str | None,
) -> dict[str, Any]:
    """The OD matrix per bin (and per period for a timed release) into ``stage``; its JSON."""
    od = od_matrix(release, bin_minutes=bin_minutes)
    name = f"od.{fmt}"
    write_od(od, stage / name, csv_escape=csv_escape)
    width = check_bin_minutes(release, bin_minutes)
    info: dict[str, Any] = dict(
        file=name,
        rows=len(od),
        bin_minutes=width,
        bins="all" if width is None else "HH:MM start of each bin",
        csv_escape="cells starting with = + - @ (not plain numbers) prefixed with '"
        if csv_escape and fmt == "csv"
        else "none",
    )
    if release.bin_width is not None:
        chosen = parse_periods(periods)
        info["periods_file"] = f"od-periods.{fmt}"
        write_od(od_by_period(release, chosen), stage / info["periods_file"], csv_escape=csv_escape)
        info["periods"] = {n: _span(s, e) for n, s, e in chosen}
    elif periods is not None:
        raise ConfigError(f"{release.path.parent}: the release has no times, so no periods")
    return info


def _write_matsim(
    release: Release,
    stage: Path,
    stops: object,
    crs: str,
    taxonomy: str | None,
    *,
    skip_unlocated: bool,
    activity_types: str | None,
    sample_share: float | None,
) -> dict[str, Any]:
    """The MATSim population (and its scaling config) into ``stage``; its JSON."""
    coords = load_coordinates(str(stops), crs=crs)
    name = "population.xml"
    modes, mode_source = leg_modes(release, taxonomy)
    plans = matsim_plans(
        release,
        coords,
        plan_end_times(release),
        modes=modes,
        skip_unlocated=skip_unlocated,
        activity_types=activity_types,
    )
    write_population(release, coords, stage / name, sample_share=sample_share, plans=plans)
    first, middle, last = parse_activity_types(activity_types)
    scaling: dict[str, Any] = {}
    if sample_share is not None:
        with atomic_path(stage / SCALING_FILE) as tmp:
            tmp.write_text(scaling_config(sample_share), encoding="utf-8")
        scaling = {
            "sample_share": float(sample_share),
            "scaling_file": SCALING_FILE,
            "scaling": "qsim flowCapacityFactor and storageCapacityFactor = sample share, counts "
            "countsScaleFactor = 1 / sample share; also the population attribute sampleShare",
        }
    if plans.unlocated:
        _warn_unlocated(release, coords.source, plans)
    return dict(
        file=name,
        crs=coords.crs,
        coordinates=coords.source,
        plan_persons=int(pd.unique(plans.rows["person"]).size),
        plan_activities=len(plans.rows),
        plan_legs=int((plans.rows["mode"].to_numpy() != "").sum()),
        legs_note=LEGS_NOTE,
        activity_types={"first": first, "middle": middle, "last": last},
        activity_rule=ACTIVITY_RULE,
        same_place="consecutive places at the same coordinates are one activity (no legs of "
        "length zero)",
        **plans.counts(),
        **({"locations_without_coordinates_skipped": plans.unlocated} if plans.unlocated else {}),
        **scaling,
        leg_modes=mode_source,
        times="released clock times"
        if release.clock_times
        else "binned departures spread inside bins"
        if release.bin_width
        else "exact departures"
        if release.bin_width == 0
        else f"defaults: first end {DEFAULT_START // 60:02d}:00, then every {DEFAULT_GAP} minutes",
        synthetic_times=release.bin_width is None,
    )


def _warn_unlocated(release: Release, source: str, plans: Plans) -> None:
    """The warning of ``skip_unlocated``: how many places went (the release is public)."""
    shown = ", ".join(repr(u) for u in plans.unlocated[:5])
    more = f" and {len(plans.unlocated) - 5} more" if len(plans.unlocated) > 5 else ""
    warnings.warn(
        f"{release.path.parent}: {len(plans.unlocated)} location(s) have no coordinates in "
        f"{source} ({shown}{more}): {plans.dropped_activities} of {len(release.steps)} places "
        f"left out of the plans, {plans.dropped_persons} of {release.n_persons} persons with "
        "none left",
        TransitSynthWarning,
        stacklevel=3,
    )


def _check_matsim_options(to: str, options: dict[str, Any]) -> None:
    """MATSim-only options refused for another export; the sample share and types checked."""
    given = [k for k, v in options.items() if v not in (None, False)]
    if to != "matsim" and given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise ConfigError(f"{flags}: only used by the MATSim export (--to matsim)")
    if options["sample_share"] is not None:
        check_sample_share(options["sample_share"])
    parse_activity_types(options["activity_types"])


def _span(start: int, end: int) -> str:
    return f"{start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d}"


def _check_options(
    to: str, fmt: str, stops: object, bin_minutes: int | None, columns: dict[str, str | None]
) -> None:
    """One clear :class:`ConfigError` for an export option that does not fit ``to``."""
    if to not in ("od", "matsim"):
        raise ConfigError(f"to must be 'od' or 'matsim', got {to!r}")
    if fmt not in ("csv", "parquet"):
        raise ConfigError(f"format must be 'csv' or 'parquet', got {fmt!r}")
    if to == "matsim" and stops is None:
        raise ConfigError(
            "a MATSim export needs stop coordinates (--stops: a GTFS zip, 'montreal' "
            "or a CSV of stop_id,x,y)"
        )
    if to == "od" and stops is not None:
        raise ConfigError("stop coordinates (--stops) are only used by the MATSim export")
    if to == "matsim" and bin_minutes is not None:
        raise ConfigError(
            "time bins (--bin) are only used by the OD export; MATSim plans keep "
            "the release's times"
        )
    unknown = sorted(
        set(columns)
        - {"id_column", "origin_column", "destination_column", "location_column", "time_column"}
    )
    if unknown:
        raise ConfigError(f"unknown option(s): {', '.join(unknown)}")
