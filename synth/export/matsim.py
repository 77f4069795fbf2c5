"""Exports: MATSim population files (see :mod:`synth.export`)."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.export.coordinates import Coordinates
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


#: The leg mode of a ``pt`` leg when the taxonomy names no mode for its boarding location.
FALLBACK_MODE = "pt"


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
    activity_type: str = "other",
    default_start: float = DEFAULT_START,
    default_gap: float = DEFAULT_GAP,
    modes: dict[str, str] | None = None,
) -> Iterator[str]:
    """The MATSim population v6 XML of ``release`` as text chunks (module docstring); ``modes``
    (:func:`leg_modes`): the mode of the ``pt`` leg leaving each location."""
    steps = release.steps
    mode = steps["mode"].to_numpy(dtype=object)
    if modes is not None:
        pt = mode == "pt"
        mode = mode.copy()
        mode[pt] = steps["location"].astype(str).to_numpy(dtype=object)[pt]
        mode[pt] = pd.Series(mode[pt], dtype=object).map(modes).fillna(FALLBACK_MODE).to_numpy()
    if not activity_type or not activity_type.strip():
        raise ConfigError("activity_type must be a non-empty string")
    loc = steps["location"].to_numpy(dtype=object)
    codes, uniq = pd.factorize(loc)
    check_xml_text(uniq, f"{release.path}: location")
    check_xml_text(pd.unique(steps["person"].astype(str)), f"{release.path}: person id")
    check_xml_text(pd.unique(pd.Series(mode, dtype=object).astype(str)), f"{release.path}: mode")
    check_xml_text([activity_type, coordinates.crs or "", release.path.parent.name], "name")
    xy = coordinates.lookup(uniq)
    digits = 7 if coordinates.crs == "EPSG:4326" else 3
    open_act = np.array(
        [
            f'<activity type={quoteattr(activity_type)} x="{x:.{digits}f}" y="{y:.{digits}f}"'
            for x, y in zip(xy["x"].to_numpy(), xy["y"].to_numpy(), strict=True)
        ],
        dtype=object,
    )
    attrs = np.array(
        [
            '><attributes><attribute name="stop_id" class="java.lang.String">'
            f"{escape(str(u))}</attribute></attributes></activity>\n"
            for u in uniq
        ],
        dtype=object,
    )
    ends = plan_end_times(release, default_start=default_start, default_gap=default_gap)
    yield '<?xml version="1.0" encoding="utf-8"?>\n'
    yield '<!DOCTYPE population SYSTEM "http://www.matsim.org/files/dtd/population_v6.dtd">\n'
    desc = (
        f"transit-synth export of the synthetic {release.kind} release {release.path.parent.name}"
    )
    yield f"<population desc={quoteattr(desc)}>\n"
    if coordinates.crs is not None:
        yield (
            '<attributes><attribute name="coordinateReferenceSystem" class="java.lang.String">'
            f"{escape(coordinates.crs)}</attribute></attributes>\n"
        )
    person = steps["person"].to_numpy(dtype=object)
    n = len(steps)
    for lo in range(0, n, XML_BLOCK):
        hi = min(n, lo + XML_BLOCK)
        sl = slice(lo, hi)
        first = steps["step"].to_numpy()[sl] == 0
        head = np.full(hi - lo, "", dtype=object)
        pids = pd.Series(person[sl][first], dtype=object).map(_attr).to_numpy(dtype=object)
        head[first] = '<person id="' + pids + '"><plan selected="yes">\n'
        end = ends[sl]
        timed = ~np.isnan(end)
        end_attr = np.full(hi - lo, "", dtype=object)
        if timed.any():
            end_attr[timed] = ' end_time="' + _hms(end[timed]) + '"'
        m = mode[sl]
        m = pd.Series(m, dtype=object).astype(str).map(_attr).to_numpy(dtype=object)
        tail = np.where(m == "", "</plan></person>\n", '<leg mode="' + m + '"/>\n')
        text = head + open_act[codes[sl]] + end_attr + attrs[codes[sl]] + tail
        yield "".join(text.tolist())
    yield "</population>\n"


def write_population(
    release: Release,
    coordinates: Coordinates,
    path: str | os.PathLike[str],
    *,
    activity_type: str = "other",
    default_start: float = DEFAULT_START,
    default_gap: float = DEFAULT_GAP,
    modes: dict[str, str] | None = None,
) -> Path:
    """Write the MATSim population XML (``.xml``, or gzip-compressed ``.xml.gz``) atomically
    (``modes``: :func:`population_chunks`)."""
    p = Path(path)
    chunks = population_chunks(
        release,
        coordinates,
        activity_type=activity_type,
        default_start=default_start,
        default_gap=default_gap,
        modes=modes,
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
