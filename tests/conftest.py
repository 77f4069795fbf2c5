"""Shared fixtures: the real public data in ../shared/data (skipped cleanly when absent), and noise
stand-ins for the DP tests (zero noise, noise at a scaled scale) patched into the production
:class:`~synth.privacy.SecureNoise`, so that every generator and command uses them."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest

from synth.privacy import SecureNoise
from synth.taxonomy import Taxonomy

if TYPE_CHECKING:  # the generator is imported by the tests that use it (a slow import)
    from archetypes import ArchetypeSynthesizer, TripSchema

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ../shared/data; skips the test when the folder is not there."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real public data not available at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="module")
def spark_session() -> Iterator[Any]:
    """A local Spark session (2 cores) for the Spark engine's tests: skipped with the reason when
    PySpark or Java is missing, but a FAILURE in CI (``CI=true``, as ``.ci/run`` sets), where the
    image has Java. The session is not stopped: the next module reuses it (JVM start-up is slow).
    """
    from synth.engines.spark_engine import SparkEngine, spark_available

    reason = spark_available()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the Spark engine cannot run: {reason}")
        pytest.skip(f"Spark engine not available: {reason}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PySpark on pandas 3: deprecation noise
        engine = SparkEngine(threads=2)
    yield engine.session


def flat_taxonomy(n: int) -> Taxonomy:
    """Locations ``s0 .. s{n-1}`` directly under the root."""
    return Taxonomy.from_edges([(f"s{i}", "root") for i in range(n)], source=f"flat {n}")


def timed_sequences(n: int, seed: int, *, n_locations: int = 6) -> pd.DataFrame:
    """``n`` random long-format timed sequences (1..10 points, locations ``L0..``, clock times
    ``HH:MM`` non-decreasing within a sequence; ids are not in string order, so ordering ties
    matter)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 11, n)
    seq = np.repeat(rng.permutation(n) * 7 + 3, lengths)
    pos = np.concatenate([np.arange(k) for k in lengths])
    weights = np.linspace(2.0, 1.0, n_locations)
    loc = rng.choice([f"L{i}" for i in range(n_locations)], seq.size, p=weights / weights.sum())
    start = np.repeat(rng.integers(300, 1200, n), lengths)
    steps = np.concatenate([np.cumsum(rng.integers(0, 150, k)) for k in lengths])
    minutes = np.minimum(start + steps, 1439)
    time = [f"{m // 60:02d}:{m % 60:02d}" for m in minutes]
    return pd.DataFrame({"seq_id": seq, "pos": pos, "location": loc, "time": time})


def card_trips(cards: list[tuple[str, list[int], str]]) -> pd.DataFrame:
    """Trips ``(card, hour, mode)`` of cards given as ``(card, hours, mode)``: one trip per hour
    listed (a card's trips share its mode). The trips tables of the joint-mode DP tests."""
    rows = [(card, hour, mode) for card, hours, mode in cards for hour in hours]
    return pd.DataFrame(rows, columns=["card", "hour", "mode"])


def card_synthesizer(**kwargs: object) -> ArchetypeSynthesizer:
    """The joint-mode synthesizer of the DP tests on :func:`card_trips` (hour the key, mode the
    category, two archetypes, 90% of the budget to the joint tables), ``kwargs`` overriding."""
    from archetypes import ArchetypeSynthesizer

    params: dict = {
        "key_columns": ["hour"],
        "category_column": "mode",
        "id_column": "card",
        "archetypes": 2,
        "joint": {"share": 0.9},
        "order_column": "hour",
        "random_state": 0,
    }
    params.update(kwargs)
    return ArchetypeSynthesizer(**params)


# ------------------------------------------------ SUBE taps (tests of issue 28, no public trips)
#: the network metadata: (mode, line, branch) rows; a line the private taps use ("999") is NOT
#: in it, and one of its lines ("7") no tap uses
SUBE_METADATA = [
    ("COL", "12", "60"),
    ("COL", "12", "61"),
    ("COL", "7", "70"),
    ("TRE", "16", "380"),
    ("TRE", "16", "283"),
    ("SUB", "32", "32"),
]
SUBE_TAP_COLUMNS = "id_tarjeta,modo,lat,lon,id_linea,id_ramal,id_tarifa,hora,etapa_red_sube"
SUBE_PARAMS = ["--id-column", "card_id", "--key-columns", "hour,line,zone"]
SUBE_PARAMS += [
    "--category-column",
    "mode",
    "--archetypes",
    "2",
    "--epsilon",
    "2",
    "--delta",
    "1e-5",
]
SUBE_PARAMS += ["--completion", '[["branch", ["line"]]]']


def sube_taps(n_cards: int = 60, extra_card: bool = False) -> str:
    """SUBE taps: day cards on bus line 12, night cards on train line 16, every fifth card on
    line 999 (absent from the metadata); ``extra_card`` adds one card on a line (555) that
    neither the metadata nor D has."""
    rows = []
    for i in range(n_cards):
        night = i % 3 == 0
        line, branch, mode = ("16", "380", "TRE") if night else ("12", "60", "COL")
        if i % 5 == 4:
            line, branch = "999", "999"
        for hour in (21, 22) if night else (7, 8, 17):
            rows.append(f"{i + 100},{mode},-34.6,-58.4,{line},{branch},1,{hour},0")
    if extra_card:
        rows += [f"9999,COL,-34.6,-58.4,555,555,1,{h},0" for h in (5, 6, 7)]
    return "\n".join([SUBE_TAP_COLUMNS, *rows]) + "\n"


def write_sube_inputs(folder: Path, *, extra_card: bool = False) -> dict[str, Path]:
    """``folder/taps.csv`` (:func:`sube_taps`) and ``folder/metadata.csv``
    (:data:`SUBE_METADATA`)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"taps": folder / "taps.csv", "metadata": folder / "metadata.csv"}
    paths["taps"].write_text(sube_taps(extra_card=extra_card))
    meta = pd.DataFrame(SUBE_METADATA, columns=["modo", "id_linea", "id_ramal"])
    meta.to_csv(paths["metadata"], index=False)
    return paths


def sube_trips_argv(paths: dict[str, Path], out: Path, *extra: str) -> list[str]:
    """``transit-synth trips`` on ``paths["taps"]`` as SUBE taps into ``out`` (seed 3), then
    ``extra``."""
    return [
        "trips",
        str(paths["taps"]),
        "--input-format",
        "sube-taps",
        "--out",
        str(out),
        *SUBE_PARAMS,
        "--quiet",
        "--seed",
        "3",
        *extra,
    ]


def spy_trips_counts(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[object]]:
    """Record what the trips release counts: each discrete Gaussian histogram (by label) and the
    number of individuals in each stand-in SBH table."""
    import archetypes.standin
    from synth.privacy import DiscreteGaussian

    seen: dict[str, list[object]] = {}
    release, sbh = DiscreteGaussian.release, archetypes.standin.stability_histogram

    def released(self: DiscreteGaussian, counts: np.ndarray, **kwargs: object) -> np.ndarray:
        seen.setdefault(str(kwargs["label"]), []).append(np.asarray(counts, dtype=np.int64))
        return release(self, counts, **kwargs)  # type: ignore[arg-type]

    def histogram(frame: pd.DataFrame, columns: list[str], **kwargs: object) -> pd.DataFrame:
        unit = str(kwargs["privacy_unit"])
        seen.setdefault(f"stand-in {columns}", []).append(frame[unit].nunique())
        return sbh(frame, columns, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(DiscreteGaussian, "release", released)
    monkeypatch.setattr(archetypes.standin, "stability_histogram", histogram)
    return seen


# ---------------------------------------------- riders: the trips of the archetype unit tests
def riders(n: int, seed: int, night_share: float = 0.5) -> pd.DataFrame:
    """Morning bus riders (hours 6-8) and night rail riders (21-23), 1-3 trips each, with fares."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        night = rng.random() < night_share
        for _ in range(rng.integers(1, 4)):
            hour = int(rng.integers(21, 24) if night else rng.integers(6, 9))
            rows.append(
                {
                    "card": f"s{seed}-{i}",
                    "hour": hour,
                    "zone": str(rng.choice(["B", "C"]) if night else "A"),
                    "mode": "rail" if night else "bus",
                    "fare": (3 if night else 1) + int(rng.integers(0, 2)),
                }
            )
    return pd.DataFrame(rows)


def riders_schema() -> TripSchema:
    """The public domains of :func:`riders`."""
    from archetypes import TripSchema

    return TripSchema.from_dict(
        {
            "card": {"kind": "id"},
            "hour": {"kind": "categorical", "values": list(range(24))},
            "zone": {"kind": "categorical", "values": ["A", "B", "C", "D"]},
            "mode": {"kind": "categorical", "values": ["bus", "rail", "ferry"]},
            "fare": {"kind": "numeric", "min": 0, "max": 10},
        }
    )


def riders_synthesizer(**kwargs: object) -> ArchetypeSynthesizer:
    """The write-up's synthesizer (not joint) on :func:`riders`, ``kwargs`` overriding."""
    from archetypes import ArchetypeSynthesizer

    params: dict = {
        "epsilon": 1.0,
        "delta": 1e-5,
        "key_columns": ["hour", "zone"],
        "category_column": "mode",
        "id_column": "card",
        "archetypes": 2,
        "completion": [("fare", ["zone", "hour"])],
        "schema": riders_schema(),
        "order_column": "hour",
        "random_state": 7,
        "joint": False,  # the write-up's algorithm (the joint mode: test_archetypes_joint.py)
    }
    params.update(kwargs)
    return ArchetypeSynthesizer(**params)


class ZeroNoise:
    """A noise source with SecureNoise's methods that adds nothing: every noisy count is exact,
    no empty cell passes a threshold, and index draws are the first ones. With it a release is a
    deterministic function of the data, so neighbouring inputs can be compared byte for byte."""

    seeded = True

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        return np.zeros(int(size), dtype=np.int64)

    def discrete_gaussian(self, sigma: float, size: int) -> np.ndarray:
        return np.zeros(int(size), dtype=np.int64)

    def discrete_laplace_tail(self, scale: float, threshold: int, size: int) -> np.ndarray:
        return np.full(int(size), int(threshold), dtype=np.int64)

    def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray:
        return np.zeros(0, dtype=np.int64)

    def choice(self, n: int, k: int) -> np.ndarray:
        return np.arange(int(k), dtype=np.int64)

    def permutation(self, n: int) -> np.ndarray:
        return np.arange(int(n), dtype=np.int64)


_ZERO_METHODS = (
    "discrete_laplace",
    "discrete_gaussian",
    "discrete_laplace_tail",
    "empty_cells_passing",
)


@pytest.fixture
def zero_noise(monkeypatch: pytest.MonkeyPatch) -> Iterator[ZeroNoise]:
    """Every :class:`SecureNoise` (seeded or not, in every generator and command) draws zero
    noise while the test runs; yields a :class:`ZeroNoise` to pass where a source is taken."""
    stand_in = ZeroNoise()
    for name in _ZERO_METHODS:
        method = getattr(stand_in, name)
        monkeypatch.setattr(SecureNoise, name, lambda self, *a, _m=method, **k: _m(*a, **k))
    yield stand_in


def scale_noise(monkeypatch: pytest.MonkeyPatch, factor: float) -> None:
    """Canary: every :class:`SecureNoise` draw uses ``factor`` times the scale (sigma) the
    mechanism asked for -- ``factor = 1/f`` is noise calibrated for ``f`` times the claimed epsilon.
    Thresholds compared against the noise are left as calibrated. Only the outermost call is
    scaled (the samplers call each other: the Gaussian proposes from the Laplace)."""
    depth = [0]

    def scaled(name: str) -> Callable[..., np.ndarray]:
        original = getattr(SecureNoise, name)

        def method(self: SecureNoise, scale: float, *rest: int) -> np.ndarray:
            depth[0] += 1
            try:
                return original(self, scale * factor if depth[0] == 1 else scale, *rest)
            finally:
                depth[0] -= 1

        return method

    for name in _ZERO_METHODS:
        monkeypatch.setattr(SecureNoise, name, scaled(name))


@pytest.fixture
def noise_scale(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """``noise_scale(factor)``: apply :func:`scale_noise` for the rest of the test."""
    return lambda factor: scale_noise(monkeypatch, factor)


class PassingZeroNoise(ZeroNoise):
    """:class:`ZeroNoise`, except that empty cells (value 0) pass when the threshold is <= 0."""

    def empty_cells_passing(self, scale: float, threshold: int, n_empty: int) -> np.ndarray:
        return np.zeros(int(n_empty) if threshold <= 0 else 0, dtype=np.int64)


#: Table 1 of Chen et al. 2012: eight sequences over four locations.
TABLE_1 = [
    ["L1", "L2", "L3"],
    ["L1", "L2"],
    ["L3", "L2", "L1"],
    ["L1", "L2", "L4"],
    ["L1", "L2", "L3"],
    ["L3", "L2"],
    ["L1", "L2", "L4", "L1"],
    ["L3", "L1"],
]


#: long-format inputs whose positions break the rules: the engines reading files themselves name
#: the row and value as load_sequences does (found on the error path only)
POSITION_ERRORS: dict[str, dict[str, list[object]]] = {
    "three rows at one position": {"seq_id": ["a"] * 4, "pos": [0, 1, 1, 1]},
    "ids normalised per value": {"seq_id": [" 7", "a", "7.0 ", "7"], "pos": [0, 0, 0, 1]},
    "first key in id order, not file order": {
        "seq_id": ["b", "b", "a", "a", "b", "a"],
        "pos": [0, 0, 1, 0, 1, 1],
    },
    "integer ids in string order": {"seq_id": [10, 9, 10, 9], "pos": [0, 0, 0, 0]},
    "negative and fractional": {"seq_id": ["a"] * 4, "pos": [0, 1, -1, 2.5]},
    "fractional": {"seq_id": ["a"] * 3, "pos": [0, 1.5, 2]},
    "text": {"seq_id": ["a"] * 3, "pos": ["0", "x", "1"]},
    "missing": {"seq_id": ["a"] * 3, "pos": [0, None, 1]},
}


def position_error_files(root: Path) -> list[Path]:
    """Each of :data:`POSITION_ERRORS` as CSV and as Parquet."""
    paths = []
    for i, (name, columns) in enumerate(POSITION_ERRORS.items()):
        frame = pd.DataFrame(columns).assign(location="x")
        paths.append(root / f"p{i}.csv")
        frame.to_csv(paths[-1], index=False)
        paths.append(root / f"p{i}.parquet")
        frame.astype({"pos": object if name == "text" else float}).to_parquet(
            paths[-1], index=False
        )
    return paths


#: the command line's small end-to-end input: four stops under two lines, 40 cards tapping twice
TWO_LINE_TAXONOMY = (
    "child,parent\nA,line:1\nB,line:1\nC,line:2\nD,line:2\nline:1,root\nline:2,root\n"
)
FORTY_CARD_TAPS = "card_id,time,stop_id\n" + "".join(
    f"c{i},2024-05-01T08:{i % 60:02d}:00,{'ABCD'[i % 4]}\n"
    f"c{i},2024-05-01T09:{i % 60:02d}:00,{'DCBA'[i % 4]}\n"
    for i in range(40)
)


@pytest.fixture
def forty_cards(tmp_path: Path) -> dict[str, Path]:
    """``taxonomy.csv`` and ``taps.csv`` (:data:`TWO_LINE_TAXONOMY`, :data:`FORTY_CARD_TAPS`) in
    ``tmp_path/data``: their paths and the folder."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "taxonomy.csv").write_text(TWO_LINE_TAXONOMY)
    (folder / "taps.csv").write_text(FORTY_CARD_TAPS)
    return {"taxonomy": folder / "taxonomy.csv", "taps": folder / "taps.csv", "folder": folder}


class CallLog:
    """Calls of watched functions during a test: (name, inside a watched ``fit``, first argument
    as text). Issue 27's "``fit`` is the only reader and validator" tests watch the readers and
    validators on a command's path and check each ran once, inside ``fit``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, bool, str]] = []
        self._depth = 0
        self._monkeypatch = monkeypatch

    def fit(self, cls: type) -> None:
        """Count the time spent inside ``cls.fit`` as "inside fit"."""
        original = cls.fit

        def fit(estimator: Any, *args: Any, **kwargs: Any) -> Any:
            self._depth += 1
            try:
                return original(estimator, *args, **kwargs)
            finally:
                self._depth -= 1

        self._monkeypatch.setattr(cls, "fit", fit)

    def _record(self, name: str, args: tuple[Any, ...]) -> None:
        self.calls.append((name, self._depth > 0, str(args[0]) if args else ""))

    def function(self, module: Any, name: str) -> None:
        """Watch ``module.name`` under every synth/prefixtree/archetypes module that imported it."""
        import sys

        original = getattr(module, name)

        def watched(*args: Any, **kwargs: Any) -> Any:
            self._record(name, args)
            return original(*args, **kwargs)

        for loaded in list(sys.modules.values()):
            if getattr(loaded, "__name__", "").startswith(("synth", "prefixtree", "archetypes")):
                if getattr(loaded, name, None) is original:
                    self._monkeypatch.setattr(loaded, name, watched)

    def method(self, cls: type, name: str, *, arg: int = 0) -> None:
        """Watch the method ``cls.name`` (its ``arg``-th argument after self/cls recorded)."""
        import inspect

        original = inspect.getattr_static(cls, name)
        func = original.__func__ if isinstance(original, classmethod) else original

        def watched(owner: Any, *args: Any, **kwargs: Any) -> Any:
            self._record(f"{cls.__name__}.{name}", args[arg:])
            return func(owner, *args, **kwargs)

        wrapped = classmethod(watched) if isinstance(original, classmethod) else watched
        self._monkeypatch.setattr(cls, name, wrapped)

    def of(self, name: str) -> list[tuple[bool, str]]:
        """(inside fit, first argument) of each call of ``name``."""
        return [(inside, arg) for what, inside, arg in self.calls if what == name]


@pytest.fixture
def call_log(monkeypatch: pytest.MonkeyPatch) -> CallLog:
    """A :class:`CallLog` undone at the end of the test."""
    return CallLog(monkeypatch)
