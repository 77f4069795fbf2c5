"""Neighbour and zero-noise cases of ``transit-synth sequences`` for date columns and for a card
active on two days, read from taps (issue 25, "DP tests on what users run").

Each case writes D (``N_CARDS`` cards) and D' = D plus one card ``new`` under the same file name in
two folders and runs the command line with the same seed: the published bytes (manifest, headers)
must be equal, and under zero noise the release may move by the one added card only
(:func:`tests.dp.test_release_neighbours.assert_one_card_apart`).

- Dates (``fecha`` + ``hora``, as SUBE writes them: ``fecha`` is dd/mm/yyyy): each value is read
  on its own, ISO if it is ISO, else day-first. D's dates are all ambiguous (``03/04/2019``,
  ``04/03/2019``), the added card's are not (``28/11/2019``): a rule choosing day-first or
  month-first from the whole column reorders every card of D in one of the two (the canary).
  Mixed ISO and dd/mm values in one column are read value by value.
- A card active on two days: under the card unit it is one sequence (its first ``height``
  locations over both days); ``per_day`` gives one sequence per card-day and the manifest says
  ``card-day``. The canary builds one sequence per card-day while the manifest says ``card``: the
  added card then moves the release by two sequences.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import prefixtree.inputs
import synth.records.common
import synth.records.sequences
from prefixtree import PrefixTreeSynthesizer
from synth.cli import main
from synth.records.taps import sequences_from_taps
from synth.taxonomy import Taxonomy
from tests.dp.test_release_neighbours import (
    N_CARDS,
    _sequences_counter,
    assert_one_card_apart,
    assert_public_bytes_equal,
)

SEED = 13
#: (stop, fecha, hora) of every card of D, and of the added card, per case
CASES: dict[str, tuple[list[tuple[str, str, int]], list[tuple[str, str, int]]]] = {
    # day-first: stop 2 on 4 March, then stop 1 on 3 April (month-first would swap them)
    "ambiguous dd/mm": (
        [("1", "03/04/2019", 8), ("2", "04/03/2019", 7)],
        [("3", "28/11/2019", 9), ("1", "29/11/2019", 10)],
    ),
    # ISO and dd/mm in one column, each read on its own: 3 April (ISO) after 4 March (dd/mm)
    "mixed ISO and dd/mm": (
        [("1", "2019-04-03", 8), ("2", "04/03/2019", 7)],
        [("3", "2019-11-28", 9), ("1", "28/11/2019", 10)],
    ),
    # one card, two days: stops 1, 2 on the 28th, stop 3 on the 29th
    "two days": (
        [("1", "28/11/2019", 7), ("2", "28/11/2019", 9), ("3", "29/11/2019", 8)],
        [("3", "28/11/2019", 6), ("1", "29/11/2019", 7)],
    ),
}
#: what D's cards are released as under zero noise (card unit)
D_SEQUENCE = {"ambiguous dd/mm": ("2", "1"), "mixed ISO and dd/mm": ("2", "1")}
D_SEQUENCE["two days"] = ("1", "2", "3")


def taps(case: str, added: bool) -> pd.DataFrame:
    d_taps, new_taps = CASES[case]
    cards = [(f"c{i:03d}", d_taps) for i in range(N_CARDS)]
    if added:
        cards.append(("new", new_taps))
    rows = [(card, stop, fecha, hora) for card, ts in cards for stop, fecha, hora in ts]
    return pd.DataFrame(rows, columns=["card_id", "stop_id", "fecha", "hora"])


def release(root: Path, case: str, added: bool, *extra: str) -> Path:
    data = root / ("d-prime" if added else "d")
    data.mkdir(parents=True)
    taps(case, added).to_csv(data / "taps.csv", index=False)
    tax = root / "public" / "tax.csv"  # public: the same file for D and D'
    if not tax.exists():
        tax.parent.mkdir()
        edges = [("1", "r"), ("2", "r"), ("3", "r")]
        pd.DataFrame(edges, columns=["child", "parent"]).to_csv(tax, index=False)
    out = data / "release"
    argv = ["sequences", str(data / "taps.csv"), "--taxonomy", str(tax)]
    argv += ["--epsilon", "12", "--height", "3", "--out", str(out), "--quiet", *extra]
    assert main([*argv, "--seed", str(SEED)]) == 0
    return out


ENGINES = [["--engine", "memory"], ["--engine", "duckdb"]]


@pytest.mark.parametrize("case", list(CASES))
def test_published_bytes_equal_on_neighbours(case: str, tmp_path: Path) -> None:
    d = release(tmp_path, case, False)
    d_prime = release(tmp_path, case, True)
    assert_public_bytes_equal(d, d_prime)


@pytest.mark.parametrize("engine", ENGINES, ids=["memory", "duckdb"])
@pytest.mark.parametrize("case", list(CASES))
def test_zero_noise_moves_by_the_added_card_only(
    case: str, engine: list[str], tmp_path: Path, zero_noise: object
) -> None:
    d = release(tmp_path, case, False, *engine)
    d_prime = release(tmp_path, case, True, *engine)
    assert_one_card_apart("sequences", d, d_prime)
    released = _sequences_counter(d)
    assert released == Counter({tuple((s,) for s in D_SEQUENCE[case]): N_CARDS}), released
    assert json.loads((d / "manifest.json").read_text())["privacy_unit"] == "card"


def test_per_day_gives_the_card_day_unit(zero_noise: object) -> None:
    """``per_day``: the two-day card is two sequences, and the manifest's unit is the card-day."""
    tax = Taxonomy.from_edges([("1", "r"), ("2", "r"), ("3", "r")])
    syn = PrefixTreeSynthesizer(
        epsilon=12.0, height=3, taxonomy=tax, per_day=True, input_format="taps", random_state=1
    ).fit(taps("two days", False))
    seqs = syn.sample().groupby("seq_id")["location"].agg(tuple)
    assert Counter(seqs) == Counter({("1", "2"): N_CARDS, ("3",): N_CARDS})
    assert syn.ledger_.unit == "card-day"
    assert "group privacy" in syn.ledger_.to_dict({})["neighbouring"]


# ------------------------------------------------------------------------------------ canaries
def column_wide_day_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Canary: day-first or month-first chosen from the whole column (day-first only when some
    value's first field exceeds 12, as a format guess over the column would)."""
    original = synth.records.common._parse_dates

    def guessed(raw: pd.Series, column: str, src: str, date_format: str | None) -> pd.Series:
        text = raw.astype(str).str.strip()
        slashed = text[text.str.contains("/")]
        day_first = bool((slashed.str.split("/").str[0].astype(int) > 12).any())
        fmt = date_format or ("%d/%m/%Y" if day_first else "%m/%d/%Y")
        if slashed.empty:
            return original(raw, column, src, date_format)
        return original(raw, column, src, fmt)

    monkeypatch.setattr(synth.records.common, "_parse_dates", guessed)


def per_day_under_card_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Canary: one sequence per card-day while the manifest keeps the card unit."""

    def grouped(taps: pd.DataFrame, **kwargs: Any) -> pd.DataFrame:
        out = sequences_from_taps(taps, **{**kwargs, "per_day": True})
        out.attrs["privacy_unit"] = "card"
        return out

    for module in (synth.records.sequences, prefixtree.inputs):
        monkeypatch.setattr(module, "sequences_from_taps", grouped)


CANARIES = {
    "column-wide day-first": (column_wide_day_first, "ambiguous dd/mm"),
    "card-day sequences under the card unit": (per_day_under_card_unit, "two days"),
}


@pytest.mark.parametrize("canary", list(CANARIES))
def test_canaries_are_caught(
    canary: str, tmp_path: Path, zero_noise: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    patch, case = CANARIES[canary]
    patch(monkeypatch)
    d = release(tmp_path, case, False, "--engine", "memory")
    d_prime = release(tmp_path, case, True, "--engine", "memory")
    with pytest.raises(AssertionError, match="moved the release by"):
        assert_one_card_apart("sequences", d, d_prime)
