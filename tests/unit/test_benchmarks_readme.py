"""README.md's tables (issue 27: "README tables are produced from the JSON, not typed by hand").

Every table in README.md is one of three kinds: generated from a results file under
``benchmarks/results/`` by ``benchmarks/tables.py`` (it stands between ``<!-- table:NAME -->``
markers, and ``test_benchmarks.test_readme_tables_match_their_results`` checks it cell for cell,
so a hand edit fails), a benchmark table still typed by hand (:data:`HAND_TYPED`, with the reason
no results file is behind it), or documentation (:data:`DOCUMENTATION`). A new table fails here
until it is generated or listed.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.test_benchmarks import GENERATED

README = Path(__file__).resolve().parents[2] / "README.md"

#: benchmark tables typed by hand (their header row -> why no results JSON is behind them): each
#: documented run takes far longer than the two minutes a regeneration may cost on the shared
#: 2-core machine, or mixes figures of earlier code that no run of today's code reproduces
HAND_TYPED = {
    "| data (H) | ceiling | auto (default) | kdd12 | hybrid-sqrt |": (
        "bench_prefixtree.py defaults, two documented runs: 160 fits with 10,000 queries each "
        "(SUBE and three 60-100k shapes, 4 configs, 10 noise seeds) and 20 on simulated Montreal "
        "1M (4 s a fit): estimated at minutes, over the 2-minute limit on the shared 2-core "
        "machine; its kdd12 Montreal cells come from an earlier version ('(earlier)')"
    ),
    "| SUBE Wednesday | length TV | hour TV | gap TV | top-50 line transitions | top-50 timed "
    "| TP@100 |": (
        "compares today's release with earlier versions' ('(before)' rows) that no current run "
        "reproduces; its current rows repeat the bench_trajectories table's"
    ),
    "| dataset | design | epsilon | seeds | mean length | TV length | TV hour | TV gap | top-50 "
    "trans. | top-50 timed | TP@100 | time (s) | peak RSS (MB) |": (
        "bench_trajectories.py at its documented size: 108 releases in child processes, 24 of "
        "them on simulated Montreal 1M at 8-45 s each; assembled from several runs (some rows "
        "re-run) before the script wrote results JSON"
    ),
}

#: tables that describe the tool, not measurements (header row -> what they say)
DOCUMENTATION = {
    "| generator | input | output | guarantee | paper |": "the generators",
    "| exit status | meaning |": "the error contract",
    "| use | sequences | trips |": "the report's traffic-light thresholds",
}

_BLOCK = re.compile(r"<!-- table:([\w.-]+) -->\n(.*?)<!-- /table:\1 -->", re.DOTALL)


def readme_tables(text: str) -> list[tuple[str, str | None]]:
    """(header row, name of the generated block holding it or None) of each markdown table."""
    spans = [(m.start(), m.end(), m.group(1)) for m in _BLOCK.finditer(text)]
    lines = text.splitlines(keepends=True)
    out, offset = [], 0
    for i, line in enumerate(lines):
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if line.startswith("|") and following.startswith("|---"):
            block = next((name for start, end, name in spans if start <= offset < end), None)
            out.append((line.rstrip("\n"), block))
        offset += len(line)
    return out


def test_every_readme_table_is_generated_or_listed() -> None:
    tables = readme_tables(README.read_text(encoding="utf-8"))
    assert len(tables) >= len(GENERATED) + len(HAND_TYPED) + len(DOCUMENTATION)
    for header, block in tables:
        if block is not None:
            assert block in GENERATED, f"README block {block!r} is not in test_benchmarks.GENERATED"
            continue
        assert header in HAND_TYPED or header in DOCUMENTATION, (
            f"README table {header!r} is typed by hand: generate it from a results JSON "
            "(benchmarks/tables.py --readme, between <!-- table:NAME --> markers, and list it in "
            "test_benchmarks.GENERATED) or list it in HAND_TYPED with the reason"
        )
    unmarked = {header for header, block in tables if block is None}
    stale = (set(HAND_TYPED) | set(DOCUMENTATION)) - unmarked
    assert not stale, f"listed but not in README (generated now?): {sorted(stale)}"
    assert set(GENERATED) <= {block for _, block in tables}, "a generated table left README"


def test_readme_tables_finds_blocks_and_hand_typed_tables() -> None:
    text = (
        "intro\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n<!-- table:noise -->\n| x |\n|---|\n| 3 |\n"
        "\nsource\n<!-- /table:noise -->\n| not | a table |\n"
    )
    assert readme_tables(text) == [("| a | b |", None), ("| x |", "noise")]
