"""The datasheet of every release (``README.md`` and ``datasheet.json``, :mod:`synth.datasheet`):
written by the one release writer for each generator, from the manifest, the data headers and
public inputs; it states the columns, the guarantee per unit in words, the bounds and the
distortions, and the public location names (a names file, a GTFS feed). That it holds nothing of
the data is checked on neighbouring datasets in tests/dp/test_release_neighbours.py."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from archetypes import ArchetypeSynthesizer, TripSchema
from prefixtree import PrefixTreeSynthesizer
from synth import OpalMarginals
from synth.datasheet import read_names
from synth.errors import InputError
from synth.taxonomy import Taxonomy

TAXONOMY = Taxonomy.from_edges(
    [(s, line) for line, stops in {"L1": "abcd", "L2": "efgh"}.items() for s in stops]
    + [("L1", "root"), ("L2", "root")]
)


def _sequences(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 6, n)
    return pd.DataFrame(
        {
            "seq_id": np.repeat(np.arange(n), lengths),
            "pos": np.concatenate([np.arange(k) for k in lengths]),
            "location": rng.choice(list("abcdefgh"), int(lengths.sum())),
        }
    )


def _read(folder: Path) -> tuple[str, dict]:
    readme = (folder / "README.md").read_text(encoding="utf-8")
    return readme, json.loads((folder / "datasheet.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tree() -> PrefixTreeSynthesizer:
    return PrefixTreeSynthesizer(
        taxonomy=TAXONOMY, epsilon=1.0, height=3, variant="simple", random_state=1
    ).fit(_sequences())


def test_sequences_datasheet_states_columns_guarantee_bounds(
    tree: PrefixTreeSynthesizer, tmp_path: Path
) -> None:
    written = tree.write(tmp_path / "rel")
    readme, sheet = _read(written.path)
    assert sheet["files"][0]["file"] == "sequences.csv"
    assert [c["name"] for c in sheet["files"][0]["columns"]] == ["seq_id", "pos", "location"]
    assert "| `seq_id` | synthetic passenger number" in readme
    in_words = sheet["privacy"]["in_words"]
    assert in_words.startswith("Adding or removing one card (with all its taps) changes")
    assert "at most a factor e^1 (about 2.72)" in in_words and "delta 0 per card" in in_words
    assert in_words in readme
    assert "height h = 3: each sequence is cut to its first h locations" in sheet["bounded"]
    assert any(d.startswith("sequences longer than h = 3 are cut") for d in sheet["distortions"])
    assert "## Known distortions (by design)" in readme and "## Location names" in readme
    assert "No public names were given" in readme
    assert not any(str(v) in readme for v in ("nan", "None"))


def test_manifest_states_that_the_guarantee_is_what_counts(tree: PrefixTreeSynthesizer) -> None:
    manifest = tree.manifest()
    words = manifest["guarantee_in_words"]
    assert words.startswith("The guarantee is epsilon 1, delta 0 per card")
    assert "this is what counts" in words and "'spent' and 'remaining' are bookkeeping" in words
    assert {"spent", "remaining", "guarantee", "cap"} <= set(manifest)  # keys others read


def test_names_file_lists_location_names(tree: PrefixTreeSynthesizer, tmp_path: Path) -> None:
    names = tmp_path / "names.csv"
    names.write_text("location,name\na,Alpha Street\nb,Bravo | Square\n", encoding="utf-8")
    written = tree.write(tmp_path / "rel", public_inputs={"names": names})
    readme, sheet = _read(written.path)
    assert sheet["location_names"] == {
        "source": "names file names.csv",
        "names": {"a": "Alpha Street", "b": "Bravo | Square"},
    }
    assert "| `a` | Alpha Street |" in readme and "| `b` | Bravo \\| Square |" in readme
    manifest = json.loads((written.path / "manifest.json").read_text())
    assert [p["role"] for p in manifest["inputs"]["public"]] == ["names"]  # fingerprinted
    bad = tmp_path / "bad.csv"
    bad.write_text("stop,label\na,A\n", encoding="utf-8")
    with pytest.raises(InputError, match="location,name"):
        read_names(bad)


def test_gtfs_names_from_stops_and_routes(tmp_path: Path) -> None:
    feed = tmp_path / "feed.zip"
    with zipfile.ZipFile(feed, "w") as zf:
        zf.writestr("stops.txt", "stop_id,stop_name\n70011,San Francisco\n70012,\n")
        zf.writestr("routes.txt", "route_id,route_short_name,route_type\nBB,Baby Bullet,2\n")
    assert read_names(feed) == {"70011": "San Francisco", "route:BB": "Baby Bullet"}


def test_marginals_datasheet_states_suppression_and_unit(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 400
    taps = pd.DataFrame(
        {
            "card_id": [f"c{i % 120}" for i in range(n)],
            "time": pd.Timestamp("2024-03-05 06:00")
            + pd.to_timedelta(rng.integers(0, 180, n), "m"),
            "stop_id": rng.choice(list("abcd"), n),
            "mode": "bus",
        }
    )
    release = OpalMarginals(
        epsilon=4.0, delta=1e-6, privacy_unit="card_id", max_contributions=2, random_state=1
    ).fit(taps)
    readme, sheet = _read(release.write(tmp_path / "m").path)
    assert {f["file"] for f in sheet["files"]} >= {"on_location.csv", "on_time_location.csv"}
    assert (
        "one card_id (with all its taps, at most 2 counted per side)"
        in sheet["privacy"]["in_words"]
    )
    assert any("are suppressed (absent from the file)" in b for b in sheet["bounded"])
    assert "| `count` | noisy number of taps in this cell" in readme
    assert "| `on_time_location.csv` | `mode`, `day`, `time`, `location`, `count` |" in readme
    per_row = OpalMarginals(epsilon=4.0, delta=1e-6, random_state=1).fit(taps)
    _, sheet = _read(per_row.write(tmp_path / "rows").path)
    in_words = sheet["privacy"]["in_words"]
    assert re.match(r"Adding or removing one (tap|trip) changes", in_words), in_words
    assert "the budget applies to each (mode, day) partition" in in_words
    assert not any(b.startswith("at most") for b in sheet["bounded"])  # no per-card bound


def test_trips_datasheet_describes_the_schema(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    trips = pd.DataFrame(
        {
            "card": [f"s{i // 2}" for i in range(300)],
            "hour": rng.integers(6, 9, 300),
            "zone": rng.choice(["A", "B"], 300),
            "mode": rng.choice(["bus", "rail"], 300),
        }
    )
    schema = TripSchema.from_dict(
        {
            "card": {"kind": "id"},
            "hour": {"kind": "categorical", "values": list(range(24))},
            "zone": {"kind": "categorical", "values": ["A", "B", "C"]},
            "mode": {"kind": "categorical", "values": ["bus", "rail"]},
        }
    )
    synth = ArchetypeSynthesizer(
        epsilon=2.0,
        delta=1e-5,
        id_column="card",
        key_columns=["hour", "zone"],
        category_column="mode",
        archetypes=2,
        unit="card",
        schema=schema,
        random_state=0,
    ).fit(trips, trips)
    readme, sheet = _read(synth.write(tmp_path / "t").path)
    meanings = {c["name"]: c["meaning"] for c in sheet["files"][0]["columns"]}
    assert meanings["card"].startswith("synthetic card: groups the rows")
    assert meanings["hour"] == "one of 24 public values (listed in schema.json)"
    in_words = sheet["privacy"]["in_words"]
    assert "one card (all the rows that share one card value, at most 200 of them used)" in in_words
    manifest = (tmp_path / "t" / "manifest.json").read_text(encoding="utf-8")
    assert "add or remove one card: all the rows that share one card value" in manifest
    assert "None" not in readme and "## Location names" not in readme


def test_cli_names_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--names FILE`` on ``sequences`` and ``marginals``: the names reach the datasheet; a
    bad names file is one error line, exit 2, before anything is written."""
    from synth.cli import main

    data = _sequences(200)
    data.to_csv(tmp_path / "seqs.csv", index=False)
    tax = tmp_path / "tax.csv"
    tax.write_text(
        "child,parent\n"
        + "".join(f"{s},L{1 + (s > 'd')}\n" for s in "abcdefgh")
        + "L1,root\nL2,root\n"
    )
    names = tmp_path / "names.csv"
    names.write_text("location,name\na,Alpha\n", encoding="utf-8")
    argv = ["sequences", str(tmp_path / "seqs.csv"), "--taxonomy", str(tax), "--epsilon", "1"]
    argv += ["--height", "3", "--seed", "1", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "rel"), "--names", str(names)]) == 0
    assert "| `a` | Alpha |" in (tmp_path / "rel" / "README.md").read_text(encoding="utf-8")
    bad = tmp_path / "bad.csv"
    bad.write_text("stop,label\na,A\n", encoding="utf-8")
    for given in (bad, tmp_path / "missing.csv"):
        capsys.readouterr()
        assert main([*argv, "--out", str(tmp_path / "no"), "--names", str(given)]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
        assert not (tmp_path / "no").exists()
    taps = pd.DataFrame(
        {
            "card_id": [f"c{i % 50}" for i in range(200)],
            "time": "2024-03-05 07:00",
            "stop_id": ["a", "b"] * 100,
            "mode": "bus",
        }
    )
    taps.to_csv(tmp_path / "taps.csv", index=False)
    margs = ["marginals", str(tmp_path / "taps.csv"), "--epsilon", "1", "--delta", "1e-6"]
    out = tmp_path / "m"
    assert main([*margs, "--out", str(out), "--names", str(names), "--quiet", "--seed", "1"]) == 0
    sheet = json.loads((out / "datasheet.json").read_text(encoding="utf-8"))
    assert sheet["location_names"]["names"] == {"a": "Alpha"}


def test_joint_trips_datasheet_states_the_joint_tables_bound() -> None:
    """The joint model counts at most its own k trips per id (spread over the day): the datasheet
    says so beside the archetypes' bound (it said only the archetypes' k, 200 by default)."""
    from synth.datasheet import archetypes_facts

    manifest = {
        "privacy_unit": "card",
        "parameters": {
            "id_column": "card_id",
            "max_records_per_individual": 200,
            "n_archetypes": 4,
            "joint": {"max_records_per_individual": 2},
        },
    }
    bounds = " ".join(archetypes_facts(manifest).bounds)
    assert "at most 2 trips per card_id, spread over its day" in bounds
    # the relations: the measured pairs, not "as far as the archetypes carry them"
    relations = archetypes_facts(manifest).distortions[-1]
    assert relations.startswith("relations between columns: no two-way table")
    manifest["parameters"]["joint"]["measurements"] = [  # type: ignore[index]
        {"tables": [["hour"], ["hour", "zone"], ["zone", "mode"]]}
    ]
    relations = archetypes_facts(manifest).distortions[-1]
    assert "the noisy two-way tables of hour x zone, zone x mode" in relations
    assert "per cell" not in " ".join(archetypes_facts(manifest).bounds)
    manifest["parameters"]["joint"]["measurements"][0]["per_cell_caps"] = [1, 1, 1]  # type: ignore[index]
    bounds = " ".join(archetypes_facts(manifest).bounds)
    assert "count each card_id at most 1 time(s) per cell" in bounds
    assert relations.endswith(
        "the other pairs hold only as far as these tables link them (no public trips)"
    )
    manifest["inputs"] = {"public": [{"file": "p.csv", "role": "public"}]}
    assert archetypes_facts(manifest).distortions[-1].endswith("come from the public trips")
    del manifest["parameters"]["joint"]
    assert "joint" not in " ".join(archetypes_facts(manifest).bounds)
    assert "as far as the archetypes and completion" in archetypes_facts(manifest).distortions[-1]
