"""TripSchema: public domains, conforming private data, validating synthetic output."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from archetypes.schema import Column, TripSchema
from synth.errors import ConfigError, InputError


def small_schema() -> TripSchema:
    return TripSchema.from_dict(
        {
            "card": {"kind": "id"},
            "mode": {"kind": "categorical", "values": ["bus", "rail", "other"], "other": "other"},
            "hour": {"kind": "categorical", "values": list(range(24))},
            "fare": {"kind": "numeric", "min": 0, "max": 10},
        }
    )


def test_conform_maps_rounds_and_clips() -> None:
    df = pd.DataFrame(
        {
            "card": [1, 2, 3],
            "mode": ["bus", "ferry", None],
            "hour": [0, 5, 23],
            "fare": [1.4, 12, -3],
        }
    )
    out = small_schema().conform(df, source="x.csv")
    assert out["mode"].tolist() == ["bus", "other", "other"]
    assert out["fare"].tolist() == [1, 10, 0]
    assert out["card"].tolist() == ["1", "2", "3"]
    small_schema().validate(out)


def test_conform_errors_name_column_and_row() -> None:
    df = pd.DataFrame({"card": [1, 2], "mode": ["bus", "bus"], "hour": [3, 24], "fare": [1, 2]})
    with pytest.raises(InputError, match=r"x\.csv: column 'hour', row 2"):
        small_schema().conform(df, source="x.csv")
    df = pd.DataFrame({"card": [1], "mode": ["bus"], "hour": [3], "fare": ["cheap"]})
    with pytest.raises(InputError, match="'fare', row 1: 'cheap' is not a number"):
        small_schema().conform(df, source="x.csv")
    with pytest.raises(InputError, match="missing column"):
        small_schema().conform(df.drop(columns="mode"))


def test_validate_catches_out_of_domain_values() -> None:
    schema = small_schema()
    good = pd.DataFrame({"card": [1], "mode": ["rail"], "hour": [7], "fare": [3]})
    schema.validate(good)
    for column, value in (("mode", "tram"), ("hour", 25), ("fare", 11), ("fare", 2.5)):
        bad = good.copy()
        bad[column] = [value]
        with pytest.raises(InputError, match=f"column '{column}'"):
            schema.validate(bad)


def test_bad_columns_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        Column("x", "categorical", ())
    with pytest.raises(ConfigError):
        Column("x", "categorical", ("a",), other="b")
    with pytest.raises(ConfigError):
        Column("x", "numeric", minimum=3, maximum=1)
    with pytest.raises(ConfigError):
        small_schema().values("fare")


def test_from_public_includes_other_and_roundtrips(tmp_path: Path) -> None:
    public = pd.DataFrame({"mode": ["rail", "bus", "bus"], "fare": [1.2, 3.0, 7.9]})
    schema = TripSchema.from_public(
        public, categorical=["mode"], numeric=["fare"], other={"mode": "unknown"}
    )
    assert schema.values("mode") == ("bus", "rail", "unknown")
    assert (schema["fare"].minimum, schema["fare"].maximum) == (1, 8)
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema.to_dict()))
    assert TripSchema.from_json(path) == schema


def test_numeric_column_against_string_domain() -> None:
    schema = TripSchema.from_dict({"line": {"kind": "categorical", "values": ["7", "12"]}})
    out = schema.conform(pd.DataFrame({"line": np.array([7, 12])}))
    assert out["line"].tolist() == ["7", "12"]


def test_nist_parameters(shared_data: Path) -> None:
    schema = TripSchema.from_json(shared_data / "nist-deid2-sprint3/sprint3_public_parameters.json")
    assert schema.values("shift") == tuple(range(21))
    assert schema["fare"].kind == "numeric" and schema["fare"].maximum == 9900
    assert schema["taxi_id"].kind == "id"
    assert len(schema.values("company_id")) == 57


def test_coarse_labels_roundtrip_and_are_checked() -> None:
    """A column's public coarser labels (issue 28: SUBE's coarse zone grid), one per value."""
    spec = {"zone": {"kind": "categorical", "values": ["a", "b", "c"], "coarse": ["x", "x", "y"]}}
    schema = TripSchema.from_dict(spec)
    assert schema["zone"].coarse == ("x", "x", "y")
    assert TripSchema.from_dict(schema.to_dict()) == schema
    with pytest.raises(ConfigError, match="one label per categorical value"):
        TripSchema.from_dict({"zone": {**spec["zone"], "coarse": ["x"]}})
