"""Trips read value by value (issue 25 item 1): readers, domains, measures and the order column.

Each case writes a table whose other rows would flip a type-guessing reader and checks that the
rows shared with a table without them come out the same (or that the odd value is an error
naming the file, the column, the row and the value)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from archetypes.datasets import chicago_taxi_trips, sube_trips
from archetypes.model import bound_individuals
from archetypes.reading import order_key, read_private_trips, read_public_trips
from archetypes.schema import Column, TripSchema, value_text
from archetypes.synthesizer import ArchetypeSynthesizer
from synth.cli import main
from synth.errors import ConfigError, InputError


def _csv(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ------------------------------------------------------------------------------- values as text
def test_value_text_is_the_identifier_rule_per_value() -> None:
    mixed = pd.Series([" 7.0 ", "07", 7, 7.5, "x", None, 8.0], dtype=object)
    text = value_text(mixed)
    assert text.isna().tolist() == [False] * 5 + [True, False]
    assert text.dropna().tolist() == ["7", "07", "7", "7.5", "x", "8"]
    floats = value_text(pd.Series([1.0, np.nan, 2.5]))
    assert floats.isna().tolist() == [False, True, False]
    assert floats.dropna().tolist() == ["1", "2.5"]


def test_conform_matches_domain_values_as_text_whatever_the_column_type() -> None:
    schema = TripSchema({"hour": Column("hour", "categorical", tuple(range(24)))})
    for raw in (["7", " 8.0 ", "21"], [7.0, 8.0, 21.0], [7, 8, 21]):
        out = schema.conform(pd.DataFrame({"hour": raw}))
        assert out["hour"].tolist() == [7, 8, 21] and out["hour"].dtype == np.int64
    with pytest.raises(InputError, match=r"column 'hour', row 2: value '07' is not in"):
        schema.conform(pd.DataFrame({"hour": ["7", "07"]}))
    # distinct values are read once, but True is not 1 (hash-equal in Python)
    odd = TripSchema({"v": Column("v", "categorical", (1, "True", "o"), other="o")})
    mixed = pd.Series([True, 1, 1.0, " 1.0 ", None, 1.5], dtype=object)
    assert odd.conform(pd.DataFrame({"v": mixed}))["v"].tolist() == ["True", 1, 1, 1, "o", "o"]


def test_conform_of_one_row_does_not_depend_on_the_others() -> None:
    """Cards' zones ``001`` and ``1`` stay two values next to a non-numeric one or not."""
    zones = Column("zone", "categorical", ("001", "1", "x1", "other"), other="other")
    schema = TripSchema({"zone": zones})
    d = pd.DataFrame({"zone": ["001", "1", "1.0", "2"]})
    d_prime = pd.concat([d, pd.DataFrame({"zone": ["x1"]})], ignore_index=True)
    assert schema.conform(d)["zone"].tolist() == ["001", "1", "1", "other"]
    assert schema.conform(d_prime)["zone"].tolist()[:4] == ["001", "1", "1", "other"]


def test_domain_values_equal_as_text_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"values 7 and '7' are the same value"):
        Column("hour", "categorical", (7, "7"))


def test_numeric_column_is_parsed_per_value() -> None:
    schema = TripSchema({"fare": Column("fare", "numeric", minimum=0, maximum=100)})
    out = schema.conform(pd.DataFrame({"fare": ["12.4", " 3 ", "1e1", "250"]}))
    assert out["fare"].tolist() == [12, 3, 10, 100]
    with pytest.raises(InputError, match=r"trips.csv: column 'fare', row 3: '\$4' is not a number"):
        schema.conform(pd.DataFrame({"fare": ["1", "2", "$4"]}), source="trips.csv")


# ------------------------------------------------------------------------------------- readers
def test_private_csv_columns_are_text_and_ids_follow_the_rule(tmp_path: Path) -> None:
    d = _csv(tmp_path / "d.csv", "card,hour\n001,7\n1,8\n 7.0 ,9\nNA,10\n")
    d_prime = _csv(tmp_path / "e.csv", "card,hour\n001,7\n1,8\n 7.0 ,9\nNA,10\nx1,x\n")
    one, two = (
        read_private_trips(d, id_column="card"),
        read_private_trips(d_prime, id_column="card"),
    )
    assert one["card"].tolist() == ["001", "1", "7", "NA"]
    assert one["hour"].tolist() == ["7", "8", "9", "10"]  # text: the domain decides
    pd.testing.assert_frame_equal(two.iloc[:4], one, check_dtype=False)
    assert one.attrs["source"] == str(d)


def test_private_id_missing_is_an_error_naming_file_and_row(tmp_path: Path) -> None:
    bad = _csv(tmp_path / "bad.csv", "card,hour\n1,7\n,8\n")
    with pytest.raises(InputError, match=r"bad.csv: column 'card', row 2: empty value"):
        read_private_trips(bad, id_column="card")


def test_parquet_numbers_as_ids(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    pd.DataFrame({"card": [1.0, 2.0, 3.0], "hour": [7, 8, 9]}).to_parquet(path)
    assert read_private_trips(path, id_column="card")["card"].tolist() == ["1", "2", "3"]
    public = read_public_trips(path, id_column="card")
    assert public["card"].tolist() == ["1", "2", "3"] and public["hour"].dtype == np.int64


def test_order_column_per_value(tmp_path: Path) -> None:
    """Text numbers order as numbers ("10" after "9"); ISO times as times; missing last."""
    assert np.argsort(order_key(pd.Series(["10", "9", None, "11"]), "o", "t")).tolist() == [
        1,
        0,
        3,
        2,
    ]
    stamps = pd.Series(["2019-11-28T09:00:00", "2019-11-28T08:00:00+01:00", "1574927000"])
    assert np.argsort(order_key(stamps, "o", "t"), kind="stable").tolist() == [2, 1, 0]
    with pytest.raises(InputError, match=r"t: column 'o', row 2: cannot order by 'late'"):
        order_key(pd.Series(["1", "late"]), "o", "t")
    trips = pd.DataFrame({"card": ["a", "a", "a"], "seq": ["10", "9", "11"]})
    assert bound_individuals(trips, "card", 1, "seq")["seq"].tolist() == ["9"]


# ------------------------------------------------------------------------------------ datasets
CHICAGO_HEADER = (
    "trip_start_timestamp,pickup_community_area,dropoff_community_area,company,payment_type,"
    "fare,tips,trip_seconds,trip_miles\n"
)


def test_chicago_reads_each_value_on_its_own(tmp_path: Path) -> None:
    rows = "1388534400,8,,001,Cash,12.25,0,600,2\n2014-01-01T09:00:00,7.0,32,1,Credit Card,,1,,3\n"
    one = chicago_taxi_trips(_csv(tmp_path / "a.csv", CHICAGO_HEADER + rows))
    assert one["company"].tolist() == ["001", "1"]
    assert one["shift"].tolist() == [6, 7]  # Wednesday 00:00 and 09:00
    assert one["dropoff_community_area"].tolist() == [-1, 32]
    assert one["fare"].tolist() == [12, -1]
    bad = _csv(tmp_path / "b.csv", CHICAGO_HEADER + rows + "1388563200,8,8,x,Cash,free,0,1,1\n")
    with pytest.raises(InputError, match=r"b.csv: column 'fare', row 3: 'free' is not a number"):
        chicago_taxi_trips(bad)


SUBE_HEADER = "id_tarjeta,modo,lat,lon,id_linea,id_ramal,id_tarifa,hora,etapa_red_sube\n"


def test_sube_ids_per_value(tmp_path: Path) -> None:
    rows = "007,COL,-34.6,-58.4, 12.0 ,60,1,7,0\n7,COL,,,12,061,1,8,1\n,COL,1,1,1,1,1,9,0\n"
    trips = sube_trips(_csv(tmp_path / "s.csv", SUBE_HEADER + rows))
    assert trips["card_id"].tolist() == ["007", "7"]  # the tap without a card is dropped
    assert trips["line"].tolist() == ["12", "12"]
    assert trips["branch"].tolist() == ["60", "061"]
    assert trips["zone"].tolist() == ["-34.60,-58.40", "unknown"]
    bad = _csv(tmp_path / "t.csv", SUBE_HEADER + rows + "8,COL,1,1,1,1,1,25,0\n")
    with pytest.raises(InputError, match=r"t.csv: column 'hora', row 4: '25' is not an integer"):
        sube_trips(bad)


# ------------------------------------------------------------------------ the release and the API
def _quirky(n: int, extra: bool) -> pd.DataFrame:
    cards = [f"{i:03d}" for i in range(1, n + 1)] + [str(i) for i in range(1, n + 1)]
    cards += ["x1"] if extra else []
    rows = [
        (c, h, "B" if i % 2 else "A", "rail" if i % 2 else "bus")
        for i, c in enumerate(cards)
        for h in ((21, 22) if i % 2 else (7, 8))
    ]
    return pd.DataFrame(rows, columns=["card", "hour", "zone", "mode"])


def test_fit_on_a_path_counts_one_individual_more(tmp_path: Path, zero_noise: object) -> None:
    """The Python API reads a path the same way as the command (zero noise: exact counts)."""
    public = tmp_path / "public.csv"
    _quirky(20, False).assign(card=lambda t: "p" + t["card"]).to_csv(public, index=False)
    totals = []
    for extra in (False, True):
        path = tmp_path / f"private-{extra}.csv"
        _quirky(20, extra).to_csv(path, index=False)
        model = ArchetypeSynthesizer(
            epsilon=2.0,
            delta=1e-5,
            key_columns=["hour", "zone"],
            category_column="mode",
            id_column="card",
            archetypes=2,
            order_column="hour",
            random_state=3,
        ).fit(path, public)
        assert model.features_ == ["hour"]  # the public hours are numbers
        totals.append(
            (int(model.noisy_category_counts_.sum()), int(model.noisy_archetype_counts_.sum()))
        )
    assert totals == [(40, 40), (41, 41)]


def test_cli_bad_number_names_file_row_and_value(tmp_path: Path, capsys) -> None:
    private, public = tmp_path / "private.csv", tmp_path / "public.csv"
    frame = _quirky(10, False).assign(fare="3")
    frame.loc[4, "fare"] = "3,50"
    frame.to_csv(private, index=False)
    _quirky(10, False).assign(fare=3).to_csv(public, index=False)
    schema = tmp_path / "schema.json"
    schema.write_text(
        json.dumps(
            {
                "card": {"kind": "id"},
                "hour": {"kind": "categorical", "values": list(range(24))},
                "zone": {"kind": "categorical", "values": ["A", "B"]},
                "mode": {"kind": "categorical", "values": ["bus", "rail"]},
                "fare": {"kind": "numeric", "min": 0, "max": 10},
            }
        )
    )
    argv = ["trips", str(private), "--public", str(public), "--epsilon", "1", "--delta", "1e-5"]
    argv += ["--out", str(tmp_path / "out"), "--id-column", "card", "--key-columns", "hour,zone"]
    argv += ["--category-column", "mode", "--archetypes", "2", "--schema", str(schema)]
    config = tmp_path / "c.toml"
    config.write_text(
        '[trips]\n[trips.parameters]\nmarginals = ["fare"]\ncompletion = [["fare", ["zone"]]]\n'
        "budget_split = [0.1, 0.5, 0.4]\n"
    )
    assert main([*argv, "--config", str(config), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "private.csv: column 'fare', row 5: '3,50' is not a number" in err[0]
    assert not (tmp_path / "out").exists()
