"""The generator contract (scikit-learn estimator conventions) over the three generators.

One parametrised test per promise: ``sklearn.base.clone`` gives an unfitted copy with equal
parameters; every method needing a fit raises :class:`~synth.errors.NotFittedError`; a seed
reproduces the release; the ledger stays within its cap; shuffling the input rows changes nothing.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from archetypes import ArchetypeSynthesizer, TripSchema
from prefixtree import PrefixTreeSynthesizer
from synth import OpalMarginals
from synth.errors import ConfigError, NotFittedError
from synth.generator import Generator
from synth.params import Interval, Options, validate_params
from synth.taxonomy import Taxonomy

# ---------------------------------------------------------------------------- data
LINES = {"L1": ["a", "b", "c", "d"], "L2": ["e", "f", "g", "h"], "L3": ["i", "j", "k", "l"]}
TAXONOMY = Taxonomy.from_edges(
    [(s, line) for line, stops in LINES.items() for s in stops] + [(ln, "root") for ln in LINES]
)


def taps(n_cards: int = 150, seed: int = 0) -> pd.DataFrame:
    """Taps of cards riding one line each, 1-4 boardings; many cards tap in the same minute (a
    card's own taps are at distinct times: same-time taps of one card keep their input order, the
    documented rule of ``synth.records.sequences_from_taps``)."""
    rng = np.random.default_rng(seed)
    rows = []
    for card in range(n_cards):
        stops = LINES[f"L{1 + card % 3}"]
        minute = int(rng.integers(6 * 60, 9 * 60))
        for _ in range(int(rng.integers(1, 5))):
            stamp = pd.Timestamp("2024-03-05") + pd.Timedelta(minutes=minute)
            rows.append({"card_id": f"c{card}", "time": stamp, "stop_id": rng.choice(stops)})
            minute += int(rng.integers(1, 3)) * 20
    return pd.DataFrame(rows)


def trips(n: int = 200, seed: int = 0) -> pd.DataFrame:
    """Morning bus riders and night rail riders, 1-3 trips each."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        night = rng.random() < 0.5
        for _ in range(int(rng.integers(1, 4))):
            rows.append(
                {
                    "card": f"s{seed}-{i}",
                    "hour": int(rng.integers(21, 24) if night else rng.integers(6, 9)),
                    "zone": str(rng.choice(["B", "C"]) if night else "A"),
                    "mode": "rail" if night else "bus",
                }
            )
    return pd.DataFrame(rows)


SCHEMA = TripSchema.from_dict(
    {
        "card": {"kind": "id"},
        "hour": {"kind": "categorical", "values": list(range(24))},
        "zone": {"kind": "categorical", "values": ["A", "B", "C", "D"]},
        "mode": {"kind": "categorical", "values": ["bus", "rail", "ferry"]},
    }
)


def ferry_taps(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 400
    time = pd.Timestamp("2016-08-12 06:00") + pd.to_timedelta(rng.integers(0, 600, n), unit="m")
    stop = rng.choice(["manly", "quay", "watsons"], n)
    return pd.DataFrame({"time": time, "stop_id": stop, "mode": "ferry", "tap": "on"})


@dataclass(frozen=True)
class Case:
    make: Callable[[int | None], Any]
    data: Callable[[], pd.DataFrame]
    fit_args: tuple[Any, ...] = ()


CASES = {
    "prefixtree": Case(
        make=lambda seed: PrefixTreeSynthesizer(
            epsilon=2.0, height=3, taxonomy=TAXONOMY, random_state=seed
        ),
        data=taps,
    ),
    "archetypes": Case(
        make=lambda seed: ArchetypeSynthesizer(
            epsilon=2.0,
            delta=1e-5,
            key_columns=["hour", "zone"],
            category_column="mode",
            id_column="card",
            archetypes=2,
            schema=SCHEMA,
            order_column="hour",
            random_state=seed,
        ),
        data=lambda: trips(200, 1),
        fit_args=(trips(150, 0),),
    ),
    "opal": Case(
        make=lambda seed: OpalMarginals(epsilon=4, random_state=seed),
        data=ferry_taps,
    ),
}

PARAMS = [pytest.param(name, id=name) for name in CASES]


def frames(release: Any) -> Iterator[pd.DataFrame]:
    """The DataFrames of a release (one frame, or a dict of named tables)."""
    if isinstance(release, pd.DataFrame):
        yield release
    else:
        for name in sorted(release):
            yield release[name]


def assert_same_release(a: Any, b: Any) -> None:
    for x, y in zip(frames(a), frames(b), strict=True):
        pd.testing.assert_frame_equal(x, y)


def fitted(name: str, seed: int | None = 3, data: pd.DataFrame | None = None) -> Any:
    case = CASES[name]
    generator = case.make(seed)
    assert isinstance(generator, Generator)
    return generator.fit(case.data() if data is None else data, *case.fit_args)


def same_params(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(repr(a[k]) == repr(b[k]) for k in a)


# ---------------------------------------------------------------------------- the contract
@pytest.mark.parametrize("name", PARAMS)
def test_clone_gives_an_unfitted_copy_with_equal_params(name: str) -> None:
    generator = fitted(name)
    copy = clone(generator)
    assert type(copy) is type(generator)
    assert same_params(copy.get_params(deep=False), generator.get_params(deep=False))
    with pytest.raises(NotFittedError):
        copy.sample()
    generator.sample()  # the original stays fitted
    assert repr(copy) == repr(generator)


@pytest.mark.parametrize("name", PARAMS)
def test_not_fitted_raises_one_error(name: str) -> None:
    generator = CASES[name].make(3)
    assert isinstance(generator, Generator)
    for call in (generator.sample, lambda: next(iter(generator.iter_sample()))):
        with pytest.raises(NotFittedError, match=r"is not fitted yet: call fit\(data\) first"):
            call()
    with pytest.raises(ValueError):
        generator.sample()
    for call in (generator.manifest, lambda: generator.write("never-written")):
        with pytest.raises(NotFittedError):
            call()
    assert not Path("never-written").exists()


@pytest.mark.parametrize("name", PARAMS)
def test_write_is_the_release_contract(name: str, tmp_path: Path) -> None:
    """``write``: data files and ``manifest()``'s manifest naming the generator, nothing else."""
    generator = fitted(name)
    written = generator.write(tmp_path / "out", format="parquet")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest == generator.manifest() and manifest["parameters"]["generator"]
    files = sorted(p.name for p in Path(written).iterdir())
    assert {"manifest.json", "README.md", "datasheet.json"} <= set(files) and len(files) > 3
    assert all(f.endswith((".parquet", ".json")) for f in files if f != "README.md")
    assert all(isinstance(n, int) for n in written.counts.values())
    with pytest.raises(ConfigError):
        generator.write(tmp_path / "other", format="xlsx")


@pytest.mark.parametrize("name", PARAMS)
def test_seeded_fits_reproduce_the_release(name: str) -> None:
    assert_same_release(fitted(name, seed=11).sample(), fitted(name, seed=11).sample())


@pytest.mark.parametrize("name", PARAMS)
def test_ledger_within_the_cap(name: str) -> None:
    generator = fitted(name)
    ledger = generator.ledger_
    assert 0 < ledger.spent_epsilon <= float(generator.epsilon)
    assert ledger.remaining_epsilon >= 0 and ledger.remaining_delta >= 0


@pytest.mark.parametrize("name", PARAMS)
def test_input_row_order_does_not_change_the_release(name: str) -> None:
    data = CASES[name].data()
    shuffled = data.sample(frac=1.0, random_state=5).reset_index(drop=True)
    assert not shuffled.equals(data)
    assert_same_release(fitted(name, data=data).sample(), fitted(name, data=shuffled).sample())


@pytest.mark.parametrize("name", PARAMS)
def test_repr_and_set_params(name: str) -> None:
    generator = CASES[name].make(3)
    assert isinstance(generator, Generator)
    text = repr(generator)
    assert text.startswith(type(generator).__name__ + "(") and "epsilon=" in text
    assert "random_state=3" in text
    assert generator.set_params(random_state=4) is generator
    assert generator.get_params()["random_state"] == 4
    with pytest.raises(ConfigError, match="invalid parameter 'no_such'"):
        generator.set_params(no_such=1)


# ---------------------------------------------------------------------------- the base itself
def test_constraint_table_names_the_parameter_and_the_rule() -> None:
    table = {"height": [Interval("integer", 1)], "variant": [None, Options(("a", "b"))]}
    validate_params(table, {"height": 2, "variant": None})
    with pytest.raises(ConfigError, match=r"height must be a positive integer, got True"):
        validate_params(table, {"height": True, "variant": "a"})
    with pytest.raises(ConfigError, match=r"variant must be one of a, b or None, got 'c'"):
        validate_params(table, {"height": 1, "variant": "c"})
    real = [Interval("real", 0, 1, closed="right")]
    with pytest.raises(ConfigError, match=r"x must be a number in \(0, 1\], got 0"):
        validate_params({"x": real}, {"x": 0})


def test_bad_params_fail_at_fit_not_in_init() -> None:
    generator = PrefixTreeSynthesizer(epsilon=1.0, height=0, taxonomy=TAXONOMY)
    assert generator.height == 0
    with pytest.raises(ConfigError, match="height"):
        generator.fit(taps(5))


def test_old_fit_keywords_still_work_with_a_deprecation_warning() -> None:
    data = taps(40)
    calls: list[tuple[int, int]] = []
    generator = PrefixTreeSynthesizer(epsilon=2.0, height=2, taxonomy=TAXONOMY, random_state=1)
    removal = r"fit\(progress=...\) is deprecated and will be removed in transit-synth 0\.3\.0"
    with pytest.warns(DeprecationWarning, match=removal):
        generator.fit(data, progress=lambda done, total: calls.append((done, total)))
    assert calls and generator.progress is None  # fit never changes the parameters
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = PrefixTreeSynthesizer(
            epsilon=2.0,
            height=2,
            taxonomy=TAXONOMY,
            random_state=1,
            progress=lambda done, total: calls.append((done, total)),
        ).fit(data)
    assert_same_release(generator.sample(), again.sample())


def test_fit_takes_taps_sequences_or_trips_and_paths(tmp_path: Any) -> None:
    data = taps(60)
    base = PrefixTreeSynthesizer(epsilon=2.0, height=3, taxonomy=TAXONOMY, random_state=2)
    from_taps = clone(base).fit(data).sample()
    sequences = clone(base).fit(data).sample()  # a release is long-format sequences
    assert list(sequences.columns[:3]) == ["seq_id", "pos", "location"]
    path = tmp_path / "taps.csv"
    data.to_csv(path, index=False)
    assert_same_release(clone(base).fit(path).sample(), from_taps)
    as_trips = data.rename(columns={"time": "on_time", "stop_id": "on_stop"})
    assert_same_release(clone(base).fit(as_trips).sample(), from_taps)
    declared = clone(base).set_params(input_format="trips").fit(as_trips).sample()
    assert_same_release(declared, from_taps)
    with pytest.raises(ConfigError, match="input_format must be one of"):
        clone(base).set_params(input_format="rows").fit(data)
