"""Exports: MATSim population files (see :mod:`synth.export`)."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.export.coordinates import Coordinates
from synth.export.plans import FALLBACK_MODE, Plans, matsim_plans
from synth.export.releases import MINUTES_PER_DAY, Release
from synth.io import atomic_path

#: MATSim defaults when a release has no times: first departure (minutes after midnight), gap.
DEFAULT_START = 8 * 60


DEFAULT_GAP = 60


#: rows per block of the XML writer (bounds memory for large releases).
XML_BLOCK = 200_000


# ---------------------------------------------------------------------------- MATSim
def plan_end_times(
    release: Release, *, default_start: float = DEFAULT_START, default_gap: float = DEFAULT_GAP
) -> np.ndarray:
    """End time (seconds after midnight, NaN for a last step) of every step's activity.

    Binned departures are spread inside their bins, exact ones and released clock times
    (``release.clock_times``) kept, and without times the defaults apply (module docstring);
    times of one person never decrease.
    """
    steps = release.steps
    person = steps["person"].to_numpy(dtype=object)
    has_leg = steps["mode"].to_numpy(dtype=object) != ""
    rows = np.flatnonzero(has_leg)
    out = np.full(len(steps), np.nan)
    if rows.size == 0:
        return out
    p = person[rows]
    new = np.r_[True, p[1:] != p[:-1]]
    idx = np.arange(rows.size)
    k = idx - np.maximum.accumulate(np.where(new, idx, 0))
    if release.bin_width is None:
        minutes = default_start + k * default_gap
    elif release.clock_times:  # released clock times: used as they are (never decreasing)
        start = steps["start"].to_numpy(dtype=float)[rows]
        offset = np.cumsum(new) * 10.0 * MINUTES_PER_DAY
        minutes = np.maximum.accumulate(start + offset) - offset
    else:
        start = steps["start"].to_numpy(dtype=float)[rows]
        # running maximum within each person: persons are lifted by growing multiples of ten
        # days (times of day are below one day), so no maximum leaks into the next person
        offset = np.cumsum(new) * 10.0 * MINUTES_PER_DAY
        start = np.maximum.accumulate(start + offset) - offset
        width = float(release.bin_width)
        if width > 0:
            run = np.r_[True, new[1:] | (start[1:] != start[:-1])]
            j = idx - np.maximum.accumulate(np.where(run, idx, 0))
            run_id = np.cumsum(run) - 1
            m = np.bincount(run_id)[run_id]
            start = start + (j + 0.5) * width / m
        minutes = start
    out[rows] = np.round(np.asarray(minutes, dtype=float) * 60.0)
    return out


def leg_modes(release: Release, taxonomy: str | None = None) -> tuple[dict[str, str] | None, str]:
    """The MATSim mode of the ``pt`` leg leaving each location, and where it came from.

    A location's mode is ``NAME`` of its nearest ``mode:NAME`` ancestor in the taxonomy (GTFS and
    SUBE taxonomies carry that level: ``mode:bus``, ``mode:SUB``), else :data:`FALLBACK_MODE`.
    The taxonomy is ``taxonomy`` (a spec of :meth:`~synth.taxonomy.Taxonomy.from_spec`), else the
    release manifest's ``taxonomy`` when that file exists (a GTFS zip read with the release's
    ``gtfs_stations`` and ``gtfs_route_rule``); without one every leg is ``pt`` (returns ``None``).
    """
    from synth.taxonomy import Taxonomy

    spec, use_stations, rule = taxonomy, False, None
    if spec is None:
        params = release.manifest.get("parameters") or {}
        stated = params.get("taxonomy")
        spec = stated if isinstance(stated, str) and Path(stated).is_file() else None
        if spec is not None and spec.lower().endswith(".zip"):  # built as the release built it
            use_stations = bool(params.get("gtfs_stations", False))
            rule = params.get("gtfs_route_rule")
    if spec is None:
        return None, f"'{FALLBACK_MODE}' for every leg (no taxonomy with a mode level)"
    with warnings.catch_warnings():  # routes without stops: said when the release was made
        warnings.simplefilter("ignore", UserWarning)
        tax = Taxonomy.from_spec(str(spec), use_stations=use_stations, route_rule=rule)
    modes: dict[str, str] = {}
    for loc in pd.unique(release.steps["location"].astype(str)):
        above = tax.ancestors(loc)[:-1] if loc in tax else []
        named = [a for a in above if a.startswith("mode:")]
        modes[loc] = named[-1].removeprefix("mode:") if named else FALLBACK_MODE
    return modes, f"the mode:NAME level of {spec} ('{FALLBACK_MODE}' where it names none)"


def _hms(seconds: np.ndarray) -> np.ndarray:
    s = seconds.astype(np.int64)
    uniq, inv = np.unique(s, return_inverse=True)
    labels = np.array(
        [f"{u // 3600:02d}:{u % 3600 // 60:02d}:{u % 60:02d}" for u in uniq], dtype=object
    )
    return labels[inv]


def _attr(value: str) -> str:
    return escape(value, {'"': "&quot;"})


#: Characters XML 1.0 cannot carry, even escaped (control characters other than tab, newline and
#: carriage return; surrogates; U+FFFE, U+FFFF).
XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def check_xml_text(values: Iterable[object], what: str) -> None:
    """ConfigError naming the first value holding a character XML 1.0 cannot carry.

    The MATSim export refuses such ids rather than altering them (a changed id would no longer
    match the release or the stop table); rename them in the input.
    """
    for value in values:
        bad = XML_INVALID.search(str(value))
        if bad:
            raise InputError(
                f"{what} {str(value)!r} holds U+{ord(bad.group()):04X}, a character XML cannot "
                "carry: the MATSim export refuses it (rename the id in the input)"
            )


def population_chunks(
    release: Release,
    coordinates: Coordinates,
    *,
    activity_types: str | Sequence[str] | None = None,
    default_start: float = DEFAULT_START,
    default_gap: float = DEFAULT_GAP,
    modes: dict[str, str] | None = None,
    skip_unlocated: bool = False,
    sample_share: float | None = None,
    plans: Plans | None = None,
) -> Iterator[str]:
    """The MATSim population v6 XML of ``release`` as text chunks (module docstring): the plans
    of :func:`~synth.export.plans.matsim_plans` (``plans``, else built here from ``modes``,
    ``skip_unlocated`` and ``activity_types``); ``sample_share``: written as the population
    attribute ``sampleShare`` (:func:`check_sample_share`)."""
    if plans is None:
        ends = plan_end_times(release, default_start=default_start, default_gap=default_gap)
        plans = matsim_plans(
            release,
            coordinates,
            ends,
            modes=modes,
            skip_unlocated=skip_unlocated,
            activity_types=activity_types,
        )
    share = None if sample_share is None else check_sample_share(sample_share)
    rows, places = plans.rows, plans.locations
    uniq = places["location"].to_numpy(dtype=object)
    check_xml_text(uniq, f"{release.path}: location")
    check_xml_text(pd.unique(rows["person"].astype(str)), f"{release.path}: person id")
    check_xml_text(pd.unique(rows["mode"].astype(str)), f"{release.path}: mode")
    check_xml_text(pd.unique(rows["type"].astype(str)), "activity type")
    check_xml_text([coordinates.crs or "", release.path.parent.name], "name")
    at_xy, attrs = _place_strings(places, coordinates.crs)
    yield '<?xml version="1.0" encoding="utf-8"?>\n'
    yield '<!DOCTYPE population SYSTEM "http://www.matsim.org/files/dtd/population_v6.dtd">\n'
    desc = (
        f"transit-synth export of the synthetic {release.kind} release {release.path.parent.name}"
    )
    yield f"<population desc={quoteattr(desc)}>\n"
    yield _population_attributes(coordinates.crs, share)
    codes = rows["code"].to_numpy()
    person = rows["person"].to_numpy(dtype=object)
    kinds = rows["type"].astype(str).map(_attr).to_numpy(dtype=object)
    legs = rows["mode"].astype(str).map(_attr).to_numpy(dtype=object)
    n = len(rows)
    first_all = np.r_[True, person[1:] != person[:-1]] if n else np.zeros(0, dtype=bool)
    for lo in range(0, n, XML_BLOCK):
        hi = min(n, lo + XML_BLOCK)
        sl = slice(lo, hi)
        first = first_all[sl]
        head = np.full(hi - lo, "", dtype=object)
        pids = pd.Series(person[sl][first], dtype=object).map(_attr).to_numpy(dtype=object)
        head[first] = '<person id="' + pids + '"><plan selected="yes">\n'
        end = rows["end"].to_numpy(dtype=float)[sl]
        timed = ~np.isnan(end)
        end_attr = np.full(hi - lo, "", dtype=object)
        if timed.any():
            end_attr[timed] = ' end_time="' + _hms(end[timed]) + '"'
        m = legs[sl]
        tail = np.where(m == "", "</plan></person>\n", '<leg mode="' + m + '"/>\n')
        opening = '<activity type="' + kinds[sl] + '"'
        text = head + opening + at_xy[codes[sl]] + end_attr + attrs[codes[sl]] + tail
        yield "".join(text.tolist())
    yield "</population>\n"


def _place_strings(places: pd.DataFrame, crs: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Per location: `` x=".." y=".."`` and the closing ``stop_id`` attribute, formatted once."""
    digits = 7 if crs == "EPSG:4326" else 3
    at_xy = np.array(
        [
            f' x="{x:.{digits}f}" y="{y:.{digits}f}"'
            for x, y in zip(places["x"].to_numpy(), places["y"].to_numpy(), strict=True)
        ],
        dtype=object,
    )
    attrs = np.array(
        [
            '><attributes><attribute name="stop_id" class="java.lang.String">'
            f"{escape(str(u))}</attribute></attributes></activity>\n"
            for u in places["location"].to_numpy(dtype=object)
        ],
        dtype=object,
    )
    return at_xy, attrs


def _population_attributes(crs: str | None, share: float | None) -> str:
    """The population's ``<attributes>``: the CRS and the sample share, when known."""
    items = []
    if crs is not None:
        items.append(
            '<attribute name="coordinateReferenceSystem" class="java.lang.String">'
            f"{escape(crs)}</attribute>"
        )
    if share is not None:
        items.append(
            f'<attribute name="sampleShare" class="java.lang.Double">{share!r}</attribute>'
        )
    return f"<attributes>{''.join(items)}</attributes>\n" if items else ""


def check_sample_share(share: float) -> float:
    """``share`` as a float in (0, 1]; ConfigError otherwise."""
    try:
        value = float(share)
    except (TypeError, ValueError):
        raise ConfigError(f"sample share must be a number in (0, 1], got {share!r}") from None
    if isinstance(share, bool) or not 0.0 < value <= 1.0:
        raise ConfigError(f"sample share must be a number in (0, 1], got {share!r}")
    return value


def scaling_config(share: float) -> str:
    """A MATSim config (``config_v2.dtd``) holding the settings a sample of ``share`` needs:
    ``qsim.flowCapacityFactor`` and ``qsim.storageCapacityFactor`` = ``share`` (links carry that
    share of their capacity) and ``counts.countsScaleFactor`` = ``1 / share`` (simulated volumes
    scaled up to compare with counts). Merge its modules into the run's config."""
    value = check_sample_share(share)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<!DOCTYPE config SYSTEM "http://www.matsim.org/files/dtd/config_v2.dtd">\n'
        f"<!-- transit-synth: settings for a population that is a {value!r} sample of the "
        "travellers (export option sample share); merge these modules into the run's config -->\n"
        "<config>\n"
        '\t<module name="qsim">\n'
        f'\t\t<param name="flowCapacityFactor" value="{value!r}" />\n'
        f'\t\t<param name="storageCapacityFactor" value="{value!r}" />\n'
        "\t</module>\n"
        '\t<module name="counts">\n'
        f'\t\t<param name="countsScaleFactor" value="{1.0 / value!r}" />\n'
        "\t</module>\n"
        "</config>\n"
    )


def write_population(
    release: Release,
    coordinates: Coordinates,
    path: str | os.PathLike[str],
    *,
    activity_types: str | Sequence[str] | None = None,
    default_start: float = DEFAULT_START,
    default_gap: float = DEFAULT_GAP,
    modes: dict[str, str] | None = None,
    skip_unlocated: bool = False,
    sample_share: float | None = None,
    plans: Plans | None = None,
) -> Path:
    """Write the MATSim population XML (``.xml``, or gzip-compressed ``.xml.gz``) atomically
    (the options: :func:`population_chunks`)."""
    p = Path(path)
    chunks = population_chunks(
        release,
        coordinates,
        activity_types=activity_types,
        default_start=default_start,
        default_gap=default_gap,
        modes=modes,
        skip_unlocated=skip_unlocated,
        sample_share=sample_share,
        plans=plans,
    )
    first = next(chunks)  # fails (missing coordinates) before any file is created
    with atomic_path(p) as tmp:
        if p.name.lower().endswith(".gz"):
            import gzip

            fh: Any = gzip.open(tmp, "wt", encoding="utf-8")
        else:
            fh = tmp.open("w", encoding="utf-8")
        with fh:
            fh.write(first)
            for chunk in chunks:
                fh.write(chunk)
    return p
