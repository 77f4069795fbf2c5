"""``trips --input-format sube-taps --metadata M`` without public trips, on neighbours.

D: the SUBE taps of :func:`tests.conftest.sube_taps`; D' = D plus one card on a line
(555) that neither the metadata nor D has. With zero noise (:func:`tests.conftest.zero_noise`):
every published file but the trips is byte-equal (the line domain is the metadata's, whatever
the taps), the category histogram moves by one card, and the joint tables by that card's trips.
Near-miss canary: a reader that takes the line domain from the private taps (what a synthesizer
learning its category lists from the data does) publishes line 555 in D' only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.cli import main
from tests.conftest import spy_trips_counts, sube_trips_argv, write_sube_inputs
from tests.dp.test_release_neighbours import assert_public_bytes_equal

N_CARDS = 60  # the cards of D (tests.conftest.sube_taps)


def releases(root: Path) -> tuple[Path, Path]:
    outs = []
    for added in (False, True):
        folder = root / ("d-prime" if added else "d")
        paths = write_sube_inputs(folder, extra_card=added)
        outs.append(folder / "release")
        flags = ["--metadata", str(paths["metadata"]), "--public-stand-in"]
        assert main(sube_trips_argv(paths, outs[-1], *flags)) == 0
    return outs[0], outs[1]


def test_manifests_byte_equal_and_one_card_more(
    tmp_path: Path, zero_noise: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = spy_trips_counts(monkeypatch)
    d, d_prime = releases(tmp_path)
    assert_public_bytes_equal(d, d_prime)
    joint = json.loads((d / "manifest.json").read_text())["parameters"]["joint"]
    measured = joint["measurements"][-1]  # the trip tables (after the trips-per-card one)
    assert joint["public_groups"] == [["mode", "line", "branch"]]
    assert max(measured["weights"]) == 3  # the group's one-way table: its 3 columns
    # the added card's trips within the bound k, in every table times its weight
    counted = min(3, measured["max_records_per_individual"])
    label = next(k for k in seen if k.startswith("joint trip marginals"))
    before, after = (np.asarray(c) for c in seen.pop(label))
    assert (after >= before).all() and int((after - before).sum()) == counted * sum(
        measured["weights"]
    )
    trips_per = next(k for k in seen if k.startswith("trips per"))
    before, after = (np.asarray(c) for c in seen.pop(trips_per))
    assert int(abs(after - before).sum()) == 1  # one card more in one cell
    category = seen.pop("mode histogram")
    assert [int(h.sum()) for h in category] == [N_CARDS, N_CARDS + 1]  # type: ignore[attr-defined]
    assert int(abs(category[1] - category[0]).sum()) == 1  # type: ignore[operator]
    archetype = seen.pop("archetype histogram")
    assert [int(h.sum()) for h in archetype] == [N_CARDS, N_CARDS + 1]  # type: ignore[attr-defined]
    assert not seen, sorted(seen)  # nothing else measured


def private_line_domain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Canary: the metadata's lines plus those of the private taps (a reader that extends the
    public domain with the values it sees)."""
    import archetypes.synthesizer
    from archetypes.schema import Column

    real = archetypes.synthesizer.read_trip_inputs

    def leaky(*args: object, **kwargs: object) -> tuple[pd.DataFrame, object, object]:
        private, public, schema = real(*args, **kwargs)  # type: ignore[arg-type]
        known = set(schema["line"].values) - {"unknown"}  # type: ignore[attr-defined]
        lines = (*sorted(known | set(private["line"])), "unknown")
        column = Column("line", "categorical", lines, other="unknown")
        return private, public, schema.replace(column)

    monkeypatch.setattr(archetypes.synthesizer, "read_trip_inputs", leaky)


def test_canary_private_line_domain_is_caught(
    tmp_path: Path, zero_noise: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    d, d_prime = releases(tmp_path / "control")
    assert_public_bytes_equal(d, d_prime)
    private_line_domain(monkeypatch)
    d, d_prime = releases(tmp_path / "canary")
    with pytest.raises(AssertionError, match="differs between D and D'"):
        assert_public_bytes_equal(d, d_prime)
