"""synth.records: loading, validation messages, sequence building, bounding and encoding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.errors import ConfigError, InputError
from synth.io import write_table
from synth.records import (
    UnknownLocationWarning,
    bound_trips,
    check_counts,
    encode_sequences,
    load_sequences,
    load_taps,
    load_trips,
    sequences_from_taps,
    truncate_sequences,
)
from synth.taxonomy import Taxonomy

TAPS = """card_id,time,stop_id,tap
c2,2020-01-01T08:00:00,s1,on
c1,2020-01-01T09:00:00,s2,on
c1,2020-01-01T07:30:00,s1,on
c2,2020-01-01T08:00:00,s3,on
c1,2020-01-02T10:00:00,s3,off
c1,2020-01-02T11:00:00,s4,on
"""


@pytest.fixture
def taps_csv(tmp_path: Path) -> Path:
    path = tmp_path / "taps.csv"
    path.write_text(TAPS)
    return path


@pytest.fixture
def tax() -> Taxonomy:
    return Taxonomy.from_edges(
        [("s1", "L1"), ("s2", "L1"), ("s3", "L2"), ("s4", "L2"), ("L1", "root"), ("L2", "root")]
    )


def _as_lists(seqs: pd.DataFrame) -> dict[str, list[str]]:
    return {k: g["location"].tolist() for k, g in seqs.groupby("seq_id", sort=True)}


def test_sequences_from_taps(taps_csv: Path) -> None:
    taps = load_taps(taps_csv)
    assert taps["time"].dtype.kind == "M" and taps["tap"].tolist()[4] == "off"
    seqs = sequences_from_taps(taps)
    assert list(seqs.columns) == ["seq_id", "pos", "location", "time"]
    # c1 ordered by time; the off tap dropped; c2's equal times keep input row order
    assert _as_lists(seqs) == {"c1": ["s1", "s2", "s4"], "c2": ["s1", "s3"]}
    assert seqs["pos"].tolist() == [0, 1, 2, 0, 1]
    assert seqs["seq_id"].tolist() == sorted(seqs["seq_id"].tolist())
    with_offs = sequences_from_taps(taps, boardings_only=False)
    assert _as_lists(with_offs)["c1"] == ["s1", "s2", "s3", "s4"]
    per_day = sequences_from_taps(taps, per_day=True)
    assert _as_lists(per_day) == {
        "c1|2020-01-01": ["s1", "s2"],
        "c1|2020-01-02": ["s4"],
        "c2|2020-01-01": ["s1", "s3"],
    }


def test_load_sequences_from_taps_file(taps_csv: Path, tmp_path: Path) -> None:
    seqs = load_sequences(taps_csv)
    assert _as_lists(seqs) == {"c1": ["s1", "s2", "s4"], "c2": ["s1", "s3"]}
    pq = tmp_path / "taps.parquet"
    write_table(pd.read_csv(taps_csv), pq)
    assert load_sequences(pq).drop(columns="time").equals(seqs.drop(columns="time"))


def test_sorted_by_string_seq_id_per_day() -> None:
    # 'A|...' vs 'AB|...': string order of seq_id, not card order, decides the row order
    taps = pd.DataFrame(
        {
            "card_id": ["A", "AB", "A"],
            "time": pd.to_datetime(["2020-01-01 10:00", "2020-01-01 09:00", "2020-01-02 08:00"]),
            "stop_id": ["x", "y", "z"],
        }
    )
    seqs = sequences_from_taps(taps, per_day=True)
    assert seqs["seq_id"].tolist() == sorted(seqs["seq_id"].tolist())


def test_stable_tie_break_large() -> None:
    rng = np.random.default_rng(1)
    n = 20_000
    taps = pd.DataFrame(
        {
            "card_id": rng.integers(0, 500, n).astype(str),
            "time": pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 5, n), unit="h"),
            "stop_id": np.arange(n).astype(str),
        }
    )
    seqs = sequences_from_taps(taps)
    expected = taps.assign(row=np.arange(n)).sort_values(["card_id", "time", "row"])
    assert seqs["location"].tolist() == expected["stop_id"].tolist()
    starts = seqs["pos"].to_numpy() == 0
    assert starts.sum() == taps["card_id"].nunique()


def test_sube_style_columns(tmp_path: Path) -> None:
    path = tmp_path / "sube.csv"
    path.write_text(
        "id,id_tarjeta,modo,id_linea,id_ramal,tipo_trx_tren,hora,fecha\n"
        "1,37031563.0,SUB,32,32,,11,27/11/2019\n"
        "2,37031563.0,TRE,16,283,CHECK IN,9,27/11/2019\n"
        "3,37031563.0,TRE,16,283,CHECK OUT,10,27/11/2019\n"
        "4,5.0,COL,77,77,,5,27/11/2019\n"
    )
    taps = load_taps(path, location_column="id_ramal")
    assert taps["card_id"].tolist()[0] == "37031563"
    assert taps["time"].tolist()[1] == pd.Timestamp("2019-11-27 09:00")
    assert taps["tap"].tolist() == ["on", "on", "off", "on"]
    seqs = load_sequences(path, location_column="id_linea")
    assert _as_lists(seqs) == {"37031563": ["16", "32"], "5": ["77"]}


def test_date_hour_minute_columns(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("card,day,h,m,stop_id\na,2020-03-01,8,5,x\na,2020-03-01,8,4,y\n")
    taps = load_taps(
        path, card_column="card", date_column="day", hour_column="h", minute_column="m"
    )
    assert taps["time"].tolist() == [
        pd.Timestamp("2020-03-01 08:05"),
        pd.Timestamp("2020-03-01 08:04"),
    ]
    seqs = load_sequences(
        path, card_column="card", date_column="day", hour_column="h", minute_column="m"
    )
    assert seqs["location"].tolist() == ["y", "x"]
    with pytest.raises(ConfigError, match="unknown option"):
        load_sequences(path, hour="h")


@pytest.mark.parametrize(
    ("text", "kwargs", "pattern"),
    [
        ("card_id,stop_id\na,x\n", {}, r"t\.csv: no time"),
        ("card_id,time\na,2020-01-01\n", {}, r"t\.csv: missing column\(s\) 'stop_id'"),
        ("time,stop_id\n2020-01-01,x\n", {}, r"missing column\(s\) 'card_id'"),
        ("card_id,time,stop_id\n", {}, r"t\.csv: no rows \(empty input\)"),
        (
            "card_id,time,stop_id\na,2020-01-01,x\nb,yesterday,y\n",
            {},
            r"t\.csv: column 'time', row 2: cannot parse 'yesterday'",
        ),
        ("card_id,time,stop_id\na,2020-01-01,x\nb,,y\n", {}, r"column 'time', row 2: empty time"),
        ("card_id,time,stop_id\na,2020-01-01,x\n,2020-01-01,y\n", {}, r"'card_id', row 2: empty"),
        (
            "card_id,fecha,hora,stop_id\na,27/11/2019,7,x\na,27/11/2019,25,x\n",
            {},
            r"column 'hora', row 2: 25 is not an integer 0\.\.23",
        ),
        (
            "card_id,fecha,hora,stop_id\na,27/11/2019,7.5,x\n",
            {},
            r"column 'hora', row 1: 7\.5 is not an integer",
        ),
        (
            "card_id,fecha,hora,stop_id\na,27/11/2019,7,x\na,32/13/2019,7,x\n",
            {},
            r"column 'fecha', row 2: cannot parse '32/13/2019' as a date",
        ),
    ],
)
def test_tap_errors(tmp_path: Path, text: str, kwargs: dict[str, str], pattern: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=pattern):
        load_taps(path, **kwargs)  # type: ignore[arg-type]


def test_unknown_locations(taps_csv: Path, tax: Taxonomy, tmp_path: Path) -> None:
    small = Taxonomy.from_edges([("s1", "L1"), ("s2", "L1"), ("L1", "root")])
    with pytest.raises(
        InputError, match=r"taps\.csv: column 'stop_id', row 4: location 's3' is not in"
    ):
        load_sequences(taps_csv, taxonomy=small)
    with pytest.warns(UnknownLocationWarning, match="dropped 3 rows"):
        seqs = load_sequences(taps_csv, taxonomy=small, on_unknown="drop")
    assert seqs.attrs["dropped_unknown"] == 3
    assert _as_lists(seqs) == {"c1": ["s1", "s2"], "c2": ["s1"]}
    assert load_sequences(taps_csv, taxonomy=tax).attrs["dropped_unknown"] == 0
    with pytest.raises(ConfigError):
        load_sequences(taps_csv, taxonomy=tax, on_unknown="ignore")
    long = tmp_path / "long.csv"
    long.write_text("seq_id,pos,location\nq,0,s1\nq,1,s9\nq,2,s2\nr,0,s9\n")
    with pytest.warns(UnknownLocationWarning):
        out = load_sequences(long, taxonomy=small, on_unknown="drop")
    assert out["seq_id"].tolist() == ["q", "q"] and out["pos"].tolist() == [0, 1]
    assert out.attrs["dropped_unknown"] == 2


def test_long_format(tmp_path: Path) -> None:
    path = tmp_path / "seqs.csv"
    path.write_text("seq_id,pos,location,extra\nb,5,y,1\n007,1,z,1\nb,2,x,1\n007,0,w,1\n")
    seqs = load_sequences(path)
    assert list(seqs.columns) == ["seq_id", "pos", "location"]
    assert seqs["seq_id"].tolist() == ["007", "007", "b", "b"]  # ids stay strings
    assert seqs["location"].tolist() == ["w", "z", "x", "y"]
    assert seqs["pos"].tolist() == [0, 1, 0, 1]  # gaps closed in pos order
    alt = tmp_path / "alt.parquet"
    write_table(pd.read_csv(path, dtype={"seq_id": str}).rename(columns={"location": "st"}), alt)
    assert load_sequences(alt, location_column="st").equals(seqs)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("seq_id,pos,location\na,0,x\na,-1,y\n", r"column 'pos', row 2: -1 is not an integer >= 0"),
        ("seq_id,pos,location\na,0,x\na,1.5,y\n", r"column 'pos', row 2: 1\.5"),
        ("seq_id,pos,location\na,0,x\na,x,y\n", r"column 'pos', row 2"),
        ("seq_id,pos,location\na,0,x\nb,0,y\na,0,z\n", r"row 3: duplicate position 0 in .*'a'"),
        ("seq_id,pos,location\na,0,x\na,1,\n", r"column 'location', row 2: empty"),
        ("seq_id,pos,location\n", r"no rows"),
        ("seq_id,pos,loc\na,0,x\n", r"missing column\(s\) 'location'"),
    ],
)
def test_long_format_errors(tmp_path: Path, text: str, pattern: str) -> None:
    path = tmp_path / "s.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=pattern):
        load_sequences(path)


def test_truncate_and_encode() -> None:
    seqs = pd.DataFrame(
        {
            "seq_id": ["b", "b", "b", "a", "c", "c"],
            "pos": [0, 1, 2, 0, 0, 1],
            "location": ["y", "x", "z", "x", "z", "z"],
        }
    )
    t = truncate_sequences(seqs, 2)
    assert t["pos"].max() == 1 and len(t) == 5
    m = encode_sequences(seqs, ["x", "y", "z"])
    assert m.dtype == np.int32
    assert m.tolist() == [[0, -1, -1], [1, 0, 2], [2, 2, -1]]
    assert encode_sequences(seqs, ["x", "y", "z"], height=2).tolist() == [
        [0, -1],
        [1, 0],
        [2, 2],
    ]
    assert encode_sequences(seqs, ["x", "y", "z"], height=4).shape == (3, 4)
    assert encode_sequences(seqs.iloc[:0], ["x"], height=3).shape == (0, 3)
    with pytest.raises(InputError, match="'z' is not in the location list"):
        encode_sequences(seqs, ["x", "y"])
    with pytest.raises(ConfigError):
        truncate_sequences(seqs, 0)
    with pytest.raises(ConfigError):
        encode_sequences(seqs, ["x", "x"])


def test_encode_matches_loop_on_random_data() -> None:
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 9, 300)
    ids = np.repeat(rng.permutation(300).astype(str), lengths)
    pos = np.concatenate([np.arange(k) for k in lengths])
    locs = [f"L{i}" for i in range(20)]
    codes = rng.integers(0, 20, ids.size)
    seqs = pd.DataFrame({"seq_id": ids, "pos": pos, "location": np.array(locs)[codes]})
    m = encode_sequences(seqs.sample(frac=1, random_state=3), locs, height=6)
    expected = np.full((300, 6), -1)
    order = sorted(set(ids))
    for sid, p, c in zip(ids, pos, codes, strict=True):
        if p < 6:
            expected[order.index(sid), p] = c
    assert (m == expected).all()


TRIPS = """card_id,on_time,mode,fare,count
a,2020-01-01T09:00:00,bus,1.5,1
a,2020-01-01T07:00:00,bus,1.5,2
b,2020-01-01T07:00:00,rail,3.0,1
a,2020-01-01T07:00:00,rail,3.0,0
a,2020-01-01T12:00:00,bus,1.5,1
"""


def test_trips(tmp_path: Path) -> None:
    path = tmp_path / "trips.csv"
    path.write_text(TRIPS)
    trips = load_trips(path)
    assert trips["on_time"].dtype.kind == "M"
    bounded = bound_trips(trips, 2)
    # card a: 07:00 (row 2), 07:00 (row 4, tie -> row order), then 09:00 and 12:00 dropped
    assert bounded["card_id"].tolist() == ["a", "b", "a"]
    assert bounded["mode"].tolist() == ["bus", "rail", "rail"]
    assert len(bound_trips(trips, 10)) == 5
    with pytest.raises(ConfigError):
        bound_trips(trips, 0)
    bad = tmp_path / "bad.csv"
    bad.write_text(TRIPS.replace("rail,3.0,0", "rail,3.0,-1"))
    with pytest.raises(InputError, match=r"bad\.csv: column 'count', row 4: -1 is not an integer"):
        load_trips(bad)
    frac = tmp_path / "frac.csv"
    frac.write_text(TRIPS.replace("bus,1.5,2", "bus,1.5,2.5"))
    with pytest.raises(InputError, match="column 'count', row 2"):
        load_trips(frac)
    with pytest.raises(InputError, match="column 'fare', row 1"):
        check_counts(trips.assign(fare=[1.5, 1, 1, 1, 1]), ["fare"], source="x")
    unix = load_trips(
        pd.DataFrame({"ts": [1400269500, 1362683700], "x": [1, 2]}),
        card_column=None,
        time_column="ts",
    )
    assert unix["on_time"].tolist()[1] == pd.Timestamp("2013-03-07 19:15:00")
    hourly = load_trips(
        pd.DataFrame({"card_id": [1, 2], "fecha": ["27/11/2019"] * 2, "hora": [7, 9]})
    )
    assert hourly["on_time"].tolist()[1] == pd.Timestamp("2019-11-27 09:00")
    with pytest.raises(InputError, match="no time: need a 'on_time' column"):
        load_trips(pd.DataFrame({"card_id": [1]}))


def test_real_sube(shared_data: Path) -> None:
    folder = shared_data / "sube-buenos-aires"
    tax = Taxonomy.from_sube_metadata(folder / "metadata_amba_2019_m1.csv")
    with pytest.raises(InputError, match=r"column 'id_ramal', row \d+: location '350'"):
        load_sequences(folder / "martes_trx.csv", taxonomy=tax, location_column="id_ramal")
    with pytest.warns(UnknownLocationWarning):
        seqs = load_sequences(
            folder / "martes_trx.csv", taxonomy=tax, location_column="id_ramal", on_unknown="drop"
        )
    assert seqs.attrs["dropped_unknown"] == 8
    assert seqs["seq_id"].nunique() == 9991  # 10,000 cards, some with only check-outs/unknowns
    assert set(seqs["location"]) <= set(tax.leaves())
    m = encode_sequences(seqs, tax.leaves(), height=8)
    assert m.shape == (9991, 8) and (m[:, 0] >= 0).all()


def _reference(df: pd.DataFrame) -> pd.DataFrame:
    """Long-format loading spelled out in pandas: stripped ids, sorted, positions renumbered."""
    out = pd.DataFrame(
        {
            "seq_id": df["seq_id"].astype(str).str.strip(),
            "pos": df["pos"].astype(np.int64),
            "location": df["location"].astype(str).str.strip(),
        }
    )
    out = out.sort_values(["seq_id", "pos"], kind="stable").reset_index(drop=True)
    out["pos"] = out.groupby("seq_id").cumcount().astype(np.int64)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_long_format_files_match_reference(tmp_path: Path, seed: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    n = 400
    ids = rng.choice(["a", " a", "b", "007", "7 ", "c", "zz", "10", "9"], n)
    locs = rng.choice(["x", "y ", "z", "Café", " x"], n)
    df = pd.DataFrame({"seq_id": ids, "pos": rng.permutation(n) * 3, "location": locs})
    if seed % 2:  # sorted input, positions already 0, 1, ...
        df = _reference(df)
    expected = _reference(df)
    frames = {"frame": load_sequences(df)}
    for kind in ("csv", "parquet", "dict"):
        path = tmp_path / f"s-{kind}.{'csv' if kind == 'csv' else 'parquet'}"
        if kind == "dict":  # categorical location, many row groups
            table = pa.Table.from_pandas(df.astype({"location": "category"}), preserve_index=False)
            pq.write_table(table, path, row_group_size=37)
        else:
            write_table(df, path)
        frames[kind] = load_sequences(path)
    for kind, got in frames.items():
        assert list(got.columns) == ["seq_id", "pos", "location"], kind
        assert got["pos"].dtype == np.int64 and got["seq_id"].dtype == expected["seq_id"].dtype
        categorical = kind != "frame"  # files: categorical location, sorted categories
        assert isinstance(got["location"].dtype, pd.CategoricalDtype) == categorical
        if categorical:
            assert list(got["location"].cat.categories) == sorted(set(expected["location"]))
        assert got.astype({"location": str}).equals(expected), kind
        locations = sorted(set(expected["location"]))
        assert (encode_sequences(got, locations) == encode_sequences(expected, locations)).all()


def test_long_format_file_errors_name_the_row(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = pd.DataFrame({"seq_id": ["a", "a", "b", "b"], "pos": [0, 1, 0, 1]})
    cases = {
        "location', row 3: empty value": df.assign(location=["x", "y", None, "x"]),
        "location', row 4: empty value": df.assign(location=["x", "y", "x", " "]),
        "seq_id', row 2: empty value": df.assign(seq_id=["a", None, "b", "b"], location="x"),
        "pos', row 4: duplicate position 0 in sequence 'b'": df.assign(
            pos=[0, 1, 0, 0], location="x"
        ),
        "pos', row 2: -1 is not an integer >= 0": df.assign(pos=[0, -1, 0, 1], location="x"),
    }
    for i, (message, frame) in enumerate(cases.items()):
        for categorical in (False, True):
            path = tmp_path / f"bad{i}{categorical}.parquet"
            if categorical:
                frame = frame.astype({"location": "category"})
            pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
            with pytest.raises(InputError, match=f"bad{i}{categorical}.parquet: column '{message}"):
                load_sequences(path)
    small = Taxonomy.from_edges([("x", "L"), ("L", "root")])
    path = tmp_path / "unknown.parquet"
    write_table(df.assign(location=["x", "q", "x", "x"]), path)
    with pytest.raises(InputError, match=r"row 2: location 'q' is not in the taxonomy"):
        load_sequences(path, taxonomy=small)
    with pytest.warns(UnknownLocationWarning, match="dropped 1 rows"):
        out = load_sequences(path, taxonomy=small, on_unknown="drop")
    assert out["pos"].tolist() == [0, 0, 1] and list(out["location"].cat.categories) == ["x"]
