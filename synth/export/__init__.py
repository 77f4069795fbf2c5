"""Exports of a release for simulation models: OD matrices per time bin and MATSim populations.

Both exports are post-processing of a published release (the synthetic data of
``transit-synth sequences`` or ``transit-synth trips``): they never read private data and do not
change the privacy guarantee of the release (docs/design.md section 4).

**Plans.** A release is first turned into one plan per person (:class:`Release`, column ``steps``):
the places the person is at, in order, each followed by a leg, except the last one.

* *Sequences* (prefix tree, Chen et al. 2012): a sequence is a person (``seq_id``); its locations in
  ``pos`` order are the steps and each pair of consecutive locations is one ``pt`` leg. A
  sequence of one location is a person without legs.
* *Trips with origin and destination* (``on_stop``/``off_stop``, ``origin``/``destination``, or
  the taxi ``pickup_community_area``/``dropoff_community_area``): each trip is one ``pt`` leg; a
  person's trips are chained in time order, and when a trip starts elsewhere than the previous
  one ended, a ``walk`` leg joins the two places (it is not counted in OD matrices).
* *Trips without destination* (boardings, e.g. the SUBE archetype release): with
  ``location_column``, a person's trips in time order are a trip chain like a sequence.

**Times.** The departure of a leg is the time of its first step: the sequence's ``time`` (bin
labels ``HH:MM`` of a trajectory release, ``HH:MM[:SS]`` or ISO timestamps, reduced to the time of
day), or a trip's ``on_time`` / ``time`` (same forms), ``hour`` (0..23) or ``shift`` (NIST sprint 3:
``3 * weekday + hour // 8``; its start hour of day is used, the weekday is dropped because a
MATSim plan covers one day). A release with time bins has a native bin width (the prefix tree's
``time_bin_minutes``, 60 for ``hour``, 480 for ``shift``; exact times have none).

A prefix-tree release whose manifest names a ``time_model`` carries clock times ``HH:MM`` sampled
inside their bins (:attr:`Release.clock_times`): they are used as they are, never moved; a
release of bin starts (older prefix-tree releases) is spread inside its bins as below.

**OD matrices** (:func:`od_matrix`): long format ``origin, destination, bin, count`` over the
``pt`` legs, ``bin`` = the start ``HH:MM`` of the leg's departure bin (``bin_minutes``, default the
native width, else 60), or the single bin ``"all"`` when the release has no times. Sorted by
origin, destination, bin (string order); counts sum to the number of legs. A timed release is
also exported per named period of the day (:func:`~synth.export.periods.od_by_period`, public
``--periods``, default early / AM peak / midday / PM peak / evening), summing to the same count.

**MATSim** (:func:`write_population`): a population v6 file (``population_v6.dtd``): one person per
plan, one selected plan of activities at the coordinates of their location, with the location id
in an activity attribute ``stop_id``, and legs of mode ``pt`` (``walk`` for the joins above); with
a taxonomy holding a ``mode:NAME`` level (GTFS, SUBE), a leg's mode is the ``NAME`` above its
boarding location (:func:`~synth.export.matsim.leg_modes`). The plans follow the public rules of
:mod:`~synth.export.plans`: places without coordinates fail the export or, with
``skip_unlocated``, are left out (counted in a warning); consecutive places at the same
coordinates are one activity (no leg of length zero); the first and last activity of a plan are
``home``, the others ``other`` (``activity_types``). A public ``sample_share`` S (the share of all
travellers the release stands for) writes ``scaling-config.xml``, a MATSim config holding
``qsim.flowCapacityFactor`` = ``qsim.storageCapacityFactor`` = S and ``counts.countsScaleFactor``
= 1/S, the settings MATSim reads (a population file has no scaling field), and the population
attribute ``sampleShare`` = S, so the share travels with the plans.
Activity end times: a leg that departs in a bin of width ``w`` is
placed inside its bin, the ``m`` legs of one person in one bin at ``start + (j + 1/2) w / m``,
``j = 0..m-1`` (times of one person made non-decreasing by a running maximum first); exact times
are used as they are; without times the first activity ends at ``default_start`` and each next one
``default_gap`` later (documented defaults 08:00 and 60 minutes). The last activity has no end
time. The population's ``coordinateReferenceSystem`` attribute names the CRS (MATSim reprojects on
reading when its ``global.coordinateSystem`` differs).

**Coordinates** (:func:`load_coordinates`): a GTFS zip (``stops.txt``), the embedded Montreal metro
(``"montreal"``: MTM zone 8 ``x_mtm8``/``y_mtm8``, EPSG:32188, keyed by station name as in its
taxonomy), or a CSV/Parquet table ``stop_id`` (or ``location``) with ``x, y`` (projected, CRS
given by ``crs``) or ``lat, lon``. Geographic coordinates are projected to UTM (zone of the mean
longitude of the coordinate file, WGS 84, EPSG:326zz/327zz) because MATSim measures distances in
the plane, unless ``crs="wgs84"`` keeps degrees (EPSG:4326).

The XML is assembled from escaped strings with vectorised pandas operations (one string per step,
formatted once per distinct location), not with ``matsim-tools``: its ``PopulationWriter`` writes
ids and types into the XML without escaping, imports protobuf through ``matsim/__init__``, and
loops in Python per activity. Tests parse every export back with :mod:`xml.etree.ElementTree`.

The package: :mod:`~synth.export.releases` (reading a release as plans),
:mod:`~synth.export.od`, :mod:`~synth.export.coordinates`, :mod:`~synth.export.plans`,
:mod:`~synth.export.matsim` and
:mod:`~synth.export.exporter` (:func:`export_release`, the one call).
"""

from synth.export.coordinates import Coordinates, load_coordinates, transverse_mercator, utm
from synth.export.exporter import export_release
from synth.export.matsim import (
    DEFAULT_GAP,
    DEFAULT_START,
    plan_end_times,
    population_chunks,
    scaling_config,
    write_population,
)
from synth.export.od import od_matrix, write_od
from synth.export.plans import matsim_plans, parse_activity_types
from synth.export.releases import OD_PAIRS, Release, read_release

__all__ = [
    "DEFAULT_GAP",
    "DEFAULT_START",
    "OD_PAIRS",
    "Coordinates",
    "Release",
    "export_release",
    "load_coordinates",
    "matsim_plans",
    "od_matrix",
    "parse_activity_types",
    "plan_end_times",
    "population_chunks",
    "read_release",
    "scaling_config",
    "transverse_mercator",
    "utm",
    "write_od",
    "write_population",
]
