"""``trips`` on neighbouring inputs, read value by value (issue 25 item 1).

Through the command line (:func:`synth.cli.main`, as :mod:`tests.dp.test_release_neighbours`), on
D and D' = D plus one individual, with identically seeded noise set to zero
(:func:`tests.conftest.zero_noise`): the category histogram moves by exactly one individual, the
archetype histogram's total by exactly one, each stand-in table counts exactly one more
individual, and the manifests are byte-equal. The ``ids`` quirk is the issue's example: cards
``001`` .. ``050`` and ``1`` .. ``50``, then ``x1``; a reader that guessed the id column's type
from its values counted 50 individuals in D and 101 in D'. The Chicago taxi and SUBE formats run
the same check with their own quirks (a company ``001`` next to ``1``; an ISO start time among unix
seconds; zero-padded card ids).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from synth.cli import main
from tests.conftest import spy_trips_counts
from tests.dp.test_release_neighbours import (
    COMMANDS,
    SEED,
    TRIP_IDS,
    _release,
    assert_public_bytes_equal,
    write_public,
)


@pytest.fixture
def public(tmp_path: Path) -> Path:
    """The public taxonomy and trips' schema of :mod:`tests.dp.test_release_neighbours`."""
    return write_public(tmp_path / "public")


TRIPS_CASES = [n for n in COMMANDS if n.startswith("trips")]


@pytest.mark.parametrize("quirk", ["plain", "ids"])
@pytest.mark.parametrize("name", TRIPS_CASES)
def test_zero_noise_trips_count_one_individual_more(
    name: str,
    quirk: str,
    tmp_path: Path,
    public: Path,
    zero_noise: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 25: ``trips`` on D and D' = D plus one card, CSV or Parquet, with or without the
    stand-in. Zero noise: the category histogram moves by exactly one individual (L1 = 1), the
    archetype histogram's total by exactly one (and by L1 = 1 with public data: the model is the
    same), every stand-in table counts exactly one more individual; the manifests are equal.
    With ``ids`` (cards 001..050 and 1..50, then x1) a reader guessing the id column's type from
    its values counted 50 individuals in D and 101 in D'."""
    assert_one_individual_more(name, quirk, tmp_path, public, monkeypatch)


def assert_one_individual_more(
    name: str, quirk: str, root: Path, public: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks of :func:`test_zero_noise_trips_count_one_individual_more`."""
    seen = spy_trips_counts(monkeypatch)
    d = _release(name, root, public, added=False, quirk=quirk)
    d_prime = _release(name, root, public, added=True, quirk=quirk)
    assert_public_bytes_equal(d, d_prime)
    stand_in = "stand-in" in name
    # without public data the joint model (or, with joint=False, the SBH stand-in) measures it
    no_public = ("stand-in", "trips per")
    assert stand_in == any(label.startswith(no_public) for label in seen), sorted(seen)
    assert_counts_one_more(seen, len(TRIP_IDS[quirk][0]), "mode", same_model=not stand_in)


def assert_counts_one_more(
    seen: dict[str, list[object]], n: int, category: str, *, same_model: bool
) -> None:
    """What :func:`spy_trips_counts` saw on D then D' (``n`` individuals in D): the category
    histogram moved by exactly one individual, the archetype histogram's total by one (its
    cells by L1 = 1 when the archetypes are learnt on the same public data), every other
    count (stand-in tables) by one; ``seen`` is emptied."""
    cat = seen.pop(f"{category} histogram")
    assert [int(h.sum()) for h in cat] == [n, n + 1]  # type: ignore[attr-defined]
    assert int(abs(cat[1] - cat[0]).sum()) == 1  # type: ignore[operator]
    arch = seen.pop("archetype histogram")
    assert [int(h.sum()) for h in arch] == [n, n + 1]  # type: ignore[attr-defined]
    if same_model:
        assert int(abs(arch[1] - arch[0]).sum()) == 1  # type: ignore[operator]
    for label, counts in list(seen.items()):
        if label.startswith("joint trip marginals"):  # every table counts each bounded trip
            tables = int(re.search(r"(\d+) tables", label).group(1))  # type: ignore[union-attr]
            moved = np.asarray(counts[1]) - np.asarray(counts[0])  # type: ignore[operator]
            assert (moved >= 0).all() and moved.sum() > 0, label  # D' only adds trips
            if moved.max() > 1:  # uncapped (no public trips): the same trips in each table
                assert moved.sum() % tables == 0, label
        elif label.startswith("trips per"):  # one individual more in one cell
            moved = np.asarray(counts[1]) - np.asarray(counts[0])  # type: ignore[operator]
            assert int(abs(moved).sum()) == 1, label
        else:
            assert counts == [n, n + 1], label
        del seen[label]


# ------------------------------------------------------------------- the other input formats
#: (start time, pickup, dropoff, company) of the Chicago trips of D: day trips from area 8 to 32
#: and night trips back; companies "001" and "1" (two companies, one integer to a type-guesser)
CHICAGO_COLUMNS = (
    "trip_start_timestamp,pickup_community_area,dropoff_community_area,company,payment_type,"
    "fare,tips,trip_seconds,trip_miles"
)
JAN_1_2014 = 1388534400  # a Wednesday, 00:00 UTC


def _chicago(added: bool, quirk: str) -> str:
    rows = []
    for i in range(90):
        night = i % 3 == 0
        start = JAN_1_2014 + (21 if night else 8) * 3600 + 60 * i
        area = (32, 8) if night else (8, 32)
        rows.append(f"{start},{area[0]},{area[1]},{'001' if i % 2 else '1'},Cash,10,1,600,2")
    if added:  # "company": a company no public trip has; "time": an ISO start time
        start = "2014-01-01T21:30:00" if quirk == "time" else str(JAN_1_2014 + 21 * 3600)
        rows.append(f"{start},32,8,{'x1' if quirk == 'company' else '1'},Cash,10,1,600,2")
    return "\n".join([CHICAGO_COLUMNS, *rows]) + "\n"


SUBE_COLUMNS = "id_tarjeta,modo,lat,lon,id_linea,id_ramal,id_tarifa,hora,etapa_red_sube"


def _sube(added: bool, quirk: str) -> str:
    cards, new = TRIP_IDS[quirk]
    rows = []
    for i, card in enumerate([*cards, *([new] if added else [])]):
        night = i % 3 == 0 or card == new
        for hour in (21, 22) if night else (7, 8, 9):
            mode, line = ("TRE", "012") if night else ("COL", "12")
            rows.append(f"{card},{mode},-34.6,-58.4,{line},60,1,{hour},0")
    return "\n".join([SUBE_COLUMNS, *rows]) + "\n"


FORMATS = {
    # format: (writer, flags, n individuals in D, category column)
    "chicago-taxi": (
        _chicago,
        [
            "--id-column",
            "taxi_id",
            "--key-columns",
            "shift,pickup_community_area,dropoff_community_area",
            "--category-column",
            "company",
        ],
        90,
        "company",
    ),
    "sube-taps": (
        _sube,
        ["--id-column", "card_id", "--key-columns", "hour,line,zone", "--category-column", "mode"],
        100,
        "mode",
    ),
}


@pytest.mark.parametrize(
    ("fmt", "quirk"),
    [("chicago-taxi", "company"), ("chicago-taxi", "time"), ("sube-taps", "ids")],
)
def test_zero_noise_input_formats_count_one_individual_more(
    fmt: str, quirk: str, tmp_path: Path, zero_noise: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--input-format chicago-taxi`` (each trip its own individual) and ``sube-taps``: D's
    public file is D itself; D' adds one trip (Chicago) or card (SUBE) with the odd value."""
    write, flags, n, category = FORMATS[fmt]
    seen = spy_trips_counts(monkeypatch)
    outs = []
    for added in (False, True):
        folder = tmp_path / ("d-prime" if added else "d")
        folder.mkdir()
        (folder / "private.csv").write_text(write(added, quirk))
        (folder / "public.csv").write_text(write(False, quirk))
        outs.append(folder / "release")
        argv = ["trips", str(folder / "private.csv"), "--public", str(folder / "public.csv")]
        argv += ["--epsilon", "2", "--delta", "1e-5", "--out", str(outs[-1]), "--archetypes", "2"]
        argv += ["--input-format", fmt, *flags, "--quiet", "--seed", str(SEED)]
        assert main(argv) == 0
    assert_public_bytes_equal(*outs)
    assert_counts_one_more(seen, n, category, same_model=True)


# ------------------------------------------------------------------------------------ canary
def type_guessing_trips_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """Canary: the private trips read with each column's type guessed from its values (the
    reader before issue 25: ``read_table`` without dtypes), patched where ``fit`` reads them
    (issue 27: :func:`archetypes.reading.read_trips`)."""
    import archetypes.reading
    from synth.io import read_table

    monkeypatch.setattr(
        archetypes.reading, "read_private_trips", lambda path, **_: read_table(path)
    )


def test_canary_type_guessing_trips_reader_is_caught(
    tmp_path: Path, public: Path, zero_noise: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_one_individual_more("trips", "ids", tmp_path / "control", public, monkeypatch)
    type_guessing_trips_reader(monkeypatch)
    with pytest.raises(AssertionError, match=r"\[50, 101\]"):
        assert_one_individual_more("trips", "ids", tmp_path / "canary", public, monkeypatch)
