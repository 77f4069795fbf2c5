"""benchmarks/: the shared harness (child peak RSS, results with machine and commit), every
benchmark at its ``--smoke`` size, and the markdown tables made from the results."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"

#: every benchmark's smoke run (script, arguments before --smoke); slow ones are marked
SMOKE_RUNS = [
    pytest.param("bench_archetypes.py", [], id="archetypes"),
    pytest.param("bench_archetypes.py", ["peers"], id="archetypes-peers"),
    pytest.param("bench_bounding.py", [], id="bounding"),
    pytest.param("bench_engines.py", [], id="engines"),
    pytest.param("bench_evaluate.py", [], id="evaluate"),
    pytest.param("bench_noise.py", [], id="noise"),
    pytest.param("bench_prefixtree.py", ["speed"], id="prefixtree-speed"),
    pytest.param("bench_prefixtree.py", ["defaults"], id="prefixtree-defaults"),
    pytest.param("bench_prefixtree.py", ["utility"], id="prefixtree-utility"),
    pytest.param("bench_prefixtree.py", ["trajectories"], id="prefixtree-trajectories"),
    pytest.param("bench_sbh.py", [], id="sbh"),
    pytest.param("bench_trajectories.py", ["--datasets", "montreal"], id="trajectories"),
]

#: scripts without a --smoke size yet, and why (remove the entry when it has one)
PENDING: dict[str, str] = {}


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass in it looks its module up
    spec.loader.exec_module(module)
    return module


def test_every_benchmark_has_a_smoke_run() -> None:
    scripts = {p.name for p in BENCH.glob("bench_*.py")}
    covered = {p.values[0] for p in SMOKE_RUNS}
    assert scripts == covered | set(PENDING), "add the new benchmark to SMOKE_RUNS"
    for name in covered:
        assert "add_options(" in (BENCH / name).read_text(), f"{name}: no --smoke via harness"
    for name in PENDING:
        assert "--smoke" not in (BENCH / name).read_text(), f"{name} has --smoke: unlist it"


#: Runs every smoke in ONE child process, each as ``python benchmarks/<script> ... --smoke`` would
#: (``runpy`` as ``__main__``, its own ``sys.argv``), so the interpreter start-up and the imports
#: (numpy, pandas, synth: most of a smoke's time) are paid once instead of once per benchmark. A
#: failing script does not stop the others: its exit status and traceback are recorded, and what
#: it prints goes to ``stdout.txt`` beside its results.
SMOKE_RUNNER = """
import contextlib, json, os, runpy, sys, traceback
bench, runs, report = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
sys.path.insert(0, bench)
status = {}
for key, script, before, out in runs:
    sys.argv = [f"{bench}/{script}", *before, "--smoke", "--json", out]
    os.chdir(os.path.dirname(out))
    try:
        with open("stdout.txt", "w") as printed, contextlib.redirect_stdout(printed):
            runpy.run_path(sys.argv[0], run_name="__main__")
        status[key] = [0, ""]
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        status[key] = [code, "" if code == 0 else str(stop.code)]
    except BaseException:
        status[key] = [1, traceback.format_exc()]
with open(report, "w") as f:
    json.dump(status, f)
"""


@pytest.fixture(scope="module")
def smoke_results(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[int, str, Path]]:
    """Every :data:`SMOKE_RUNS` entry this session selected (``-m slow`` picks the slow ones),
    run once: id -> (exit status, error text, results file); each in its own working folder."""
    selected = {
        item.callspec.id
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.originalname == "test_smoke_run_writes_results"
        and item.getparent(pytest.Module) is request.node
    }
    root = tmp_path_factory.mktemp("smokes")
    runs = []
    for param in SMOKE_RUNS:
        if param.id not in selected:
            continue
        script, before = param.values
        assert isinstance(param.id, str)
        (root / param.id).mkdir()
        runs.append([param.id, script, before, str(root / param.id / "results.json")])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    report = root / "status.json"
    cmd = [sys.executable, "-c", SMOKE_RUNNER, str(BENCH), json.dumps(runs), str(report)]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and report.exists(), proc.stderr[-2000:]
    status = json.loads(report.read_text())
    return {  # the child's stderr too: a script's own messages (argparse's, a child's) are there
        key: (code, f"{text}\n{proc.stderr[-2000:]}", Path(out))
        for key, _, _, out in runs
        for code, text in [status[key]]
    }


@pytest.mark.parametrize(("script", "before"), SMOKE_RUNS)
def test_smoke_run_writes_results(
    script: str,
    before: list[str],
    smoke_results: dict[str, tuple[int, str, Path]],
    request: pytest.FixtureRequest,
) -> None:
    code, error, out = smoke_results[request.node.callspec.id]
    assert code == 0, error
    doc = json.loads(out.read_text())
    assert doc["rows"] and all(isinstance(r, dict) for r in doc["rows"])
    assert doc["arguments"]["smoke"] is True
    machine = doc["machine"]
    assert machine["cores"] >= 1 and machine["memory_gb"] > 0 and machine["python"]
    assert doc["commit"] is None or len(doc["commit"].split("+")[0]) == 40
    if script == "bench_archetypes.py":  # every measured row has its child's peak RSS
        measured = [r for r in doc["rows"] if r.get("source") == "measured"]
        assert measured and all(r["peak_rss_mb"] > 0 and r["runs"] == 1 for r in measured)
    if before == ["peers"]:  # no smartnoise here: the recorded figures, said so
        recorded = {(r["data"], r["method"], r.get("epsilon")): r for r in doc["rows"]}
        assert recorded["chicago", "MST", 1.0]["score_mean"] == 924
        assert recorded["chicago", "MST", 1.0]["source"] == "recorded in issue 28"
        assert "smartnoise-synth not run" in (out.parent / "stdout.txt").read_text()


def test_peers_bound_each_card_and_find_no_smartnoise_here() -> None:
    """The card-level peer table keeps each card's first k rows by the order column (ties in
    input order) and drops the id; an interpreter without snsynth is named with the reason."""
    peers = _load("smartnoise_peers")
    table = pd.DataFrame(
        {"card": ["a", "b", "a", "a", "b", "c"], "hour": [9, 7, 8, 8, 6, 1], "x": list("uvwxyz")}
    )
    got = peers.bounded(table, "card", "hour", 2)
    assert list(got.columns) == ["hour", "x"]
    assert got.to_dict("list") == {"hour": [8, 8, 6, 7, 1], "x": ["w", "x", "y", "v", "z"]}
    assert len(peers.bounded(table, "card", "hour", 1)) == 3
    missing = peers.available(sys.executable)
    if importlib.util.find_spec("snsynth") is None:
        assert missing is not None and "snsynth" in missing
    assert "nonexistent" in str(peers.available("/nonexistent/python"))


def _peer(data: str, method: str, runs: int, **extra: Any) -> dict[str, Any]:
    row = {"data": data, "method": method, "epsilon": 1.0, "runs": runs, "rows": 7}
    row |= {"seconds": 300.0, "wall_s": 320.0, "peak_rss_mb": 1400.0}
    return row | {"source": "measured (smartnoise-synth)"} | extra


def test_peer_rows_of_several_files_become_one_row_of_all_their_runs(tmp_path: Path) -> None:
    """``--peer-rows``: a one-run row written before runs were kept (seed 0) and new runs (seeds
    1, 2) of the same data, method and epsilon become one row of 3 runs (mean, sd, median time,
    max peak); a row of several runs without them is kept alone, refused with more; a seed twice
    is refused; the merged file read again gives the same rows; other data sets are left out."""
    bench = _load("bench_archetypes")
    old = [_peer("sube", "MST", 1, score_mean=600.0, score_sd=0.0)]
    old.append(_peer("chicago", "MST", 3, score_mean=930.0, score_sd=2.0))
    new = bench.peer_summary(
        "sube",
        "MST",
        1.0,
        [
            {"seed": s, "score": v, "seconds": t, "wall_s": t, "peak_rss_mb": m, "rows": 7}
            for s, v, t, m in [(2, 660.0, 100.0, 1500.0), (1, 630.0, 200.0, 1300.0)]
        ],
    )
    assert [r["seed"] for r in new["per_run"]] == [1, 2] and new["runs"] == 2
    files = [tmp_path / "old.json", tmp_path / "new.json"]
    files[0].write_text(json.dumps({"rows": [*old, {"data": "sube", "method": "joint"}]}))
    files[1].write_text(json.dumps([new]))
    kept = bench.recorded_peer_rows(files, ["chicago", "sube"])
    assert len(kept) == 3 and bench.recorded_peer_rows(files, ["chicago"]) == [old[1]]
    merged = bench.merge_peer_rows(kept)
    sube = next(r for r in merged if r["data"] == "sube")
    assert sube["runs"] == 3 and [r["seed"] for r in sube["per_run"]] == [0, 1, 2]
    assert sube["score_mean"] == 630.0 and sube["score_sd"] == 24.5  # sd of 600, 630, 660
    assert sube["seconds"] == 200.0 and sube["peak_rss_mb"] == 1500.0
    assert next(r for r in merged if r["data"] == "chicago") == old[1]
    assert bench.merge_peer_rows(merged) == merged
    with pytest.raises(ValueError, match=r"seeds \[0, 0\] repeat"):
        bench.merge_peer_rows([old[0], old[0]])
    with pytest.raises(ValueError, match="without its per_run"):
        bench.merge_peer_rows([old[1], {**new, "data": "chicago"}])


def test_peer_runs_that_repeat_a_recorded_seed_are_refused_before_any_fit() -> None:
    """The jobs' planned rows (per data, unit, method, epsilon, sampling) merged with the
    recorded ones: seed 0 again is refused at once; seeds from ``--peer-first-seed 1`` on pass."""
    bench = _load("bench_archetypes")
    scored = pd.DataFrame({"card": ["a", "a", "b"], "hour": [8, 9, 7], "line": ["x", "y", "x"]})
    case = bench.Case("sube", scored, scored, scored, ["card"], 1e-5, "hour", {})
    args = argparse.Namespace(card_k=3, peer_methods=["mst"], epsilons=[1.0, 10.0], seeds=3)
    args.peer_runs, args.peer_first_seed = 2, 0
    recorded = _peer("sube", "MST, tap level (weaker guarantee), i.i.d. (mbi sample)", 1)
    recorded |= {"score_mean": 790.0}
    planned = bench.planned_peer_rows(bench.peer_jobs([case], args))
    assert len(planned) == 2 * 2 * 2 * 2  # units x epsilons x runs x samplings
    with pytest.raises(SystemExit, match=r"tap level .* epsilon 1: seeds \[0, 0, 1\] repeat"):
        bench.check_peer_rows([recorded, *planned])
    args.peer_first_seed = 1
    planned = bench.planned_peer_rows(bench.peer_jobs([case], args))
    merged = bench.check_peer_rows([recorded, *planned])
    assert len(merged) == 8 and merged[0]["per_run"][0] == {"seed": 0, "score": 790.0} | {
        k: recorded[k] for k in ("seconds", "wall_s", "peak_rss_mb", "rows")
    }


def test_child_peak_rss_is_the_childs_own() -> None:
    """A small child of a large parent reports its own few MB (a child forked straight from the
    parent would report the parent's size); a child that touches 150 MB reports at least that."""
    harness = _load("harness")
    ballast = bytearray(300 * 2**20)
    ballast[::4096] = b"\1" * len(range(0, len(ballast), 4096))
    assert harness.own_peak_rss_mb() >= 300
    small = harness.child([sys.executable, "-c", "pass"])
    assert small["peak_rss_mb"] < 100
    big = "b = bytearray(150 * 2**20); b[::4096] = b'\\1' * len(range(0, len(b), 4096))"
    assert harness.child([sys.executable, "-c", big])["peak_rss_mb"] >= 150
    with pytest.raises(RuntimeError, match="boom"):
        harness.child([sys.executable, "-c", "import sys; sys.exit('boom')"])
    del ballast


def test_results_record_machine_and_commit(tmp_path: Path) -> None:
    harness = _load("harness")
    doc = harness.write_results(tmp_path / "r.json", "demo", [{"a": 1}], {"n": 3})
    assert json.loads((tmp_path / "r.json").read_text()) == doc
    assert doc["benchmark"] == "demo" and doc["arguments"] == {"n": 3}
    assert doc["machine"]["cores"] == os.cpu_count()
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert doc["commit"] is None or doc["commit"].startswith(head)


def test_tables_turn_results_into_markdown(tmp_path: Path) -> None:
    tables = _load("tables")
    doc: dict[str, Any] = {
        "benchmark": "sbh",
        "commit": "0123456789abcdef" * 2 + "01234567",
        "created": "2026-11-27T08:00:00+00:00",
        "machine": {"cores": 2, "usable_cores": 2, "memory_gb": 8.0, "python": "3.11.7"},
        "rows": [
            {"input": "a|b", "rows": 20000, "sbh": {"seconds": 0.0971}, "ratio": 1234.5},
            {"input": "c", "rows": 5, "sbh": {}, "ratio": float("nan")},
        ],
    }
    text = tables.markdown(doc, ["input", "rows", "sbh.seconds=time (s)", "ratio"])
    lines = text.splitlines()
    assert lines[0] == "| input | rows | time (s) | ratio |"
    assert lines[2] == "| a\\|b | 20,000 | 0.0971 | 1,234 |"
    assert lines[3] == "| c | 5 | - | - |"
    assert "`sbh` at 0123456789ab, 2 cores" in lines[-1]
    readme = tmp_path / "README.md"
    readme.write_text("x\n<!-- table:sbh -->\nold\n<!-- /table:sbh -->\ny\n")
    results = tmp_path / "sbh.json"
    results.write_text(json.dumps(doc))
    assert tables.main([str(results), "--columns", "input", "--readme", str(readme)]) == 0
    new = readme.read_text()
    assert "old" not in new and new.startswith("x\n<!-- table:sbh -->\n| input |")
    assert new.endswith("<!-- /table:sbh -->\ny\n")
    with pytest.raises(ValueError, match="one"):
        tables.replace_block("no markers", "sbh", text)


def test_readme_tables_match_their_results() -> None:
    """Every generated README table is what benchmarks/tables.py makes from its JSON today."""
    tables = _load("tables")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = dict(GENERATED)
    assert blocks, "no generated table"
    for name, spec in blocks.items():
        doc = json.loads((BENCH / "results" / f"{name}.json").read_text(encoding="utf-8"))
        doc["rows"] = tables.where(doc["rows"], spec.get("where", []))
        if "pivot" in spec:
            doc["rows"] = tables.pivot(doc["rows"], **spec["pivot"])
        table = tables.markdown(doc, spec["columns"])
        assert f"<!-- table:{name} -->\n{table}<!-- /table:{name} -->" in readme, name


#: README tables generated by benchmarks/tables.py: results file stem -> columns (and pivot)
GENERATED: dict[str, dict[str, Any]] = {
    "noise": {"columns": ["sampler", "scale", "draws", "draws_per_s=draws/s"]},
    "trips-peers": {
        "pivot": {
            "on": "epsilon",
            "index": ["data", "method"],
            "values": ["score_mean", "score_sd"],
        },
        "columns": [
            "data",
            "method",
            "score_mean@1=eps 1",
            "score_sd@1=sd",
            "score_mean@10=eps 10",
            "score_sd@10=sd",
            "runs",
            "seconds=fit+sample (s)",
            "peak_rss_mb=peak RSS (MB)",
            "source",
        ],
    },
}
GENERATED["trips-heldout"] = GENERATED["trips-peers"]  # the held-out splits, the same columns


def test_tables_pivot_one_column_per_epsilon() -> None:
    tables = _load("tables")
    rows = [
        {"data": "x", "method": "a", "epsilon": 1.0, "score": 900.4, "seconds": 2.1, "src": "m"},
        {"data": "x", "method": "a", "epsilon": 10.0, "score": 950.0, "seconds": 5.66, "src": "m"},
        {"data": "x", "method": "b", "epsilon": 1.0, "score": 800.0, "seconds": 3.0},
        {"data": "all", "method": "note without epsilon"},
    ]
    got = tables.pivot(rows, on="epsilon", index=["data", "method"], values=["score"])
    assert got == [
        {"data": "x", "method": "a", "score@1": 900.4, "score@10": 950.0}
        | {"seconds": "2.1-5.66", "src": "m"},
        {"data": "x", "method": "b", "score@1": 800.0, "seconds": "3"},
    ]
    text = tables.markdown(got, ["method", "score@1=eps 1", "score@10=eps 10", "seconds"])
    assert text.splitlines()[2:] == ["| a | 900 | 950 | 2.1-5.66 |", "| b | 800 | - | 3 |"]
    assert tables.where(rows, ["src=m", "epsilon=10.0"]) == [rows[1]]
    assert tables.where(rows, []) == rows


def test_peers_sube_without_public_runs_the_commands_layout_and_held_out_splits() -> None:
    """SUBE without public trips is benchmarked on what a user gets (``sube_schema(None,
    metadata)``: lat/lon read off the zones), not on the public day's schema; the held-out
    splits swap the days (and take Chicago 2015 against 2014) with the joint rows and the
    public file as it is."""
    bench = _load("bench_archetypes")
    sube = bench.CASES["peers"]["sube"](None, False)
    alone = sube.variants["joint, no public"][0]["schema"]
    given = sube.variants["joint, public"][0]["schema"]
    assert alone.columns["lat"].kind == "coordinate" and "lat" not in given.columns
    assert sube.variants["previous stand-in, no public"][0]["schema"] is alone
    swap = bench.CASES["peers"]["sube-swap"](None, False)
    assert swap.name == "sube-swap" and list(swap.variants) == ["joint, public", "joint, no public"]
    assert len(swap.private) == len(sube.public) and len(swap.public) == len(sube.private)
    assert swap.as_is is not None and list(swap.as_is.columns) == list(swap.scored.columns)
    late = bench.CASES["peers"]["chicago-2015"](None, False)
    assert late.name == "chicago-2015" and list(late.variants) == list(swap.variants)
    years = [
        len(bench.chicago_taxi_trips(bench.embedded("chicago_taxi"), years=[y]))
        for y in (2014, 2015)
    ]
    assert (len(late.public), len(late.private)) == tuple(years)
