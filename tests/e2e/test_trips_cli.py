"""``transit-synth trips``: release files, manifest, configs and user errors (exit 2, nothing
written)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.cli import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _trips(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    night = rng.random(n) < 0.4
    cards = np.repeat(np.arange(n), rng.integers(1, 4, n))
    return pd.DataFrame(
        {
            "card": [f"k{seed}-{c}" for c in cards],
            "hour": np.where(
                night[cards], rng.integers(20, 24, len(cards)), rng.integers(6, 10, len(cards))
            ),
            "zone": np.where(night[cards], "B", "A"),
            "mode": np.where(night[cards], "rail", "bus"),
            "fare": np.where(night[cards], 3, 1),
        }
    )


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    private, public = tmp_path / "private.csv", tmp_path / "public.parquet"
    _trips(300, 1).to_csv(private, index=False)
    _trips(200, 0).to_parquet(public, index=False)
    return private, public


def _args(private: Path, public: Path, out: Path, *extra: str) -> list[str]:
    return [
        "trips",
        str(private),
        "--public",
        str(public),
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--out",
        str(out),
        "--id-column",
        "card",
        "--key-columns",
        "hour,zone",
        "--category-column",
        "mode",
        *extra,
    ]


def test_release_directory(files: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    out = tmp_path / "release"
    assert main(_args(*files, out, "--archetypes", "2", "--seed", "3")) == 0
    err = capsys.readouterr().err
    assert "NOT differentially private" in err and "synthetic trips" in err
    trips = pd.read_csv(out / "trips.csv")
    assert list(trips.columns) == ["card", "hour", "zone", "mode"]
    assert set(trips["mode"]) <= {"bus", "rail"} and set(trips["zone"]) <= {"A", "B"}
    manifest = json.loads((out / "manifest.json").read_text())
    spends = [s for s in manifest["composition"] if s["type"] == "spend"]
    assert [s["label"] for s in spends] == [
        # the joint mode: hour, zone, mode and the tree's 2 pairs, each counting a card at most
        # once per cell (public trips): at that noise the pairs carry more signal than noise
        # next to this small public file (archetypes.jointpublic.informative_pairs)
        "joint trip marginals (5 tables)",
        "archetype histogram",
        "mode histogram",
    ]
    assert manifest["spent"]["epsilon_exact"] == "1"
    assert manifest["parameters"]["n_archetypes"] == 2
    schema = json.loads((out / "schema.json").read_text())
    assert schema["mode"]["values"] == ["bus", "rail"]
    # same seed, same release
    again = tmp_path / "again"
    assert main(_args(*files, again, "--archetypes", "2", "--seed", "3", "--quiet")) == 0
    pd.testing.assert_frame_equal(trips, pd.read_csv(again / "trips.csv"))


def test_config_n_records_and_parquet(files: tuple[Path, Path], tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[trips]\ninput_format = "trips"\n\n[trips.parameters]\nid_column = "card"\nunit = "card"\n'
        'key_columns = ["hour", "zone"]\ncategory_column = "mode"\nn_archetypes = 2\n'
        'completion = [["fare", ["zone", "hour"]]]\nbudget_split = [0.2, 0.8]\n'
    )
    out = tmp_path / "rel"
    argv = ["trips", str(files[0]), "--public", str(files[1]), "--epsilon", "2", "--delta", "1e-6"]
    argv += [
        "--out",
        str(out),
        "--config",
        str(config),
        "--n-records",
        "250",
        "--format",
        "parquet",
    ]
    assert main([*argv, "--seed", "1", "--quiet"]) == 0
    trips = pd.read_parquet(out / "trips.parquet")
    assert len(trips) == 250 and set(trips["fare"]) <= {1, 3}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["privacy_unit"] == "card"
    # the joint measurements take 80%, the split divides the rest
    assert [s["epsilon_exact"] for s in manifest["composition"]] == ["8/5", "2/25", "8/25"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--epsilon", "0"], "epsilon"),
        (["--delta", "0"], "delta"),
        (["--key-columns", "hour,weather"], "missing column"),
        (["--config", "nowhere.toml"], "not found"),
    ],
)
def test_user_errors_exit_2_and_write_nothing(
    files: tuple[Path, Path], tmp_path: Path, capsys, extra: list[str], message: str
) -> None:
    out = tmp_path / "never"
    assert main(_args(*files, out, *extra)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("transit-synth trips: error:") and message in err[0]
    assert not out.exists()


def test_missing_private_file(files: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    out = tmp_path / "never"
    assert main(_args(tmp_path / "nope.csv", files[1], out)) == 2
    assert "file not found" in capsys.readouterr().err
    assert not out.exists()


def test_bad_config_key(files: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[trips.parameters]\nnum_archetypes = 3\n")
    assert main(_args(*files, tmp_path / "never", "--config", str(config))) == 2
    assert "unknown key 'num_archetypes' in [trips.parameters]" in capsys.readouterr().err
    config.write_text("[sequences]\ninput = 'x.csv'\n")
    assert main(_args(*files, tmp_path / "never", "--config", str(config))) == 2
    assert "expected one [trips] table" in capsys.readouterr().err


OLD_FORM = (
    '[input]\nformat = "trips"\n\n[archetypes]\nid_column = "card"\nunit = "card"\n'
    'key_columns = ["hour", "zone"]\ncategory_column = "mode"\nn_archetypes = 2\n'
)


def test_old_config_form_still_read_with_a_deprecation_note(
    files: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    """The old [input] / [archetypes] form gives the same release as the run dialect."""
    old, new = tmp_path / "old.toml", tmp_path / "new.toml"
    old.write_text(OLD_FORM)
    new.write_text(
        OLD_FORM.replace("[input]\nformat", "[trips]\ninput_format").replace(
            "[archetypes]", "[trips.parameters]"
        )
    )
    argv = ["trips", str(files[0]), "--public", str(files[1]), "--epsilon", "2", "--delta", "1e-6"]
    assert main([*argv, "--out", str(tmp_path / "a"), "--config", str(old), "--seed", "1"]) == 0
    err = capsys.readouterr().err
    assert "old `trips --config` form" in err and "[trips.parameters]" in err
    assert main([*argv, "--out", str(tmp_path / "b"), "--config", str(new), "--seed", "1"]) == 0
    assert "old `trips --config` form" not in capsys.readouterr().err
    a, b = (pd.read_csv(tmp_path / d / "trips.csv") for d in "ab")
    pd.testing.assert_frame_equal(a, b)
    quiet = ["--out", str(tmp_path / "c"), "--config", str(old), "--seed", "1", "--quiet"]
    assert main([*argv, *quiet]) == 0
    assert capsys.readouterr().err == ""  # --quiet: errors only, the deprecation note too
    # the old form given to `run` names the new one
    assert main(["run", str(old), "--out", str(tmp_path / "never")]) == 2
    assert "[trips.parameters]" in capsys.readouterr().err


def test_config_is_a_run_entry_with_its_budget(files: tuple[Path, Path], tmp_path: Path) -> None:
    """A `trips --config` file is a run config's [trips] table: the budget and the inputs may
    come from it, the flags override them, and `run` makes the same release."""
    config = tmp_path / "c.toml"
    config.write_text(
        f'[trips]\nprivate = "{files[0]}"\npublic = "{files[1]}"\ninput_format = "trips"\n'
        '[trips.parameters]\nepsilon = 2.0\ndelta = 1e-6\nid_column = "card"\nunit = "card"\n'
        'key_columns = ["hour", "zone"]\ncategory_column = "mode"\nn_archetypes = 2\n'
    )
    out = tmp_path / "trips"
    argv = ["trips", str(files[0]), "--out", str(out), "--config", str(config)]
    assert main([*argv, "--seed", "4", "--quiet"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["cap"]["epsilon"] == 2 and manifest["cap"]["delta"] == pytest.approx(1e-6)
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--seed", "4", "--quiet"]) == 0
    pd.testing.assert_frame_equal(
        pd.read_csv(out / "trips.csv"), pd.read_csv(tmp_path / "run" / "trips" / "trips.csv")
    )
    flagged = tmp_path / "flagged"
    argv[argv.index(str(out))] = str(flagged)
    assert main([*argv, "--epsilon", "3", "--seed", "4", "--quiet"]) == 0
    assert json.loads((flagged / "manifest.json").read_text())["cap"]["epsilon"] == 3


def _taxi_argv(data: Path, out: Path) -> list[str]:
    argv = ["trips", str(data), "--public", str(data)]
    argv += ["--epsilon", "1", "--delta", "2.5e-5", "--out", str(out)]
    return [*argv, "--config", str(CONFIGS / "taxi-archetypes.toml"), "--seed", "0", "--quiet"]


def test_chicago_config_smoke(shared_data: Path, tmp_path: Path) -> None:
    """Quick, in-process version of the slow console-script test below: the shipped config on
    every 10th row of the taxi file (its lines as they are)."""
    lines = (shared_data / "chicago-taxi/chicago_taxi_simple.csv").read_text().splitlines()
    data = tmp_path / "taxi-sample.csv"
    data.write_text("\n".join([lines[0], *lines[1::10]]) + "\n")
    out = tmp_path / "taxi"
    assert main(_taxi_argv(data, out)) == 0
    trips = pd.read_csv(out / "trips.csv")
    assert {"taxi_id", "shift", "company", "fare", "payment_type"} <= set(trips.columns)
    assert len(trips) > 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["privacy_unit"] == "taxi trip" and len(manifest["composition"]) == 3


@pytest.mark.slow
def test_console_script_on_chicago_config(shared_data: Path, tmp_path: Path) -> None:
    data = shared_data / "chicago-taxi/chicago_taxi_simple.csv"
    out = tmp_path / "taxi"
    argv = [sys.executable, "-m", "synth", *_taxi_argv(data, out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    trips = pd.read_csv(out / "trips.csv")
    assert {"taxi_id", "shift", "company", "fare", "payment_type"} <= set(trips.columns)
    assert 9000 < len(trips) < 10500  # about the 9,781 private (2014-2015) trips
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["privacy_unit"] == "taxi trip" and len(manifest["composition"]) == 3


def test_without_public_data_with_the_stand_in(
    files: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(
        json.dumps(
            {
                "card": {"kind": "id"},
                "hour": {"kind": "categorical", "values": list(range(24))},
                "zone": {"kind": "categorical", "values": ["A", "B", "C"]},
                "mode": {"kind": "categorical", "values": ["bus", "rail"]},
            }
        )
    )
    big = tmp_path / "big.csv"
    _trips(3000, 1).to_csv(big, index=False)
    out = tmp_path / "standin"
    argv = ["trips", str(big), "--epsilon", "4", "--delta", "1e-5", "--out", str(out)]
    argv += ["--id-column", "card", "--key-columns", "hour,zone", "--category-column", "mode"]
    argv += ["--schema", str(schema), "--archetypes", "2", "--seed", "5", "--quiet"]
    # the joint model (default) needs no public data: the schema gives the domains
    joint = tmp_path / "joint"
    assert main([str(joint) if a == str(out) else a for a in argv]) == 0
    manifest = json.loads((joint / "manifest.json").read_text())
    assert [s["label"] for s in manifest["composition"]][:2] == [
        "trips per individual",  # first: its noisy median sets k
        "joint trip marginals (6 tables)",  # 3 one-way, every pair (sigma small at epsilon 4)
    ]
    n = len(pd.read_csv(big))  # cards with 1-3 trips each: the noisy trips-per-card histogram
    assert 0.8 * n < len(pd.read_csv(joint / "trips.csv")) < 1.2 * n
    # the write-up's algorithm (joint = false) without public data and no stand-in: a one-line
    # user error, nothing written
    config = tmp_path / "c.toml"
    config.write_text("[trips.parameters]\njoint = false\n")
    argv += ["--config", str(config)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no public data" in err and "--public-stand-in" in err  # the flag, as typed
    assert not out.exists()
    # the stand-in needs its budget share first in budget_split (default split has two)
    assert main([*argv, "--public-stand-in"]) == 2
    assert "3 positive shares (stand-in, archetypes, category)" in capsys.readouterr().err
    config.write_text("[trips.parameters]\njoint = false\nbudget_split = [0.5, 0.1, 0.4]\n")
    assert main([*argv, "--public-stand-in"]) == 0
    trips = pd.read_csv(out / "trips.csv")
    assert set(trips["zone"]) <= {"A", "B"} and set(trips["mode"]) <= {"bus", "rail"}
    assert 2700 < len(trips) < 3300  # one trip per synthetic card, about the private cards
    manifest = json.loads((out / "manifest.json").read_text())
    labels = [s["label"] for s in manifest["composition"]]
    assert labels == [
        "public stand-in: SBH of hour, zone",
        "public stand-in: SBH of mode, hour",
        "archetype histogram",
        "mode histogram",
    ]
    assert manifest["spent"]["epsilon_exact"] == "4"
    assert [p["role"] for p in manifest["inputs"]["public"]] == ["schema"]  # public only
    assert "big.csv" not in json.dumps(manifest)  # nothing of the private file
    # the same through the config alone, with options
    config.write_text(
        "[trips.parameters]\njoint = false\nbudget_split = [0.5, 0.1, 0.4]\n\n"
        "[trips.parameters.public_stand_in]\n"
        'tables = [["hour", "zone", "mode"]]\n'
    )
    again = tmp_path / "again"
    argv[argv.index(str(out))] = str(again)
    assert main(argv) == 0
    manifest = json.loads((again / "manifest.json").read_text())
    assert manifest["composition"][0]["label"] == "public stand-in: SBH of hour, zone, mode"
    # and --public still works, the stand-in then unused
    public_out = tmp_path / "public"
    argv[argv.index(str(again))] = str(public_out)
    assert main([*argv, "--public", str(files[1])]) == 0
    manifest = json.loads((public_out / "manifest.json").read_text())
    assert [s["label"] for s in manifest["composition"]] == [
        "archetype histogram",
        "mode histogram",
    ]


def test_private_may_be_an_embedded_file_as_the_configs_name_it(tmp_path: Path, capsys) -> None:
    """The shipped configs say ``private = "embedded:chicago_taxi"``; PRIVATE and --public take
    that name too (it was "unsupported file type"); an unknown one is a one-line error naming
    the embedded files, nothing written."""
    config = ["--config", str(CONFIGS / "taxi-archetypes.toml"), "--seed", "0", "--quiet"]
    out = tmp_path / "taxi"
    assert (
        main(["trips", "embedded:chicago_taxi", "--public-stand-in", "--out", str(out), *config])
        == 0
    )
    assert len(pd.read_csv(out / "trips.csv")) > 1000
    for argv in (
        ["embedded:chicago_taxis", "--public-stand-in"],
        ["embedded:chicago_taxi", "--public", "embedded:nope"],
    ):
        never = tmp_path / "never"
        assert main(["trips", *argv, "--out", str(never), *config]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "unknown embedded file" in err[0] and "chicago_taxi," in err[0]
        assert not never.exists()


def test_schema_columns_left_out_are_named_and_the_summary_states_both_budgets(
    files: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    """A schema column that is neither key, category nor completion column was dropped from the
    release without a word (an agency's fare column); now a warning names it. The summary line
    gives delta against its budget, as it does epsilon."""
    domains = {
        "card": {"kind": "id"},
        "hour": {"kind": "categorical", "values": list(range(24))},
        "zone": {"kind": "categorical", "values": ["A", "B", "C"]},
        "mode": {"kind": "categorical", "values": ["bus", "rail"]},
        "fare": {"kind": "numeric", "min": 0, "max": 10},
    }
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(domains))
    argv = ["trips", str(files[0]), "--epsilon", "2", "--delta", "1e-5", "--schema", str(schema)]
    argv += ["--id-column", "card", "--key-columns", "hour,zone", "--category-column", "mode"]
    argv += ["--archetypes", "2"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        "warning: schema column(s) 'fare' are not in the release: neither key, category nor "
        "completion columns (add them to --key-columns or --completion)"
    )
    assert err[-1].startswith("transit-synth trips: ") and err[-1].endswith(" of 1e-05")
    assert "fare" not in pd.read_csv(tmp_path / "a" / "trips.csv").columns
    # modelled as a completion column: no warning, the column is released
    assert main([*argv, "--completion", '[["fare", ["zone"]]]', "--out", str(tmp_path / "b")]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "fare" in pd.read_csv(tmp_path / "b" / "trips.csv").columns
    # the datasheet says what the numbers are: whole numbers (the schema rounds every value)
    sheet = json.loads((tmp_path / "b" / "datasheet.json").read_text())
    meanings = {c["name"]: c["meaning"] for c in sheet["files"][0]["columns"]}
    assert meanings["fare"].startswith("a whole number between 0 and 10 (the public range")
    # without public trips a feature must be modelled: it said "public data: missing column"
    never = tmp_path / "never"
    assert main([*argv, "--features", "hour,fare", "--out", str(never)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "without public trips the archetypes cluster" in err[0]
    assert "'fare' (add them to --key-columns or --completion" in err[0] and not never.exists()
    # a misspelt key column is missing from the file (it asked for its schema entry)
    bad = [a if a != "hour,zone" else "hour,zome" for a in argv]
    assert main([*bad, "--out", str(never)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("private.csv: missing column(s) 'zome'")
    assert not never.exists()


def test_public_and_the_stand_in_flags_exclude_each_other(
    files: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    """``[--public PUBLIC | --public-stand-in]`` (docs/design.md section 3): both given, the
    stand-in flag was ignored without a word."""
    out = tmp_path / "never"
    assert main(_args(*files, out, "--public-stand-in")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "transit-synth trips: error: --public and --public-stand-in exclude each other: give "
        "public trips, or let the model stand in for them"
    ]
    assert not out.exists()
