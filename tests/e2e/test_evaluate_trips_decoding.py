"""``evaluate`` on trips as the trips command reads them, read back in the user's own columns
(issue 29): the raw Chicago file and SUBE taps score against a release in the same encoding, and
``--decode`` writes the released trips in the original columns and values."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from archetypes import chicago_taxi_trips, sube_trips
from archetypes.decoding import decode_trips, decoding
from synth import datasets
from synth.cli import main


@pytest.fixture(scope="module")
def raw_taxi() -> pd.DataFrame:
    return datasets.chicago_taxi().iloc[:3000].reset_index(drop=True)


def _evaluate(original: Path, synthetic: Path, out: Path, *flags: str) -> int:
    args = ["evaluate", str(original), str(synthetic), "--kind", "trips", "--quiet"]
    return main([*args, "--out", str(out), "--id-column", "taxi_id", *flags])


def test_raw_chicago_file_scored_and_decoded(
    raw_taxi: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = tmp_path / "chicago.csv"
    raw_taxi.to_csv(raw, index=False)
    encoded = chicago_taxi_trips(raw_taxi)  # stands for a release in the challenge encoding
    encoded.to_csv(tmp_path / "trips.csv", index=False)
    flags = ("--time-column", "shift", "--origin-column", "pickup_community_area")
    flags += ("--destination-column", "dropoff_community_area")
    # the raw file read as a trips table: not the release's columns (the old behaviour)
    assert _evaluate(raw, tmp_path / "trips.csv", tmp_path / "plain", *flags) == 2
    capsys.readouterr()
    code = _evaluate(
        raw, tmp_path / "trips.csv", tmp_path / "e", *flags, "--input-format", "chicago-taxi"
    )
    assert code == 0
    result = json.loads((tmp_path / "e" / "private-evaluation.json").read_text())
    assert result["original"]["n_trips"] == len(raw_taxi)
    assert result["decoding"]["values"]["payment_type"]["1"] == "Credit Card"
    assert result["decoding"]["columns"]["shift"] == ["trip_start_day", "trip_start_hours"]
    (scores,) = result["releases"].values()
    report = (tmp_path / "e" / "private-report.html").read_text()
    assert "Reading the columns back" in report and "trip_start_day, trip_start_hours" in report
    assert scores  # the same trips: every marginal distance is 0
    tvs = [v for _, v in _numbers(scores, "tv")]
    assert tvs and max(tvs) < 1e-9
    # --decode: the released trips in the original columns and values
    assert (
        _evaluate(
            raw,
            tmp_path / "trips.csv",
            tmp_path / "d",
            *flags,
            "--input-format",
            "chicago-taxi",
            "--decode",
        )
        == 0
    )
    (decoded_file,) = (tmp_path / "d").glob("*-decoded.csv")  # NAME-decoded.csv
    decoded = pd.read_csv(decoded_file, keep_default_na=False)
    assert "shift" not in decoded and {"trip_start_day", "trip_start_hours"} <= set(decoded)
    start = pd.to_datetime(raw_taxi["trip_start_timestamp"], unit="s", errors="coerce")
    if start.isna().all():
        start = pd.to_datetime(raw_taxi["trip_start_timestamp"])
    assert (decoded["trip_start_day"] == start.dt.day_name()).all()
    raw_payment = raw_taxi["payment_type"].fillna("Unknown").astype(str)
    known = raw_payment.isin(decoding("chicago-taxi")["values"]["payment_type"].values())
    assert (decoded["payment_type"][known] == raw_payment[known]).all()


def _numbers(tree: object, key: str) -> list[tuple[str, float]]:
    """Every number under a key containing ``key`` in a nested result."""
    found: list[tuple[str, float]] = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            if isinstance(v, int | float) and key in str(k).lower():
                found.append((str(k), float(v)))
            else:
                found += _numbers(v, key)
    elif isinstance(tree, list):
        for v in tree:
            found += _numbers(v, key)
    return found


def test_sube_decoding_round_trip() -> None:
    """SUBE trips renamed back to the SUBE tap columns, values as read."""
    taps = datasets.sube_taps("tuesday").iloc[:500]
    trips = sube_trips(taps)
    back = decode_trips(trips, "sube-taps")
    assert {"id_tarjeta", "hora", "modo", "id_linea", "id_ramal", "id_tarifa"} <= set(back)
    boardings = taps[taps["id_tarjeta"].notna()]
    boardings = boardings[~boardings["tipo_trx_tren"].isin(["CHECK OUT", "CHECK OUT SIN CHECKIN"])]
    assert back["hora"].tolist() == boardings["hora"].astype(int).tolist()
    assert back["modo"].tolist() == boardings["modo"].tolist()
    assert decode_trips(trips, "trips").equals(trips)
