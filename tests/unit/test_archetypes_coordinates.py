"""Coordinate columns of a trip schema: a number read off another column's ``"x,y"`` labels
(SUBE's lat/lon from the zone cell without public trips), per value, within a public range."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from archetypes import ArchetypeSynthesizer
from archetypes.datasets import AMBA_BOX, sube_schema
from archetypes.schema import Column, TripSchema
from synth import datasets
from synth.errors import ConfigError, InputError

ZONES = ("-34.60,-58.40", "-34.65,-58.45", "unknown")


def schema() -> TripSchema:
    return TripSchema(
        {
            "zone": Column("zone", "categorical", ZONES, other="unknown"),
            "lat": Column("lat", "coordinate", minimum=-35.0, maximum=-34.0, source="zone"),
            "lon": Column("lon", "coordinate", minimum=-59.0, maximum=-58.0, source="zone", part=1),
        }
    )


def test_read_off_is_per_value_and_clipped() -> None:
    labels = pd.Series(["-34.60,-58.40", "unknown", None, "-3.15,126.85", "1,x", "-34.65,-58.45"])
    out = schema().derive(pd.DataFrame({"zone": labels}))
    np.testing.assert_allclose(out["lat"], [-34.6, np.nan, np.nan, -34.0, np.nan, -34.65])
    np.testing.assert_allclose(out["lon"], [-58.4, np.nan, np.nan, -58.0, np.nan, -58.45])
    # one value's result never depends on the others
    alone = schema().derive(pd.DataFrame({"zone": labels.iloc[3:4]}))
    assert alone["lat"].tolist() == [-34.0]


def test_conform_reads_the_label_and_validate_allows_missing() -> None:
    frame = pd.DataFrame({"zone": ["-34.60,-58.40", "unknown"], "lat": [-34.61, 2.0]})
    out = schema().conform(frame, columns=["zone", "lat"])
    assert out["lat"].iloc[0] == pytest.approx(-34.6) and np.isnan(out["lat"].iloc[1])
    schema().validate(out)
    with pytest.raises(InputError, match="'lat', row 1"):
        schema().validate(pd.DataFrame({"lat": [-36.0]}))


def test_json_round_trip_and_bad_columns() -> None:
    spec = schema().to_dict()
    assert spec["lon"] == {
        "kind": "coordinate",
        "min": -59.0,
        "max": -58.0,
        "source": "zone",
        "part": 1,
    }
    assert TripSchema.from_dict(spec) == schema()
    with pytest.raises(ConfigError, match="source 'nope' is not a categorical"):
        TripSchema.from_dict({**spec, "lat": {**spec["lat"], "source": "nope"}})
    with pytest.raises(ConfigError, match="part, 0 or 1"):
        TripSchema.from_dict({**spec, "lat": {**spec["lat"], "part": 2}})
    with pytest.raises(ConfigError, match="minimum <= maximum"):
        TripSchema.from_dict({**spec, "lat": {**spec["lat"], "min": 0.0}})


def test_sube_layout_without_public_trips_has_the_amba_coordinates() -> None:
    without = sube_schema(None, datasets.path("sube_metadata"))
    assert [(without[c].minimum, without[c].maximum) for c in ("lat", "lon")] == list(AMBA_BOX)
    assert [without[c].source for c in ("lat", "lon")] == ["zone", "zone"]


def test_a_coordinate_is_never_a_modelled_column() -> None:
    private = pd.DataFrame(
        {"card": [1, 1, 2], "zone": ["-34.60,-58.40"] * 3, "lat": [-34.6] * 3, "mode": ["a"] * 3}
    )
    given = schema().replace(Column("mode", "categorical", ("a", "b")))
    synthesizer = ArchetypeSynthesizer(
        epsilon=1.0,
        delta=1e-5,
        id_column="card",
        key_columns=["lat", "zone"],
        category_column="mode",
        schema=given,
        random_state=0,
    )
    with pytest.raises(ConfigError, match="'lat' is a coordinate read off 'zone'"):
        synthesizer.fit(private)


def test_the_datasheet_says_what_a_coordinate_is() -> None:
    from synth.datasheet import _schema_meaning

    meaning = _schema_meaning("lat", schema().to_dict()["lat"])
    expected = "number 0 of the trip's zone label, between -35.0 and -34.0 (the public range)"
    assert meaning == expected
