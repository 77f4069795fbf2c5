"""synth.io: table round trips, atomic writes, staged release directories, fingerprints."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from synth.errors import ConfigError, InputError
from synth.io import (
    atomic_path,
    fingerprint,
    id_strings,
    read_arrow,
    read_table,
    table_columns,
    write_table,
)
from synth.outdir import release_dir


@pytest.fixture
def frame() -> pd.DataFrame:
    return pd.DataFrame({"seq_id": ["007", "008"], "pos": [0, 1], "x": [1.5, 2.0]})


@pytest.mark.parametrize("name", ["t.csv", "t.parquet", "t.csv.gz", "T.PARQUET"])
def test_round_trip(tmp_path: Path, frame: pd.DataFrame, name: str) -> None:
    path = write_table(frame, tmp_path / name)
    back = read_table(path, dtype={"seq_id": str})
    assert back["seq_id"].tolist() == ["007", "008"]
    assert back["pos"].tolist() == [0, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_read_columns_subset(tmp_path: Path, frame: pd.DataFrame) -> None:
    for name in ("a.csv", "a.parquet"):
        write_table(frame, tmp_path / name)
        assert list(read_table(tmp_path / name, columns=["pos", "absent"]).columns) == ["pos"]


def test_read_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        read_table(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="unsupported file type"):
        read_table(tmp_path / "data.xlsx")
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(InputError, match=r"bad\.csv: cannot read CSV"):
        read_table(bad)
    corrupt = tmp_path / "bad.parquet"
    corrupt.write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match="cannot read PARQUET"):
        read_table(corrupt)


def test_read_arrow(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text(" seq_id ,pos,location\n007,0,x\n008,1,y\n")
    assert table_columns(csv) == ["seq_id", "pos", "location"]
    table = read_arrow(csv, ["seq_id", "location", "absent"], strings=["seq_id"])
    assert table.column_names == ["seq_id", "location"]
    assert table.column("seq_id").to_pylist() == ["007", "008"]  # text, not numbers
    pq = tmp_path / "t.parquet"
    write_table(pd.DataFrame({"seq_id": ["a", "b"], "pos": [0, 1], "location": ["x", "x"]}), pq)
    table = read_arrow(pq, ["location", "pos"], dictionary=["location"])
    assert table.column_names == ["location", "pos"]
    assert str(table.column("location").type).startswith("dictionary")
    assert table.column("location").to_pylist() == ["x", "x"]
    for call in (table_columns, lambda p: read_arrow(p, ["a"])):
        with pytest.raises(InputError, match="file not found"):
            call(tmp_path / "missing.parquet")
        with pytest.raises(InputError, match="unsupported file type"):
            call(tmp_path / "data.xlsx")
    corrupt = tmp_path / "bad.parquet"
    corrupt.write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match="cannot read PARQUET"):
        read_arrow(corrupt, ["a"])


def test_write_unknown_extension(tmp_path: Path, frame: pd.DataFrame) -> None:
    with pytest.raises(ConfigError):
        write_table(frame, tmp_path / "x.json")


def test_atomic_path_success_and_failure(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.txt"
    with atomic_path(target) as tmp:
        assert tmp.parent == target.parent and tmp.suffix == ".txt"
        tmp.write_text("new")
        assert not target.exists()
    assert target.read_text() == "new"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert target.read_text() == "new"
    assert [p.name for p in target.parent.iterdir()] == ["out.txt"]


def test_atomic_path_interrupt_and_nothing_written(tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    with pytest.raises(KeyboardInterrupt), atomic_path(target) as tmp:
        tmp.write_text("partial")
        raise KeyboardInterrupt
    with pytest.raises(FileNotFoundError), atomic_path(target):
        pass
    with pytest.raises(ValueError), atomic_path(tmp_path / "new" / "dirs" / "x.csv") as tmp:
        tmp.write_text("partial")
        raise ValueError
    assert list(tmp_path.iterdir()) == []  # no temp file, no directory created for nothing


def test_write_table_failure_keeps_old_file(tmp_path: Path, frame: pd.DataFrame) -> None:
    target = write_table(frame, tmp_path / "t.parquet")
    before = target.read_bytes()
    bad = pd.DataFrame({"a": [object()]})  # pyarrow cannot serialise a bare object
    with pytest.raises(Exception):  # noqa: B017 - any writer error
        write_table(bad, target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


def test_release_dir_new(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "release"
    with release_dir(out) as stage:
        (stage / "manifest.json").write_text("{}")
        (stage / "data").mkdir()
        (stage / "data" / "x.csv").write_text("a\n1\n")
        assert not out.exists()
    assert (out / "manifest.json").read_text() == "{}"
    assert (out / "data" / "x.csv").exists()
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir()) == ["release"]


def test_release_dir_error_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "release"
    with pytest.raises(ValueError), release_dir(out) as stage:
        (stage / "sequences.csv").write_text("half")
        raise ValueError("user error")
    assert not out.exists()
    assert not (tmp_path / "deep").exists()
    assert list(tmp_path.iterdir()) == []


def test_release_dir_error_keeps_existing(tmp_path: Path) -> None:
    """Issue 16: a previous release is replaced whole; a folder with the user's files is refused
    unless ``force``, which keeps them (the old merge-file-by-file rule is gone)."""
    out = tmp_path / "release"
    with release_dir(out) as stage:  # a genuine earlier output (issue 26: proven by its marker)
        (stage / "manifest.json").write_text('{"old": 1}')
    (out / "keep.txt").write_text("mine")
    with pytest.raises(KeyboardInterrupt), release_dir(out, force=True) as stage:
        (stage / "manifest.json").write_text("new")
        raise KeyboardInterrupt
    assert (out / "manifest.json").read_text() == '{"old": 1}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["release"]
    with pytest.raises(ConfigError, match=r"keep\.txt"), release_dir(out):
        pass
    with release_dir(out, force=True) as stage:
        (stage / "manifest.json").write_text("new")
    assert (out / "manifest.json").read_text() == "new"
    assert (out / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["release"]


def test_release_dir_on_a_file(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(ConfigError), release_dir(f):
        pass


def test_fingerprint(tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("1")
    b.write_text("2")
    fa = fingerprint(a)
    assert fa.startswith("sha256:") and len(fa) == 7 + 64
    assert fingerprint([a]) == fa == fingerprint(str(a))
    assert fingerprint([a, b]) != fingerprint([b, a])
    b.write_text("1")
    assert fingerprint(b) == fa  # names do not matter, contents do
    b.write_text("3")
    assert fingerprint(b) != fa
    assert fingerprint(tmp_path) == fingerprint([a, b])
    with pytest.raises(InputError, match="not found"):
        fingerprint(tmp_path / "nope")


def test_id_strings() -> None:
    assert id_strings(pd.Series([32.0, None, 7.0])).tolist()[::2] == ["32", "7"]
    assert id_strings(pd.Series(["37031563.0", "1.0"])).tolist() == ["37031563", "1"]
    # per value: "1.0" loses its ".0" whatever the other values are
    assert id_strings(pd.Series(["1.0", "1.5"])).tolist() == ["1", "1.5"]
    assert id_strings(pd.Series([" a ", "007"])).tolist() == ["a", "007"]
    with pytest.raises(InputError, match=r"column 'id', row 1: 1\.5 is not an identifier"):
        id_strings(pd.Series([1.5, 2.0]))


def test_json_depth_and_read_json_limits(tmp_path: Path) -> None:
    # issue 26: deep JSON made the parser recurse past Python's limit (RecursionError)
    from synth.io import JSON_DEPTH_LIMIT, json_depth, read_json

    assert json_depth("") == 0 and json_depth("3") == 0 and json_depth("[]") == 1
    assert json_depth('{"a": [1, {"b": "[[[\\" {{"}], "c": "]]]"}') == 3  # strings do not count
    ok = tmp_path / "ok.json"
    ok.write_text("[" * JSON_DEPTH_LIMIT + "]" * JSON_DEPTH_LIMIT)
    assert isinstance(read_json(ok), list)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * (JSON_DEPTH_LIMIT + 1) + "]" * (JSON_DEPTH_LIMIT + 1))
    with pytest.raises(InputError, match=f"nested {JSON_DEPTH_LIMIT + 1} levels deep"):
        read_json(deep)
