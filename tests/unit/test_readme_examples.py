"""The README's Python examples run as written (each ```python block, in order, in a temp dir)."""

from __future__ import annotations

import re
from contextlib import nullcontext
from pathlib import Path

import pytest

from synth.records import UnknownLocationWarning

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks() -> list[str]:
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def test_the_readme_has_a_python_example_per_generator() -> None:
    text = "\n".join(python_blocks())
    for name in ("PrefixTreeSynthesizer", "ArchetypeSynthesizer", "OpalMarginals"):
        assert f"{name}(" in text and ".fit(" in text


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_python_example_runs(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code = python_blocks()[index]
    # an example that drops unknown locations says so (the tool's warnings are errors here)
    expected = (
        pytest.warns(UnknownLocationWarning) if 'on_unknown="drop"' in code else nullcontext()
    )
    with expected:
        exec(
            compile(code, f"README.md python block {index + 1}", "exec"), {"__name__": "__readme__"}
        )
