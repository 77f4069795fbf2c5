"""``transit-synth evaluate``: JSON and HTML report written atomically, summary, user errors."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.cli import main
from synth.outmarker import MARKER


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.srcs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.srcs.append(dict(attrs).get("src") or "")


def _write_sequences(path: Path, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 7, n)
    seq = np.repeat(np.arange(n), lengths)
    pos = np.concatenate([np.arange(k) for k in lengths])
    loc = rng.choice([f"st{i}" for i in range(12)], len(seq))
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"seq_id": seq, "pos": pos, "location": loc}).to_csv(path, index=False)
    return path


def test_evaluate_sequences_writes_json_and_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = _write_sequences(tmp_path / "original.csv", 300, 0)
    release = tmp_path / "release"
    _write_sequences(release / "sequences.csv", 300, 1)
    (release / "manifest.json").write_text(json.dumps({"epsilon": 1.0, "unit": "card"}))
    other = _write_sequences(tmp_path / "simple.csv", 250, 2)
    out = tmp_path / "eval"
    argv = ["evaluate", str(original), str(release), str(other), "--out", str(out)]
    assert main([*argv, "--queries", "400", "--top-k", "20"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        MARKER,
        "private-evaluation.json",
        "private-report.html",
    ]
    results = json.loads((out / "private-evaluation.json").read_text())
    assert next(iter(results)) == "notice" and results["notice"].startswith(
        "INTERNAL - NOT PRIVATE"
    )
    assert set(results["releases"]) == {"eps=inf (truncated)", "release", "simple"}
    assert results["releases"]["eps=inf (truncated)"]["patterns"][0]["tp"] == 20
    assert results["releases"]["release"]["patterns"][0]["k"] == 20
    parser = _Images()
    parser.feed((out / "private-report.html").read_text(encoding="utf-8"))
    assert len(parser.srcs) == 2  # error per subset and TP vs k; lengths and pattern supports
    assert all(s.startswith("data:image/png;base64,") for s in parser.srcs)
    printed = capsys.readouterr().out
    assert re.search(
        r"^release: top-20 travel patterns: \d+ found, 20 possible without", printed, re.M
    )
    assert "simple: top-20" in printed and "eps=inf" not in printed
    page = (out / "private-report.html").read_text(encoding="utf-8")
    # a loose table has no manifest: no guarantee is claimed for it
    assert "unknown: the release has no privacy manifest" in page
    assert main([*argv, "--queries", "400", "--top-k", "20", "--no-baseline", "--quiet"]) == 0
    results = json.loads((out / "private-evaluation.json").read_text())
    assert set(results["releases"]) == {"release", "simple"}


def test_query_universe_from_a_public_taxonomy(tmp_path: Path) -> None:
    original = _write_sequences(tmp_path / "original.csv", 100, 0)
    release = _write_sequences(tmp_path / "rel.csv", 100, 1)
    edges = [f"st{i},{'north' if i < 8 else 'south'}" for i in range(16)]
    tax = tmp_path / "tax.csv"
    tax.write_text("child,parent\n" + "\n".join([*edges, "north,root", "south,root"]) + "\n")
    out = tmp_path / "eval"
    argv = ["evaluate", str(original), str(release), "--taxonomy", str(tax), "--out", str(out)]
    assert main([*argv, "--queries", "100", "--top-k", "5", "--quiet"]) == 0
    params = json.loads((out / "private-evaluation.json").read_text())["parameters"]
    assert params["universe_source"] == "given" and params["universe_size"] == 16


def test_evaluate_trips_defaults_to_a_private_sibling_of_the_release(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    trips = pd.DataFrame(
        {
            "card_id": rng.integers(0, 40, 200),
            "on_time": (
                pd.Timestamp("2019-11-27") + pd.to_timedelta(rng.integers(0, 1440, 200), "m")
            ).strftime("%Y-%m-%dT%H:%M"),
            "mode": rng.choice(["bus", "rail"], 200),
        }
    )
    trips.to_csv(tmp_path / "private.csv", index=False)
    release = tmp_path / "rel"
    release.mkdir()
    trips.sample(frac=1.0, random_state=1).to_csv(release / "trips.csv", index=False)
    assert main(["evaluate", str(tmp_path / "private.csv"), str(release), "--kind", "trips"]) == 0
    out = tmp_path / "rel-evaluation-private"
    results = json.loads((out / "private-evaluation.json").read_text())
    assert results["releases"]["rel"]["k_marginal"]["score"] == 1000.0
    assert (out / "private-report.html").is_file()
    assert sorted(p.name for p in release.iterdir()) == ["trips.csv"]  # nothing added


def test_user_errors_exit_2_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = _write_sequences(tmp_path / "original.csv", 50, 0)
    out = tmp_path / "eval"
    assert main(["evaluate", str(original), str(tmp_path / "missing.csv"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("transit-synth evaluate: error:") and "missing.csv" in err
    assert "\n" not in err
    pd.DataFrame({"a": [1], "b": [2]}).to_csv(tmp_path / "t.csv", index=False)
    pd.DataFrame({"a": [1]}).to_csv(tmp_path / "s.csv", index=False)
    argv = ["evaluate", str(tmp_path / "t.csv"), str(tmp_path / "s.csv"), "--kind", "trips"]
    assert main([*argv, "--out", str(out)]) == 2
    assert "lacks column(s) b" in capsys.readouterr().err
    assert not out.exists()


def test_kind_height_and_taxonomy_come_from_the_manifest(tmp_path: Path) -> None:
    """A prefix-tree release of height 3: evaluate needs no --kind, --height or --taxonomy."""
    from synth.datasets import montreal_taxonomy
    from synth.simulate import simulate_sequences

    metro = montreal_taxonomy()
    simulate_sequences(1500, taxonomy=metro, seed=4).to_csv(tmp_path / "sim.csv", index=False)
    metro.to_csv(tmp_path / "metro.csv")
    release = tmp_path / "release"
    args = ["sequences", str(tmp_path / "sim.csv"), "--taxonomy", str(tmp_path / "metro.csv")]
    args += ["--epsilon", "2", "--height", "3", "--out", str(release), "--seed", "3", "--quiet"]
    assert main(args) == 0
    out = tmp_path / "eval"
    argv = ["evaluate", str(tmp_path / "sim.csv"), str(release), "--out", str(out)]
    assert main([*argv, "--queries", "200", "--top-k", "20", "--quiet"]) == 0
    results = json.loads((out / "private-evaluation.json").read_text())
    assert results["kind"] == "sequences"
    assert results["parameters"]["height"] == 3  # the release's, not 12
    assert results["parameters"]["universe_source"] == "given"
    assert results["parameters"]["universe_size"] == len(metro.leaves())
    assert main([*argv, "--height", "5", "--queries", "200", "--top-k", "20", "--quiet"]) == 0
    assert json.loads((out / "private-evaluation.json").read_text())["parameters"]["height"] == 5
    assert main([*argv, "--height", "0", "--quiet"]) == 2


def _trip_table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cards = np.repeat(np.arange(n), rng.integers(1, 4, n))
    return pd.DataFrame(
        {
            "card": [f"c{seed}-{c}" for c in cards],
            "hour": rng.integers(5, 23, len(cards)),
            "zone": rng.choice(["A", "B", "C"], len(cards)),
            "dest": rng.choice(["A", "B", "C"], len(cards)),
            "mode": rng.choice(["bus", "rail"], len(cards)),
        }
    )


def test_trip_release_columns_from_the_manifest_and_flags(tmp_path: Path) -> None:
    """An archetype release: kind and id column from its manifest; time and OD from flags."""
    private, public = tmp_path / "private.csv", tmp_path / "public.csv"
    _trip_table(300, 1).to_csv(private, index=False)
    _trip_table(200, 0).to_csv(public, index=False)
    release = tmp_path / "release"
    args = ["trips", str(private), "--public", str(public), "--epsilon", "1", "--delta", "1e-5"]
    args += ["--out", str(release), "--id-column", "card", "--key-columns", "hour,zone,dest"]
    assert main([*args, "--category-column", "mode", "--seed", "1", "--quiet"]) == 0
    out = tmp_path / "eval"
    argv = ["evaluate", str(private), str(release), "--out", str(out), "--quiet"]
    assert main(argv) == 0
    results = json.loads((out / "private-evaluation.json").read_text())
    assert results["kind"] == "trips" and results["parameters"]["id_column"] == "card"
    entry = results["releases"]["release"]
    assert "trips_per_individual" in entry and "time_of_day" not in entry and "od" not in entry
    assert any("--time-column" in s for s in results["skipped"])
    flags = ["--time-column", "hour", "--origin-column", "zone", "--destination-column", "dest"]
    assert main([*argv, *flags]) == 0
    results = json.loads((out / "private-evaluation.json").read_text())
    entry = results["releases"]["release"]
    assert results["skipped"] == []
    assert entry["time_of_day"]["label"] == "hour" and len(entry["od"]) > 1
    report = (out / "private-report.html").read_text(encoding="utf-8")
    assert "Privacy manifest of release" in report and "not measured" not in report


def test_a_marginal_release_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    release = tmp_path / "marginals"
    release.mkdir()
    (release / "manifest.json").write_text(
        json.dumps({"parameters": {"generator": "opal-marginals"}})
    )
    original = _write_sequences(tmp_path / "original.csv", 20, 0)
    assert main(["evaluate", str(original), str(release), "--out", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "transit-synth audit" in err
    assert not (tmp_path / "e").exists()


def test_internal_files_say_so_on_top_and_stay_out_of_release_directories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Default --out beside the release, the notice at the top of both files; an --out that is
    (or is inside) a release directory is refused with exit 2 and nothing written."""
    original = _write_sequences(tmp_path / "original.csv", 100, 0)
    release = tmp_path / "rel"
    _write_sequences(release / "sequences.csv", 100, 1)
    (release / "manifest.json").write_text(json.dumps({"privacy_unit": "card"}))
    before = sorted(p.name for p in release.iterdir())
    argv = ["evaluate", str(original), str(release), "--queries", "50", "--top-k", "5"]
    assert main([*argv, "--quiet"]) == 0
    assert sorted(p.name for p in release.iterdir()) == before
    out = tmp_path / "rel-evaluation-private"
    notice = "INTERNAL - NOT PRIVATE: contains exact statistics of the original data"
    text = (out / "private-evaluation.json").read_text()
    assert text.splitlines()[1].startswith(f'  "notice": "{notice}')
    page = (out / "private-report.html").read_text()
    assert page.index(notice) < page.index("<h1>")
    # the table file inside a release: the same default place
    assert (
        main(
            [
                "evaluate",
                str(original),
                str(release / "sequences.csv"),
                "--queries",
                "50",
                "--top-k",
                "5",
                "--quiet",
            ]
        )
        == 0
    )
    assert sorted(p.name for p in release.iterdir()) == before
    for bad in (release, release / "eval"):
        assert main([*argv, "--out", str(bad), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "release directory" in err and "\n" not in err.strip()
    assert sorted(p.name for p in release.iterdir()) == before
