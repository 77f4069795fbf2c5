"""The DuckDB engine's one-pass reading of files grouped by sequence (issue 9): the same counts as
the memory engine, and the SQL grouping whenever the file is not grouped in order."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prefixtree.synthesizer import PrefixTreeSynthesizer
from synth.datasets import montreal_taxonomy
from synth.engines.duckdb_engine import DuckDBEngine
from synth.engines.memory import MemoryEngine
from synth.errors import InputError
from synth.records import UnknownLocationWarning, encode_sequences, load_sequences
from synth.simulate import simulate_sequences, simulate_taps
from synth.taxonomy import Taxonomy

HEIGHT = 4


@pytest.fixture(scope="module")
def taxonomy() -> Taxonomy:
    return montreal_taxonomy()


@pytest.fixture(params=[7, 1 << 20], ids=["batch7", "batch1M"])
def batch_rows(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Tiny batches put run boundaries (and whole runs) across batches."""
    monkeypatch.setattr(DuckDBEngine, "_grouped_batch_rows", request.param)
    return int(request.param)


def _levels(counter: object) -> list[tuple[np.ndarray, np.ndarray]]:
    """Counts of every level, some cells dropped on the way (as the tree's thresholds do)."""
    levels, n_nodes = [], 1
    for level in range(HEIGHT):
        keys, n = counter.level_counts(level, n_nodes)  # type: ignore[attr-defined]
        levels.append((keys, n))
        node = np.arange(keys.size, dtype=np.int64)
        node[1::4] = -1
        counter.advance(level, keys, node)  # type: ignore[attr-defined]
        n_nodes = keys.size
    return levels


def _memory(
    path: Path, taxonomy: Taxonomy, time_bin: int | None, on_unknown: str
) -> tuple[int, list]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownLocationWarning)
        seqs = load_sequences(path, taxonomy=taxonomy, on_unknown=on_unknown)
    locations = sorted(taxonomy.leaves())
    codes = encode_sequences(seqs, locations, HEIGHT)
    times = None
    if time_bin is not None:
        synth = PrefixTreeSynthesizer(
            epsilon=1.0, height=HEIGHT, taxonomy=taxonomy, time_bin=time_bin
        )
        times = synth._time_matrix(seqs, len(codes), HEIGHT)
    n_bins = 1 if time_bin is None else -(-1440 // time_bin)
    counter = MemoryEngine().prefix_counter(codes, times, n_bins=n_bins, n_locations=len(locations))
    return counter.n_sequences, _levels(counter)


def _duckdb(
    path: Path, taxonomy: Taxonomy, time_bin: int | None, on_unknown: str
) -> tuple[str, int, list]:
    with DuckDBEngine() as engine:
        counter = engine.prefix_counter_from_file(
            path,
            locations=sorted(taxonomy.leaves()),
            height=HEIGHT,
            time_bin_minutes=time_bin,
            on_unknown=on_unknown,
        )
        assert counter is not None
        levels = _levels(counter)
        counter.close()
        return engine._read_path, counter.n_sequences, levels


def _same_counts(
    path: Path,
    taxonomy: Taxonomy,
    *,
    time_bin: int | None = None,
    on_unknown: str = "error",
) -> str:
    """Assert the DuckDB engine counts the file as the memory engine does; how it read it."""
    n_ref, ref = _memory(path, taxonomy, time_bin, on_unknown)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownLocationWarning)
        read_path, n_got, got = _duckdb(path, taxonomy, time_bin, on_unknown)
    assert n_got == n_ref
    assert ref[0][1].sum() == n_ref > 0
    for (k0, c0), (k1, c1) in zip(ref, got, strict=True):
        np.testing.assert_array_equal(k1, k0)
        np.testing.assert_array_equal(c1, c0)
    return read_path


def _padded(n: int, seed: int, *, with_time: bool = False) -> pd.DataFrame:
    """Simulated sequences with zero-padded ids (written by sequence, ids increasing)."""
    seqs = simulate_sequences(n, with_time=with_time, seed=seed)
    seqs["seq_id"] = seqs["seq_id"].astype(int).map("s{:05d}".format)
    return seqs.sort_values(["seq_id", "pos"], kind="stable").reset_index(drop=True)


def test_grouped_file_read_in_one_pass(tmp_path: Path, taxonomy: Taxonomy, batch_rows: int) -> None:
    path = tmp_path / "s.parquet"
    _padded(250, 1).to_parquet(path, index=False)
    assert _same_counts(path, taxonomy) == "grouped"


@pytest.mark.parametrize("fits", [True, False])
def test_wide_table_in_memory_only_when_it_fits(
    tmp_path: Path, taxonomy: Taxonomy, monkeypatch: pytest.MonkeyPatch, fits: bool
) -> None:
    """A wide table that may not fit in memory_limit is written to the database file."""
    if not fits:
        monkeypatch.setattr(DuckDBEngine, "memory_limit_bytes", lambda self: 1000.0)
    path = tmp_path / "s.parquet"
    _padded(200, 11).to_parquet(path, index=False)
    assert _same_counts(path, taxonomy) == "grouped"
    with DuckDBEngine() as engine:
        counter = engine.prefix_counter_from_file(
            path, locations=sorted(taxonomy.leaves()), height=HEIGHT, time_bin_minutes=None
        )
        assert counter is not None
        keys, _ = counter.level_counts(0, 1)
        counter.advance(0, keys, np.arange(keys.size))
        tables = dict(engine.sql("SELECT table_name, temporary FROM duckdb_tables()").fetchall())
        assert tables == {counter._base: fits, "_level_1": fits}
        counter.close()


def test_unpadded_numeric_ids_in_order(tmp_path: Path, taxonomy: Taxonomy) -> None:
    """Ids "9" then "10": increasing by length, then bytes (numbers written without padding)."""
    seqs = simulate_sequences(300, seed=4)
    assert seqs["seq_id"].iloc[-1] == "299"
    seqs.to_parquet(tmp_path / "s.parquet", index=False)
    assert _same_counts(tmp_path / "s.parquet", taxonomy) == "grouped"
    seqs.assign(seq_id=seqs["seq_id"].astype(np.int64)).to_parquet(tmp_path / "i.parquet")
    assert _same_counts(tmp_path / "i.parquet", taxonomy) == "grouped"


def test_shuffled_file_falls_back(tmp_path: Path, taxonomy: Taxonomy, batch_rows: int) -> None:
    seqs = _padded(400, 2)
    order = np.random.default_rng(0).permutation(len(seqs))
    seqs.iloc[order].to_parquet(tmp_path / "s.parquet", index=False)
    assert _same_counts(tmp_path / "s.parquet", taxonomy) == "hash"


def test_grouped_but_unordered_ids_fall_back(tmp_path: Path, taxonomy: Taxonomy) -> None:
    """Runs in decreasing id order: grouped, but not provably so; the SQL grouping reads it."""
    seqs = _padded(300, 3)
    seqs = seqs.sort_values(["seq_id", "pos"], ascending=[False, True]).reset_index(drop=True)
    seqs.to_parquet(tmp_path / "s.parquet", index=False)
    assert _same_counts(tmp_path / "s.parquet", taxonomy) == "hash"


@pytest.mark.parametrize("where", ["end", "next batch"])
def test_sequence_split_in_two_runs_falls_back(
    tmp_path: Path, taxonomy: Taxonomy, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sequence whose rows come in two runs is one sequence (as in memory), not two."""
    monkeypatch.setattr(DuckDBEngine, "_grouped_batch_rows", 64)
    seqs = _padded(300, 5)
    sid = seqs["seq_id"].iloc[0]
    first = seqs[seqs["seq_id"] == sid]
    assert len(first) >= 2
    tail = first.iloc[len(first) // 2 :]
    rest = seqs.drop(index=tail.index)
    at = len(rest) if where == "end" else 70
    moved = pd.concat([rest.iloc[:at], tail, rest.iloc[at:]], ignore_index=True)
    moved.to_parquet(tmp_path / "s.parquet", index=False)
    assert _same_counts(tmp_path / "s.parquet", taxonomy) == "hash"


def test_gaps_and_unknown_locations_dropped(
    tmp_path: Path, taxonomy: Taxonomy, batch_rows: int
) -> None:
    seqs = _padded(250, 6)
    seqs.loc[seqs.index % 7 == 3, "location"] = "Nowhere"
    seqs.loc[seqs["seq_id"] == "s00010", "location"] = "Elsewhere"  # a sequence with no kept row
    seqs = seqs[seqs.index % 11 != 5]  # gaps in pos
    path = tmp_path / "s.parquet"
    seqs.to_parquet(path, index=False)
    assert _same_counts(path, taxonomy, on_unknown="drop") == "grouped"
    # the same warning as the SQL grouping's, and the same error without on_unknown="drop"
    shuffled = tmp_path / "shuffled.parquet"
    seqs.sample(frac=1.0, random_state=0).to_parquet(shuffled, index=False)
    messages = []
    for source in (path, shuffled):
        with pytest.warns(UnknownLocationWarning) as record:
            _duckdb(source, taxonomy, None, "drop")
        messages.append(str(record[0].message).replace(str(source), "FILE"))
    assert messages[0] == messages[1]
    assert "2 distinct locations" in messages[0]
    with pytest.raises(InputError, match="location 'Elsewhere' is not in the taxonomy"):
        _duckdb(path, taxonomy, None, "error")


@pytest.mark.parametrize("time_bin", [60, 45])
def test_time_bins(tmp_path: Path, taxonomy: Taxonomy, batch_rows: int, time_bin: int) -> None:
    seqs = _padded(250, 7, with_time=True)
    earlier = seqs.index % 5 == 2  # times going back (bins are running maxima along a sequence)
    seqs.loc[earlier, "time"] -= pd.Timedelta(hours=5)
    path = tmp_path / "s.parquet"
    seqs.to_parquet(path, index=False)
    assert _same_counts(path, taxonomy, time_bin=time_bin) == "grouped"


def test_pos_out_of_order_falls_back(tmp_path: Path, taxonomy: Taxonomy) -> None:
    """Rows of a sequence not in pos order: the SQL grouping orders them."""
    seqs = _padded(300, 8)
    seqs = seqs.sort_values(["seq_id", "pos"], ascending=[True, False]).reset_index(drop=True)
    seqs.to_parquet(tmp_path / "s.parquet", index=False)
    assert _same_counts(tmp_path / "s.parquet", taxonomy) == "hash"


def test_taps_grouped_by_card(tmp_path: Path, taxonomy: Taxonomy, batch_rows: int) -> None:
    taps = simulate_taps(250, seed=3)
    taps["card_id"] = taps["card_id"].astype(int).map("c{:05d}".format)
    grouped = taps.sort_values(["card_id", "time"], kind="stable").reset_index(drop=True)
    grouped.to_parquet(tmp_path / "grouped.parquet", index=False)
    taps.to_parquet(tmp_path / "by_time.parquet", index=False)  # in time order
    assert _same_counts(tmp_path / "grouped.parquet", taxonomy, time_bin=60) == "grouped"
    assert _same_counts(tmp_path / "by_time.parquet", taxonomy, time_bin=60) == "hash"
    # check-outs are no step of a sequence
    grouped["tap"] = np.where(grouped.index % 3 == 1, " Off", "on")
    grouped.to_parquet(tmp_path / "tapped.parquet", index=False)
    assert _same_counts(tmp_path / "tapped.parquet", taxonomy) == "grouped"
    with DuckDBEngine() as engine:
        counter = engine.prefix_counter_from_file(
            tmp_path / "tapped.parquet",
            locations=sorted(taxonomy.leaves()),
            height=HEIGHT,
            time_bin_minutes=None,
        )
        assert counter is not None
        on = grouped[grouped["tap"] == "on"]
        assert counter.n_sequences == on["card_id"].nunique() < grouped["card_id"].nunique()
        counter.close()


def test_invalid_files_give_the_sql_path_errors(tmp_path: Path, taxonomy: Taxonomy) -> None:
    seqs = _padded(50, 9)
    cases = {
        "duplicate position": pd.concat([seqs.head(3), seqs.iloc[[2]], seqs.iloc[3:]]),
        "'seq_id': 1 empty value": seqs.assign(seq_id=seqs["seq_id"].mask(seqs.index == 4, "")),
        "'location': 1 empty value": seqs.assign(
            location=seqs["location"].mask(seqs.index == 7, "")
        ),
        "no rows": seqs.head(0),
    }
    for message, frame in cases.items():
        frame.to_parquet(tmp_path / "bad.parquet", index=False)
        with DuckDBEngine() as engine, pytest.raises(InputError, match=message):
            engine.prefix_counter_from_file(
                tmp_path / "bad.parquet",
                locations=sorted(taxonomy.leaves()),
                height=HEIGHT,
                time_bin_minutes=None,
            )
        assert engine._read_path == "hash"


def test_release_identical_to_memory_engine(tmp_path: Path, taxonomy: Taxonomy) -> None:
    """End to end with seeded noise: the engine, and how it reads, do not change the release."""
    path = tmp_path / "s.parquet"
    _padded(2000, 10, with_time=True).to_parquet(path, index=False)
    trees = []
    for engine in ("memory", "duckdb"):
        synth = PrefixTreeSynthesizer(
            preset="kdd12",
            epsilon=2.0,
            height=HEIGHT,
            taxonomy=taxonomy,
            time_bin=60,
            random_state=3,
            engine=engine,
        )
        trees.append(synth.fit(path).tree_)
    assert len(trees[0]) > 20
    pd.testing.assert_frame_equal(trees[0], trees[1])
