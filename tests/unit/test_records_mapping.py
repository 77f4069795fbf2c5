"""Input mapping (:mod:`synth.records.mapping`): profiles, options, per-record rules."""

from __future__ import annotations

import contextlib
import gzip
import warnings
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from synth.errors import ConfigError, InputError
from synth.io import read_table
from synth.logs import private_logs
from synth.records.mapping import (
    PROFILES,
    InputMap,
    MissingIdWarning,
    TimeResolutionWarning,
    read_mapped,
    time_resolution_warning,
)


def test_profiles_are_shipped_data() -> None:
    assert set(PROFILES) == {"sube", "generic"}
    sube = InputMap.build("sube")
    assert (sube.card_column, sube.location_column, sube.tap_column) == (
        "id_tarjeta",
        "id_linea",
        "tipo_trx_tren",
    )
    assert sube.drop_missing_ids and sube.time_resolution == 60
    assert InputMap.build("sube", location_column="id_ramal").location_column == "id_ramal"
    assert InputMap.build("generic").active and not InputMap.build(location_column="x").active


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"profile": "nope"}, "unknown input profile 'nope'"),
        ({"sep": ";;"}, "expected one character"),
        ({"tap_off_values": " , "}, "at least one value"),
        ({"time_resolution": 0}, "whole minutes"),
        ({"colour": "x"}, "unknown input option"),
    ],
)
def test_bad_options(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        InputMap.build(**options)


def test_tab_separator(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("card\twhen\tstop\nc1\t2024-01-01T08:00\t7\n")
    imap = InputMap.build(sep="tab", card_column="card", time_column="when", location_column="stop")
    taps, summary = read_mapped(path, imap)
    assert taps.columns.tolist() == ["card_id", "time", "stop_id"]
    assert summary == "t.csv: columns card=card, time=when, location=stop, tap=none (all boardings)"


def test_hint_from_the_header_only(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("a|b|c\n1|2|3\n")
    with pytest.raises(InputError, match=r"looks like '\|'-separated: pass --sep '\|'"):
        read_table(path)
    assert read_table(path, sep="|").columns.tolist() == ["a", "b", "c"]
    one = tmp_path / "one.csv"  # a one-column file without another delimiter is fine
    one.write_text("stop\n1;2\n")
    assert read_table(one)["stop"].tolist() == ["1;2"]


def test_utf8_checked_in_every_column_compressed_too(tmp_path: Path) -> None:
    raw = "card_id,note\nc1,ok\nc2,caf\u00e9\n".encode("latin-1")
    (tmp_path / "a.csv").write_bytes(raw)
    with gzip.open(tmp_path / "a.csv.gz", "wb") as fh:
        fh.write(raw)
    for name in ("a.csv", "a.csv.gz"):
        with pytest.raises(InputError, match=r"not UTF-8 text \(byte 0xe9 on line 3"):
            read_table(tmp_path / name, columns=["card_id"])
    (tmp_path / "bom.csv").write_bytes("\ufeffcard_id\nc1\n".encode())
    assert read_table(tmp_path / "bom.csv")["card_id"].tolist() == ["c1"]


def test_drop_missing_ids_per_record_and_private(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("card,time,stop_id\nc1,2024-01-01T08:00,1\n,2024-01-01T09:00,2\n  ,x,3\n")
    imap = InputMap.build(card_column="card", drop_missing_ids=True)
    with pytest.warns(MissingIdWarning, match=r"dropped 2 rows .*private: for the data holder"):
        taps, _ = read_mapped(path, imap)
    assert taps["card_id"].tolist() == ["c1"]
    with private_logs(False), _none_of(MissingIdWarning):  # hidden: nothing printed
        taps, _ = read_mapped(path, imap)
    assert taps["card_id"].tolist() == ["c1"]


@contextlib.contextmanager
def _none_of(category: type[Warning]) -> Iterator[None]:
    """Fails if a warning of ``category`` is emitted inside."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", category)
        yield


def test_time_resolution_rule() -> None:
    hourly = ["card_id", "fecha", "hora", "stop_id"]
    with pytest.warns(TimeResolutionWarning, match="hour column 'hora' without minutes"):
        time_resolution_warning(InputMap(), hourly, 15)
    with pytest.warns(TimeResolutionWarning, match="declared"):
        time_resolution_warning(InputMap(time_resolution=30), ["card_id", "time"], 15)
    with _none_of(TimeResolutionWarning):
        time_resolution_warning(InputMap(), hourly, 60)
        time_resolution_warning(InputMap(), [*hourly, "minuto"], 15)
        time_resolution_warning(InputMap(), ["card_id", "time", "stop_id"], 1)


def test_mapped_frame_reads_like_the_canonical_file() -> None:
    frame = pd.DataFrame(
        {
            "T": ["c1", "c1"],
            "D": ["05/03/2024"] * 2,
            "H": [7, 8],
            "S": ["1", "2"],
            "K": ["in", "OUT"],
        }
    )
    imap = InputMap.build(
        card_column="T",
        date_column="D",
        hour_column="H",
        location_column="S",
        tap_column="K",
        tap_off_values="out",
    )
    taps, _ = read_mapped(frame, imap)
    assert taps["time"].tolist() == [
        pd.Timestamp("2024-03-05 07:00"),
        pd.Timestamp("2024-03-05 08:00"),
    ]
    assert taps["tap"].tolist() == ["on", "off"] and "D" not in taps and "H" not in taps
