"""benchmarks/bench_trajectories.py at its --smoke size (seconds): the rows and the table."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_trajectories.py"


def _bench():
    sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("bench_trajectories", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.filterwarnings("ignore")
def test_smoke_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench()
    out, table = tmp_path / "rows.json", tmp_path / "table.md"
    args = ["--smoke", "--datasets", "montreal", "wide", "--out", str(out)]
    assert bench.main([*args, "--markdown", str(table)]) == 0
    rows = json.loads(out.read_text())
    runnable = [d["name"] for d in bench.DESIGNS if not bench._accepted(d["kwargs"])]
    assert {"factorised", "tree", "tree-hybrid-coarse-360", "untimed"} <= set(runnable)
    for dataset in ("Montreal 2,000", "wide network 2,000"):
        mine = [r for r in rows if r["dataset"].startswith(dataset)]
        [ceiling] = [r for r in mine if r["design"] == "ceiling"]
        assert ceiling["tv_hour"] == ceiling["tv_length"] == ceiling["tv_gap"] == 0.0
        assert ceiling["timed_transitions_kept"] == 50 and ceiling["tp100"] >= 90
        ran = [r for r in mine if "skipped" not in r and r["design"] != "ceiling"]
        assert sorted(r["design"] for r in ran) == sorted(runnable)
        for r in ran:
            assert r["epsilon"] == 1.0 and r["seed"] == 1 and r["release_s"] >= 0
            assert 0 <= r["tv_length"] <= 1 and 0 <= r["tp100"] <= 100
            if r["design"] == "untimed":  # no times: length and TP@100 only
                assert "tv_hour" not in r and "timed_transitions_kept" not in r
            else:
                assert 0 <= r["tv_hour"] <= 1 and 0 <= r["tv_gap"] <= 1
            assert r["mean_length_original"] > 1 and r["mean_length"] >= 1
        assert len(mine) == 1 + len(bench.DESIGNS)  # a skipped design still has its row
    text = table.read_text()
    assert text.startswith("| dataset | design | epsilon | seeds | mean length | TV length")
    assert text.count("| ceiling | inf | 1 |") == 2
    assert capsys.readouterr().out.count("\n") == len(rows)  # one JSON line per row
