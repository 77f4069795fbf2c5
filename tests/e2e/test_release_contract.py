"""One release contract (:mod:`synth.release`): the same fitted generator gives the same manifest
whichever way it is written (the command line, ``run``, the Python API's ``fit`` then ``write``,
the demo); paths are recorded as given or ``embedded:NAME``; ``run`` states the combined
guarantee; messages stating exact private counts are labelled and can be hidden."""

from __future__ import annotations

import json
import textwrap
import warnings
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest

import synth
from synth.cli import main
from synth.cli.run import run_config
from synth.logs import PRIVATE_LABEL
from synth.release import combined_manifest, recorded_path, write_manifest

SEED = 7


def _taps(folder: Path, unknown: bool = False) -> None:
    """60 cards over stops 1-3 (tap-on then tap-off), a stop taxonomy, trips and their public twin
    for the archetypes. With ``unknown``, 2 cards ride stop "9" (not in the taxonomy)."""
    rows = []
    for i in range(60):
        path = (("1", "2"), ("1", "3"), ("2", "3"))[i % 3]
        for step, (stop, hm) in enumerate(zip(path, ("07:05", "08:20"), strict=True)):
            mode = "rail" if i % 2 else "bus"
            rows.append((f"c{i}", f"2019-11-28T{hm}:00", stop, mode, "off" if step else "on"))
    if unknown:
        rows += [("u1", "2019-11-28T09:00:00", "9", "bus", "on")] * 1
        rows += [("u2", "2019-11-28T09:00:00", "9", "bus", "on")]
    pd.DataFrame(rows, columns=["card_id", "time", "stop_id", "mode", "tap"]).to_csv(
        folder / "taps.csv", index=False
    )
    edges = [("1", "g1"), ("2", "g1"), ("3", "g2"), ("g1", "r"), ("g2", "r")]
    pd.DataFrame(edges, columns=["child", "parent"]).to_csv(folder / "tax.csv", index=False)
    trips = [
        (f"{p}{i}", hour, "B" if i % 3 == 0 else "A", "rail" if i % 3 == 0 else "bus")
        for p in ("k", "p")
        for i in range(60)
        for hour in ((21, 22) if i % 3 == 0 else (7, 8))
    ]
    frame = pd.DataFrame(trips, columns=["card", "hour", "zone", "mode"])
    frame[frame["card"].str.startswith("k")].to_csv(folder / "trips.csv", index=False)
    frame[frame["card"].str.startswith("p")].to_csv(folder / "public.csv", index=False)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The inputs in a fresh working folder (paths given relative to it, as a user types them)."""
    _taps(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _same_manifests(*folders: Path) -> None:
    texts = [(f / "manifest.json").read_text() for f in folders]
    for folder, text in zip(folders[1:], texts[1:], strict=True):
        assert text == texts[0], f"{folder}/manifest.json differs from {folders[0]}"


def test_prefix_tree_manifest_same_from_cli_api_and_demo(here: Path) -> None:
    """``transit-synth sequences``, ``fit`` then ``write``, and the demo's writer: one manifest."""
    from prefixtree import PrefixTreeSynthesizer
    from synth.cli import demo
    from synth.records import load_sequences
    from synth.taxonomy import Taxonomy

    argv = ["sequences", "taps.csv", "--taxonomy", "tax.csv", "--epsilon", "4", "--height", "3"]
    assert main([*argv, "--out", "cli", "--seed", str(SEED), "--quiet"]) == 0
    api = PrefixTreeSynthesizer(
        epsilon=4.0, height=3, taxonomy=Taxonomy.from_spec("tax.csv"), random_state=SEED
    )
    written = api.fit("taps.csv").write("api")
    assert Path(written) == Path("api") and written.counts["sequences"] > 0
    assert api.manifest() == json.loads((here / "api" / "manifest.json").read_text())
    tax = Taxonomy.from_spec("tax.csv")
    original = load_sequences("taps.csv", taxonomy=tax)
    step = demo._Steps(True)
    demo._prefix_tree(
        here,
        "demo",
        original,
        tax,
        seed=SEED,
        step=step,
        params={"epsilon": 4.0, "height": 3},
        reading={},
    )
    step.close()
    _same_manifests(here / "cli", here / "api", here / "demo")
    manifest = json.loads((here / "cli" / "manifest.json").read_text())
    params = manifest["parameters"]
    assert params["generator"] == "prefixtree"
    # what the command line used to add by itself, now from the fitted generator
    assert params["taxonomy"] == "tax.csv" and params["on_unknown"] == "error"
    assert "location_column" in params and params["timezone"] == "wall clock as written"
    assert [p["role"] for p in manifest["inputs"]["public"]] == ["taxonomy"]
    assert (here / "cli" / "sequences.csv").read_bytes() == (
        here / "api" / "sequences.csv"
    ).read_bytes()


def test_marginals_manifest_same_from_cli_and_api(here: Path) -> None:
    from synth.marginals import OpalMarginals

    argv = ["marginals", "taps.csv", "--epsilon", "4", "--delta", "1e-6", "--taxonomy", "tax.csv"]
    assert main([*argv, "--out", "cli", "--seed", str(SEED), "--quiet"]) == 0
    from synth.taxonomy import Taxonomy

    release = OpalMarginals(
        epsilon=4.0, delta=1e-6, taxonomy=Taxonomy.from_spec("tax.csv"), random_state=SEED
    )
    release.fit("taps.csv").write("api")
    _same_manifests(here / "cli", here / "api")
    manifest = json.loads((here / "api" / "manifest.json").read_text())
    assert manifest["parameters"]["generator"] == "opal-marginals"
    assert manifest["parameters"]["taxonomy"] == "tax.csv"


def test_trips_manifest_same_from_cli_and_api(here: Path) -> None:
    from archetypes import ArchetypeSynthesizer

    argv = ["trips", "trips.csv", "--public", "public.csv", "--epsilon", "2", "--delta", "1e-5"]
    argv += ["--id-column", "card", "--key-columns", "hour,zone", "--category-column", "mode"]
    assert main([*argv, "--archetypes", "2", "--out", "cli", "--seed", str(SEED), "--quiet"]) == 0
    synthesizer = ArchetypeSynthesizer(
        epsilon=2.0,
        delta=1e-5,
        id_column="card",
        key_columns=["hour", "zone"],
        category_column="mode",
        archetypes=2,
        random_state=SEED,
    ).fit("trips.csv", "public.csv")
    synthesizer.write("api", public_inputs={"public": "public.csv"})
    _same_manifests(here / "cli", here / "api")
    assert (here / "cli" / "trips.csv").read_bytes() == (here / "api" / "trips.csv").read_bytes()


def test_paths_recorded_as_given_or_embedded(here: Path) -> None:
    """No local absolute path of a packaged file: ``embedded:NAME`` (old code: the venv path)."""
    from prefixtree import PrefixTreeSynthesizer
    from synth import datasets
    from synth.simulate import simulate_sequences

    assert recorded_path(datasets.path("montreal_taxonomy")) == "embedded:montreal_taxonomy"
    assert recorded_path(here / "tax.csv") == "tax.csv"  # absolute under the working folder
    assert recorded_path("fanout:4") == "fanout:4"
    elsewhere = Path("/definitely/not/here.csv")
    assert recorded_path(elsewhere) == str(elsewhere)
    metro = datasets.montreal_taxonomy()
    seqs = simulate_sequences(300, taxonomy=metro, seed=1)
    model = PrefixTreeSynthesizer(epsilon=1.0, height=3, taxonomy=metro, random_state=1)
    model.fit(seqs).write("metro")
    text = (here / "metro" / "manifest.json").read_text()
    assert json.loads(text)["parameters"]["taxonomy"] == "embedded:montreal_taxonomy"
    assert str(Path(synth.__file__).parent) not in text
    assert str(here) not in text


def test_combined_manifest_composes_per_unit(tmp_path: Path) -> None:
    """Basic composition per privacy unit, exact; releases of another unit listed apart."""

    def manifest(unit: str, eps: str, delta: str) -> dict:
        return {
            "privacy_unit": unit,
            "parameters": {"generator": "prefixtree"},
            "guarantee": {"epsilon_exact": eps, "delta_exact": delta},
        }

    combined = combined_manifest(
        {
            "a": manifest("card", "1/3", "0"),
            "b": manifest("card", "1/6", "1/1000000"),
            "t": manifest("trip", "2", "0"),
        }
    )
    card = combined["guarantee_per_unit"]["card"]
    assert Fraction(card["epsilon_exact"]) == Fraction(1, 2) and card["releases"] == ["a", "b"]
    assert Fraction(card["delta_exact"]) == Fraction(1, 1000000)
    assert combined["guarantee_per_unit"]["trip"]["releases"] == ["t"]
    assert "note" in combined
    write_manifest(tmp_path, combined)
    broken = {**combined, "guarantee_per_unit": {"card": card}}  # release t not accounted for
    with pytest.raises(ValueError, match="exactly one unit"):
        write_manifest(tmp_path / "x", broken)


RUN = """
[sequences]
input = "taps.csv"
taxonomy = "tax.csv"
[sequences.parameters]
epsilon = 3.0
height = 3

[marginals]
input = "taps.csv"
[marginals.parameters]
epsilon = 2.0
delta = 1e-6
privacy_unit = "card_id"
max_contributions = 2

[trips]
private = "trips.csv"
public = "public.csv"
[trips.parameters]
epsilon = 1.0
delta = 1e-5
id_column = "card"
key_columns = ["hour", "zone"]
category_column = "mode"
archetypes = 2
"""


def test_run_states_the_combined_guarantee_and_redacts_private_paths(here: Path) -> None:
    (here / "run.toml").write_text(textwrap.dedent(RUN))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_config(here / "run.toml", here / "out", seed=SEED)
    for w in caught:  # a warning names the output folder, never the hidden stage
        assert ".stage-" not in str(w.message), str(w.message)
    combined = json.loads((here / "out" / "manifest.json").read_text())
    per_release = {
        name: json.loads((here / "out" / name / "manifest.json").read_text())
        for name in ("sequences", "marginals", "trips")
    }
    units = {m["privacy_unit"] for m in per_release.values()}
    assert set(combined["guarantee_per_unit"]) == units
    for unit, claim in combined["guarantee_per_unit"].items():
        names = sorted(n for n, m in per_release.items() if m["privacy_unit"] == unit)
        assert claim["releases"] == names
        total = sum(Fraction(per_release[n]["guarantee"]["epsilon_exact"]) for n in names)
        assert Fraction(claim["epsilon_exact"]) == total
    copied = (here / "out" / "config.toml").read_text()
    assert "taps.csv" not in copied and "trips.csv" not in copied  # the private inputs
    assert "public.csv" in copied and "tax.csv" in copied  # public inputs stay as given


def test_private_counts_labelled_and_hidden_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "dropped N rows (K distinct locations)" says it is private; ``--log-private hide`` and
    ``--quiet`` keep it out of the log."""
    _taps(tmp_path, unknown=True)
    monkeypatch.chdir(tmp_path)
    argv = ["sequences", "taps.csv", "--taxonomy", "tax.csv", "--epsilon", "2", "--height", "2"]
    argv += ["--on-unknown", "drop", "--seed", "1"]
    assert main([*argv, "--out", "a"]) == 0
    err = capsys.readouterr().err
    dropped = [line for line in err.splitlines() if "dropped 2 rows" in line]
    assert dropped and all(PRIVATE_LABEL in line for line in dropped)
    assert main([*argv, "--out", "b", "--log-private", "hide"]) == 0
    err = capsys.readouterr().err
    assert "dropped" not in err and PRIVATE_LABEL not in err
    assert "seed" in err  # other warnings still shown
    assert main([*argv, "--out", "c", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_every_manifest_goes_through_the_one_writer(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run`` (three releases and the combined manifest) and the API's ``write``: every
    ``manifest.json`` written is one call of :func:`synth.release.write_manifest`."""
    import synth.release
    from synth.marginals import OpalMarginals

    real = synth.release.write_manifest
    calls: list[Path] = []

    def counting(folder: Path, manifest: dict) -> Path:
        calls.append(Path(folder))
        return real(folder, manifest)

    monkeypatch.setattr(synth.release, "write_manifest", counting)
    (here / "run.toml").write_text(textwrap.dedent(RUN))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_config(here / "run.toml", here / "out", seed=SEED)
        OpalMarginals(epsilon=1.0, delta=1e-6, random_state=1).fit("taps.csv").write("api")
    written = sorted(here.rglob("manifest.json"))
    assert len(written) == 5 and len(calls) == 5


def test_a_run_folder_is_not_read_as_one_release(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "run.toml").write_text(textwrap.dedent(RUN))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_config(here / "run.toml", here / "out", seed=SEED)
    assert main(["audit", "out"]) == 2  # one line naming the release folders to give instead
    assert "give one of its release folders: marginals, sequences, trips" in capsys.readouterr().err
    assert main(["audit", "out/marginals", "--out", "audited"]) == 0


@pytest.mark.slow
def test_demo_and_run_write_the_same_prefix_tree_release(tmp_path: Path) -> None:
    """The demo's SUBE sequences and ``run`` on the shipped demo config (its first release, the
    same seed): the same manifest and data, byte for byte (about 90 s)."""
    from importlib import resources

    from synth.cli.configs import find

    assert main(["demo", "--out", str(tmp_path / "demo"), "--seed", "5", "--quiet"]) == 0
    with resources.as_file(find("demo")) as config:
        assert (
            main(["run", str(config), "--out", str(tmp_path / "run"), "--seed", "5", "--quiet"])
            == 0
        )
    demo, run = (
        tmp_path / "demo" / "releases" / "sequences-sube",
        tmp_path / "run" / "sequences-sube",
    )
    _same_manifests(demo, run)
    assert (demo / "sequences.csv").read_bytes() == (run / "sequences.csv").read_bytes()
