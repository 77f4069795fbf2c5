"""Records: taps, long-format sequences and trips (docs/design.md section 2), loaded and validated.

Formats (CSV or Parquet, by extension):

* **Taps**: one row per card tap: ``card_id``, ``time`` (ISO 8601; or a date column plus an hour
  and optionally a minute column), a location column (``stop_id`` by default); optional ``mode``,
  ``line``, ``tap`` (``on``/``off``). Known aliases are recognised so that the SUBE files load as
  they are: ``id_tarjeta`` for ``card_id``, ``fecha``/``hora``/``minuto`` for
  ``date``/``hour``/``minute`` (dates in ISO form or day-first ``dd/mm/yyyy``), and
  ``tipo_trx_tren`` (``CHECK OUT...`` = ``off``) when there is no ``tap`` column.
* **Sequences** (long format): ``seq_id`` (str), ``pos`` (int, 0-based, contiguous), ``location``
  (str; a categorical of str when loaded from a file) and optionally ``time``; sorted by
  ``seq_id`` (string order), then ``pos``. One sequence = one card (the privacy unit), or one
  card-day with ``per_day=True``.
* **Trips**: one row per trip: ``card_id``, ``on_time`` and any other columns (``date``, ``mode``,
  ``on_stop``, ``off_time``, ``off_stop``, fare, ...).

Every validation failure raises :class:`~synth.errors.InputError` with one line naming the file, the
column and the row (1-based data row, header not counted). Unknown locations (not leaves of the
taxonomy) either raise (``on_unknown="error"``) or are dropped (``on_unknown="drop"``): then an
:class:`UnknownLocationWarning` says how many rows went, and the returned frame carries the count in
``df.attrs["dropped_unknown"]``.

Contribution bounding is deterministic (Chen et al. 2012, section 3; docs/design.md section 4): the
first ``h`` locations of a sequence (:func:`truncate_sequences`) and the first ``k`` trips of a card
by time (:func:`bound_trips`), ties broken by input row order.

The package: :mod:`~synth.records.common` (constants, column checks, time columns),
:mod:`~synth.records.codes` (id columns as arrow text and integer codes),
:mod:`~synth.records.taps`, :mod:`~synth.records.sequences`, :mod:`~synth.records.trips`.
"""

from synth.records.common import (
    OFF_VALUES,
    SEQUENCE_COLUMNS,
    TAP_ALIASES,
    PathOrFrame,
    UnknownLocationWarning,
    check_counts,
)
from synth.records.sequences import encode_sequences, load_sequences, truncate_sequences
from synth.records.taps import load_taps, sequences_from_taps
from synth.records.trips import bound_trips, load_trips

__all__ = [
    "OFF_VALUES",
    "SEQUENCE_COLUMNS",
    "TAP_ALIASES",
    "PathOrFrame",
    "UnknownLocationWarning",
    "bound_trips",
    "check_counts",
    "encode_sequences",
    "load_sequences",
    "load_taps",
    "load_trips",
    "sequences_from_taps",
    "truncate_sequences",
]
