"""Property (issue 18): random small tables, taxonomies and parameters through each command's
release path (the CLI in this process) end in success, or in a user error said in one line (exit 2);
never in another exception (exit 1), and never leave a stage, a temporary file or half an output.

A bounded number of examples runs in the default suite; ``-m slow`` runs many more.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth.cli import main

STOPS = ["A", "B", "C", "D", "NA", "null", " padded ", "=cmd()", "007", "é", "a,b", 'q"t', "$x$"]
TIMES = [
    "2024-05-01T08:00:00",
    "2024-05-01T08:40:00+02:00",
    "2024-05-01 17:59",
    "1714550400",
    "",
    "garbage",
    "2024-13-45T99:00",
]
EPSILONS = [1e-300, 1e-16, 1e-9, 0.05, 1.0, 8.0, 1000.0, 1e15, 1e308, 0.0, -1.0, float("nan")]


SAFE_STOPS = [s for s in STOPS if s not in ("NA", "null")]
SAFE_TIMES = TIMES[:4]
CARDS = ["c1", "c2", "c3", "x y", "NA", ""]


@st.composite
def taps_and_taxonomy(draw: st.DrawFn) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Half the examples hold only valid values (the release path runs to its end); the other
    half mix in empty, NA-like and unparsable values and stops missing from the taxonomy."""
    hostile = draw(st.booleans())
    stops = draw(
        st.lists(
            st.sampled_from(STOPS if hostile else SAFE_STOPS), min_size=1, max_size=6, unique=True
        )
    )
    n = draw(st.integers(0 if hostile else 1, 40))

    def column(values: list[str]) -> list[str]:
        return draw(st.lists(st.sampled_from(values), min_size=n, max_size=n))

    taps = pd.DataFrame(
        {
            "card_id": column(CARDS if hostile else CARDS[:4]),
            "time": column(TIMES if hostile else SAFE_TIMES),
            "stop_id": column(stops),
        }
    )
    if hostile:
        known = draw(st.lists(st.sampled_from(stops), unique=True, max_size=len(stops)))
    else:
        known = stops
    lines = draw(st.integers(1, 3))
    edges = [(s, f"line:{i % lines}") for i, s in enumerate(known)]
    edges += [(f"line:{i}", "root") for i in range(lines)]
    return taps, pd.DataFrame(edges, columns=["child", "parent"])


def _outcome(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def _check(code: int, err: str, folder: Path, out: Path, inputs: set[str]) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("warning:")]
    assert code in (0, 2), err
    assert "Traceback" not in err
    if code == 2:
        assert len(lines) == 1, err
        assert ": error: " in lines[0]
        assert not out.exists()
    else:
        assert (out / "manifest.json").is_file()
    left = {p.name for p in folder.iterdir()} - inputs - {out.name}
    assert not left, left  # no stage, no temporary file
    if out.exists():
        assert not [p for p in out.rglob("*") if ".tmp-" in p.name or ".stage-" in p.name]


def _run_sequences(data: tuple[pd.DataFrame, pd.DataFrame], epsilon: float, height: int) -> None:
    taps, taxonomy = data
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        taps.to_csv(folder / "taps.csv", index=False)
        taxonomy.to_csv(folder / "tax.csv", index=False)
        out = folder / "out"
        argv = ["sequences", str(folder / "taps.csv"), "--taxonomy", str(folder / "tax.csv")]
        argv += ["--epsilon", repr(epsilon), "--height", str(height), "--out", str(out)]
        code, err = _outcome([*argv, "--seed", "1", "--quiet"])
        _check(code, err, folder, out, {"taps.csv", "tax.csv"})
        if code == 0:  # the release exports, or says in one line why not (an empty release)
            code, err = _outcome(["export", str(out), "--to", "od", "--quiet"])
            assert code == 0 or (code == 2 and "no rows" in err), err
            assert "Traceback" not in err


def _run_marginals(taps: pd.DataFrame, epsilon: float, delta: float, pure: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        taps.to_csv(folder / "taps.csv", index=False)
        out = folder / "out"
        argv = ["marginals", str(folder / "taps.csv"), "--epsilon", repr(epsilon)]
        argv += ["--delta", repr(delta), "--out", str(out), "--seed", "1", "--quiet"]
        code, err = _outcome([*argv, *(["--pure"] if pure else [])])
        _check(code, err, folder, out, {"taps.csv"})
        if code == 0:
            audit = ["audit", str(out), "--quiet"]
            code, err = _outcome(audit)
            assert code == 0, err


def _run_trips(n: int, epsilon: float, seed: int) -> None:
    import numpy as np

    rng = np.random.default_rng(seed)
    trips = pd.DataFrame(
        {
            "card": rng.choice(["k1", "k2", "NA", "k 4"], n),
            "hour": rng.integers(0, 24, n),
            "zone": rng.choice(["A", "=B", "é"], n),
            "mode": rng.choice(["bus", "rail"], n),
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        trips.to_csv(folder / "private.csv", index=False)
        trips.sample(frac=1.0, random_state=seed).to_csv(folder / "public.csv", index=False)
        out = folder / "out"
        argv = ["trips", str(folder / "private.csv"), "--public", str(folder / "public.csv")]
        argv += ["--epsilon", repr(epsilon), "--delta", "1e-5", "--out", str(out)]
        argv += ["--id-column", "card", "--key-columns", "hour,zone", "--category-column", "mode"]
        code, err = _outcome([*argv, "--archetypes", "2", "--seed", "1", "--quiet"])
        _check(code, err, folder, out, {"private.csv", "public.csv"})


EPSILON = st.sampled_from(EPSILONS) | st.floats(1e-3, 50.0)
CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large]


def _sequences_property(examples: int):  # type: ignore[no-untyped-def]
    @settings(max_examples=examples, deadline=None, suppress_health_check=CHECKS)
    @given(taps_and_taxonomy(), EPSILON, st.integers(-1, 4))
    def prop(data, epsilon, height):  # type: ignore[no-untyped-def]
        _run_sequences(data, epsilon, height)

    return prop


def _marginals_property(examples: int):  # type: ignore[no-untyped-def]
    @settings(max_examples=examples, deadline=None, suppress_health_check=CHECKS)
    @given(
        taps_and_taxonomy(),
        EPSILON,
        st.sampled_from([1e-12, 1e-6, 0.5, 0.0, 1.0]),
        st.booleans(),
    )
    def prop(data, epsilon, delta, pure):  # type: ignore[no-untyped-def]
        _run_marginals(data[0], epsilon, delta, pure)

    return prop


def _trips_property(examples: int):  # type: ignore[no-untyped-def]
    @settings(max_examples=examples, deadline=None, suppress_health_check=CHECKS)
    @given(st.integers(0, 30), EPSILON, st.integers(0, 1000))
    def prop(n, epsilon, seed):  # type: ignore[no-untyped-def]
        _run_trips(n, epsilon, seed)

    return prop


def test_sequences_property() -> None:
    _sequences_property(12)()


def test_marginals_property() -> None:
    _marginals_property(12)()


def test_trips_property() -> None:
    _trips_property(4)()


@pytest.mark.slow
@pytest.mark.parametrize(
    "prop", [_sequences_property(300), _marginals_property(300), _trips_property(60)]
)
def test_property_long(prop) -> None:  # type: ignore[no-untyped-def]
    prop()
