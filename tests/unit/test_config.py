"""TOML configuration loading, and a parameter table's check of a ``parameters`` sub-table."""

from __future__ import annotations

import datetime
import tomllib
from pathlib import Path

import pytest

from synth.config import dump_config, load_config
from synth.errors import ConfigError, RenamedParameterWarning
from synth.params import STRING, Interval, Options, Param, ParamTable, Satisfies

TABLE = ParamTable(
    "Model",
    [
        Param("epsilon", (Interval("real", 0, None, "neither"),), "budget"),
        Param("height", (Interval("integer", 1),), "height", default=12),
        Param("variant", (Options(("hybrid", "simple")),), "variant", default="hybrid"),
        Param(
            "budget_split",
            (None, Satisfies(lambda v: all(isinstance(x, float) for x in v), "shares")),
            "split",
            default=None,
        ),
        Param("name", (STRING,), "name", default="x"),
        Param(
            "time_bin",
            (None, Interval("integer", 1)),
            "bins",
            default=None,
            renamed_from="time_bins",
        ),
        Param("seed", (None, Interval("integer")), "seed", default=None, api_only="a test"),
    ],
)


def test_load_and_check(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[model]\nepsilon = 1\nheight = 8\nvariant = "simple"\nbudget_split = [0.1, 0.9]\n'
    )
    config = load_config(path)
    params = TABLE.check_config(config["model"], source=path, section="model")
    assert params == {"epsilon": 1, "height": 8, "variant": "simple", "budget_split": [0.1, 0.9]}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("epsilon = 1\nheigth = 3\n", "unknown key 'heigth'"),
        ('epsilon = "one"\n', "key 'epsilon'"),
        ("epsilon = 1\nheight = 2.5\n", "key 'height'"),
        ("epsilon = 1\nheight = 0\n", "key 'height' in [model] must be a positive integer"),
        ('epsilon = 1\nvariant = "fancy"\n', "key 'variant'"),
        ('epsilon = 1\nbudget_split = ["a"]\n', "key 'budget_split'"),
        ("epsilon = true\n", "key 'epsilon'"),
        ("seed = 3\n", "unknown key 'seed'"),  # API-only: no config key
    ],
)
def test_bad_keys_name_key_and_file(tmp_path: Path, body: str, fragment: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[model]\n" + body)
    with pytest.raises(ConfigError) as info:
        TABLE.check_config(load_config(path)["model"], source=path, section="model")
    assert fragment in str(info.value)
    assert str(path) in str(info.value)


def test_excluded_key_is_unknown(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key 'name'"):
        TABLE.check_config({"name": "y"}, source="f.toml", section="m", exclude=("name",))


def test_a_renamed_key_is_read_with_a_deprecation_naming_the_removal() -> None:
    with pytest.warns(RenamedParameterWarning, match=r"'time_bins'.*0\.3\.0.*'time_bin'"):
        params = TABLE.check_config({"time_bins": 15}, source="f.toml", section="m")
    assert params == {"time_bin": 15}
    with (
        pytest.warns(RenamedParameterWarning),
        pytest.raises(ConfigError, match="'time_bin' in \\[m\\] is given twice"),
    ):
        TABLE.check_config({"time_bin": 15, "time_bins": 15}, source="f.toml", section="m")


def test_syntax_error_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text("[model\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.toml")


def test_dump_config_reads_back_equal() -> None:
    """What ``run`` copies into its folder: tables, arrays of tables, nested tables, odd keys."""
    config = {
        "sequences": {
            "input": "a b/taps.csv",
            "parameters": {"epsilon": 0.5, "height": 3, "budget_split": {"1": 0.25, "2": 0.75}},
        },
        "trips": [
            {
                "name": "t1",
                "private": 'quote"d\\path',
                "public_years": [2013, 2014],
                "parameters": {"completion": [["a", ["b", "c"]]], "public_stand_in": True},
            },
            {"name": "t2", "private": "ü.csv", "parameters": {"day": datetime.date(2019, 11, 28)}},
        ],
    }
    text = dump_config(config, "copied\nsecond line")
    assert text.startswith("# copied\n# second line\n")
    assert tomllib.loads(text) == config
