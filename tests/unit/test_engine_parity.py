"""Engine parity: memory, DuckDB and Spark give byte-identical release directories under a fixed
seed, or the same clean error (exit 2, one line), on the same inputs.

Inputs: simulated sequences and taps (:mod:`synth.simulate`) and the real SUBE taps (Buenos Aires,
``../shared/data``), as CSV and as Parquet, through ``transit-synth sequences`` and ``transit-synth
marginals``; and small files of edge values under the agreed per-value record rules: identifiers
padded with spaces, written ``17.0``, or NA-like (``NA``, ``None``, ``null``, ``nan`` are ids),
numeric Parquet ids, non-integer positions, times in mixed formats (each value parsed alone; the
wall-clock time as written without ``--timezone``), duplicate rows. Where a rule says an edge
value means the same as a clean one, the release must also equal the clean input's release.

DuckDB runs in the default suite; Spark (one local session for the module) under ``-m slow``.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from synth import datasets
from synth.cli import main
from synth.simulate import simulate_sequences, simulate_taps

#: (case, engine) pairs that still fail, with the reason ("*": every engine, the memory engine's
#: own release or error breaks the agreed rule; "clean": the edge input's release is not the clean
#: one's). Strict: a fix makes them fail until removed. Errors that differ only in wording are
#: still clean errors (test_engine_errors_are_clean).
KNOWN: dict[tuple[str, str], str] = {}


SPARK_MARKS = [pytest.mark.slow, pytest.mark.spark]


def _known(name: str, engine: str) -> list[pytest.MarkDecorator]:
    reason = KNOWN.get((name, engine)) or KNOWN.get((name, "*"))
    return [] if reason is None else [pytest.mark.xfail(strict=True, reason=reason)]


def _engine_params() -> list[Any]:
    """(case, engine) parameters: DuckDB in the default suite, Spark under -m slow."""
    params = []
    for name in CASES:
        for engine in ("duckdb", "spark"):
            marks = _known(name, engine) + (SPARK_MARKS if engine == "spark" else [])
            params.append(pytest.param(name, engine, marks=marks, id=f"{name}-{engine}"))
    return params


# ---------------------------------------------------------------------------- edge-value inputs
EDGE_TAXONOMY = """child,parent
line:A,root
line:B,root
1,line:A
2,line:A
3,line:A
10,line:B
11,line:B
"""
STOPS = ["1", "2", "3", "10", "11"]


def _clean_taps() -> pd.DataFrame:
    """40 cards, 2-4 taps each, times on 2024-03-05 (deterministic, no RNG)."""
    rows = []
    for card in range(40):
        for k in range(2 + card % 3):
            minute = 6 * 60 + (card * 37 + k * 95) % (16 * 60)
            stop = STOPS[(card * 7 + k * 3) % len(STOPS)]
            rows.append(
                (f"{1000 + card}", f"2024-03-05T{minute // 60:02d}:{minute % 60:02d}:00", stop)
            )
    taps = pd.DataFrame(rows, columns=["card_id", "time", "stop_id"])
    return taps.sort_values(["card_id", "time"], kind="stable").reset_index(drop=True)


def _clean_sequences() -> pd.DataFrame:
    taps = _clean_taps()
    pos = taps.groupby("card_id").cumcount()
    return pd.DataFrame({"seq_id": taps["card_id"], "pos": pos, "location": taps["stop_id"]})


def _padded(frame: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    out = frame.copy()
    for i, col in enumerate(cols):
        out[col] = [(" " * (1 + (j + i) % 3)) + v + (" " * (j % 2)) for j, v in enumerate(out[col])]
    return out


def _dot_zero(frame: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    out = frame.copy()
    for col in cols:  # "17" -> "17.0" / "17.00" ("NA" stays: not digits)
        out[col] = [
            v + "." + "0" * (1 + j % 2) if v.isdigit() else v for j, v in enumerate(out[col])
        ]
    return out


NA_LIKE = {"1000": "NA", "1001": "None", "1002": "null", "1003": "nan", "1004": "NaN"}


def _na_ids(frame: pd.DataFrame, col: str) -> pd.DataFrame:
    return frame.assign(**{col: frame[col].replace(NA_LIKE)})


def _pos_fraction(seqs: pd.DataFrame) -> pd.DataFrame:
    """One position written ``1.5`` (the others integers)."""
    pos = seqs["pos"].astype(str).to_numpy(copy=True)
    pos[int((seqs["pos"] == 2).to_numpy().argmax())] = "1.5"
    return seqs.assign(pos=pos)


def _mixed_times(taps: pd.DataFrame) -> pd.DataFrame:
    """The same wall-clock times, written five ways (offsets dropped without --timezone)."""
    out = []
    for j, t in enumerate(taps["time"]):
        stamp = pd.Timestamp(t)
        out.append(
            [
                t,  # 2024-03-05T08:00:00
                stamp.strftime("%Y-%m-%d %H:%M:%S"),
                stamp.strftime("%Y-%m-%dT%H:%M:%S+01:00"),
                stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
                stamp.strftime("%Y-%m-%dT%H:%M"),
            ][j % 5]
        )
    return taps.assign(time=out)


def _write_csv(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False)
    return path


def _write_parquet(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_parquet(path, index=False)
    return path


#: one value outside the supported time range (1677-09-22 .. 2262-04-10) per file
_OUT_OF_RANGE: dict[str, Any] = {
    "time_1500": "1500-05-01T09:00:00",
    "time_2300": "2300-05-01T09:00:00+02:00",
    "unix_1e20": "100000000000000000000",
    "unix_1e20_float": 1e20,
    "stamp_1500": "1500-05-01T09:00:00",
}


# ---------------------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    """One command on one input; ``clean``: the input whose release this one must equal."""

    input: str
    command: str
    args: tuple[str, ...]
    clean: str | None = None
    error: bool = False
    marks: tuple[Any, ...] = field(default=())


SEQ_SIM = ("--epsilon", "2", "--height", "4")
SEQ_EDGE = ("--epsilon", "20", "--height", "3", "--taxonomy", "{edge_taxonomy}")
MARG = ("--epsilon", "4", "--delta", "1e-6", "--bin", "60")
#: card-unit marginals by the rule the out-of-core engines count themselves (a uniform choice of a
#: card's taps is drawn in memory on every engine: tests/unit/test_bounding.py)
MARG_UNIT = (
    *MARG,
    "--privacy-unit",
    "card_id",
    "--max-contributions",
    "2",
    "--bounding",
    "earliest",
)
SEQ_SUBE = ("--epsilon", "1", "--height", "4", "--taxonomy", "{sube_taxonomy}")
SEQ_SUBE += ("--location-column", "id_linea", "--on-unknown", "drop")
MARG_SUBE = ("--epsilon", "1", "--delta", "1e-6", "--location-column", "id_linea")
MONTREAL = ("--taxonomy", "{montreal}")

CASES: dict[str, Case] = {
    # simulated (Montreal metro)
    "sim-sequences-csv": Case("sim_seq.csv", "sequences", (*SEQ_SIM, *MONTREAL)),
    "sim-sequences-parquet": Case("sim_seq.parquet", "sequences", (*SEQ_SIM, *MONTREAL)),
    "sim-taps-csv-sequences": Case("sim_taps.csv", "sequences", (*SEQ_SIM, *MONTREAL)),
    "sim-taps-parquet-sequences": Case("sim_taps.parquet", "sequences", (*SEQ_SIM, *MONTREAL)),
    "sim-taps-parquet-trajectories": Case(
        "sim_taps.parquet", "sequences", (*SEQ_SIM, *MONTREAL, "--time-bin", "120")
    ),
    "sim-taps-csv-marginals": Case("sim_taps.csv", "marginals", MARG),
    "sim-taps-parquet-marginals": Case("sim_taps.parquet", "marginals", MARG),
    "sim-taps-parquet-marginals-card": Case("sim_taps.parquet", "marginals", MARG_UNIT),
    # real SUBE taps (Buenos Aires): ids written 37031563.0, times as hour + date
    "sube-csv-sequences": Case("sube.csv", "sequences", SEQ_SUBE),
    "sube-parquet-sequences": Case("sube.parquet", "sequences", SEQ_SUBE),
    "sube-csv-marginals": Case("sube.csv", "marginals", MARG_SUBE),
    "sube-parquet-marginals": Case("sube.parquet", "marginals", MARG_SUBE),
    # edge values: taps
    "edge-taps-clean": Case("taps_clean.csv", "sequences", SEQ_EDGE),
    "edge-taps-padded": Case("taps_padded.csv", "sequences", SEQ_EDGE, clean="taps_clean.csv"),
    "edge-taps-dot-zero": Case("taps_dot0.csv", "sequences", SEQ_EDGE, clean="taps_clean.csv"),
    "edge-taps-na-ids": Case("taps_na.csv", "sequences", SEQ_EDGE, clean="taps_clean.csv"),
    "edge-taps-mixed-times": Case(
        "taps_times.csv", "sequences", (*SEQ_EDGE, "--time-bin", "60"), clean="taps_clean.csv"
    ),
    "edge-taps-na-stop": Case(
        "taps_na_stop.csv", "sequences", (*SEQ_EDGE[:-1], "{edge_taxonomy_na}")
    ),
    "edge-taps-duplicates": Case("taps_dup.csv", "sequences", SEQ_EDGE),
    "edge-taps-parquet-int-ids": Case(
        "taps_int.parquet", "sequences", SEQ_EDGE, clean="taps_clean.csv"
    ),
    "edge-taps-parquet-float-ids": Case(
        "taps_float.parquet", "sequences", SEQ_EDGE, clean="taps_clean.csv"
    ),
    "edge-taps-parquet-fraction-ids": Case(
        "taps_fraction.parquet", "sequences", SEQ_EDGE, error=True
    ),
    "edge-marginals-padded": Case(
        "taps_padded.csv", "marginals", MARG_UNIT, clean="taps_clean.csv"
    ),
    "edge-marginals-mixed-times": Case(
        "taps_times.csv", "marginals", MARG_UNIT, clean="taps_clean.csv"
    ),
    "edge-marginals-duplicates": Case("taps_dup.csv", "marginals", MARG_UNIT),
    # edge values: long-format sequences
    "edge-seq-padded": Case("seq_padded.csv", "sequences", SEQ_EDGE, clean="seq_clean.csv"),
    "edge-seq-dot-zero": Case("seq_dot0.csv", "sequences", SEQ_EDGE, clean="seq_clean.csv"),
    "edge-seq-na-ids": Case("seq_na.csv", "sequences", SEQ_EDGE, clean="seq_clean.csv"),
    "edge-seq-parquet-padded": Case(
        "seq_padded.parquet", "sequences", SEQ_EDGE, clean="seq_clean.csv"
    ),
    "edge-seq-fractional-pos": Case("seq_pos15.csv", "sequences", SEQ_EDGE, error=True),
    "edge-seq-parquet-fractional-pos": Case("seq_pos15.parquet", "sequences", SEQ_EDGE, error=True),
    "edge-seq-duplicate-rows": Case("seq_dup.csv", "sequences", SEQ_EDGE, error=True),
    # times outside the supported range (issue 26): one line naming file, row and value
    **{
        f"edge-{command}-{name}": Case(f"{name}.{ext}", command, args, error=True)
        for command, args in (("sequences", SEQ_EDGE), ("marginals", MARG))
        for name, ext in (
            ("time_1500", "csv"),
            ("time_2300", "parquet"),
            ("unix_1e20", "csv"),
            ("unix_1e20_float", "parquet"),
            ("stamp_1500", "parquet"),
        )
    },
}


def _build_inputs(root: Path, shared: Path | None) -> dict[str, Path]:
    """Every input file of :data:`CASES` (and the taxonomies) under ``root``."""
    files: dict[str, Path] = {}
    seqs = simulate_sequences(300, seed=11)
    files["sim_seq.csv"] = _write_csv(seqs, root / "sim_seq.csv")
    files["sim_seq.parquet"] = _write_parquet(seqs, root / "sim_seq.parquet")
    taps = simulate_taps(300, seed=12)
    files["sim_taps.csv"] = _write_csv(taps, root / "sim_taps.csv")
    files["sim_taps.parquet"] = _write_parquet(taps, root / "sim_taps.parquet")
    if shared is not None:
        files["sube.csv"] = shared / "sube-buenos-aires" / "martes_trx.csv"
        sube = pd.read_csv(files["sube.csv"], dtype=str, keep_default_na=False)
        files["sube.parquet"] = _write_parquet(sube, root / "sube.parquet")
    clean = _clean_taps()
    writers: dict[str, Callable[[], pd.DataFrame]] = {
        "taps_clean.csv": lambda: clean,
        "taps_padded.csv": lambda: _padded(clean, ["card_id", "stop_id"]),
        "taps_dot0.csv": lambda: _dot_zero(clean, ["card_id", "stop_id"]),
        "taps_na.csv": lambda: _na_ids(clean, "card_id"),
        "taps_times.csv": lambda: _mixed_times(clean),
        "taps_dup.csv": lambda: pd.concat([clean, clean.iloc[::4]]).sort_index(kind="stable"),
        "seq_clean.csv": _clean_sequences,
        "seq_padded.csv": lambda: _padded(_clean_sequences(), ["seq_id", "location"]),
        "seq_dot0.csv": lambda: _dot_zero(_clean_sequences(), ["seq_id", "location"]),
        "seq_na.csv": lambda: _na_ids(_clean_sequences(), "seq_id"),
        "seq_pos15.csv": lambda: _pos_fraction(_clean_sequences()),
        "taps_na_stop.csv": lambda: clean.assign(stop_id=clean["stop_id"].replace({"11": "NA"})),
        "seq_dup.csv": lambda: pd.concat([_clean_sequences(), _clean_sequences().iloc[[3]]]),
    }
    for name, make in writers.items():
        files[name] = _write_csv(make(), root / name)
    no_na = clean[clean["stop_id"] != "NA"]  # numeric Parquet columns: every stop a number
    numeric = no_na.assign(card_id=no_na["card_id"].astype("int64"))
    numeric = numeric.assign(stop_id=numeric["stop_id"].astype("int64"))
    files["taps_int.parquet"] = _write_parquet(numeric, root / "taps_int.parquet")
    floats = numeric.astype({"card_id": "float64", "stop_id": "float64"})
    files["taps_float.parquet"] = _write_parquet(floats, root / "taps_float.parquet")
    frac = floats.assign(card_id=floats["card_id"] + 0.5)
    files["taps_fraction.parquet"] = _write_parquet(frac, root / "taps_fraction.parquet")
    files["seq_padded.parquet"] = _write_parquet(
        _padded(_clean_sequences(), ["seq_id", "location"]), root / "seq_padded.parquet"
    )
    for name, value in _OUT_OF_RANGE.items():
        column = pd.Series(clean["time"], dtype=object)
        column.iloc[len(clean) // 2] = value
        frame = clean.assign(time=column)
        if name == "unix_1e20_float":
            frame = clean.assign(time=1.7e9).astype({"time": float})
            frame.loc[len(clean) // 2, "time"] = value
        elif name == "stamp_1500":
            stamps = pd.to_datetime(clean["time"]).astype("datetime64[us]")
            stamps.iloc[len(clean) // 2] = pd.Timestamp(value)
            frame = clean.assign(time=stamps)
        ext = "parquet" if name in ("time_2300", "unix_1e20_float", "stamp_1500") else "csv"
        write = _write_parquet if ext == "parquet" else _write_csv
        files[f"{name}.{ext}"] = write(frame, root / f"{name}.{ext}")
    files["seq_pos15.parquet"] = _write_parquet(
        _pos_fraction(_clean_sequences()).astype({"pos": float}), root / "seq_pos15.parquet"
    )
    (root / "edge_taxonomy.csv").write_text(EDGE_TAXONOMY)
    (root / "edge_taxonomy_na.csv").write_text(EDGE_TAXONOMY + "NA,line:B\n")  # a stop named NA
    return files


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    shared_data = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    shared = shared_data if (shared_data / "sube-buenos-aires").is_dir() else None
    return _build_inputs(tmp_path_factory.mktemp("parity-inputs"), shared)


# ---------------------------------------------------------------------------- running
@dataclass(frozen=True)
class Outcome:
    """Exit status, stderr lines (warnings dropped) and the release files' bytes."""

    status: int
    errors: tuple[str, ...]
    files: dict[str, bytes]


def _run(case: Case, input: Path, engine: str, out: Path, root: Path) -> Outcome:
    subs = {
        "{edge_taxonomy}": str(root / "edge_taxonomy.csv"),
        "{edge_taxonomy_na}": str(root / "edge_taxonomy_na.csv"),
        "{montreal}": str(datasets.path("montreal_taxonomy")),
        "{sube_taxonomy}": str(datasets.path("sube_line_taxonomy")),
    }
    args = [case.command, str(input), *(subs.get(a, a) for a in case.args)]
    args += ["--out", str(out), "--seed", "7", "--quiet", "--engine", engine]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main(args)
    lines = [line for line in err.getvalue().splitlines() if not line.startswith("warning:")]
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    return Outcome(status, tuple(lines), files)


_MEMORY: dict[tuple[str, str, tuple[str, ...]], Outcome] = {}


def _memory(case: Case, inputs: dict[str, Path], out: Path) -> Outcome:
    """The memory engine's outcome on a case's command line (input, command, arguments): once per
    module, so the clean input that several edge cases are compared with is released once."""
    key = (case.input, case.command, case.args)
    if key not in _MEMORY:
        _MEMORY[key] = _run(
            case, inputs[case.input], "memory", out, inputs["taps_clean.csv"].parent
        )
    return _MEMORY[key]


def _needs(case: Case, inputs: dict[str, Path]) -> None:
    if case.input not in inputs:
        pytest.skip(f"real public data not available for {case.input}")


def _expected(case: Case, outcome: Outcome) -> None:
    """The memory engine's outcome is what the case says: a release, or one clean error."""
    if case.error:
        assert outcome.status == 2, outcome
        assert len(outcome.errors) == 1 and ": error: " in outcome.errors[0], outcome.errors
        assert not outcome.files  # nothing half-written
    else:
        assert outcome.status == 0, outcome.errors
        assert any(name != "manifest.json" for name in outcome.files)


def _data_files(outcome: Outcome) -> dict[str, bytes]:
    """The released tables (the manifest names its input files, which differ)."""
    return {k: v for k, v in outcome.files.items() if k != "manifest.json"}


@pytest.mark.parametrize(("name", "engine"), _engine_params())
def test_engine_parity(
    name: str,
    engine: str,
    inputs: dict[str, Path],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """Each engine gives the memory engine's release directory, byte for byte, or its error."""
    case = CASES[name]
    _needs(case, inputs)
    if engine == "spark":
        request.getfixturevalue("spark_session")  # skipped (failed in CI) without Java/PySpark
    ref = _memory(case, inputs, tmp_path / "memory")
    _expected(case, ref)
    got = _run(case, inputs[case.input], engine, tmp_path / engine, inputs["taps_clean.csv"].parent)
    assert got.status == ref.status, got.errors
    if case.error:
        assert got.errors == ref.errors
        assert not got.files
    else:
        assert got.files.keys() == ref.files.keys()
        for file, data in ref.files.items():
            assert got.files[file] == data, f"{engine}: {file} differs from the memory engine's"


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=_known(n, "clean")) for n, c in CASES.items() if c.clean is not None],
)
def test_edge_values_mean_the_clean_values(
    name: str, inputs: dict[str, Path], tmp_path: Path
) -> None:
    """Padded, ``17.0``, NA-like and numeric ids and mixed time formats release exactly what the
    clean input releases (the per-value rules; the parity test carries it to every engine)."""
    case = CASES[name]
    assert case.clean is not None
    ref = _memory(case, inputs, tmp_path / "memory")
    _expected(case, ref)
    clean_case = Case(case.clean, case.command, case.args)
    clean = _memory(clean_case, inputs, tmp_path / "clean")
    _expected(clean_case, clean)
    assert _data_files(ref) == _data_files(clean)
