"""TOML configuration loading and key/type checks against constructor signatures."""

from __future__ import annotations

import datetime
import tomllib
from pathlib import Path
from typing import Literal

import pytest

from synth.config import check_params, dump_config, load_config
from synth.errors import ConfigError


class Model:
    def __init__(
        self,
        *,
        epsilon: float,
        height: int = 12,
        variant: Literal["hybrid", "simple"] = "hybrid",
        budget_split: tuple[float, float] | None = None,
        name: str = "x",
    ) -> None:
        self.epsilon = epsilon


def test_load_and_check(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[model]\nepsilon = 1\nheight = 8\nvariant = "simple"\nbudget_split = [0.1, 0.9]\n'
    )
    config = load_config(path)
    params = check_params(Model, config["model"], source=path, section="model")
    assert params == {"epsilon": 1, "height": 8, "variant": "simple", "budget_split": [0.1, 0.9]}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("epsilon = 1\nheigth = 3\n", "unknown key 'heigth'"),
        ('epsilon = "one"\n', "key 'epsilon'"),
        ("epsilon = 1\nheight = 2.5\n", "key 'height'"),
        ('epsilon = 1\nvariant = "fancy"\n', "key 'variant'"),
        ('epsilon = 1\nbudget_split = ["a"]\n', "key 'budget_split'"),
        ("epsilon = true\n", "key 'epsilon'"),
    ],
)
def test_bad_keys_name_key_and_file(tmp_path: Path, body: str, fragment: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[model]\n" + body)
    with pytest.raises(ConfigError) as info:
        check_params(Model, load_config(path)["model"], source=path, section="model")
    assert fragment in str(info.value)
    assert str(path) in str(info.value)


def test_excluded_key_is_unknown(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key 'name'"):
        check_params(Model, {"name": "y"}, source="f.toml", section="m", exclude=("name",))


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
