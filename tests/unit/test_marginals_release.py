"""``synth.marginals.release`` (``transit-synth marginals`` and ``run``'s ``[marginals]``): with an
input mapping the driver hands ``OpalMarginals.fit`` a
:class:`~synth.records.mapped_source.MappedSource`, and ``fit`` alone reads and validates
(issue 27)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import synth.io
import synth.marginals.events
import synth.privacy
import synth.records.mapping
from synth.cli import main
from synth.errors import InputError
from synth.marginals.opal import OpalMarginals
from synth.records.mapped_source import MappedSource
from synth.records.mapping import InputMap
from tests.conftest import CallLog

TABLES = ("on_time", "on_location", "on_time_location")


def _agency_copy(forty_cards: dict[str, Path], tmp_path: Path) -> Path:
    """The forty cards' taps with agency column names and a semicolon delimiter."""
    taps = pd.read_csv(forty_cards["taps"], dtype=str)
    path = tmp_path / "agency.csv"
    renamed = taps.rename(columns={"card_id": "tarjeta", "stop_id": "parada", "time": "cuando"})
    renamed.to_csv(path, index=False, sep=";")
    return path


def _watch(call_log: CallLog) -> None:
    call_log.fit(OpalMarginals)
    call_log.function(synth.records.mapping, "read_mapped_rows")
    call_log.function(synth.io, "read_table")
    call_log.function(synth.marginals.events, "load_input")
    call_log.function(synth.privacy, "check_budget")
    call_log.method(OpalMarginals, "_check")


def _assert_read_once_in_fit(call_log: CallLog, path: Path) -> None:
    assert call_log.of("read_mapped_rows") == [(True, str(path))]
    assert [inside for inside, arg in call_log.of("read_table") if arg == str(path)] == [True]
    assert [inside for inside, _ in call_log.of("load_input")] == [True]
    assert [inside for inside, _ in call_log.of("OpalMarginals._check")] == [True]
    budget_checks = call_log.of("check_budget")
    assert budget_checks and all(inside for inside, _ in budget_checks), budget_checks


def _same_tables(a: Path, b: Path) -> None:
    for table in TABLES:
        assert (a / f"{table}.csv").read_bytes() == (b / f"{table}.csv").read_bytes(), table


MAPPING = ["--sep", ";", "--card-column", "tarjeta", "--time-column", "cuando"]
MAPPING += ["--location-column", "parada"]
COMMON = ["--epsilon", "4", "--delta", "1e-6", "--quiet", "--seed", "2"]


def test_mapped_command_reads_in_fit(
    forty_cards: dict[str, Path], tmp_path: Path, call_log: CallLog
) -> None:
    """``marginals FILE --card-column ...``: the file is read (``read_mapped``) and loaded
    (``load_input``) once each, inside ``fit``, which alone validates. The code before read and
    loaded it in the driver and gave ``fit`` the loaded frame. The tables equal those of the
    same taps under the canonical names (read by ``fit`` from the file)."""
    agency = _agency_copy(forty_cards, tmp_path)
    _watch(call_log)
    argv = ["marginals", str(agency), *MAPPING, *COMMON, "--privacy-unit", "tarjeta"]
    assert main([*argv, "--out", str(tmp_path / "mapped")]) == 0
    _assert_read_once_in_fit(call_log, agency)
    plain = ["marginals", str(forty_cards["taps"]), *COMMON, "--privacy-unit", "card_id"]
    plain += ["--out", str(tmp_path / "plain")]
    assert main(plain) == 0
    _same_tables(tmp_path / "mapped", tmp_path / "plain")


def test_mapped_run_table_reads_in_fit(
    forty_cards: dict[str, Path], tmp_path: Path, call_log: CallLog
) -> None:
    """``run`` with a ``[marginals]`` table and mapping keys (:func:`synth.cli.releases._mapped`):
    the same, through the config path."""
    agency = _agency_copy(forty_cards, tmp_path)
    config = tmp_path / "m.toml"
    table = f'[marginals]\ninput = "{agency}"\nsep = ";"\ncard_column = "tarjeta"\n'
    table += 'time_column = "cuando"\nlocation_column = "parada"\n[marginals.parameters]\n'
    table += 'epsilon = 4\ndelta = 1e-6\nprivacy_unit = "tarjeta"\n'
    config.write_text(table)
    _watch(call_log)
    out = tmp_path / "run"
    assert main(["run", str(config), "--out", str(out), "--seed", "2", "--quiet"]) == 0
    _assert_read_once_in_fit(call_log, agency)
    plain = ["marginals", str(forty_cards["taps"]), *COMMON, "--privacy-unit", "card_id"]
    assert main([*plain, "--out", str(tmp_path / "plain")]) == 0
    _same_tables(out / "marginals", tmp_path / "plain")


def test_fit_reads_a_mapped_source_and_keeps_the_frame_contract(
    forty_cards: dict[str, Path], tmp_path: Path
) -> None:
    """The API: a :class:`MappedSource` is read by ``fit`` (a frame wrapped in one is loaded as
    the command loads it); a plain row-level frame without ``card_id`` is still counted as
    given (the contract the driver's loader would have broken)."""
    agency = _agency_copy(forty_cards, tmp_path)
    imap = InputMap.build(
        sep=";", card_column="tarjeta", time_column="cuando", location_column="parada"
    )
    params = {"epsilon": 4.0, "delta": 1e-6, "privacy_unit": "card_id", "random_state": 2}
    mapped = OpalMarginals(**params).fit(MappedSource(agency, imap))
    plain = OpalMarginals(**params).fit(forty_cards["taps"])
    for table in TABLES:
        pd.testing.assert_frame_equal(mapped.tables_[table], plain.tables_[table])
    rows = pd.read_csv(forty_cards["taps"], dtype=str).drop(columns="card_id")
    row_level = {"epsilon": 4.0, "delta": 1e-6, "random_state": 2}
    assert OpalMarginals(**row_level).fit(rows).row_kind_ == "tap"
    with pytest.raises(InputError, match=r"missing column.*'card_id'"):
        OpalMarginals(**row_level).fit(MappedSource(rows))  # loaded as a command loads a file
