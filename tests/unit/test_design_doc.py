"""docs/design.md is kept current: its section 3 names every command and every flag of the CLI."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from synth.cli import build_parser, commands

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"


def _section_3() -> str:
    text = DESIGN.read_text(encoding="utf-8")
    start = text.index("## 3. Command line")
    return text[start : text.index("## 4.", start)]


def _flags(command: str) -> set[str]:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[
        command
    ]
    return {s for a in sub._actions for s in a.option_strings if s.startswith("--")} - {"--help"}


def _missing(section: str, flags: set[str]) -> list[str]:
    return sorted(f for f in flags if not re.search(re.escape(f) + r"(?![\w-])", section))


@pytest.mark.parametrize("command", sorted(commands()))
def test_section_3_lists_every_flag(command: str) -> None:
    section = _section_3()
    assert f"transit-synth {command}" in section
    missing = _missing(section, _flags(command))
    assert not missing, f"docs/design.md section 3 lacks {command} {', '.join(missing)}"


def test_the_check_sees_a_missing_flag() -> None:
    """Canary: a flag absent from the text, or present only as a longer flag's prefix, is found."""
    text = "[--time-bin MINUTES] [--coarse-time-bin M]"
    assert _missing(text, {"--time-bin", "--bin", "--time"}) == ["--bin", "--time"]
    assert "--out" in _flags("sequences") and "--gtfs-stations" in _flags("marginals")
