"""Streamed prefix-tree release (issue 9): iter_sample chunks, write_release, the CLI path; fit
alone reads, validates and plans (issue 27)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import synth.io
import synth.records.mapping
import synth.times
from prefixtree import PrefixTreeSynthesizer
from prefixtree.output import write_sequences as write_release
from prefixtree.plan import TreePlanning
from prefixtree.release import release_sequences
from synth.cli import main
from synth.errors import ConfigError, UnderspendWarning
from synth.taxonomy import Taxonomy
from tests.conftest import CallLog


def _taxonomy() -> Taxonomy:
    edges = [(f"s{k}-{i}", f"line{k}") for k in range(4) for i in range(17)]
    return Taxonomy.from_edges(edges + [(f"line{k}", "root") for k in range(4)])


def _sequences(n: int = 800, seed: int = 0, with_time: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    locs = _taxonomy().leaves()[:4]
    rows = [
        (f"c{i}", k, str(loc))
        for i in range(n)
        for k, loc in enumerate(rng.choice(locs, size=rng.integers(1, 7)))
    ]
    out = pd.DataFrame(rows, columns=["seq_id", "pos", "location"])
    if with_time:
        minutes = np.sort(rng.integers(0, 900, len(out)))
        out["time"] = pd.to_datetime("2019-11-27 06:00") + pd.to_timedelta(minutes, unit="min")
    return out


@functools.cache
def _fitted(with_time: bool = False) -> PrefixTreeSynthesizer:
    return PrefixTreeSynthesizer(
        preset="kdd12",
        epsilon=8.0,
        height=5,
        taxonomy=_taxonomy(),
        time_bin=240 if with_time else None,
        random_state=4,
    ).fit(_sequences(with_time=with_time))


def _expanded(syn: PrefixTreeSynthesizer) -> list[tuple[str, ...]]:
    """Oracle: every node in ``tree_`` order, ``ending`` copies of its root-to-node path."""
    tree = syn.tree_
    steps = tree["location"].astype(str)
    if "time_bin" in tree.columns:
        steps = steps + "@" + tree["time_bin"].astype(str)
    parent, label = tree["parent"].to_numpy(), steps.to_numpy()
    out = []
    for v, n in enumerate(tree["ending"].to_numpy()):
        path, u = [], v
        while u >= 0:
            path.append(label[u])
            u = parent[u]
        out += [tuple(reversed(path))] * int(n)
    return out


@pytest.mark.parametrize("with_time", [False, True])
def test_sample_is_the_tree_expanded_in_node_order(with_time: bool) -> None:
    syn = _fitted(with_time)
    out = syn.sample()
    steps = out["location"].astype(str)
    if with_time:
        minutes = out["time"].astype(str).map(lambda t: int(t[:2]) * 60 + int(t[3:]))
        steps = steps + "@" + (minutes // syn.time_bin).astype(str)
    got = [tuple(g) for _, g in steps.groupby(out["seq_id"], sort=True)]
    assert got == _expanded(syn)
    assert (out["seq_id"].to_numpy() == np.repeat(np.arange(len(got)), [len(g) for g in got])).all()


@pytest.mark.parametrize("with_time", [False, True])
@pytest.mark.parametrize("chunk_rows", [1, 2, 5, 97, 10**9])
def test_chunks_concatenate_to_sample(with_time: bool, chunk_rows: int) -> None:
    syn = _fitted(with_time)
    whole = syn.sample()
    assert whole.groupby("seq_id").size().max() >= 2
    chunks = list(syn.iter_sample(chunk_rows=chunk_rows))
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), whole)
    for chunk in chunks:
        assert chunk["pos"].iloc[0] == 0  # whole sequences only
        n_seq = int((chunk["pos"] == 0).sum())
        assert len(chunk) <= chunk_rows or n_seq == 1
        assert list(chunk.dtypes) == list(whole.dtypes)
    if chunk_rows == 1:  # shorter than some sequences: one sequence per chunk
        assert len(chunks) == whole["seq_id"].nunique()


def test_empty_release_is_one_empty_chunk() -> None:
    syn = PrefixTreeSynthesizer(
        preset="kdd12", epsilon=0.01, height=2, taxonomy=_taxonomy(), random_state=3
    )
    syn.fit(_sequences(n=1))
    chunks = list(syn.iter_sample(chunk_rows=10))
    assert len(chunks) == 1 and chunks[0].empty
    assert list(chunks[0].columns) == ["seq_id", "pos", "location"]
    pd.testing.assert_frame_equal(syn.sample(), chunks[0])


def test_iter_sample_validation() -> None:
    syn = PrefixTreeSynthesizer(preset="kdd12", epsilon=1.0, height=2, taxonomy=_taxonomy())
    with pytest.raises(ConfigError, match="not fitted"):
        next(syn.iter_sample())
    syn = _fitted()
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ConfigError, match="chunk_rows"):
            next(syn.iter_sample(chunk_rows=bad))  # type: ignore[arg-type]


@pytest.mark.parametrize("with_time", [False, True])
def test_write_release_chunked_equals_one_shot(tmp_path: Path, with_time: bool) -> None:
    syn = _fitted(with_time)
    whole = syn.sample()
    for ext in ("csv", "parquet"):
        one, many = tmp_path / f"one.{ext}", tmp_path / f"many.{ext}"
        assert write_release(whole, one) == len(whole)
        assert write_release(syn.iter_sample(chunk_rows=7), many) == len(whole)
        if ext == "csv":
            assert one.read_bytes() == many.read_bytes()
            back = pd.read_csv(many)
            assert list(back.columns) == list(whole.columns)
            assert (back["location"] == whole["location"].astype(str)).all()
        else:
            assert pq.read_table(one).equals(pq.read_table(many))
            assert pq.ParquetFile(many).metadata.num_row_groups > 1


def test_write_release_needs_a_frame(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no frame"):
        write_release(iter([]), tmp_path / "x.csv")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_release_sequences_streams_the_same_release(tmp_path: Path, fmt: str) -> None:
    seqs = _sequences()
    tax = tmp_path / "tax.csv"
    _taxonomy().to_csv(tax)
    params = {"epsilon": 3.0, "height": 5}
    with pytest.warns(UnderspendWarning, match="stopped early: no node left to count"):
        summary = release_sequences(
            seqs, tmp_path / "out", taxonomy=str(tax), params=params, format=fmt, seed=4
        )
    expected = (
        PrefixTreeSynthesizer(**params, taxonomy=Taxonomy.from_spec(str(tax)), random_state=4)
        .fit(seqs)
        .sample()
    )
    write_release(expected, tmp_path / f"expected.{fmt}")
    got_file = tmp_path / "out" / f"sequences.{fmt}"
    if fmt == "csv":
        assert got_file.read_bytes() == (tmp_path / f"expected.{fmt}").read_bytes()
    else:
        assert pq.read_table(got_file).equals(pq.read_table(tmp_path / f"expected.{fmt}"))
    n_seq = expected["seq_id"].nunique()
    assert f"{n_seq} synthetic sequences ({len(expected)} rows)" in summary
    assert (tmp_path / "out" / "manifest.json").is_file()


def _watch(monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, bool, str]], name: str) -> None:
    """Record every call of the function ``name`` of :mod:`synth.times` / :mod:`synth.io`, under
    whatever module imported it: (name, inside ``fit``, first argument)."""
    original = getattr(synth.times, name, None) or getattr(synth.io, name)

    def watched(*args: Any, **kwargs: Any) -> Any:
        calls.append((name, _IN_FIT[0] > 0, str(args[0]) if args else ""))
        return original(*args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith(("synth", "prefixtree", "archetypes")):
            if getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, watched)


_IN_FIT = [0]


@pytest.mark.parametrize(
    "extra", [[], ["--engine", "memory"], ["--timezone", "America/Argentina/Buenos_Aires"]]
)
def test_fit_is_the_only_reader_and_planner(
    extra: list[str],
    forty_cards: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 27: ``transit-synth sequences`` (through :func:`release_sequences`) hands the input
    file to ``fit``, which alone validates, checks the time zone, plans the tree once and reads the
    data. The code before the issue planned in the driver (then reused the plan in ``fit``),
    checked the time zone there and, with ``--engine memory`` or ``--timezone``, loaded the
    file itself: the planner ran twice per release, first outside ``fit``."""
    calls: list[tuple[str, bool, str]] = []
    fit, prepare = PrefixTreeSynthesizer.fit, TreePlanning._prepare

    def counted_fit(self: PrefixTreeSynthesizer, *args: Any, **kwargs: Any) -> Any:
        _IN_FIT[0] += 1
        try:
            return fit(self, *args, **kwargs)
        finally:
            _IN_FIT[0] -= 1

    def counted_prepare(self: TreePlanning, *args: Any, **kwargs: Any) -> Any:
        calls.append(("plan", _IN_FIT[0] > 0, ""))
        return prepare(self, *args, **kwargs)

    monkeypatch.setattr(PrefixTreeSynthesizer, "fit", counted_fit)
    monkeypatch.setattr(TreePlanning, "_prepare", counted_prepare)
    for name in ("check_timezone", "read_table", "read_arrow"):
        _watch(monkeypatch, calls, name)
    taps = str(forty_cards["taps"])
    argv = ["sequences", taps, "--taxonomy", str(forty_cards["taxonomy"]), "--epsilon", "2"]
    argv += ["--height", "2", "--out", str(tmp_path / "out"), "--quiet", "--seed", "1", *extra]
    assert main(argv) == 0
    plans = [inside for what, inside, _ in calls if what == "plan"]
    assert plans == [True]  # planned exactly once, by fit
    outside = [(what, arg) for what, inside, arg in calls if not inside]
    assert not [what for what, _ in outside if what == "check_timezone"], outside
    assert taps not in {arg for _, arg in outside}, outside  # the input is read in fit only
    assert ("read_table", True, taps) in calls


def test_a_trips_file_is_read_as_trips_on_every_engine(
    forty_cards: dict[str, Path], tmp_path: Path
) -> None:
    """One reader: the driver used to load the file itself under ``--engine memory`` (as taps:
    a trips file failed there, "missing column 'stop_id'") while ``fit`` read it as trips."""
    rows = [(f"c{i}", f"2024-05-01T08:{i:02d}:00", "ABCD"[i % 4], "DCBA"[i % 4]) for i in range(40)]
    trips = tmp_path / "trips.csv"
    pd.DataFrame(rows, columns=["card_id", "on_time", "on_stop", "off_stop"]).to_csv(
        trips, index=False
    )
    released = []
    for engine in ("auto", "memory"):
        out = tmp_path / engine
        argv = ["sequences", str(trips), "--taxonomy", str(forty_cards["taxonomy"])]
        argv += ["--epsilon", "2", "--height", "2", "--out", str(out), "--quiet", "--seed", "1"]
        assert main([*argv, "--engine", engine]) == 0
        released.append((out / "sequences.csv").read_bytes())
    assert released[0] == released[1]


def _mapped_copy(forty_cards: dict[str, Path], tmp_path: Path) -> Path:
    """The forty cards' taps with agency column names (``tarjeta``, ``parada``)."""
    taps = pd.read_csv(forty_cards["taps"], dtype=str)
    path = tmp_path / "agency.csv"
    taps.rename(columns={"card_id": "tarjeta", "stop_id": "parada"}).to_csv(path, index=False)
    return path


def test_a_mapped_file_is_read_in_fit(
    forty_cards: dict[str, Path], tmp_path: Path, call_log: CallLog
) -> None:
    """Issue 27, the input mapping: ``sequences --card-column ... --location-column ...`` hands
    ``fit`` a :class:`~synth.records.mapped_source.MappedSource`, read once, inside ``fit``. The
    code before loaded the file in the driver (``mapped_input`` -> ``read_mapped``) and gave
    ``fit`` the frame. The release is the one of the same taps under the canonical names."""
    mapped = _mapped_copy(forty_cards, tmp_path)
    call_log.fit(PrefixTreeSynthesizer)
    call_log.function(synth.records.mapping, "read_mapped_rows")
    call_log.function(synth.io, "read_table")
    argv = ["sequences", "--taxonomy", str(forty_cards["taxonomy"]), "--epsilon", "2"]
    argv += ["--height", "2", "--quiet", "--seed", "1"]
    flags = ["--card-column", "tarjeta", "--location-column", "parada"]
    assert main([*argv, str(mapped), *flags, "--out", str(tmp_path / "mapped")]) == 0
    assert call_log.of("read_mapped_rows") == [(True, str(mapped))]
    assert [inside for inside, arg in call_log.of("read_table") if arg == str(mapped)] == [True]
    assert main([*argv, str(forty_cards["taps"]), "--out", str(tmp_path / "plain")]) == 0
    released = [(tmp_path / d / "sequences.csv").read_bytes() for d in ("mapped", "plain")]
    assert released[0] == released[1]


def test_a_mapped_run_table_is_read_in_fit(
    forty_cards: dict[str, Path], tmp_path: Path, call_log: CallLog
) -> None:
    """The same through ``run``'s ``[sequences]`` table with mapping keys
    (:func:`synth.cli.releases.make_sequences`): read once, inside ``fit``."""
    mapped = _mapped_copy(forty_cards, tmp_path)
    config = tmp_path / "s.toml"
    table = f'[sequences]\ninput = "{mapped}"\ntaxonomy = "{forty_cards["taxonomy"]}"\n'
    table += 'card_column = "tarjeta"\nlocation_column = "parada"\n'
    config.write_text(table + "[sequences.parameters]\nepsilon = 2\nheight = 2\n")
    call_log.fit(PrefixTreeSynthesizer)
    call_log.function(synth.records.mapping, "read_mapped_rows")
    call_log.function(synth.io, "read_table")
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--seed", "1", "--quiet"]) == 0
    assert call_log.of("read_mapped_rows") == [(True, str(mapped))]
    assert [inside for inside, arg in call_log.of("read_table") if arg == str(mapped)] == [True]
