"""Per-value record rules (README "Data formats"): each record is read on its own.

Every loader test builds a dataset D and its neighbour D' (one card added with an unusual value)
and checks that the records of D are read the same in D' (the column-wide rules this replaces
failed each of them). The engine tests feed the same edge values to the memory and DuckDB engines
(and Spark, slow) and ask for the same release or the same clean error.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from prefixtree.synthesizer import PrefixTreeSynthesizer
from synth.errors import ConfigError, InputError
from synth.io import id_strings, read_table
from synth.marginals.opal import OpalMarginals, marginal_tables
from synth.records import load_sequences, load_taps, sequences_from_taps
from synth.taxonomy import Taxonomy
from synth.times import parse_times, times_of_day
from tests.conftest import ZeroNoise

LEAVES = ("1", "2", "3", "NA", "None", "z")


@pytest.fixture(scope="module")
def tax() -> Taxonomy:
    groups = {"1": "g1", "2": "g1", "3": "g2", "NA": "g2", "None": "g2", "z": "g2"}
    return Taxonomy.from_edges([*groups.items(), ("g1", "root"), ("g2", "root")])


def _csv(path: Path, rows: list[tuple[object, ...]], header: str) -> Path:
    lines = [header] + [",".join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def _without(seqs: pd.DataFrame, card: str) -> pd.DataFrame:
    """The loaded records of every card but ``card`` (what D' must read as D does)."""
    keep = seqs["seq_id"].astype(str) != card
    out = seqs[keep].reset_index(drop=True)
    out["location"] = out["location"].astype(str)
    return out


# --------------------------------------------------------------------------- ids
def test_dot_zero_locations_are_read_per_value(tmp_path: Path, tax: Taxonomy) -> None:
    """Old rule: '.0' was stripped only when every location looked like 'N.0': one added card
    at location '3' made every other location '1.0', '2.0' unknown."""
    rows = [("a", 0, "1.0"), ("a", 1, "2.0"), ("b", 0, "2.0")]
    d = _csv(tmp_path / "d.csv", rows, "seq_id,pos,location")
    d2 = _csv(tmp_path / "d2.csv", [*rows, ("new", 0, "3")], "seq_id,pos,location")
    one = load_sequences(d, taxonomy=tax)
    two = load_sequences(d2, taxonomy=tax)
    assert _without(one, "new")["location"].tolist() == ["1", "2", "2"]
    pd.testing.assert_frame_equal(_without(two, "new"), _without(one, "new"))


def test_dot_zero_card_ids_merge_whatever_the_other_cards(tmp_path: Path) -> None:
    """Old rule: '7.0' and '7.00' merged into card '7' only while every id was of that form."""
    header = "card_id,time,stop_id"
    rows = [("7.0", "2019-11-27T08:00:00", "1"), ("7.00", "2019-11-27T09:00:00", "2")]
    d = _csv(tmp_path / "d.csv", rows, header)
    d2 = _csv(tmp_path / "d2.csv", [*rows, ("x", "2019-11-27T10:00:00", "3")], header)
    one = load_sequences(d)
    two = load_sequences(d2)
    assert one["seq_id"].tolist() == ["7", "7"]
    pd.testing.assert_frame_equal(_without(two, "x"), _without(one, "x"))


def test_na_like_strings_are_ids(tmp_path: Path, tax: Taxonomy) -> None:
    """NA, None, null, nan are card ids and locations like any other text (old: missing, and one
    such card made the whole file fail)."""
    header = "card_id,time,stop_id"
    rows = [("5", "2019-11-27T08:00:00", "1")]
    d = _csv(tmp_path / "d.csv", rows, header)
    odd = [
        (c, "2019-11-27T09:00:00", s) for c, s in (("NA", "NA"), ("None", "None"), ("null", "1"))
    ]
    d2 = _csv(tmp_path / "d2.csv", [*rows, *odd, ("nan", "2019-11-27T09:00:00", "2")], header)
    one = load_taps(d, taxonomy=tax)
    two = load_taps(d2, taxonomy=tax)
    assert two["card_id"].tolist() == ["5", "NA", "None", "null", "nan"]
    assert two["stop_id"].tolist() == ["1", "NA", "None", "1", "2"]
    pd.testing.assert_frame_equal(two.iloc[:1], one)
    with pytest.raises(InputError, match=r"column 'card_id', row 2: empty value"):
        load_taps(_csv(tmp_path / "e.csv", [*rows, ("", "2019-11-27T09:00:00", "1")], header))


def test_id_strings_each_value_alone() -> None:
    assert id_strings(pd.Series([" 3.0 ", "3.5", "007", "-4.00", "\t12\n", "x.0"])).tolist() == [
        "3",
        "3.5",
        "007",
        "-4",
        "12",
        "x.0",
    ]
    # the same value reads the same next to any other value
    for other in ("3", "abc", "1.5", "2.0"):
        assert id_strings(pd.Series(["7.0", other])).iloc[0] == "7"


def test_float_ids_in_parquet(tmp_path: Path) -> None:
    """Integral floats are integers; a non-integral number is refused (InputError, exit 2)."""
    pd.DataFrame({"card_id": [7.0, np.nan], "x": [1, 2]}).to_parquet(tmp_path / "a.parquet")
    got = read_table(tmp_path / "a.parquet", dtype={"card_id": str})
    assert got["card_id"].iloc[0] == "7" and pd.isna(got["card_id"].iloc[1])
    pd.DataFrame({"card_id": [7.0, 7.5]}).to_parquet(tmp_path / "b.parquet")
    with pytest.raises(InputError, match=r"column 'card_id', row 2: 7\.5 is not an identifier"):
        read_table(tmp_path / "b.parquet", dtype={"card_id": str})


# --------------------------------------------------------------------------- times
def test_mixed_offsets_do_not_shift_other_cards(tmp_path: Path) -> None:
    """Old rule: one time with another UTC offset re-parsed every time in UTC (every card's
    time bins moved by the offset)."""
    header = "card_id,time,stop_id"
    rows = [("a", "2019-11-27T08:15:00+01:00", "1"), ("b", "2019-11-27T17:40:00+01:00", "2")]
    d = _csv(tmp_path / "d.csv", rows, header)
    d2 = _csv(tmp_path / "d2.csv", [*rows, ("c", "2019-11-27T08:00:00+05:00", "3")], header)
    one, two = load_taps(d), load_taps(d2)
    assert one["time"].dt.strftime("%H:%M").tolist() == ["08:15", "17:40"]  # as written
    pd.testing.assert_frame_equal(two.iloc[:2], one)
    assert two["time"].iloc[2] == pd.Timestamp("2019-11-27T08:00:00")


def test_timezone_option() -> None:
    values = pd.Series(["2019-11-27T08:15:00+01:00", "2019-11-27T08:15:00", "2019-11-27T07:15Z"])
    assert parse_times(values).dt.strftime("%H:%M").tolist() == ["08:15", "08:15", "07:15"]
    paris = parse_times(values, timezone="Europe/Paris")
    assert paris.dt.strftime("%H:%M").tolist() == ["08:15", "08:15", "08:15"]
    assert parse_times(pd.Series([0]), timezone="America/Montreal").iloc[0] == pd.Timestamp(
        "1969-12-31T19:00"
    )
    assert parse_times(pd.Series([0])).iloc[0] == pd.Timestamp("1970-01-01")  # UTC
    with pytest.raises(ConfigError, match="timezone"):
        parse_times(values, timezone="Mars/Olympus")


def test_dates_are_parsed_per_value(tmp_path: Path) -> None:
    """Old rule: the first format that parsed the whole column; one dd/mm/yyyy date made the ISO
    dates unreadable."""
    header = "id_tarjeta,fecha,hora,stop_id"
    rows = [("a", "2019-11-27", 8, "1"), ("b", "2019-11-28", 9, "2")]
    d = _csv(tmp_path / "d.csv", rows, header)
    d2 = _csv(tmp_path / "d2.csv", [*rows, ("c", "29/11/2019", 7, "3")], header)
    one, two = load_taps(d), load_taps(d2)
    pd.testing.assert_frame_equal(two.iloc[:2], one)
    assert two["time"].iloc[2] == pd.Timestamp("2019-11-29T07:00")


def test_clock_and_timestamps_each_read_alone() -> None:
    minute, day = times_of_day(pd.Series(["08:15", "2019-11-27T08:20:00+03:00", "25:10"]))
    assert minute.tolist() == [495, 500, 1510]
    assert day[1] == np.datetime64("2019-11-27", "D").astype(np.int64)


def test_long_format_time_mode_does_not_flip(tax: Taxonomy) -> None:
    """Old rule: one time in another format (a timestamp among clock times) switched the parse
    mode of the whole column (the release failed or every time moved)."""
    d = pd.DataFrame(
        {"seq_id": ["a", "a", "b"], "pos": [0, 1, 0], "location": ["1", "2", "3"]}
        | {"time": ["08:15", "09:40", "17:05"]}
    )
    extra = pd.DataFrame(
        {"seq_id": ["new"], "pos": [0], "location": ["z"], "time": ["2019-11-27T08:15:00+02:00"]}
    )

    def tree(seqs: pd.DataFrame) -> pd.DataFrame:
        synth = PrefixTreeSynthesizer(
            epsilon=2.0,
            height=2,
            taxonomy=tax,
            thresholds={tax.height: 1},
            time_bin=60,
            time_model="tree",
            random_state=ZeroNoise(),
        ).fit(seqs)
        t = synth.tree_
        t = t[(t["depth"] > 0) & (t["location"].astype(str) != "z")]
        cols = ["depth", "location", "time_bin", "noisy_count"]
        return t[cols].astype(str).sort_values(cols).reset_index(drop=True)

    ref = tree(d)
    assert len(ref) == 3
    pd.testing.assert_frame_equal(tree(pd.concat([d, extra], ignore_index=True)), ref)


def test_sbh_clock_times_read_per_value() -> None:
    """Old rule: the column was clock times only if every value was one."""
    d = pd.DataFrame({"on_time": ["08:15", "09:40"], "on_stop": ["1", "2"]})
    d2 = pd.concat(
        [d, pd.DataFrame({"on_time": ["2019-11-27T10:00:00-04:00"], "on_stop": ["3"]})],
        ignore_index=True,
    )
    one = marginal_tables(d, bin_minutes=60)
    two = marginal_tables(d2, bin_minutes=60)
    for name, table in one.items():
        got = two[name][two[name]["day"] == "all"].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, table, obj=name)
    assert (two["on_time"]["day"] == "2019-11-27").sum() == 1


# --------------------------------------------------------------------------- per_day unit
def test_per_day_sequences_are_card_days_in_the_manifest(tax: Taxonomy, tmp_path: Path) -> None:
    """Old: a card active on 10 days was 10 privacy units while the manifest said 'card'."""
    taps = pd.DataFrame(
        {
            "card_id": ["a", "a", "b"],
            "time": pd.to_datetime(["2019-11-27T08:00", "2019-11-28T08:00", "2019-11-27T09:00"]),
            "stop_id": ["1", "2", "3"],
        }
    )
    per_day = sequences_from_taps(taps, per_day=True)
    assert per_day.attrs["privacy_unit"] == "card-day"
    assert "privacy_unit" not in sequences_from_taps(taps).attrs
    synth = PrefixTreeSynthesizer(epsilon=1.0, height=2, taxonomy=tax, random_state=0)
    synth.fit(per_day)
    manifest = synth.manifest()
    assert manifest["privacy_unit"] == "card-day"
    assert "d times the epsilon" in manifest["neighbouring"]
    loaded = load_sequences(taps, per_day=True)  # through the loader too
    assert loaded.attrs["privacy_unit"] == "card-day"
    assert PrefixTreeSynthesizer(epsilon=1.0, height=2, taxonomy=tax, random_state=0).fit(
        sequences_from_taps(taps)
    ).ledger_.unit == ("card")


# --------------------------------------------------------------------------- engines
EDGE_ROWS = [  # seq_id, pos, location, time: padded ids, '.0' ids, NA-like ids, mixed times
    (" 7 ", 0, "1.0", "2019-11-27T08:15:00+01:00"),
    ("7.0", 1, " 2 ", "2019-11-27T09:15:00-05:00"),
    ("7", 2, "3", "2019-11-27 10:20Z"),
    ("NA", 0, "None", "08:15"),
    ("NA", 1, "NA", "2019-11-27T08:40:00"),
    ("null", 0, "1", "25:10"),
    ("nan", 0, "2.00", "2019-11-27T23:59:00+09:30"),
    ("-4.0", 0, "NA", " 07:05:10 "),
    ("-4.0", 3, "1", "2019-11-27T07:06:00.5+00:00"),
    ("12", 0, "3", "2019-11-27T12:00:00"),
]


def _edge_files(tmp_path: Path) -> list[Path]:
    frame = pd.DataFrame(EDGE_ROWS, columns=["seq_id", "pos", "location", "time"])
    csv = tmp_path / "edges.csv"
    frame.to_csv(csv, index=False)
    parquet = tmp_path / "edges.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), parquet)
    return [csv, parquet]


def _engine_tree(source: object, tax: Taxonomy, engine: str, time_bin: int | None) -> pd.DataFrame:
    synth = PrefixTreeSynthesizer(
        epsilon=2.0,
        height=3,
        taxonomy=tax,
        thresholds={tax.height: 1},
        time_bin=time_bin,
        random_state=ZeroNoise(),
        engine=engine,
        engine_options={"threads": 2} if engine == "spark" else None,
    )
    return synth.fit(source).tree_  # type: ignore[arg-type]


@pytest.mark.parametrize("time_bin", [None, 60])
def test_engines_read_edge_values_alike(
    tmp_path: Path, tax: Taxonomy, time_bin: int | None
) -> None:
    """Padded ids, '.0' ids, NA-like ids and locations, mixed offsets and clock times: the memory
    and DuckDB engines (CSV and Parquet read by DuckDB itself) give the same tree."""
    files = _edge_files(tmp_path)
    ref = _engine_tree(files[0], tax, "memory", time_bin)
    first = ref[ref["depth"] == 1]
    assert first["noisy_count"].sum() == 6  # 7, NA, null, nan, -4, 12
    for path in files:
        pd.testing.assert_frame_equal(_engine_tree(path, tax, "memory", time_bin), ref)
        pd.testing.assert_frame_equal(_engine_tree(path, tax, "duckdb", time_bin), ref)


def _bad_positions(tmp_path: Path) -> list[Path]:
    frame = pd.DataFrame({"seq_id": ["a", "a", "b"], "pos": [0, 1.5, 0], "location": "1"})
    frame.to_csv(tmp_path / "pos.csv", index=False)
    frame.to_parquet(tmp_path / "pos.parquet", index=False)
    return [tmp_path / "pos.csv", tmp_path / "pos.parquet"]


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_engines_refuse_non_integer_positions(tmp_path: Path, tax: Taxonomy, engine: str) -> None:
    """Old DuckDB: position 1.5 was rounded to 2 and the release went on."""
    for path in _bad_positions(tmp_path):
        with pytest.raises(InputError, match=r"column 'pos'.*(1\.5|not integers)"):
            _engine_tree(path, tax, engine, None)


def _edge_taps(tmp_path: Path) -> Path:
    """Taps whose cards, stops, taps and times need the per-value rules (each pattern 40 times,
    so that the cells pass the SBH threshold)."""
    rows = []
    for i in range(40):
        rows += [
            (f" {i} ", "2019-11-27T08:15:00+01:00", "1.0", "on"),
            (f"{i}.0", "2019-11-27T08:50:00-05:00", " 2 ", " OFF "),
            (f"{i}", "2019-11-27 09:20Z", "3", "on"),
            (f"x{i}", "2019-11-27T10:00:00", "NA", None),
            (f"x{i}", "2019-11-27T10:30:00+09:00", "None", "on"),
            (f"y{i}", "2019-11-27T11:00:00.5", "1", "out"),
            (f"{i + 100}.00", "1574852400", "2.00", "on"),
        ]
    rows += [("NA", "2019-11-27T12:00:00", "1", "on"), ("null", "2019-11-27T12:00:00", "3", "on")]
    taps = pd.DataFrame(rows, columns=["card_id", "time", "stop_id", "tap"])
    path = tmp_path / "taps.parquet"
    pq.write_table(pa.Table.from_pandas(taps, preserve_index=False), path)
    return path


@pytest.mark.parametrize("unit", [None, "card_id"])
def test_sbh_engines_read_edge_values_alike(tmp_path: Path, unit: str | None) -> None:
    """The DuckDB engine reads the taps file itself and gives the memory release."""
    path = _edge_taps(tmp_path)
    params = {"bin": 30, "privacy_unit": unit, "random_state": ZeroNoise()}
    if unit:  # by the rule DuckDB counts itself (a uniform choice is drawn in memory)
        params |= {"max_contributions": 2, "bounding": "earliest"}
    ref = OpalMarginals(**params).fit(path)  # type: ignore[arg-type]
    got = OpalMarginals(**params, engine="duckdb").fit(path)  # type: ignore[arg-type]
    assert set(ref.tables_["on_location"]["location"]) == {"1", "2", "3", "NA", "None"}
    for table, expected in ref.tables_.items():
        pd.testing.assert_frame_equal(got.tables_[table], expected, obj=table)


def test_timezone_reaches_the_releases(tmp_path: Path) -> None:
    """--timezone converts offsets in both generators' readers (engines read through them)."""
    path = _edge_taps(tmp_path)
    params = {"bin": 60, "random_state": ZeroNoise()}
    plain = OpalMarginals(**params).fit(path).tables_["on_time"]  # type: ignore[arg-type]
    utc = OpalMarginals(**params, timezone="UTC").fit(path).tables_["on_time"]  # type: ignore[arg-type]
    duck = OpalMarginals(**params, timezone="UTC", engine="duckdb").fit(path)  # type: ignore[arg-type]
    pd.testing.assert_frame_equal(duck.tables_["on_time"], utc)
    assert not plain.equals(utc)
    with pytest.raises(ConfigError, match="timezone"):
        OpalMarginals(timezone="Nowhere/Land").fit(path)


def test_duckdb_strips_padded_ids_as_memory_does(tmp_path: Path, tax: Taxonomy) -> None:
    """Old DuckDB: ' a ' and 'a' were two sequences and ' 1 ' an unknown location, while the
    memory engine stripped them."""
    frame = pd.DataFrame(
        {"seq_id": [" a ", "a", "b", "b "], "pos": [0, 1, 0, 1], "location": [" 1 ", "2", "3", "1"]}
    )
    for path in (tmp_path / "pad.csv", tmp_path / "pad.parquet"):
        frame.to_csv(path, index=False) if path.suffix == ".csv" else frame.to_parquet(path)
        ref = _engine_tree(path, tax, "memory", None)
        assert ref.loc[ref["depth"] == 1, "noisy_count"].sum() == 2
        pd.testing.assert_frame_equal(_engine_tree(path, tax, "duckdb", None), ref)


@pytest.mark.spark
@pytest.mark.slow  # a JVM start-up and a local Spark session: tens of seconds
@pytest.mark.usefixtures("spark_session")  # skipped without Java/PySpark; a failure in CI
@pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")
def test_spark_reads_edge_values_as_memory(tmp_path: Path, tax: Taxonomy) -> None:
    """Spark reads long-format files itself: the same tree, and 1.5 positions refused (old Spark
    truncated 1.5 to 1 and kept padded ids apart)."""
    for path in _edge_files(tmp_path):
        ref = _engine_tree(path, tax, "memory", None)
        pd.testing.assert_frame_equal(_engine_tree(path, tax, "spark", None), ref)
    for path in _bad_positions(tmp_path):
        with pytest.raises(InputError, match=r"column 'pos'"):
            _engine_tree(path, tax, "spark", None)


def test_timezone_flag_on_the_commands(tmp_path: Path, tax: Taxonomy) -> None:
    """``--timezone`` on ``sequences`` and ``marginals``: recorded in the manifest; a bad zone is
    one line and exit 2."""
    from synth.cli import main

    taps = _edge_taps(tmp_path)
    edges = tax.to_csv(tmp_path / "tax.csv")  # NA and None are node ids
    common = ["--seed", "1", "--quiet"]
    runs = {
        "m": ["marginals", str(taps), "--epsilon", "8", "--delta", "1e-6", "--bin", "60"],
        "s": ["sequences", str(taps), "--taxonomy", str(edges), "--epsilon", "1", "--height", "2"],
    }
    for name, argv in runs.items():
        assert main([*argv, "--out", str(tmp_path / name), "--timezone", "UTC", *common]) == 0
        manifest = json.loads((tmp_path / name / "manifest.json").read_text())
        assert manifest["parameters"]["timezone"] == "UTC"
        assert main([*argv, "--out", str(tmp_path / f"{name}2"), "--timezone", "Nowhere/X"]) == 2
        assert not (tmp_path / f"{name}2").exists()


def test_sbh_trips_csv_read_alike(tmp_path: Path) -> None:
    """Trips CSV read by DuckDB itself and by the loaders: mixed offsets, unix seconds, clock
    tap-off times, NA-like stops (ids) and NA tap-off times (missing: no tap-off)."""
    rows = []
    for i in range(40):
        rows += [
            (f"{i}", "2019-11-27T08:15:00+01:00", "1.0", "09:05", " 2 "),
            (f"{i}", "2019-11-27 08:40Z", "NA", "NA", "3"),
            (f"{i}", "1574845200", "None", "2019-11-27T10:10:00-03:00", "NA"),
            (f"{i}", "2019-11-27T11:00:00", "2", "", ""),
        ]
    frame = pd.DataFrame(rows, columns=["card_id", "on_time", "on_stop", "off_time", "off_stop"])
    path = tmp_path / "trips.csv"
    frame.to_csv(path, index=False)
    params = {"bin": 30, "random_state": ZeroNoise()}
    ref = OpalMarginals(**params).fit(path)  # type: ignore[arg-type]
    got = OpalMarginals(**params, engine="duckdb").fit(path)  # type: ignore[arg-type]
    assert set(ref.tables_["on_location"]["location"]) == {"1", "2", "NA", "None"}
    assert set(ref.tables_["off_location"]["location"]) == {"2", "NA"}
    assert set(ref.tables_["off_time"]["day"]) == {"all", "2019-11-27"}  # clock: no day
    for table, expected in ref.tables_.items():
        pd.testing.assert_frame_equal(got.tables_[table], expected, obj=table)
