"""A taps file (or frame) and its input mapping, read by the estimator's ``fit`` (issue 27).

``transit-synth sequences`` and ``marginals`` (and their ``run`` tables) with an input mapping
(``--profile``, ``--card-column`` ... ``--sep``) used to load the file in the driver and hand
``fit`` a frame. They now hand ``fit`` a :class:`MappedSource`: ``fit`` validates its parameters
first, then reads the source with :func:`~synth.records.mapping.read_mapped` (every rule per
record or per schema, see :mod:`synth.records.mapping`). What ``fit`` does with a plain frame is
unchanged. The one-line column summary the commands print comes from the header alone
(:meth:`MappedSource.summary`), without reading a record.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from synth.errors import InputError
from synth.io import table_columns
from synth.records.common import source_name
from synth.records.mapping import (
    InputMap,
    header_roles,
    read_mapped_rows,
    restated_error,
    role_summary,
    time_grain_warning,
)

__all__ = ["MappedSource"]


@dataclass(frozen=True)
class MappedSource:
    """``data`` (a CSV/Parquet path or a frame of taps, sequences or trips) to be read with
    ``input_map`` (public configuration), its location column named ``location_default``."""

    data: str | os.PathLike[str] | pd.DataFrame = field(repr=False)
    input_map: InputMap = field(default_factory=InputMap)
    location_default: str = "stop_id"
    time_bin: int | None = None
    bin_flag: str = "--time-bin"
    #: what :meth:`read` learnt for :meth:`naming`: the file's row of each kept row
    _rows: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def read(self) -> pd.DataFrame:
        """The records with the canonical column names (:func:`read_mapped`); a frame with the
        default mapping as given. With ``time_bin`` (the data's resolution neither declared nor a
        schema fact), each time value is checked on its own against it
        (:func:`~synth.records.mapping.time_grain_warning`: counts in the holder's log only)."""
        if isinstance(self.data, pd.DataFrame) and not self.input_map.active:
            return self.data
        frame, _, rows = read_mapped_rows(
            self.data, self.input_map, location_default=self.location_default
        )
        self._rows["kept"] = rows
        if self.time_bin is not None and "time" in frame.columns:
            time_grain_warning(frame["time"], self.time_bin, self.bin_flag)
        return frame

    @contextmanager
    def naming(self) -> Iterator[None]:
        """Errors the loaders raise about the frame :meth:`read` returned (``input DataFrame:
        column 'time', row 20000: ...``) restated in the user's terms: this file, the user's own
        column (``tap_datetime``) and the file's data row (1-based after the header, counting
        the rows ``drop_missing_ids`` dropped), as an unmapped file's errors are (issue 29)."""
        try:
            yield
        except InputError as exc:
            if isinstance(self.data, pd.DataFrame) and not self.input_map.active:
                raise
            roles = header_roles(self.columns(), self.input_map, self.location_default)
            parts = [v for k in ("date", "hour", "minute") if (v := roles[k])]
            columns = {k: v for k, v in roles.items() if v}
            if roles["time"] is None and parts:
                columns["time"] = " + ".join(parts)
            rows = self._rows.get("kept")
            error = restated_error(exc, "input DataFrame", source_name(self.data), columns, rows)
            if error is exc:
                raise
            raise error from None

    def columns(self) -> list[str]:
        """The header (a public schema fact): the frame's column names or the file's."""
        if isinstance(self.data, pd.DataFrame):
            return [str(c) for c in self.data.columns]
        return table_columns(self.data, sep=self.input_map.sep)

    def long_format(self) -> bool:
        """Sequences (``seq_id``, ``pos``) or trips (``on_stop`` without ``stop_id``): read as
        they are, only the delimiter applies."""
        names = set(self.columns())
        return {"seq_id", "pos"} <= names or ("on_stop" in names and "stop_id" not in names)

    def summary(self) -> str:
        """Which column plays which role, from the header only (the line of
        :func:`~synth.records.mapping.read_mapped`)."""
        names = self.columns()
        frame = isinstance(self.data, pd.DataFrame)
        src = "input DataFrame" if frame else str(self.data)
        if self.long_format():
            return f"{src if frame else Path(src).name}: columns {', '.join(names)}"
        roles = header_roles(names, self.input_map, self.location_default)
        return role_summary(src, roles, self.input_map, self.location_default)
