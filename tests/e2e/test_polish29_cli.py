"""Issue 29 polish, as the user sees it: the pure-mode error names its flags, the taxi privacy
unit in words."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from synth.cli import main
from synth.errors import ConfigError
from synth.marginals import OpalMarginals

CONFIGS = Path(__file__).resolve().parents[2] / "synth" / "configs"


def test_pure_mode_error_names_flags_keys_or_keywords(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--pure`` without its public domains: the CLI names --taxonomy, --modes, --days; a run
    config names its keys; Python names the keywords (:func:`synth.params.spell`)."""
    taps = tmp_path / "taps.csv"
    taps.write_text("card_id,time,stop_id\nc1,2024-03-05T08:00:00,A\n")
    argv = ["marginals", str(taps), "--pure", "--epsilon", "1", "--delta", "1e-6"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "needs --taxonomy, --modes, --days" in err
    (tmp_path / "tax.csv").write_text("child,parent\nA,X\n")
    assert main([*argv, "--taxonomy", str(tmp_path / "tax.csv"), "--out", str(tmp_path / "o")]) == 2
    assert "needs --modes, --days" in capsys.readouterr().err
    config = tmp_path / "c.toml"
    config.write_text(
        '[marginals]\ninput = "taps.csv"\ntaxonomy = "tax.csv"\n'
        '[marginals.parameters]\nepsilon = 1\ndelta = 1e-6\nmode = "pure"\n'
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    assert 'pure mode (mode = "pure")' in capsys.readouterr().err
    with pytest.raises(ConfigError, match="needs taxonomy, modes, days"):
        OpalMarginals(epsilon=1, delta=1e-6, mode="pure").fit(pd.read_csv(taps))


def test_taxi_unit_says_one_trip(shared_data: Path, tmp_path: Path) -> None:
    """The Chicago layout numbers the rows (no taxi id): the datasheet, its README and the
    manifest say one unit is one row, not "every row with its taxi_id value (at most 200
    kept)"; the guarantee (epsilon, delta per taxi trip) is unchanged."""
    lines = (shared_data / "chicago-taxi/chicago_taxi_simple.csv").read_text().splitlines()
    data = tmp_path / "taxi-sample.csv"
    data.write_text("\n".join([lines[0], *lines[1::20]]) + "\n")
    out = tmp_path / "taxi"
    argv = ["trips", str(data), "--public", str(data), "--epsilon", "1", "--delta", "2.5e-5"]
    argv += ["--config", str(CONFIGS / "taxi-archetypes.toml"), "--seed", "0", "--quiet"]
    assert main([*argv, "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    sheet = json.loads((out / "datasheet.json").read_text())
    readme = (out / "README.md").read_text()
    unit = "one taxi trip (one row of the input: its layout gives each row its own taxi_id)"
    assert unit in sheet["privacy"]["in_words"] and unit in readme
    assert manifest["neighbouring"] == (
        "add or remove one taxi trip: one row (the input layout gives each row its own taxi_id)"
    )
    assert manifest["parameters"]["one_row_per_id"] is True
    assert manifest["privacy_unit"] == "taxi trip" and manifest["guarantee"]["epsilon"] == 1
    for text in (readme, json.dumps(sheet), json.dumps(manifest)):
        assert "every row with its" not in text
