"""What users see: the report's, datasheet's and CLI's wording on agency-shaped runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.evaluate.reference import MAX_ONE_WAY_TVD, MIN_WITHIN


def _check_row(table: str, *, cells: int, outside: int, tvd: float, passes: bool) -> dict:
    return {
        "table": table,
        "compared": True,
        "cells": cells,
        "within_bound": 1 - outside / cells,
        "tvd": tvd,
        "coverage": 0.3,
        "passes": passes,
        "error_bound": 10.0,
        "outside_bound": outside,
        "release_total": 100.0,
        "microdata_total": 120.0,
    }


def test_a_failing_reference_table_says_which_limit_it_missed() -> None:
    """A one-way table with no cell outside its bound fails on its TV distance: the row must say
    so, or '0 (0.0%) outside' beside 'NO' reads as a contradiction."""
    from synth.report.manifests import reference_section

    frame = pd.DataFrame(
        [
            _check_row("on_location", cells=380, outside=0, tvd=0.09031, passes=False),
            _check_row("on_time_location", cells=100, outside=20, tvd=0.01, passes=False),
            _check_row("on_time", cells=24, outside=0, tvd=0.01, passes=True),
        ]
    )
    text = reference_section({"sequences-sube": frame})
    assert f"NO (one-way TV 0.0903 &gt; {MAX_ONE_WAY_TVD})" in text
    assert f"NO (80.0% within &lt; {MIN_WITHIN:.0%})" in text
    assert ">yes<" in text


def test_audit_refusing_its_out_folder_prints_one_line_only(
    forty_cards: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad --out: one line on stderr, exit 2, no findings printed before the refusal, the user's
    file kept."""
    from synth.cli import main

    release = tmp_path / "release"
    argv = ["sequences", str(forty_cards["taps"]), "--taxonomy", str(forty_cards["taxonomy"])]
    argv += ["--epsilon", "1", "--height", "3", "--out", str(release), "--seed", "1", "--quiet"]
    assert main(argv) == 0
    capsys.readouterr()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "audit.html").write_text("my notes")
    assert main(["audit", str(release), "--out", str(mine)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and "mine" in captured.err
    assert (mine / "audit.html").read_text() == "my notes"
    assert main(["audit", str(release), "--out", str(tmp_path / "new")]) == 0
    assert "zeros" in capsys.readouterr().out  # the findings still print once written


def test_consistent_marginals_datasheet_says_the_one_way_tables_are_sums(tmp_path: Path) -> None:
    """In consistent mode a one-way table is the sum of the thresholded two-way table's published
    cells: the datasheet must say its counts leave out the suppressed cells (the demo's
    on_location.csv holds a fifth of the taps); the SBH mode measures each table itself."""
    from synth import OpalMarginals

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
    settings = {"epsilon": 4.0, "delta": 1e-6, "privacy_unit": "card_id", "random_state": 1}
    release = OpalMarginals(mode="consistent", **settings).fit(taps)
    folder = release.write(tmp_path / "consistent").path
    sheet = json.loads((folder / "datasheet.json").read_text())
    readme = (folder / "README.md").read_text()
    assert any(
        b.startswith("on_location: the sums of the published cells of on_time_location")
        for b in sheet["bounded"]
    )
    assert "the summed tables leave out the taps of the suppressed cells" in readme
    sbh = OpalMarginals(**settings).fit(taps).write(tmp_path / "sbh").path
    assert "the summed tables" not in (sbh / "README.md").read_text()


def test_an_export_states_the_release_guarantee_not_only_its_spend(
    forty_cards: dict[str, Path], tmp_path: Path
) -> None:
    """A modeller reads export-od.json: it must carry the release's guarantee (the budget asked),
    not only 'spent', which is below it when the prefix tree stops early."""
    from synth.cli import main

    release = tmp_path / "release"
    argv = ["sequences", str(forty_cards["taps"]), "--taxonomy", str(forty_cards["taxonomy"])]
    argv += ["--epsilon", "1", "--height", "3", "--out", str(release), "--seed", "1", "--quiet"]
    assert main(argv) == 0
    out = str(tmp_path / "od")
    assert main(["export", str(release), "--to", "od", "--out", out, "--quiet"]) == 0
    info = json.loads((tmp_path / "od" / "export-od.json").read_text())
    manifest = json.loads((release / "manifest.json").read_text())
    assert info["guarantee"] == manifest["guarantee"]
    assert info["guarantee"]["epsilon"] == 1.0


def test_a_value_outside_the_public_domain_says_how_to_fix_it() -> None:
    """An agency's private trips hold a line the public day never saw: the one-line error names
    the remedy (list it in --schema, or an "other" value), not only the failure."""
    from archetypes import TripSchema
    from synth.errors import InputError

    public = pd.DataFrame({"line": ["1", "2"], "hour": [7, 8]})
    schema = TripSchema.from_public(public, categorical=["line"], numeric=["hour"])
    private = pd.DataFrame({"line": ["1", "399"], "hour": [7, 9]})
    with pytest.raises(InputError) as err:
        schema.conform(private, source="trips.csv")
    text = str(err.value)
    assert text.startswith("trips.csv: column 'line', row 2: value '399' is not in the schema")
    assert 'give the column an "other" value in --schema' in text and "\n" not in text


def test_default_features_skip_a_numeric_column_with_a_text_other_value(tmp_path: Path) -> None:
    """Line ids are numbers in the public trips, but the agency's --schema gives the column an
    "other" value: it is then categorical, not a clustering feature, and a private line the public
    day never saw no longer fails as 'feature columns must be numeric'."""
    from archetypes import ArchetypeSynthesizer, TripSchema

    rng = np.random.default_rng(0)

    def trips(n: int, lines: list[int]) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "card_number": rng.integers(0, n // 2, n),
                "hour": rng.integers(5, 23, n),
                "line": rng.choice(lines, n),
                "mode": rng.choice(["COL", "SUB"], n),
            }
        )

    public, private = trips(400, [1, 2, 3]), trips(400, [1, 2, 3, 399])
    schema = TripSchema.from_dict(
        {
            "card_number": {"kind": "id"},
            "hour": {"kind": "categorical", "values": list(range(24))},
            "line": {"kind": "categorical", "values": ["1", "2", "3", "other"], "other": "other"},
            "mode": {"kind": "categorical", "values": ["COL", "SUB"]},
        }
    )
    model = ArchetypeSynthesizer(
        epsilon=1.0,
        delta=1e-5,
        id_column="card_number",
        key_columns=["hour", "line", "mode"],
        category_column="mode",
        schema=schema,
        random_state=0,
    ).fit(private, public)
    assert "hour" in model.features_ and "line" not in model.features_
    assert set(model.sample(200)["line"].astype(str)) <= {"1", "2", "3", "other"}


def test_a_missing_trips_option_names_the_flag_and_the_config_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'--key-columns (or --key-columns in the --config file ...)' named the flag twice: a config
    spells it key_columns."""
    from synth.cli import main

    trips = tmp_path / "trips.csv"
    trips.write_text("card_number,hour,mode\n1,7,COL\n2,8,SUB\n")
    argv = ["trips", str(trips), "--public", str(trips), "--epsilon", "1", "--delta", "1e-5"]
    assert main([*argv, "--out", str(tmp_path / "out"), "--id-column", "card_number"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        "--key-columns (or key 'key_columns' in the --config file's [trips.parameters]) is required"
    )
    assert not (tmp_path / "out").exists()


def test_a_run_failing_late_prints_one_line_and_writes_nothing(
    forty_cards: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config whose second release fails at run time (a column its trips lack): the first
    release's summary and warnings ('... -> OUT/seq/sequences.csv') must not be printed for files
    that are never written; one error line, exit 2, no output folder."""
    from synth.cli import main

    folder = forty_cards["folder"]
    (folder / "trips.csv").write_text(
        "card_number,hour,mode\n" + "".join(f"c{i % 9},{i % 24},{'AB'[i % 2]}\n" for i in range(60))
    )
    config = folder / "agency.toml"
    config.write_text(
        '[sequences]\ninput = "taps.csv"\ntaxonomy = "taxonomy.csv"\n'
        "[sequences.parameters]\nepsilon = 1.0\nheight = 3\n"
        '[trips]\nprivate = "trips.csv"\npublic = "trips.csv"\n'
        "[trips.parameters]\nepsilon = 1.0\ndelta = 1e-5\n"
        'id_column = "card_number"\nkey_columns = ["hour", "mode"]\n'
        'category_column = "nonexistent"\n'
    )
    out = tmp_path / "out"
    assert main(["run", str(config), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1, captured.err
    assert "nonexistent" in captured.err and not out.exists()


def test_timed_sequences_datasheet_says_the_minute_is_random(
    forty_cards: dict[str, Path], tmp_path: Path
) -> None:
    """The released times of a timed sequences release are a sampled bin plus a uniform minute
    (18:35, 21:24 in the demo), so the datasheet must not say 'floored: 08:59 is shown at 08:00'
    (an analyst would read the minutes as measured); a marginals table's times are floored."""
    from synth.cli import main

    out = tmp_path / "timed"
    argv = ["sequences", str(forty_cards["taps"]), "--taxonomy", str(forty_cards["taxonomy"])]
    argv += ["--epsilon", "1", "--height", "3", "--time-bin", "60", "--out", str(out)]
    assert main([*argv, "--seed", "1", "--quiet"]) == 0
    readme = (out / "README.md").read_text()
    sheet = json.loads((out / "datasheet.json").read_text())
    time = next(c for f in sheet["files"] for c in f["columns"] if c["name"] == "time")
    assert "minute within it drawn at random" in time["meaning"]
    assert "floored to the time bin" not in readme and "is shown at 08:00" not in readme
    assert "a synthetic 08:35 says 08:00-08:59, not a measured minute" in readme
    minutes = {t.split(":")[1] for t in pd.read_csv(out / "sequences.csv")["time"]}
    assert minutes != {"00"}  # what the datasheet describes: minutes are not floored
