"""synth.datasets: the embedded data loads, matches the public sources and carries its notices."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from synth import datasets
from synth.errors import ConfigError
from synth.records import load_sequences, load_taps
from synth.taxonomy import Taxonomy


def test_every_file_and_notice_is_packaged() -> None:
    for name in datasets.FILES:
        p = datasets.path(name)
        assert p.is_file(), p
        folder = p.parent
        assert (folder / "NOTICE").is_file() and (folder / "PROVENANCE.txt").is_file()
        assert any(f.name.startswith("UPSTREAM_LICENSE") for f in folder.iterdir())
        assert "Licen" in datasets.notice(name) or "licen" in datasets.notice(name)
    with pytest.raises(ConfigError):
        datasets.path("nope")


def test_sube() -> None:
    tue, wed = datasets.sube_taps(), datasets.sube_taps("wednesday")
    assert tue.shape == (28669, 14) and wed.shape == (29007, 14)
    assert set(tue["fecha"]) == {"27/11/2019"} and set(wed["fecha"]) == {"28/11/2019"}
    assert tue["id_tarjeta"].nunique() == 10000
    with pytest.raises(ConfigError):
        datasets.sube_taps("monday")
    branch, line = datasets.sube_taxonomy(), datasets.sube_taxonomy("line")
    assert len(branch.leaves()) == 398 and branch.height == 3
    assert len(line.leaves()) == 382 and line.height == 2
    meta = datasets.sube_metadata()
    assert set(branch.leaves()) == set(meta["id_ramal"].astype(str))
    assert branch.parent("220") == "line:32" and line.parent("32") == "mode:SUB"
    with pytest.raises(ConfigError):
        datasets.sube_taxonomy("mode")
    taps = load_taps(tue, location_column="id_linea")
    assert taps["time"].min() == pd.Timestamp("2019-11-27 00:00")
    with pytest.warns(UserWarning, match="dropped 8 rows"):
        seqs = load_sequences(tue, location_column="id_ramal", taxonomy=branch, on_unknown="drop")
    assert seqs["seq_id"].nunique() == 9991


def test_montreal() -> None:
    net, stations, tax = (
        datasets.montreal_network(),
        datasets.montreal_stations(),
        datasets.montreal_taxonomy(),
    )
    assert len(net) == 73 and net["station"].nunique() == 68 and len(stations) == 68
    assert sorted(tax.leaves()) == sorted(stations["station"])
    assert tax.children("root") == ["line:1", "line:2", "line:4", "line:5"]
    assert tax.parent("Berri-UQAM") == "line:1" and tax.parent("Snowdon") == "line:2"
    assert net["lat"].between(45.4, 45.7).all() and net["lon"].between(-73.8, -73.4).all()


def test_chicago() -> None:
    taxi = datasets.chicago_taxi()
    assert taxi.shape == (15002, 18)
    assert "trip_start_timestamp" in taxi.columns


def test_identical_to_shared_sources(shared_data: Path) -> None:
    pd.testing.assert_frame_equal(
        datasets.sube_taps(), pd.read_csv(shared_data / "sube-buenos-aires" / "martes_trx.csv")
    )
    pd.testing.assert_frame_equal(
        datasets.chicago_taxi(),
        pd.read_csv(shared_data / "chicago-taxi" / "chicago_taxi_simple.csv"),
    )
    meta = shared_data / "sube-buenos-aires" / "metadata_amba_2019_m1.csv"
    assert Taxonomy.from_sube_metadata(meta).to_frame().equals(datasets.sube_taxonomy().to_frame())
    for name in ("montreal_metro_line_stations.csv", "montreal_metro_stations.csv"):
        embedded = datasets.path("montreal_stations").parent / name
        assert embedded.read_bytes() == (shared_data / "montreal-metro" / name).read_bytes()
