"""Counting engines: with a zero-noise source (and with seeded noise) every engine gives the same
counts and the same release on the same input (docs/design.md section 7)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prefixtree.synthesizer import PrefixTreeSynthesizer
from synth.engines import get_engine
from synth.errors import ConfigError, InputError
from synth.marginals.opal import OpalMarginals
from synth.records import UnknownLocationWarning, encode_sequences, load_sequences
from synth.simulate import simulate_sequences, simulate_taps, write_simulated_sequences
from synth.taxonomy import Taxonomy
from tests.conftest import ZeroNoise, position_error_files

ENGINES = ("memory", "duckdb")


def _tree(
    source: pd.DataFrame | Path,
    taxonomy: Taxonomy,
    engine: str,
    *,
    time_bin: int | None = None,
    random_state: object = None,
    **fit: object,
) -> PrefixTreeSynthesizer:
    zero = random_state is None  # zero noise: threshold 1 keeps every present cell
    in_use = PrefixTreeSynthesizer(epsilon=2.0, height=5, taxonomy=taxonomy)._generalized_levels()
    synth = PrefixTreeSynthesizer(
        epsilon=2.0,
        height=5,
        taxonomy=taxonomy,
        thresholds={g: 1 for g in [*in_use[0], taxonomy.height]} if zero else None,
        time_bin=time_bin,
        time_model="tree" if time_bin else "auto",  # the engines count (location, bin) cells
        random_state=ZeroNoise() if random_state is None else random_state,
        engine=engine,
        **fit,  # type: ignore[arg-type]
    )
    return synth.fit(source)


@pytest.fixture(scope="module")
def montreal() -> Taxonomy:
    from synth.simulate import _montreal

    return _montreal()[0]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("sim")
    out: dict[str, object] = {}
    for with_time in (False, True):
        tag = "timed" if with_time else "plain"
        out[tag] = simulate_sequences(3000, with_time=with_time, seed=7)
        for ext in ("parquet", "csv"):
            out[f"{tag}.{ext}"] = write_simulated_sequences(
                tmp / f"{tag}.{ext}", 3000, with_time=with_time, seed=7
            )
    taps = simulate_taps(2000, seed=3)
    taps.to_parquet(tmp / "taps.parquet", index=False)
    out["taps"], out["taps.parquet"] = taps, tmp / "taps.parquet"
    return out


@pytest.mark.parametrize("time_bin", [None, 60])
def test_identical_level_counts(simulated: dict, montreal: Taxonomy, time_bin: int | None) -> None:
    """The engines' counts, level by level, with the same (all-surviving) node assignment."""
    seqs = simulated["timed" if time_bin else "plain"]
    synth = PrefixTreeSynthesizer(epsilon=1.0, height=4, taxonomy=montreal, time_bin=time_bin)
    locations = sorted(montreal.leaves())
    codes = encode_sequences(seqs, locations, 4)
    times = None if time_bin is None else synth._time_matrix(seqs, len(codes), 4)
    n_bins = 1 if time_bin is None else 1440 // time_bin
    counts = {}
    for name in ENGINES:
        with get_engine(name) as engine:
            counter = engine.prefix_counter(codes, times, n_bins=n_bins, n_locations=len(locations))
            levels, n_nodes = [], 1
            for level in range(4):
                keys, n = counter.level_counts(level, n_nodes)
                levels.append((keys, n))
                node = np.arange(keys.size, dtype=np.int64)
                node[::3] = -1  # some cells do not survive
                counter.advance(level, keys, node)
                n_nodes = keys.size
            counter.close()
        counts[name] = levels
    for (k0, n0), (k1, n1) in zip(counts["memory"], counts["duckdb"], strict=True):
        np.testing.assert_array_equal(k0, k1)
        np.testing.assert_array_equal(n0, n1)
    assert counts["memory"][0][1].sum() == len(codes)


@pytest.mark.parametrize("time_bin", [None, 60])
def test_simulated_releases_identical(
    simulated: dict, montreal: Taxonomy, time_bin: int | None
) -> None:
    tag = "timed" if time_bin else "plain"
    ref = _tree(simulated[tag], montreal, "memory", time_bin=time_bin)
    assert len(ref.tree_) > 100
    for source in (simulated[tag], simulated[f"{tag}.parquet"], simulated[f"{tag}.csv"]):
        got = _tree(source, montreal, "duckdb", time_bin=time_bin)  # type: ignore[arg-type]
        pd.testing.assert_frame_equal(got.tree_, ref.tree_)
        pd.testing.assert_frame_equal(got.sample(), ref.sample())


def test_seeded_noise_gives_the_same_release(simulated: dict, montreal: Taxonomy) -> None:
    """Noise is drawn in the driver, in cell order: the engine cannot change the draws."""
    trees = [
        _tree(simulated["plain.parquet"], montreal, name, random_state=11).tree_ for name in ENGINES
    ]
    assert len(trees[0]) > 10
    pd.testing.assert_frame_equal(trees[0], trees[1])


def test_coarse_time_bins_same_tree_from_every_engine(simulated: dict, montreal: Taxonomy) -> None:
    """Coarse time bins are the driver's: the engines count fine bins, the trees are identical."""
    params = {"preset": "kdd12", "epsilon": 4.0, "height": 4, "taxonomy": montreal, "time_bin": 60}
    params |= {"coarse_time_bin": 240, "random_state": 5, "completion": "markov"}
    trees = [
        PrefixTreeSynthesizer(**params, engine=name).fit(simulated["timed.parquet"]).tree_
        for name in ENGINES
    ]
    assert len(trees[0]) > 100
    pd.testing.assert_frame_equal(trees[0], trees[1])


def test_taps_parquet_read_by_duckdb(simulated: dict, montreal: Taxonomy) -> None:
    """Taps in time order (not grouped by card): sequences by time, ties by row, first h kept."""
    taps = simulated["taps"].copy()
    ref = _tree(load_sequences(taps, taxonomy=montreal), montreal, "memory", time_bin=30)
    got = _tree(simulated["taps.parquet"], montreal, "duckdb", time_bin=30)
    pd.testing.assert_frame_equal(got.tree_, ref.tree_)


def test_duckdb_file_unknown_locations_and_gaps(tmp_path: Path, montreal: Taxonomy) -> None:
    seqs = simulate_sequences(500, seed=2)
    seqs.loc[seqs.index % 7 == 3, "location"] = "Nowhere"
    seqs = seqs[seqs.index % 11 != 5]  # gaps in pos
    path = tmp_path / "s.parquet"
    seqs.to_parquet(path, index=False)
    with pytest.raises(InputError, match="Nowhere"):
        _tree(path, montreal, "duckdb")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownLocationWarning)
        ref = _tree(load_sequences(seqs, taxonomy=montreal, on_unknown="drop"), montreal, "memory")
        got = _tree(path, montreal, "duckdb", on_unknown="drop")
    pd.testing.assert_frame_equal(got.tree_, ref.tree_)
    dup = pd.concat([seqs.head(3), seqs.head(1)])
    dup.to_parquet(tmp_path / "dup.parquet", index=False)
    with pytest.raises(InputError, match="duplicate position"):
        _tree(tmp_path / "dup.parquet", montreal, "duckdb", on_unknown="drop")


def test_engine_parameters_are_checked(montreal: Taxonomy, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="engine must be one of"):
        PrefixTreeSynthesizer(
            epsilon=1.0, height=2, taxonomy=montreal, engine="polars"
        ).check_params()
    with pytest.raises(ConfigError, match="unknown option"):
        OpalMarginals(engine="duckdb", engine_options={"spill": "x"}).fit(pd.DataFrame())
    with pytest.raises(ConfigError, match="not a directory"):
        get_engine("duckdb", {"temp_directory": str(tmp_path / "missing")})
    with pytest.raises(ConfigError, match="engine options"):
        get_engine("duckdb", {"memory_limit": "lots"})
    with get_engine("duckdb", {"temp_directory": str(tmp_path), "memory_limit": "512MB"}) as e:
        assert any(p.name.startswith("transit-synth-duckdb-") for p in tmp_path.iterdir())
        assert e.name == "duckdb"
    assert not any(tmp_path.iterdir())  # the temporary directory is removed on close


@pytest.mark.parametrize("unit", [None, "card_id"])
def test_sbh_releases_identical(simulated: dict, unit: str | None) -> None:
    taps = simulated["taps"]
    releases = [
        OpalMarginals(
            bin=30,
            privacy_unit=unit,
            max_contributions=3 if unit else 1,
            random_state=ZeroNoise(),
            engine=name,
        ).fit(taps)
        for name in ENGINES
    ]
    for name, table in releases[0].tables_.items():
        pd.testing.assert_frame_equal(releases[1].tables_[name], table)
    if unit:  # the bound bites: 3 taps per card at most
        assert releases[0].tables_["on_time"]["count"].sum() < len(taps)
    seeded = [  # real (seeded) noise, drawn in the driver in cell order: the same draws
        OpalMarginals(bin=30, privacy_unit=unit, random_state=5, engine=name)
        .fit(taps)
        .tables_["on_time_location"]
        for name in ENGINES
    ]
    pd.testing.assert_frame_equal(seeded[1], seeded[0])


# ---------------------------------------------------------------------------- SUBE (real data)
@pytest.fixture(scope="module")
def sube(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = shared_data / "sube-buenos-aires"
    tmp = tmp_path_factory.mktemp("sube")
    taps = pd.read_csv(root / "martes_trx.csv", dtype=str)
    taps = taps[taps["id_tarjeta"].notna()]
    taps.to_csv(tmp / "taps.csv", index=False)
    meta = root / "metadata_amba_2019_m1.csv"
    return {
        "taps": tmp / "taps.csv",
        "lines": Taxonomy.from_sube_metadata(meta, location="id_linea"),
    }


def test_sube_sequences_identical(sube: dict) -> None:
    tax = sube["lines"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownLocationWarning)
        seqs = load_sequences(
            sube["taps"], taxonomy=tax, on_unknown="drop", location_column="id_linea"
        )
        ref = _tree(seqs, tax, "memory")
        frame = _tree(seqs, tax, "duckdb")
        file = _tree(
            sube["taps"], tax, "duckdb", on_unknown="drop", location_column="id_linea"
        )  # SUBE aliases: loaded by synth.records, counted by DuckDB
    assert len(ref.tree_) > 50
    pd.testing.assert_frame_equal(frame.tree_, ref.tree_)
    pd.testing.assert_frame_equal(file.tree_, ref.tree_)


@pytest.mark.parametrize("unit", [None, "card_id"])
def test_sube_marginals_identical(sube: dict, unit: str | None) -> None:
    from synth.marginals import load_input as _load

    taps = _load(Path(sube["taps"]), "id_linea")
    releases = [
        OpalMarginals(
            bin=60,
            privacy_unit=unit,
            max_contributions=2 if unit else 1,
            random_state=ZeroNoise(),
            engine=name,
        ).fit(taps)
        for name in ENGINES
    ]
    assert sum(len(t) for t in releases[0].tables_.values()) > 100
    for name, table in releases[0].tables_.items():
        pd.testing.assert_frame_equal(releases[1].tables_[name], table)


# ---------------------------------------------------------------------------- CLI and run config
def test_cli_engine_flag_gives_the_same_release(simulated: dict, tmp_path: Path) -> None:
    from synth import datasets
    from synth.cli import main

    outs = {}
    for name in ENGINES:
        out = tmp_path / name
        args = ["sequences", str(simulated["plain.parquet"]), "--taxonomy"]
        args += [str(datasets.path("montreal_taxonomy")), "--epsilon", "2", "--height", "4"]
        args += ["--out", str(out), "--seed", "3", "--quiet", "--engine", name]
        if name == "duckdb":
            args += ["--engine-temp-dir", str(tmp_path), "--engine-memory-limit", "256MB"]
        assert main(args) == 0
        outs[name] = pd.read_csv(out / "sequences.csv")
    pd.testing.assert_frame_equal(outs["duckdb"], outs["memory"])
    marg = {}
    for name in ENGINES:
        out = tmp_path / f"m-{name}"
        args = ["marginals", str(simulated["taps.parquet"]), "--epsilon", "8", "--delta"]
        args += ["1e-6", "--out", str(out), "--seed", "3", "--quiet", "--engine", name]
        args += ["--privacy-unit", "card_id", "--max-contributions", "2"]
        assert main(args) == 0
        marg[name] = pd.read_csv(out / "on_time_location.csv")
    pd.testing.assert_frame_equal(marg["duckdb"], marg["memory"])


def test_run_config_engine_parameter(simulated: dict, tmp_path: Path) -> None:
    from synth.cli.run import plan

    config = tmp_path / "c.toml"
    config.write_text(
        f'[sequences]\ninput = "{simulated["plain.parquet"]}"\n'
        'taxonomy = "embedded:montreal_taxonomy"\n'
        "[sequences.parameters]\nepsilon = 1.0\nheight = 3\n"
        'engine = "duckdb"\nengine_options = { memory_limit = "512MB" }\n'
    )
    (planned,) = plan(config)
    assert planned.params["engine"] == "duckdb"
    config.write_text(config.read_text().replace('"duckdb"', '"polars"'))
    with pytest.raises(ConfigError):
        from synth.cli.run import run_config

        run_config(config, out=tmp_path / "out")


@pytest.mark.parametrize(("unit", "public"), [(None, False), ("card_id", False), ("card_id", True)])
def test_sbh_file_read_by_duckdb(
    simulated: dict, tmp_path: Path, unit: str | None, public: bool
) -> None:
    """Taps (with tap-offs and modes) and trips read out of core give the memory release."""
    from synth.marginals import load_input as _load

    taps = simulated["taps"].copy()
    rng = np.random.default_rng(0)
    taps["tap"] = np.where(rng.random(len(taps)) < 0.3, "off", "on")
    taps["mode"] = np.where(rng.random(len(taps)) < 0.2, "bus", "metro")
    taps.loc[taps.index % 9 == 0, "time"] = taps["time"].iloc[0]  # ties: broken by row order
    trips = pd.DataFrame(
        {
            "card_id": taps["card_id"],
            "on_time": taps["time"].dt.strftime("%Y-%m-%dT%H:%M:%S"),
            "on_stop": taps["stop_id"],
            "off_time": (taps["time"] + pd.Timedelta("17min")).where(taps.index % 4 > 0),
            "off_stop": taps["stop_id"].iloc[::-1].to_numpy(),
        }
    )
    for name, frame in (("taps", taps), ("trips", trips)):
        path = tmp_path / f"{name}.parquet"
        frame.to_parquet(path, index=False)
        params = {
            "bin": 60,
            "privacy_unit": unit,
            "max_contributions": 2 if unit else 1,
            "random_state": ZeroNoise(),
        }
        if unit:  # the rule DuckDB counts out of core (a uniform choice is drawn in memory)
            params["bounding"] = "earliest"
        if public:
            params |= {"modes": ["metro", "tram"], "days": ["2012-01-04"]}
            if name == "trips":
                params["modes"] = ["all"]
        ref = OpalMarginals(**params).fit(_load(path, "stop_id"))
        got = OpalMarginals(**params, engine="duckdb").fit(path)
        assert got.row_kind_ == ref.row_kind_
        assert sum(len(t) for t in ref.tables_.values()) > 20
        for table, expected in ref.tables_.items():
            pd.testing.assert_frame_equal(got.tables_[table], expected, obj=f"{name} {table}")


def test_duckdb_groups_large_inputs_in_passes(
    simulated: dict, montreal: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    from synth.engines.duckdb_engine import DuckDBEngine

    monkeypatch.setattr(DuckDBEngine, "_min_rows_per_pass", 4000)
    monkeypatch.setattr(DuckDBEngine, "_rows_per_gb", 1)
    monkeypatch.setattr(DuckDBEngine, "_wide_grouped", lambda *a, **k: None)  # the SQL grouping
    ref = _tree(simulated["timed"], montreal, "memory", time_bin=60)
    got = _tree(simulated["timed.parquet"], montreal, "duckdb", time_bin=60)
    pd.testing.assert_frame_equal(got.tree_, ref.tree_)


def test_duckdb_groups_taps_in_passes_below_the_window(
    simulated: dict, montreal: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Taps: each pass filters its card bucket before the per-card ordering window."""
    from synth.engines.duckdb_engine import DuckDBEngine

    queries: list[str] = []
    sql = DuckDBEngine.sql
    monkeypatch.setattr(DuckDBEngine, "sql", lambda self, q: queries.append(q) or sql(self, q))
    monkeypatch.setattr(DuckDBEngine, "_min_rows_per_pass", 2000)
    monkeypatch.setattr(DuckDBEngine, "_rows_per_gb", 1)
    seqs = load_sequences(simulated["taps"], taxonomy=montreal)
    ref = _tree(seqs, montreal, "memory", time_bin=60)
    got = _tree(simulated["taps.parquet"], montreal, "duckdb", time_bin=60)
    pd.testing.assert_frame_equal(got.tree_, ref.tree_)
    passes = [q for q in queries if "OVER (PARTITION BY" in q and "hash(" in q]
    assert len(passes) > 1
    assert all(q.index("hash(") < q.rindex(") r GROUP BY sid") for q in passes)


def test_duckdb_position_errors_name_the_row(tmp_path: Path) -> None:
    from synth.engines.duckdb_engine import DuckDBEngine

    engine = DuckDBEngine(threads=2)
    try:
        for path in position_error_files(tmp_path):
            with pytest.raises(InputError) as ref:
                load_sequences(path)
            with pytest.raises(InputError) as got:
                engine.prefix_counter_from_file(
                    path, locations=["x"], height=3, time_bin_minutes=None
                )
            assert str(got.value) == str(ref.value), path
            assert ", row " in str(ref.value)
    finally:
        engine.close()
