"""Exports: a release's plans made ready for MATSim (see :mod:`synth.export`).

Three public rules turn the release's steps (:class:`~synth.export.releases.Release`) into the
activities and legs of the population file, each applied to one plan at a time:

* **Locations without coordinates** fail the export, or with ``skip_unlocated`` are left out of
  the plans: the place goes, the plan goes on from the previous place (the leg keeps that
  place's mode and end time); a plan whose last place goes ends at the place before; a person
  with no located place is left out. The counts go to ``export-matsim.json`` and a warning (the
  release is public, so its counts are too).
* **Consecutive places at the same coordinates** (the same location tapped again, e.g. two
  boardings on one SUBE line, or two ids at one point) are one activity: MATSim cannot route a
  leg of length zero. The activity keeps the first place's id and the last one's end time and
  leg mode (the departure that leaves the place). A plan of one place has no legs.
* **Activity types** (:func:`parse_activity_types`, :data:`ACTIVITY_RULE`): the first activity
  of each plan is ``home``, the others ``other`` by default; the last is ``home`` again only when
  it is back at the first activity's place (the same coordinates): a plan that ends at another
  station ends at an ``other`` activity, not at a second home elsewhere. The types are
  configurable (FIRST, MIDDLE, LAST); the rule is the same for any of them (the LAST type is the
  return to the first place; the first activity of a one-place plan is FIRST). MATSim scores each
  type with its own ``activityParams`` (both default types are in its default config).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.export.coordinates import Coordinates
from synth.export.releases import Release

__all__ = [
    "ACTIVITY_RULE",
    "DEFAULT_ACTIVITY_TYPES",
    "FALLBACK_MODE",
    "Plans",
    "matsim_plans",
    "parse_activity_types",
]

#: Activity types of the first, middle and last activities of a plan (``--activity-types``).
DEFAULT_ACTIVITY_TYPES = ("home", "other", "home")

#: The public rule of the activity types, as ``export-matsim.json`` states it.
ACTIVITY_RULE = (
    "the first activity of a plan is 'first'; its last is 'last' only when back at the first "
    "activity's place (the same coordinates), else 'middle' like every other activity"
)

#: The leg mode of a ``pt`` leg when the taxonomy names no mode for its boarding location.
FALLBACK_MODE = "pt"


def parse_activity_types(spec: str | Sequence[str] | None) -> tuple[str, str, str]:
    """``(first, middle, last)`` activity types from ``spec``: comma-separated (or a sequence of)
    one type (every activity), two (``ENDS,MIDDLE``: first and last, then the others; default
    ``home,other``) or three (``FIRST,MIDDLE,LAST``); ConfigError otherwise."""
    if spec is None:
        return DEFAULT_ACTIVITY_TYPES
    parts = spec.split(",") if isinstance(spec, str) else list(spec)
    types = [str(p).strip() for p in parts]
    if not 1 <= len(types) <= 3 or not all(types):
        raise ConfigError(
            f"activity types must be 1 to 3 non-empty comma-separated names (ENDS,MIDDLE or "
            f"FIRST,MIDDLE,LAST, e.g. home,other), got {spec!r}"
        )
    if len(types) == 1:
        return types[0], types[0], types[0]
    if len(types) == 2:
        return types[0], types[1], types[0]
    return types[0], types[1], types[2]


@dataclass(frozen=True)
class Plans:
    """The activities of every plan in order: ``rows`` with ``person``, ``code`` (index into
    ``locations``), ``mode`` (the leg after the activity, ``""`` after the last), ``end``
    (seconds after midnight, NaN for none) and ``type``; ``locations`` (ids) with their ``x``,
    ``y``; what the rules of the module docstring removed: ``unlocated`` (ids without
    coordinates, sorted), ``dropped_activities``, ``dropped_persons``, ``merged_activities``."""

    rows: pd.DataFrame
    locations: pd.DataFrame
    unlocated: list[str]
    dropped_activities: int
    dropped_persons: int
    merged_activities: int

    def counts(self) -> dict[str, int]:
        """The counts of what the rules removed (for ``export-matsim.json``)."""
        return {
            "locations_without_coordinates": len(self.unlocated),
            "activities_dropped_without_coordinates": self.dropped_activities,
            "persons_dropped_without_coordinates": self.dropped_persons,
            "activities_merged_at_the_same_place": self.merged_activities,
        }


def _leg_modes(release: Release, modes: dict[str, str] | None) -> np.ndarray:
    """The mode of every step's leg: ``pt`` legs renamed by ``modes`` (location -> mode)."""
    steps = release.steps
    mode = steps["mode"].to_numpy(dtype=object).copy()
    if modes is not None:
        pt = mode == "pt"
        loc = steps["location"].astype(str).to_numpy(dtype=object)[pt]
        mode[pt] = pd.Series(loc, dtype=object).map(modes).fillna(FALLBACK_MODE).to_numpy()
    return mode


def _first_and_last(person: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    first = np.r_[True, person[1:] != person[:-1]] if person.size else np.zeros(0, dtype=bool)
    last = np.r_[first[1:], True] if person.size else np.zeros(0, dtype=bool)
    return first, last


def matsim_plans(
    release: Release,
    coordinates: Coordinates,
    ends: np.ndarray,
    *,
    modes: dict[str, str] | None = None,
    skip_unlocated: bool = False,
    activity_types: str | Sequence[str] | None = None,
) -> Plans:
    """The plans of ``release`` under the rules of the module docstring; ``ends``: the end time of
    every step (:func:`~synth.export.matsim.plan_end_times`), ``modes``: the leg mode of each
    boarding location (:func:`~synth.export.matsim.leg_modes`)."""
    first_t, middle_t, last_t = parse_activity_types(activity_types)
    steps = release.steps
    person = steps["person"].to_numpy(dtype=object)
    codes, uniq = pd.factorize(steps["location"].to_numpy(dtype=object))
    known = pd.Index(uniq).isin(coordinates.table.index)
    unlocated = sorted(str(u) for u in np.asarray(uniq, dtype=object)[~known])
    if unlocated and not skip_unlocated:
        more = f" (and {len(unlocated) - 1} more)" if len(unlocated) > 1 else ""
        raise InputError(
            f"no coordinates for location {unlocated[0]!r}{more} in {coordinates.source} "
            "(--skip-unlocated leaves such places out of the plans)"
        )
    keep = known[codes]
    mode, end = _leg_modes(release, modes)[keep], np.asarray(ends, dtype=float)[keep]
    person, codes = person[keep], codes[keep]
    first, last = _first_and_last(person)
    mode[last], end[last] = "", np.nan  # a plan whose last place went ends at the one before
    xy = coordinates.table.loc[pd.Index(uniq)[known]]
    located = np.cumsum(known) - 1  # old code -> row of xy
    x, y = xy["x"].to_numpy()[located[codes]], xy["y"].to_numpy()[located[codes]]
    same = np.zeros(person.size, dtype=bool)
    same[1:] = ~first[1:] & (x[1:] == x[:-1]) & (y[1:] == y[:-1])
    head = np.flatnonzero(~same)  # the first place of each run at one point
    tail = np.r_[head[1:] - 1, person.size - 1].astype(np.int64) if head.size else head
    person, hx, hy = person[head], x[head], y[head]
    first, last = _first_and_last(person)
    start = np.maximum.accumulate(np.where(first, np.arange(person.size), 0))
    back = last & (hx == hx[start]) & (hy == hy[start])  # the last back at the first's place
    kinds = np.where(first, first_t, np.where(back, last_t, middle_t)).astype(object)
    rows = pd.DataFrame(
        {
            "person": person,
            "code": located[codes[head]],
            "mode": mode[tail],
            "end": end[tail],
            "type": kinds,
        }
    )
    n_before = int(pd.unique(steps["person"]).size)
    return Plans(
        rows=rows,
        locations=pd.DataFrame(
            {"location": np.asarray(xy.index, dtype=object), "x": xy["x"], "y": xy["y"]}
        ).reset_index(drop=True),
        unlocated=unlocated,
        dropped_activities=int((~keep).sum()),
        dropped_persons=n_before - int(pd.unique(person).size),
        merged_activities=int(same.sum()),
    )
