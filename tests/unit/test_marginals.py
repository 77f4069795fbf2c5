"""Stability-based histogram (000 Algorithm 1) and the Opal release, with zero-noise samplers."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.errors import ConfigError, InputError, RenamedClassWarning
from synth.marginals.cells import empty_positions
from synth.marginals.grid import TABLES
from synth.marginals.histogram import stability_histogram
from synth.marginals.opal import OpalMarginals, marginal_tables
from synth.marginals.sbh_calibration import calibrate
from synth.outmarker import MARKER
from synth.privacy import threshold_delta
from synth.taxonomy import Taxonomy
from tests.conftest import ZeroNoise


class ShiftNoise(ZeroNoise):
    """Adds a constant to every present cell (a huge shift makes every present cell pass)."""

    def __init__(self, shift: int) -> None:
        self.shift = shift

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        return np.full(size, self.shift, dtype=np.int64)


class AllEmptyPass(ZeroNoise):
    """Every empty cell passes with the value ``threshold`` (pure mode can emit any domain cell)."""

    def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray:
        return np.full(n_empty, threshold, dtype=np.int64)

    def choice(self, n: int, k: int) -> np.ndarray:
        return np.arange(n, dtype=np.int64)[::-1][:k]


def _trips(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    on = pd.Timestamp("2016-07-25") + pd.to_timedelta(rng.integers(0, 2 * 1440, n), unit="m")
    stops = np.array([f"s{i}" for i in range(6)])
    return pd.DataFrame(
        {
            "card_id": rng.integers(0, 400, n).astype(str),
            "mode": rng.choice(["bus", "ferry"], n),
            "on_time": on,
            "on_stop": rng.choice(stops, n, p=[0.5, 0.2, 0.1, 0.1, 0.05, 0.05]),
            "off_time": on + pd.to_timedelta(rng.integers(5, 60, n), unit="m"),
            "off_stop": rng.choice(stops, n),
        }
    )


def _taxonomy() -> Taxonomy:
    edges = [(f"s{i}", f"zone{i // 3}") for i in range(6)]
    edges += [("zone0", "root"), ("zone1", "root"), ("unused", "root")]
    return Taxonomy.from_edges(edges)


# ----------------------------------------------------------------------------- calibration
@pytest.mark.parametrize("eps,delta", [(1.0, 1 / 8e6), (2.0, 1e-6), (0.1, 1e-9)])
def test_row_calibration_is_algorithm_1(eps: float, delta: float) -> None:
    cal = calibrate(eps, delta)
    assert cal.scale == pytest.approx(2 / eps)
    # kept when a >= 2 ln(2/delta)/eps + 1; for integer a that is a >= ceil(.)
    assert cal.threshold == math.ceil(2 * math.log(2 / delta) / eps + 1)
    p = math.exp(-1 / cal.scale)
    assert p ** (cal.threshold - 1) / (1 + p) <= delta / 2  # bad event of Theorem 5


@pytest.mark.parametrize("k", [1, 2, 5])
def test_card_calibration_bounds_the_bad_event(k: int) -> None:
    eps, delta = 1.0, 1e-6
    cal = calibrate(eps, delta, privacy_unit="card_id", max_contributions=k)
    assert (cal.l0, cal.l1, cal.linf) == (k, k, k)
    assert cal.scale == pytest.approx(k / eps)
    p = math.exp(-1 / cal.scale)

    def bad_event(tau: int) -> float:  # worst split of the card's k rows over new cells
        return max(p ** (tau - k), k * p ** (tau - 1)) / (1 + p)

    assert bad_event(cal.threshold) <= delta < bad_event(cal.threshold - 1)


def test_error_bound_is_the_least_tail_quantile() -> None:
    cal = calibrate(1.0, 1e-6)
    p = math.exp(-1 / cal.scale)
    m = cal.error_bound(0.05) - (cal.threshold - 1)
    assert 2 * p ** (m + 1) / (1 + p) <= 0.05 < 2 * p**m / (1 + p)
    assert cal.error_bound(0.01) > cal.error_bound(0.05)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0.0, "delta": 1e-6},
        {"epsilon": 1.0, "delta": 0.0},
        {"epsilon": 1.0, "delta": 1.0},
        {"epsilon": float("nan"), "delta": 1e-6},
        {"epsilon": 1.0, "delta": 1e-6, "max_contributions": 2},
        {"epsilon": 1.0, "delta": 1e-6, "privacy_unit": "c", "max_contributions": 0},
    ],
)
def test_bad_parameters(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        calibrate(**kwargs)


def test_pure_calibration_spends_no_delta() -> None:
    cal = calibrate(1.0, 1e-6, pure=True)
    assert cal.delta == 0 and cal.pure
    assert cal.threshold == calibrate(1.0, 1e-6).threshold
    assert calibrate(1.0, 0.0, pure=True).threshold == 1


# ----------------------------------------------------------------------------- Algorithm 1
def test_exact_counts_and_threshold_with_zero_noise() -> None:
    cal = calibrate(1.0, 1e-6)
    t = cal.threshold
    data = pd.DataFrame(
        {
            "a": ["b"] * t + ["a"] * (t - 1) + ["c"] * (t + 5) + ["a"] * 2,
            "b": [1] * t + [1] * (t - 1) + [2] * (t + 5) + [2] * 2,
        }
    )
    out = stability_histogram(data, ["a", "b"], epsilon=1.0, delta=1e-6, random_state=ZeroNoise())
    assert out.to_dict("records") == [
        {"a": "b", "b": 1, "count": t},
        {"a": "c", "b": 2, "count": t + 5},
    ]
    assert out.attrs["sbh"]["threshold"] == t
    assert out.attrs["sbh"]["error_bound"] == cal.error_bound()


def test_no_absent_point_ever_appears_and_order_is_lexicographic() -> None:
    data = pd.DataFrame({"x": ["z", "a", "m", "a", "q"], "y": ["1", "2", "1", "2", "9"]})
    out = stability_histogram(
        data, ["x", "y"], epsilon=1.0, delta=1e-6, random_state=ShiftNoise(10_000)
    )
    assert list(zip(out["x"], out["y"], strict=True)) == [
        ("a", "2"),
        ("m", "1"),
        ("q", "9"),
        ("z", "1"),
    ]
    assert list(out["count"]) == [10_002, 10_001, 10_001, 10_001]


def test_card_unit_bounds_contributions_deterministically() -> None:
    data = pd.DataFrame({"card": ["c1"] * 50 + ["c2"] * 3, "x": ["a"] * 50 + ["b"] * 3})
    out = stability_histogram(
        data,
        ["x"],
        epsilon=1.0,
        delta=1e-6,
        privacy_unit="card",
        max_contributions=2,
        random_state=ShiftNoise(1000),
    )
    assert dict(zip(out["x"], out["count"], strict=True)) == {"a": 1002, "b": 1002}


def test_pure_domain_cells_can_appear() -> None:
    data = pd.DataFrame({"x": ["a", "a"], "y": [1, 1]})
    domain = {"x": ["a", "b", "c"], "y": [1, 2]}
    out = stability_histogram(
        data, ["x", "y"], epsilon=1.0, delta=1e-6, domain=domain, random_state=AllEmptyPass()
    )
    assert len(out) == 5  # every empty cell of the 3 x 2 domain; ("a", 1) has 2 < threshold
    assert ("a", 1) not in set(zip(out["x"], out["y"], strict=True))
    assert out.attrs["sbh"]["delta"] == 0.0
    with pytest.raises(InputError, match="outside the public domain"):
        stability_histogram(
            data, ["x", "y"], epsilon=1.0, delta=1e-6, domain={"x": ["b"], "y": [1]}
        )


def test_missing_column_and_value_are_input_errors() -> None:
    with pytest.raises(InputError, match="missing column"):
        stability_histogram(pd.DataFrame({"a": [1]}), ["b"], epsilon=1.0, delta=1e-6)
    with pytest.raises(InputError, match="row 1"):
        stability_histogram(pd.DataFrame({"a": [1, None]}), ["a"], epsilon=1.0, delta=1e-6)


def test_empty_positions_match_enumeration() -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        size = int(rng.integers(1, 60))
        present = np.sort(rng.choice(size, int(rng.integers(0, size)), replace=False))
        empty = np.setdiff1d(np.arange(size), present)
        ranks = np.arange(empty.size)
        assert np.array_equal(empty_positions(present.astype(np.int64), ranks), empty)


# ----------------------------------------------------------------------------- Opal release
def test_default_split_and_delta_are_the_papers() -> None:
    rel = OpalMarginals(random_state=ZeroNoise()).fit(_trips())
    eps = [rel.calibrations_[t].epsilon for t in TABLES]
    assert eps == [1, 1, 1, 1, 2, 2]
    assert {rel.calibrations_[t].delta for t in TABLES} == {Fraction(1, 8_000_000)}
    manifest = rel.ledger_.to_dict(rel.parameters())
    group = manifest["composition"][0]
    assert group["type"] == "parallel" and group["epsilon"] == 8.0
    assert [b["epsilon"] for b in group["branches"]] == [8.0]  # partitions not listed
    assert manifest["spent"]["delta_exact"] == "3/4000000"


def test_zero_noise_release_is_the_thresholded_true_tables() -> None:
    trips = _trips(20_000)
    rel = OpalMarginals(random_state=ZeroNoise(), bin=60).fit(trips)
    truth = marginal_tables(trips, bin_minutes=60)
    suppressed = 0
    for name in TABLES:
        t = rel.calibrations_[name].threshold
        expected = truth[name][truth[name]["count"] >= t].reset_index(drop=True)
        assert len(expected) > 0
        suppressed += len(truth[name]) - len(expected)
        pd.testing.assert_frame_equal(rel.tables_[name], expected)
        assert set(rel.tables_[name]["day"]) <= {"2016-07-25", "2016-07-26", "2016-07-27"}
    assert suppressed > 0


def test_taps_and_trips_give_the_same_tables() -> None:
    trips = _trips()
    taps = pd.concat(
        [
            trips.rename(columns={"on_time": "time", "on_stop": "stop_id"})[
                ["card_id", "mode", "time", "stop_id"]
            ].assign(tap="on"),
            trips.rename(columns={"off_time": "time", "off_stop": "stop_id"})[
                ["card_id", "mode", "time", "stop_id"]
            ].assign(tap="OFF"),
        ],
        ignore_index=True,
    )
    a = OpalMarginals(random_state=ZeroNoise(), bin=30).fit(trips)
    b = OpalMarginals(random_state=ZeroNoise(), bin=30).fit(taps)
    for name in TABLES:
        pd.testing.assert_frame_equal(a.tables_[name], b.tables_[name])
    assert a.ledger_.unit == "trip" and b.ledger_.unit == "tap"


def test_consistent_one_way_tables_are_sums_of_two_way() -> None:
    rel = OpalMarginals(random_state=7, mode="consistent", bin=60).fit(_trips(6000))
    assert set(rel.calibrations_) == {"on_time_location", "off_time_location"}
    assert rel.calibrations_["on_time_location"].epsilon == 4  # 1 + 1 + 2: no extra budget
    assert rel.ledger_.spent_epsilon == 8.0
    for side in ("on", "off"):
        two = rel.tables_[f"{side}_time_location"]
        for dims in (["mode", "day", "time"], ["mode", "day", "location"]):
            name = f"{side}_{dims[-1]}"
            expected = two.groupby(dims, as_index=False, sort=True)["count"].sum()
            pd.testing.assert_frame_equal(rel.tables_[name], expected)


def test_pure_mode_needs_public_domain_and_can_emit_any_cell() -> None:
    with pytest.raises(ConfigError, match="taxonomy, modes, days"):
        OpalMarginals(mode="pure").fit(_trips())
    rel = OpalMarginals(
        mode="pure",
        random_state=AllEmptyPass(),
        bin=720,
        taxonomy=_taxonomy(),
        level=1,
        modes=["bus", "ferry", "tram"],
        days=["2016-07-25"],
    ).fit(_trips())
    # domain: 3 modes x 1 day x 2 bins x 3 zones (zone0, zone1, unused) = 18 cells
    assert len(rel.tables_["on_time_location"]) == 18
    assert set(rel.tables_["on_location"]["location"]) == {"zone0", "zone1", "unused"}
    assert "tram" in set(rel.tables_["on_time"]["mode"])
    assert rel.ledger_.spent_delta == 0.0
    assert len(rel.ledger_.to_dict()["composition"][0]["branches"]) == 3
    assert set(rel.tables_["on_time"]["day"]) == {"2016-07-25"}  # 07-26 is outside the public days


def test_card_unit_release_bounds_each_card() -> None:
    trips = _trips(2000)
    trips["card_id"] = "one card"
    rel = OpalMarginals(
        random_state=ShiftNoise(1000), privacy_unit="card_id", max_contributions=3
    ).fit(trips)
    # one card: at most 3 events per side survive bounding, over all (mode, day) partitions
    # together (a card may appear in several partitions, so they do not compose in parallel)
    for name in TABLES:
        table = rel.tables_[name]
        assert (table["count"] - 1000).sum() == 3
    assert rel.calibrations_["on_time"].l1 == 3
    assert "at most 3" in rel.ledger_.neighbouring
    composition = rel.ledger_.to_dict()["composition"]
    assert [item["label"] for item in composition] == list(TABLES)  # sequential, no parallel group
    assert rel.ledger_.spent_epsilon == 8.0


def test_card_in_two_partitions_is_bounded_across_them() -> None:
    trips = _trips(200)
    trips["card_id"] = "one card"
    assert trips.groupby(["mode"]).ngroups > 1
    rel = OpalMarginals(
        random_state=ShiftNoise(1000), privacy_unit="card_id", max_contributions=1
    ).fit(trips)
    for name in TABLES:
        assert (rel.tables_[name]["count"] - 1000).sum() == 1


def test_taxonomy_level_collapses_locations() -> None:
    rel = OpalMarginals(random_state=ShiftNoise(100), taxonomy=_taxonomy(), level=1).fit(_trips())
    assert set(rel.tables_["on_location"]["location"]) == {"zone0", "zone1"}
    with pytest.raises(InputError, match="not a leaf"):
        OpalMarginals(taxonomy=_taxonomy()).fit(_trips().assign(on_stop="nowhere"))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"bin": 7},
        {"mode": "other"},
        {"split": (1, 1, 1)},
        {"epsilon": -1.0},
        {"level": 1},
    ],
)
def test_bad_release_parameters(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        OpalMarginals(**kwargs).fit(_trips(50))


def test_bad_input_rows_are_named() -> None:
    trips = _trips(20)
    trips["on_time"] = trips["on_time"].astype(str)
    trips.loc[4, "on_time"] = "yesterday"
    with pytest.raises(InputError, match=r"column 'on_time', row 4"):
        OpalMarginals().fit(trips)
    with pytest.raises(InputError, match="expected trips"):
        OpalMarginals().fit(pd.DataFrame({"foo": [1]}))


def test_save_writes_tables_and_manifest(tmp_path: Path) -> None:
    rel = OpalMarginals(random_state=ZeroNoise()).fit(_trips())
    out = rel.write(tmp_path / "rel", format="parquet").path
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{t}.parquet" for t in TABLES] + ["README.md", "datasheet.json", "manifest.json", MARKER]
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parameters"]["tables"]["on_time"]["error_bound"] > 0
    assert manifest["privacy_unit"] == "trip"


def test_sube_release_spends_epsilon_8_per_partition(shared_data: Path) -> None:
    folder = shared_data / "sube-buenos-aires"
    frames = []
    for name in ("martes_trx.csv", "miercoles_trx.csv"):
        raw = pd.read_csv(folder / name, dtype={"id_tarjeta": str, "id_linea": str})
        day = pd.to_datetime(raw["fecha"], format="%d/%m/%Y")
        frames.append(
            pd.DataFrame(
                {
                    "card_id": raw["id_tarjeta"],
                    "mode": raw["modo"],
                    "time": day + pd.to_timedelta(raw["hora"], unit="h"),
                    "stop_id": raw["id_linea"],  # lines as locations
                    "tap": np.where(raw["tipo_trx_tren"] == "CHECK OUT", "off", "on"),
                }
            )
        )
    taps = pd.concat(frames, ignore_index=True)
    rel = OpalMarginals(bin=60, modes=["COL", "SUB", "TRE"], days=["2019-11-27", "2019-11-28"]).fit(
        taps
    )
    group = rel.ledger_.to_dict()["composition"][0]
    assert len(group["branches"]) == 6
    assert {b["epsilon"] for b in group["branches"]} == {8.0}
    assert rel.ledger_.spent_epsilon == 8.0
    on = rel.tables_["on_time"]
    assert len(on) > 0 and set(on["mode"]) <= {"COL", "SUB", "TRE"}
    assert len(rel.tables_["off_time"]) > 0  # rail CHECK OUT taps


def test_opal_config_reproduces_the_paper_defaults() -> None:
    from synth.config import load_config

    path = Path(__file__).resolve().parents[2] / "configs" / "opal.toml"
    params = OpalMarginals.parameter_table.check_config(
        load_config(path)["marginals"]["parameters"],
        source=path,
        section="marginals.parameters",
    )
    rel = OpalMarginals(**params, random_state=ZeroNoise()).fit(_trips(200))
    assert [rel.calibrations_[t].epsilon for t in TABLES] == [1, 1, 1, 1, 2, 2]
    assert {rel.calibrations_[t].delta for t in TABLES} == {Fraction(1, 8_000_000)}


def test_card_bounding_ignores_events_outside_the_public_partitions() -> None:
    trips = _trips(40).assign(card_id="c", mode="bus")
    trips["on_time"] = pd.Timestamp("2016-07-25 08:00") + pd.to_timedelta(
        np.arange(40) * 30, unit="min"
    )
    trips["off_time"] = trips["on_time"] + pd.Timedelta(minutes=10)
    # the card's first 32 taps are on 07-25 (not public): the 07-26 partition still keeps k
    rel = OpalMarginals(
        random_state=ShiftNoise(1000),
        privacy_unit="card_id",
        max_contributions=2,
        modes=["bus"],
        days=["2016-07-26"],
    ).fit(trips)
    assert rel.tables_["on_location"]["count"].sum() - 1000 * len(rel.tables_["on_location"]) == 2


def test_many_public_partitions_each_get_a_ledger_branch() -> None:
    days = [str(d.date()) for d in pd.date_range("2016-07-01", periods=60)]
    rel = OpalMarginals(random_state=ZeroNoise(), modes=["bus", "ferry"], days=days).fit(_trips())
    group = rel.ledger_.to_dict()["composition"][0]
    assert len(group["branches"]) == 120
    assert {len(b["items"]) for b in group["branches"]} == {6}
    assert group["epsilon"] == 8.0 and len(rel.partitions_) == 120
    assert rel.ledger_.spent_epsilon == 8.0


@pytest.mark.parametrize("epsilon", [2.0, 0.01, 1e-6])
def test_card_threshold_is_the_least_meeting_delta_at_any_scale(epsilon: float) -> None:
    cal = calibrate(epsilon, 1 / 8e6, privacy_unit="card_id", max_contributions=3)
    assert threshold_delta(cal.scale, cal.threshold, 3) <= 1 / 8e6
    assert threshold_delta(cal.scale, cal.threshold - 1, 3) > 1 / 8e6


def test_the_old_name_opal_release_warns_until_0_3_0() -> None:
    """``OpalRelease`` (renamed ``OpalMarginals`` after its manifest name, issue 27) is still
    the same class under its old name, from ``synth.marginals`` and ``synth``, with a
    deprecation warning naming the new name and the removal release at each use."""
    import synth
    import synth.marginals

    message = r"OpalRelease is renamed OpalMarginals.*removed in transit-synth 0\.3\.0"
    with pytest.warns(RenamedClassWarning, match=message):
        assert synth.marginals.OpalRelease is OpalMarginals
    with pytest.warns(DeprecationWarning, match=message):
        from synth.marginals import OpalRelease
    assert OpalRelease is OpalMarginals
    with pytest.warns(RenamedClassWarning, match=message):
        assert synth.OpalRelease is OpalMarginals
    with pytest.warns(RenamedClassWarning):  # not cached: every use warns
        assert synth.OpalRelease is OpalMarginals
    assert "OpalRelease" not in synth.__all__ and "OpalRelease" not in synth.marginals.__all__
    with pytest.raises(AttributeError, match="OpalReleases"):
        synth.marginals.OpalReleases  # noqa: B018
