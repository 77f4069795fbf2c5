"""Issue 26, cases 1-3 and the symlink stage: output folders owned by proof, not by guess.

Each test reproduces one hostile case that lost a user's file (or left a stage behind) before the
marker listed each file's size and SHA-256; all fail on the guessing rules they replace.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from synth.cli import main
from synth.outmarker import MARKER
from tests.conftest import FORTY_CARD_TAPS


@pytest.fixture
def data(forty_cards: dict[str, Path]) -> dict[str, Path]:
    return forty_cards


def _sequences(taps: Path, taxonomy: Path, out: Path, *extra: str) -> list[str]:
    return [
        "sequences",
        str(taps),
        "--taxonomy",
        str(taxonomy),
        "--epsilon",
        "1",
        "--height",
        "3",
        "--out",
        str(out),
        "--seed",
        "1",
        "--quiet",
        *extra,
    ]


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every file's bytes and every folder and symlink, by relative path (symlinks not followed)."""
    snap: dict[str, bytes | str] = {}
    for here, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(here) / name
            rel = str(path.relative_to(folder))
            if path.is_symlink():
                snap[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                snap[rel] = "dir"
            else:
                snap[rel] = path.read_bytes()
    return snap


def _kept(before: dict[str, bytes | str], after: dict[str, bytes | str]) -> None:
    lost = {k for k in before if after.get(k) != before[k]}
    assert not lost, f"changed or lost: {sorted(lost)}"


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def _no_stage(parent: Path) -> None:
    left = [p.name for p in parent.iterdir() if ".stage-" in p.name or ".old-" in p.name]
    assert left == []


def test_case1_stray_manifest_and_input_in_the_folder(data, tmp_path, capsys) -> None:
    """Case 1: a user's manifest.json made the folder a 'release'; it was replaced whole, the
    input, .git/ and settings.json included (exit 0)."""
    d = tmp_path / "d"
    (d / ".git").mkdir(parents=True)
    (d / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (d / "manifest.json").write_text('{"name": "x"}')
    (d / "settings.json").write_text('{"theme": "dark"}')
    (d / "taps.csv").write_text(FORTY_CARD_TAPS)
    before = _snapshot(d)
    assert main(_sequences(d / "taps.csv", data["taxonomy"], d)) == 2
    assert "--force" in _one_line(capsys.readouterr().err)
    assert _snapshot(d) == before
    # --force: the user's manifest.json is in the way; refused rather than replaced
    assert main(_sequences(d / "taps.csv", data["taxonomy"], d, "--force")) == 2
    assert "manifest.json" in _one_line(capsys.readouterr().err)
    assert _snapshot(d) == before
    _no_stage(tmp_path)


def test_case2_rerun_keeps_the_users_dot_entries(data, tmp_path, capsys) -> None:
    """Case 2: a rerun into a previous release deleted the user's .git/ and .notes."""
    out = tmp_path / "release"
    assert main(_sequences(data["taps"], data["taxonomy"], out)) == 0
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (out / ".notes").write_text("why epsilon 1")
    user = {k: v for k, v in _snapshot(out).items() if k.startswith((".git", ".notes"))}
    assert main(_sequences(data["taps"], data["taxonomy"], out, "--format", "parquet")) == 2
    line = _one_line(capsys.readouterr().err)
    assert "--force" in line and ".git" in line
    _kept(user, _snapshot(out))
    assert (out / "sequences.csv").is_file()  # nothing was replaced either
    assert (
        main(_sequences(data["taps"], data["taxonomy"], out, "--format", "parquet", "--force")) == 0
    )
    after = _snapshot(out)
    _kept(user, after)
    # the tool's own old file is gone (it still matched its marker), the new release is there
    assert "sequences.csv" not in after and "sequences.parquet" in after
    assert json.loads((out / "manifest.json").read_text())
    _no_stage(tmp_path)


def test_case2_a_clean_rerun_still_replaces_the_release_whole(data, tmp_path) -> None:
    out = tmp_path / "release"
    assert main(_sequences(data["taps"], data["taxonomy"], out)) == 0
    assert main(_sequences(data["taps"], data["taxonomy"], out, "--format", "parquet")) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        MARKER,
        "README.md",
        "datasheet.json",
        "manifest.json",
        "sequences.parquet",
    ]
    _no_stage(tmp_path)


def test_an_edited_release_file_is_the_users(data, tmp_path, capsys) -> None:
    """A release file edited after the run no longer matches its marker: it is the user's."""
    out = tmp_path / "release"
    assert main(_sequences(data["taps"], data["taxonomy"], out)) == 0
    with (out / "sequences.csv").open("a") as fh:
        fh.write("# my comment\n")
    before = _snapshot(out)
    assert main(_sequences(data["taps"], data["taxonomy"], out)) == 2
    assert "sequences.csv" in _one_line(capsys.readouterr().err)
    assert main(_sequences(data["taps"], data["taxonomy"], out, "--force")) == 2
    assert "sequences.csv" in _one_line(capsys.readouterr().err)
    assert _snapshot(out) == before


@pytest.mark.parametrize("forged", ["legacy", "wrong-hash", "outside"])
def test_case3_forged_marker_with_force_keeps_notes(data, tmp_path, forged, capsys) -> None:
    """Case 3: whatever a marker listed was deleted with --force, user files included."""
    p = tmp_path / "p"
    (p / "folder").mkdir(parents=True)
    (p / "notes.txt").write_text("my notes")
    (p / "folder" / "f.txt").write_text("mine too")
    outside = tmp_path / "outside.txt"
    outside.write_text("not in the folder")
    (p / "link").symlink_to(tmp_path)
    size, sha = len(b"my notes"), "0" * 64
    claims: dict[str, object]
    if forged == "legacy":
        claims = {"entries": ["notes.txt", "folder", "link"]}
    elif forged == "wrong-hash":
        files = {"notes.txt": {"bytes": size, "sha256": sha}, "folder/f.txt": {"bytes": 8}}
        claims = {"format": "transit-synth-output/2", "files": files, "dirs": ["folder"]}
    else:  # correct hashes, but paths leaving the folder or through a symlink
        real = {"bytes": 17, "sha256": hashlib.sha256(outside.read_bytes()).hexdigest()}
        files = {"../outside.txt": real, "link/outside.txt": real, str(outside): real}
        claims = {"format": "transit-synth-output/2", "files": files, "dirs": ["..", "link"]}
    (p / MARKER).write_text(json.dumps(claims))
    before = _snapshot(p)
    before.pop(MARKER)
    assert main(_sequences(data["taps"], data["taxonomy"], p, "--force")) == 0
    after = _snapshot(p)
    _kept(before, after)
    assert outside.read_text() == "not in the folder"
    assert "manifest.json" in after and "sequences.csv" in after
    # the marker now lists the tool's own files only
    listed = json.loads((p / MARKER).read_text())["files"]
    assert sorted(listed) == ["README.md", "datasheet.json", "manifest.json", "sequences.csv"]
    _no_stage(tmp_path)


def test_out_a_symlink_to_a_previous_release_leaves_no_stage(data, tmp_path) -> None:
    """Issue 26, case 6: ``--out`` a symlink to a release left ``.link.stage-PID-*`` behind."""
    release = tmp_path / "release-1"
    assert main(_sequences(data["taps"], data["taxonomy"], release)) == 0
    link = tmp_path / "latest"
    link.symlink_to(release.name)
    assert main(_sequences(data["taps"], data["taxonomy"], link, "--format", "parquet")) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "latest", "release-1"]
    assert link.is_symlink() and os.readlink(link) == "release-1"  # the user's link stays
    assert (release / "sequences.parquet").is_file()
    assert not (release / "sequences.csv").exists()


def test_audit_into_its_own_release_keeps_the_release(data, tmp_path, capsys) -> None:
    """``audit REL --out REL`` replaced the release it read by the audit (the release was gone)."""
    release = tmp_path / "release"
    assert main(_sequences(data["taps"], data["taxonomy"], release)) == 0
    before = _snapshot(release)
    assert main(["audit", str(release), "--out", str(release)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "--force" in line and "input" in line
    assert _snapshot(release) == before
    assert main(["audit", str(release), "--out", str(release), "--force"]) == 0
    after = _snapshot(release)
    _kept({k: v for k, v in before.items() if k != MARKER}, after)
    assert "audit.json" in after


@pytest.mark.parametrize(
    "argv",
    [
        ["trips", "absent.csv", "--public-stand-in", "--epsilon", "1", "--delta", "1e-6"],
        ["marginals", "absent.csv", "--epsilon", "1", "--delta", "1e-6"],
        ["sequences", "absent.csv", "--taxonomy", "absent.csv", "--epsilon", "1", "--height", "3"],
        ["run", "absent.toml"],
    ],
    ids=["trips", "marginals", "sequences", "run"],
)
def test_a_release_command_refuses_the_users_folder_before_any_work(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The folder check comes first: the input does not even exist, yet the refusal names the
    folder (it used to come after the fit, so a long run ended in it)."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "output folder holds files this tool cannot prove it wrote (notes.txt)" in err
    assert "absent" not in err
    assert (out / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
