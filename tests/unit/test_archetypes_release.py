"""``archetypes.release`` (``transit-synth trips``): the driver passes the files through and
``ArchetypeSynthesizer.fit`` alone reads and validates them (issue 27)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import synth.io
import synth.privacy
from archetypes import ArchetypeSynthesizer
from archetypes.release import release_trips
from archetypes.schema import TripSchema
from archetypes.trip_sources import TripSource
from synth.cli import main
from synth.errors import ConfigError
from tests.conftest import CallLog


def _trips(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cards = np.repeat(np.arange(n), rng.integers(1, 4, n))
    night = rng.random(n)[cards] < 0.4
    return pd.DataFrame(
        {
            "card": [f"k{seed}-{c}" for c in cards],
            "hour": np.where(
                night, rng.integers(18, 24, len(cards)), rng.integers(5, 12, len(cards))
            ),
            "zone": np.where(night, "B", "A"),
            "mode": np.where(night, "rail", "bus"),
        }
    )


@pytest.fixture
def trip_files(tmp_path: Path) -> dict[str, Path]:
    paths = {k: tmp_path / f"{k}.csv" for k in ("private", "public")}
    _trips(120, 1).to_csv(paths["private"], index=False)
    _trips(80, 0).to_csv(paths["public"], index=False)
    paths["schema"] = tmp_path / "schema.json"
    schema = {"mode": {"kind": "categorical", "values": ["bus", "rail", "ferry"]}}
    paths["schema"].write_text(json.dumps(schema))
    return paths


def test_fit_is_the_only_reader_and_validator(
    trip_files: dict[str, Path], tmp_path: Path, call_log: CallLog
) -> None:
    """``transit-synth trips``: the private and public trips and the schema file are read once
    each, inside ``fit``, and the parameters validated there only. The code before the issue
    read all three in the driver (``load_inputs``) and checked the budget twice before ``fit``
    (the command and ``release_trips``), and twice inside it."""
    call_log.fit(ArchetypeSynthesizer)
    call_log.function(synth.io, "read_table")
    call_log.function(synth.privacy, "check_budget")
    call_log.method(TripSchema, "from_json")
    call_log.method(ArchetypeSynthesizer, "_validate_params")
    argv = ["trips", str(trip_files["private"]), "--public", str(trip_files["public"])]
    argv += ["--schema", str(trip_files["schema"]), "--epsilon", "2", "--delta", "1e-5"]
    argv += ["--id-column", "card", "--key-columns", "hour,zone", "--category-column", "mode"]
    argv += ["--archetypes", "2", "--out", str(tmp_path / "out"), "--quiet", "--seed", "3"]
    assert main(argv) == 0
    reads = call_log.of("read_table")
    for role in ("private", "public"):
        assert [inside for inside, arg in reads if arg == str(trip_files[role])] == [True], reads
    assert call_log.of("TripSchema.from_json") == [(True, str(trip_files["schema"]))]
    assert [inside for inside, _ in call_log.of("ArchetypeSynthesizer._validate_params")] == [True]
    # the validator's check and the ledger's of its own cap (PrivacyLedger); _budgets, which
    # only divides the checked budget, checked it a third time before
    assert call_log.of("check_budget") == [(True, "2.0")] * 2
    released = pd.read_csv(tmp_path / "out" / "trips.csv")
    assert set(released["mode"]) <= {"bus", "rail", "ferry"}
    saved = TripSchema.from_json(tmp_path / "out" / "schema.json")
    assert saved.values("mode") == ("bus", "rail", "ferry")  # the file's domain


def test_release_equals_fit_on_the_files(trip_files: dict[str, Path], tmp_path: Path) -> None:
    """The driver adds nothing to what ``fit`` reads: the same trips as the estimator fitted on
    the paths (the schema file given as the ``schema`` parameter)."""
    params = {"epsilon": 2.0, "delta": 1e-5, "id_column": "card", "key_columns": ["hour", "zone"]}
    params |= {"category_column": "mode"}
    release_trips(
        trip_files["private"],
        trip_files["public"],
        tmp_path / "out",
        params=params,
        schema=trip_files["schema"],
        seed=5,
    )
    fitted = ArchetypeSynthesizer(**params, schema=str(trip_files["schema"]), random_state=5).fit(
        str(trip_files["private"]), str(trip_files["public"])
    )
    fitted.write(tmp_path / "api")
    got = (tmp_path / "out" / "trips.csv").read_bytes()
    assert got == (tmp_path / "api" / "trips.csv").read_bytes()


def test_trip_source_options_are_read_in_fit(trip_files: dict[str, Path], tmp_path: Path) -> None:
    """A :class:`TripSource`'s delimiter is applied by ``fit``; a bad format or two different
    formats are a ConfigError from ``fit`` before anything is read."""
    semi = tmp_path / "private_semicolon.csv"
    _trips(120, 1).to_csv(semi, index=False, sep=";")
    params = {"epsilon": 2.0, "delta": 1e-5, "id_column": "card", "key_columns": ["hour", "zone"]}
    params |= {"category_column": "mode", "random_state": 5}
    by_sep = ArchetypeSynthesizer(**params).fit(TripSource(semi, sep=";"), trip_files["public"])
    plain = ArchetypeSynthesizer(**params).fit(trip_files["private"], trip_files["public"])
    pd.testing.assert_frame_equal(by_sep.sample(), plain.sample())
    with pytest.raises(ConfigError, match="input format must be one of"):
        ArchetypeSynthesizer(**params).fit(TripSource(semi, format="xlsx"), trip_files["public"])
    with pytest.raises(ConfigError, match="different formats"):
        ArchetypeSynthesizer(**params).fit(
            TripSource(semi, format="sube-taps"), trip_files["public"]
        )
