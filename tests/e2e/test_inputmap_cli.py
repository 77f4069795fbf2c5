"""Input mapping (issue 29): an agency's files load with flags alone, on every taps command."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from synth.cli import main
from synth.records import load_sequences
from synth.records.mapping import InputMap, MissingIdWarning, read_mapped

TAPS = pd.DataFrame(
    {
        "card_id": ["c1", "c1", "c2", "c2", "c3", "c3", "c4"],
        "time": [f"2024-03-05T0{h}:{m}:00" for h, m in [(7, 1), (7, 20), (8, 0), (8, 30)]]
        + ["2024-03-05T09:00:00", "2024-03-05T09:10:00", "2024-03-05T09:40:00"],
        "stop_id": ["A", "B", "A", "C", "B", "A", "C"],
    }
)
RENAMED = {"card_id": "card_number", "time": "tap_datetime", "stop_id": "stop_code"}
FLAGS = ["--card-column", "card_number", "--time-column", "tap_datetime"]
FLAGS += ["--location-column", "stop_code"]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "tax.csv").write_text("child,parent\nA,X\nB,X\nC,Y\n")
    TAPS.to_csv(tmp_path / "canonical.csv", index=False)
    TAPS.rename(columns=RENAMED).to_csv(tmp_path / "renamed.csv", index=False)
    TAPS.rename(columns=RENAMED).to_csv(tmp_path / "semi.csv", index=False, sep=";")
    return {p.stem: p for p in tmp_path.glob("*.csv")}


def _sequences(path: Path, out: Path, *flags: str) -> int:
    tax = str(path.with_name("tax.csv"))
    args = ["sequences", str(path), "--taxonomy", tax, "--epsilon", "2", "--height", "3"]
    return main([*args, "--out", str(out), "--seed", "5", *flags])


def test_renamed_columns_load_with_flags(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _sequences(files["renamed"], tmp_path / "plain") == 2  # 'card_id' missing
    assert "missing column" in capsys.readouterr().err
    assert _sequences(files["canonical"], tmp_path / "ref") == 0
    assert _sequences(files["renamed"], tmp_path / "mapped", *FLAGS) == 0
    err = capsys.readouterr().err
    assert "columns card=card_number, time=tap_datetime, location=stop_code" in err
    ref = (tmp_path / "ref" / "sequences.csv").read_bytes()
    assert (tmp_path / "mapped" / "sequences.csv").read_bytes() == ref


def test_semicolon_file_hint_and_sep(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _sequences(files["semi"], tmp_path / "no", *FLAGS) == 2
    err = capsys.readouterr().err
    assert "looks like ';'-separated: pass --sep ';'" in err and len(err.splitlines()) <= 2
    assert not (tmp_path / "no").exists()
    assert _sequences(files["canonical"], tmp_path / "ref") == 0
    assert _sequences(files["semi"], tmp_path / "yes", *FLAGS, "--sep", ";") == 0
    ref = (tmp_path / "ref" / "sequences.csv").read_bytes()
    assert (tmp_path / "yes" / "sequences.csv").read_bytes() == ref
    out = tmp_path / "marg"
    marg = ["marginals", str(files["semi"]), "--epsilon", "1", "--delta", "1e-6"]
    assert main([*marg, "--out", str(out), "--seed", "1", *FLAGS, "--sep", ";"]) == 0


def test_latin1_in_an_unused_column_is_refused(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "latin1.csv"
    frame = TAPS.assign(note=["ok"] * 6 + ["caf\u00e9"])
    bad.write_bytes(frame.to_csv(index=False).encode("latin-1"))
    assert _sequences(bad, tmp_path / "out") == 2
    err = [e for e in capsys.readouterr().err.splitlines() if "error" in e]
    assert len(err) == 1 and str(bad) in err[0] and "not UTF-8" in err[0] and "line 8" in err[0]


def test_tap_off_values_and_time_resolution(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hourly = TAPS.assign(fecha="2024-03-05", hora=[7, 7, 8, 8, 9, 9, 9], kind="entrada")
    hourly.loc[[1, 3], "kind"] = " Salida "
    path = tmp_path / "hourly.csv"
    hourly.drop(columns=["time"]).to_csv(path, index=False)
    imap = InputMap.build(
        date_column="fecha", hour_column="hora", tap_column="kind", tap_off_values="salida"
    )
    taps, summary = read_mapped(path, imap)
    assert taps["tap"].tolist() == ["on", "off", "on", "off", "on", "on", "on"]
    assert "tap=kind (off: salida)" in summary and "time=fecha + hora" in summary
    flags = ["--date-column", "fecha", "--hour-column", "hora", "--time-bin", "15"]
    assert _sequences(path, tmp_path / "o", *flags) == 0
    assert "--time-bin 15 is finer than the data's time resolution (60 minutes" in (
        capsys.readouterr().err
    )
    assert _sequences(path, tmp_path / "o2", *flags[:4], "--time-bin", "60") == 0
    assert "finer than" not in capsys.readouterr().err


def test_sube_with_empty_card_ids(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sube = shared_data / "sube-buenos-aires" / "miercoles_trx.csv"
    tax = tmp_path / "lines.csv"
    lines = pd.read_csv(sube, usecols=["id_linea"])["id_linea"].astype(str).unique()
    pd.DataFrame({"child": lines, "parent": "all"}).to_csv(tax, index=False)
    args = ["sequences", str(sube), "--taxonomy", str(tax), "--epsilon", "1", "--height", "3"]
    assert main([*args, "--out", str(tmp_path / "a"), "--location-column", "id_linea"]) == 2
    assert "empty value" in capsys.readouterr().err
    flags = ["--location-column", "id_linea", "--drop-missing-ids"]
    assert main([*args, "--out", str(tmp_path / "b"), *flags]) == 0
    err = capsys.readouterr().err
    assert "dropped 10 rows without a card id" in err and "private: for the data holder" in err
    hide = ["--log-private", "hide", "--seed", "2"]
    assert main([*args, "--out", str(tmp_path / "c"), "--profile", "sube", *hide]) == 0
    err = capsys.readouterr().err
    assert "without a card id" not in err and "[profile sube]" in err
    # the profile reads the file as the demo does: rows without a card id dropped, id_linea
    with pytest.warns(MissingIdWarning, match="dropped 10 rows"):
        mapped, _ = read_mapped(sube, InputMap.build("sube"))
    raw = pd.read_csv(sube, dtype={"id_tarjeta": str, "id_linea": str})
    demo = load_sequences(raw[raw["id_tarjeta"].notna()], location_column="id_linea")
    pd.testing.assert_frame_equal(load_sequences(mapped), demo)


def test_run_config_keys(files: dict[str, Path], tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    body = f'input = "{files["semi"]}"\ntaxonomy = "{files["tax"]}"\nsep = ";"\n'
    body += 'card_column = "card_number"\ntime_column = "tap_datetime"\n'
    body += 'location_column = "stop_code"\n'
    cfg.write_text(f"[sequences]\n{body}[sequences.parameters]\nepsilon = 2\nheight = 3\n")
    assert main(["run", str(cfg), "--out", str(tmp_path / "r"), "--seed", "5"]) == 0
    assert _sequences(files["canonical"], tmp_path / "ref") == 0
    ref = (tmp_path / "ref" / "sequences.csv").read_bytes()
    assert (tmp_path / "r" / "sequences" / "sequences.csv").read_bytes() == ref
    marg = f'[marginals]\ninput = "{files["semi"]}"\nsep = ";"\ncard_column = "card_number"\n'
    marg += 'time_column = "tap_datetime"\nlocation_column = "stop_code"\n[marginals.parameters]\n'
    marg += 'epsilon = 1\ndelta = 1e-6\nprivacy_unit = "card_number"\n'
    (tmp_path / "m.toml").write_text(marg)
    assert main(["run", str(tmp_path / "m.toml"), "--out", str(tmp_path / "m"), "--quiet"]) == 0
    manifest = json.loads((tmp_path / "m" / "marginals" / "manifest.json").read_text())
    assert "card" in json.dumps(manifest["privacy_unit"]).lower()
    cfg.write_text(cfg.read_text().replace('sep = ";"', 'profile = "nope"'))
    assert main(["run", str(cfg), "--out", str(tmp_path / "r2")]) == 2


@pytest.mark.parametrize(
    ("engine", "command"),
    [
        ("duckdb", "sequences"),
        ("duckdb", "marginals"),
        pytest.param("spark", "sequences", marks=[pytest.mark.slow, pytest.mark.spark]),
    ],
)
def test_mapped_input_on_every_engine(
    files: dict[str, Path], tmp_path: Path, engine: str, command: str
) -> None:
    """The mapped rows reach every engine: the same release as the canonical file in memory."""
    if engine == "spark":
        pytest.importorskip("pyspark")
    flags = [*FLAGS, "--sep", ";", "--engine"]
    if command == "sequences":
        assert _sequences(files["canonical"], tmp_path / "ref", "--engine", "memory") == 0
        assert _sequences(files["semi"], tmp_path / "eng", *flags, engine) == 0
        name = "sequences.csv"
    else:  # enough taps per cell for SBH's threshold to release some
        many = pd.concat([TAPS.assign(card_id=TAPS["card_id"] + f"-{i}") for i in range(60)])
        many.to_csv(tmp_path / "many.csv", index=False)
        many.rename(columns=RENAMED).to_csv(tmp_path / "many_semi.csv", index=False, sep=";")
        base = ["marginals", "--epsilon", "4", "--delta", "1e-3", "--seed", "4", "--bin", "60"]
        ref = [str(tmp_path / "many.csv"), "--out", str(tmp_path / "ref"), "--engine", "memory"]
        assert main([*base, *ref]) == 0
        eng = [str(tmp_path / "many_semi.csv"), "--out", str(tmp_path / "eng")]
        assert main([*base, *eng, *flags, engine]) == 0
        name = "on_time_location.csv"
        assert len(pd.read_csv(tmp_path / "ref" / name)) > 0
    assert (tmp_path / "eng" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()


def _evaluation(original: Path, release: Path, out: Path, *flags: str) -> dict:
    assert (
        main(["evaluate", str(original), str(release), "--out", str(out), "--quiet", *flags]) == 0
    )
    result = json.loads((out / "private-evaluation.json").read_text())
    del result["inputs"]  # the file names
    return result


def test_evaluate_takes_the_input_options(files: dict[str, Path], tmp_path: Path) -> None:
    """evaluate reads ORIGINAL with the generator's input options: the same scores as the
    canonical file; --on-unknown drop drops what the taxonomy lacks, as the generator did."""
    assert _sequences(files["semi"], tmp_path / "rel", *FLAGS, "--sep", ";") == 0
    ref = _evaluation(files["canonical"], tmp_path / "rel", tmp_path / "e-ref")
    mapped = _evaluation(files["semi"], tmp_path / "rel", tmp_path / "e-map", *FLAGS, "--sep", ";")
    assert mapped == ref
    extra = pd.concat([TAPS, TAPS.iloc[:1].assign(card_id="c9", stop_id="Z")])
    extra.to_csv(tmp_path / "extra.csv", index=False)
    tax = ["--taxonomy", str(files["tax"])]
    kept = _evaluation(tmp_path / "extra.csv", tmp_path / "rel", tmp_path / "e-x", *tax)
    dropped = ["--on-unknown", "drop", *tax]
    assert _evaluation(tmp_path / "extra.csv", tmp_path / "rel", tmp_path / "e-d", *dropped) == (
        _evaluation(files["canonical"], tmp_path / "rel", tmp_path / "e-c", *tax)
    )
    assert kept["original"] != ref["original"]


def test_trips_sep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A semicolon trips file: refused with the hint, then read with --sep as the comma file."""
    rows = [
        (f"k{i}", h, "AB"[i % 2], ("bus", "rail")[i % 3 == 0]) for i in range(60) for h in (7, 8)
    ]
    trips = pd.DataFrame(rows, columns=["card", "hour", "zone", "mode"])
    trips.to_csv(tmp_path / "comma.csv", index=False)
    trips.to_csv(tmp_path / "semi.csv", index=False, sep=";")
    trips.assign(card="p" + trips["card"]).to_csv(tmp_path / "public.csv", index=False, sep=";")
    trips.assign(card="p" + trips["card"]).to_csv(tmp_path / "public_c.csv", index=False)
    common = ["--epsilon", "2", "--delta", "1e-5", "--id-column", "card", "--archetypes", "2"]
    common += ["--key-columns", "hour,zone", "--category-column", "mode", "--seed", "3", "--quiet"]

    def trips_cli(private: str, public: str, out: str, *extra: str) -> int:
        args = ["trips", str(tmp_path / private), "--public", str(tmp_path / public)]
        return main([*args, "--out", str(tmp_path / out), *common, *extra])

    assert trips_cli("semi.csv", "public.csv", "no") == 2
    assert "pass --sep ';'" in capsys.readouterr().err
    assert trips_cli("comma.csv", "public_c.csv", "ref") == 0
    assert trips_cli("semi.csv", "public.csv", "yes", "--sep", ";") == 0
    ref = (tmp_path / "ref" / "trips.csv").read_bytes()
    assert (tmp_path / "yes" / "trips.csv").read_bytes() == ref
    scored = []
    for original, flags in (("comma.csv", ()), ("semi.csv", ("--sep", ";"))):
        out = tmp_path / f"eval-{original}"
        args = ["evaluate", str(tmp_path / original), str(tmp_path / "ref"), "--out", str(out)]
        assert main([*args, "--kind", "trips", "--quiet", *flags]) == 0
        result = json.loads((out / "private-evaluation.json").read_text())
        scored.append({k: v for k, v in result.items() if k != "inputs"})
    assert scored[0] == scored[1]


def test_time_values_checked_one_by_one(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hourly data in a timestamp column (no schema fact, nothing declared): each value is
    checked on its own against --time-bin; the count of whole-hour values goes to the holder's
    log only (labelled private, hidden by --log-private hide, never in the release)."""
    hourly = TAPS.assign(time=pd.to_datetime(TAPS["time"]).dt.floor("h").astype(str))
    hourly.loc[0, "time"] = "2024-03-05 07:01:00"  # one value given to the minute
    path = tmp_path / "hourly_stamps.csv"
    hourly.rename(columns=RENAMED).to_csv(path, index=False)
    assert _sequences(path, tmp_path / "o", *FLAGS, "--time-bin", "15") == 0
    err = capsys.readouterr().err
    assert "--time-bin 15: 6 of 7 time values lie on a whole hour" in err
    assert "private: for the data holder" in err
    published = "".join(p.read_text() for p in (tmp_path / "o").iterdir() if p.is_file())
    assert "6 of 7" not in published and "whole hour" not in published
    assert (
        _sequences(path, tmp_path / "h", *FLAGS, "--time-bin", "15", "--log-private", "hide") == 0
    )
    assert "whole hour" not in capsys.readouterr().err
    # a bin of an hour or more: whole-hour values split nothing; a declared resolution: the
    # declared rule speaks instead of the counts
    assert _sequences(path, tmp_path / "o60", *FLAGS, "--time-bin", "60") == 0
    assert "whole hour" not in capsys.readouterr().err
    declared = [*FLAGS, "--time-bin", "15", "--time-resolution", "60"]
    assert _sequences(path, tmp_path / "od", *declared) == 0
    err = capsys.readouterr().err
    assert "whole hour" not in err and "declared" in err
