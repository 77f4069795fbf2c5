"""Nothing in a release's manifest is a noise-free function of the private input (issue 15).

Each releasing command runs through the real command line on D and on D' = D plus one card, with
the same seed: every manifest must be byte-identical (its fields are public parameters and the
noise plan; the old manifests held a SHA-256 of the private file, which differed). The operator's
provenance record is written beside the release, never inside it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.cli import main
from synth.outmarker import MARKER
from synth.provenance import ENV_VAR, SUFFIX, input_hmac

TAXONOMY = "child,parent\ns1,north\ns2,north\ns3,south\ns4,south\nnorth,root\nsouth,root\n"


def _taps(n_cards: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    per = rng.integers(1, 5, n_cards)
    card = np.repeat(np.arange(n_cards), per)
    minutes = rng.integers(5 * 60, 23 * 60, len(card))
    return pd.DataFrame(
        {
            "card_id": [f"c{c}" for c in card],
            "time": (pd.Timestamp("2019-11-27") + pd.to_timedelta(minutes, unit="m")).strftime(
                "%Y-%m-%dT%H:%M:%S"
            ),
            "stop_id": rng.choice(["s1", "s2", "s3", "s4"], len(card), p=[0.4, 0.3, 0.2, 0.1]),
            "mode": rng.choice(["bus", "rail"], len(card)),
            "tap": rng.choice(["on", "off"], len(card)),
        }
    )


def _trips(n: int, seed: int, prefix: str = "k") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    night = rng.random(n) < 0.4
    cards = np.repeat(np.arange(n), rng.integers(1, 4, n))
    return pd.DataFrame(
        {
            "card": [f"{prefix}{c}" for c in cards],
            "hour": np.where(
                night[cards], rng.integers(20, 24, len(cards)), rng.integers(6, 10, len(cards))
            ),
            "zone": np.where(night[cards], "B", "A"),
            "mode": np.where(night[cards], "rail", "bus"),
        }
    )


@pytest.fixture(scope="module")
def neighbours(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Folders ``d`` and ``d1`` holding the same file names: D, and D plus one card (taps and
    trips); a public taxonomy, public trips and a schema shared by both."""
    root = tmp_path_factory.mktemp("neighbours")
    taps = _taps(400, 1)
    extra = pd.DataFrame(
        {
            "card_id": ["added"] * 3,
            "time": ["2019-11-27T07:10:00", "2019-11-27T12:40:00", "2019-11-27T18:05:00"],
            "stop_id": ["s4", "s1", "s3"],
            "mode": ["rail", "bus", "rail"],
            "tap": ["on", "off", "on"],
        }
    )
    trips = _trips(300, 2)
    added_trips = pd.DataFrame({"card": ["added"] * 2, "hour": [21, 22], "zone": ["B", "B"]})
    added_trips["mode"] = "rail"
    for name, t, p in (
        ("d", taps, trips),
        ("d1", pd.concat([taps, extra]), pd.concat([p_ for p_ in (trips, added_trips)])),
    ):
        folder = root / name
        folder.mkdir()
        t.to_csv(folder / "taps.csv", index=False)
        p.to_csv(folder / "trips.csv", index=False)
    (root / "tax.csv").write_text(TAXONOMY)
    _trips(200, 0, prefix="p").to_csv(root / "public.csv", index=False)
    schema = {
        "hour": {"kind": "categorical", "values": list(range(24))},
        "zone": {"kind": "categorical", "values": ["A", "B"]},
        "mode": {"kind": "categorical", "values": ["bus", "rail"]},
    }
    (root / "schema.json").write_text(json.dumps(schema))
    (root / "standin.toml").write_text("[archetypes]\nbudget_split = [0.5, 0.1, 0.4]\n")
    return {"root": root, "d": root / "d", "d1": root / "d1"}


SEQUENCES = {
    "paper": [],
    "trajectories, completion": ["--time-bin", "240", "--completion", "markov"],
    "candidates": ["--threshold-rule", "candidates", "--false-children", "0.5"],
}
MARGINALS = {
    "sbh": [],
    "consistent": ["--consistent"],
    "card unit": ["--privacy-unit", "card_id", "--max-contributions", "2"],
    "pure": ["--pure", "--modes", "bus,rail", "--days", "2019-11-27"],
}
TRIPS = {
    "public": ["--public", "{root}/public.csv"],
    "stand-in": [
        "--public-stand-in",
        "--schema",
        "{root}/schema.json",
        "--config",
        "{root}/standin.toml",
    ],
}


def _argv(kind: str, folder: Path, out: Path, extra: list[str], root: Path) -> list[str]:
    extra = [e.format(root=root) for e in extra]
    if kind == "sequences":
        head = ["sequences", str(folder / "taps.csv"), "--taxonomy", str(root / "tax.csv")]
        return [*head, "--epsilon", "1", "--height", "3", "--out", str(out), *extra]
    if kind == "marginals":
        head = ["marginals", str(folder / "taps.csv"), "--epsilon", "4", "--delta", "1e-6"]
        taxonomy = ["--taxonomy", str(root / "tax.csv")]
        return [*head, *taxonomy, "--bin", "60", "--out", str(out), *extra]
    head = ["trips", str(folder / "trips.csv"), "--epsilon", "2", "--delta", "1e-5"]
    keys = ["--id-column", "card", "--key-columns", "hour,zone", "--category-column", "mode"]
    return [*head, "--out", str(out), *keys, "--archetypes", "2", *extra]


CASES = [
    *[("sequences", name, extra) for name, extra in SEQUENCES.items()],
    *[("marginals", name, extra) for name, extra in MARGINALS.items()],
    *[("trips", name, extra) for name, extra in TRIPS.items()],
]


@pytest.mark.parametrize(("kind", "name", "extra"), CASES, ids=[f"{k}-{n}" for k, n, _ in CASES])
def test_manifest_is_identical_on_neighbouring_inputs(
    neighbours: dict[str, Path], tmp_path: Path, kind: str, name: str, extra: list[str]
) -> None:
    root = neighbours["root"]
    # the public domains of a trips release (schema.json) come from the schema or public trips
    files = ["manifest.json", "README.md", "datasheet.json"]  # the datasheet too
    files += ["schema.json"] if kind == "trips" else []
    written = []
    for which in ("d", "d1"):
        out = tmp_path / which
        argv = _argv(kind, neighbours[which], out, extra, root)
        assert main([*argv, "--seed", "7", "--quiet"]) == 0
        written.append({f: (out / f).read_bytes() for f in files})
    assert written[0] == written[1]
    manifest = json.loads(written[0]["manifest.json"])
    assert manifest["inputs"]["private"].startswith("not recorded")
    text = written[0]["manifest.json"].decode()
    assert "taps.csv" not in text and "trips.csv" not in text  # not even the private file's name
    public = {p["role"]: p for p in manifest["inputs"]["public"]}
    if kind != "trips":
        assert public["taxonomy"]["file"] == "tax.csv"
        assert public["taxonomy"]["fingerprint"].startswith("sha256:")


def test_run_config_outputs_are_identical_on_neighbouring_inputs(
    neighbours: dict[str, Path], tmp_path: Path
) -> None:
    """``transit-synth run``: every non-data file (config copy and manifests) is equal on D, D'."""
    root = neighbours["root"]
    outs = []
    for which in ("d", "d1"):
        config = neighbours[which] / "run.toml"
        config.write_text(
            f'[sequences]\ninput = "taps.csv"\ntaxonomy = "{root / "tax.csv"}"\n'
            "[sequences.parameters]\nepsilon = 1.0\nheight = 3\n\n"
            f'[marginals]\ninput = "taps.csv"\ntaxonomy = "{root / "tax.csv"}"\n'
            "[marginals.parameters]\nepsilon = 4.0\ndelta = 1e-6\nbin_minutes = 60\n\n"
            f'[trips]\nprivate = "trips.csv"\npublic = "{root / "public.csv"}"\n'
            '[trips.parameters]\nid_column = "card"\nkey_columns = ["hour", "zone"]\n'
            'category_column = "mode"\nn_archetypes = 2\nepsilon = 1.0\ndelta = 1e-5\n'
        )
        out = tmp_path / which
        assert main(["run", str(config), "--out", str(out), "--seed", "3", "--quiet"]) == 0
        outs.append(out)
    published = sorted(p.relative_to(outs[0]) for p in outs[0].rglob("*") if p.is_file())
    assert published == sorted(p.relative_to(outs[1]) for p in outs[1].rglob("*") if p.is_file())
    assert {p.parts[0] for p in published} == {
        MARKER,
        "config.toml",
        "manifest.json",
        "sequences",
        "marginals",
        "trips",
    }
    for rel in published:
        if rel.name in ("manifest.json", "config.toml", "schema.json"):
            assert (outs[0] / rel).read_bytes() == (outs[1] / rel).read_bytes(), rel


def test_provenance_record_is_beside_the_release_never_inside(
    neighbours: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, private = neighbours["root"], neighbours["d"] / "taps.csv"
    key_file = tmp_path / "key"
    key_file.write_text("k" * 40 + "\n")
    plain, keyed = tmp_path / "plain", tmp_path / "keyed"
    assert main([*_argv("sequences", neighbours["d"], plain, [], root), "--seed", "1"]) == 0
    argv = _argv("sequences", neighbours["d"], keyed, [], root)
    assert main([*argv, "--seed", "1", "--provenance-key-file", str(key_file), "--quiet"]) == 0
    # the release directory is the same, byte for byte, with or without the record
    names = sorted(p.name for p in keyed.iterdir())
    assert (
        names
        == sorted(p.name for p in plain.iterdir())
        == [
            MARKER,
            "README.md",
            "datasheet.json",
            "manifest.json",
            "sequences.csv",
        ]
    )
    for n in names:
        assert (keyed / n).read_bytes() == (plain / n).read_bytes()
    assert not (plain.parent / f"plain{SUFFIX}").exists()  # only when asked for
    record = json.loads((tmp_path / f"keyed{SUFFIX}").read_text())
    assert record["notice"].startswith("INTERNAL - NOT PRIVATE")
    (entry,) = record["private_inputs"]
    assert entry["hmac"] == input_hmac(b"k" * 40, private)
    assert entry["hmac"] != input_hmac(b"j" * 40, private)  # keyed: no use without the key
    assert entry["hmac"] != input_hmac(b"k" * 40, neighbours["d1"] / "taps.csv")
    assert list(record["manifests"]) == ["manifest.json"]
    # the key from the environment; a short key is one clear error (exit 2), nothing written
    os.environ[ENV_VAR] = "e" * 32
    try:
        assert (
            main([*_argv("marginals", neighbours["d"], tmp_path / "m", [], root), "--quiet"]) == 0
        )
        record = json.loads((tmp_path / f"m{SUFFIX}").read_text())
        assert record["private_inputs"][0]["hmac"] == input_hmac(b"e" * 32, private)
        assert not list((tmp_path / "m").glob("*provenance*"))
        os.environ[ENV_VAR] = "short"
        bad = tmp_path / "bad"
        assert main([*_argv("marginals", neighbours["d"], bad, [], root), "--quiet"]) == 2
        assert "at least 16 bytes" in capsys.readouterr().err
        assert not bad.exists() and not (tmp_path / f"bad{SUFFIX}").exists()
    finally:
        del os.environ[ENV_VAR]


def test_run_writes_one_provenance_record_beside_its_directory(
    neighbours: dict[str, Path], tmp_path: Path
) -> None:
    root = neighbours["root"]
    config = tmp_path / "run.toml"
    config.write_text(
        f'[sequences]\ninput = "{neighbours["d"] / "taps.csv"}"\ntaxonomy = "{root / "tax.csv"}"\n'
        "[sequences.parameters]\nepsilon = 1.0\nheight = 2\n\n"
        f'[trips]\nprivate = "{neighbours["d"] / "trips.csv"}"\npublic = "{root / "public.csv"}"\n'
        '[trips.parameters]\nid_column = "card"\nkey_columns = ["hour", "zone"]\n'
        'category_column = "mode"\nn_archetypes = 2\nepsilon = 1.0\ndelta = 1e-5\n'
    )
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32))
    out = tmp_path / "out"
    argv = ["run", str(config), "--out", str(out), "--provenance-key-file", str(key), "--quiet"]
    assert main([*argv, "--seed", "2"]) == 0
    assert not [p for p in out.rglob("*") if "provenance" in p.name]
    record = json.loads((tmp_path / f"out{SUFFIX}").read_text())
    roles = {e["role"]: e["hmac"] for e in record["private_inputs"]}
    assert roles == {
        "sequences: input": input_hmac(key.read_bytes(), neighbours["d"] / "taps.csv"),
        "trips: private": input_hmac(key.read_bytes(), neighbours["d"] / "trips.csv"),
    }
    assert sorted(record["manifests"]) == [
        "manifest.json",
        "sequences/manifest.json",
        "trips/manifest.json",
    ]
