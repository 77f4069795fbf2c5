"""Issue 26: whatever the folder holds and whatever the flags, no user byte is changed or lost.

Hypothesis builds a random ``--out`` folder: optionally a genuine earlier output (written by
:func:`synth.outdir.release_dir`, nested sub-release included), then the user's additions (files,
dot-entries, nested folders, symlinks inside and outside, a stray ``manifest.json``, edits of the
tool's files, a forged marker), then writes into it with random ``force`` / ``add`` / inputs, and
sometimes an interrupt. The oracle, independent of the module: every entry the user made (file
bytes, symlink target, folder) and every input survives unchanged; only files the tool wrote and
the user left byte-identical, and the marker, may go. Nothing outside the folder changes, no
stage is left, and a successful call leaves exactly the staged bytes under the staged names.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth.errors import ConfigError
from synth.outdir import release_dir
from synth.outmarker import MARKER

TOOL_FILES = ("manifest.json", "sequences.csv", "sub/manifest.json", "sub/x.csv")
TOPS = ("manifest.json", "sequences.csv", "notes.txt", ".git", ".notes", "sub", "taps.csv", MARKER)
SUBS = ("HEAD", "x.csv", ".hidden", "manifest.json", "deep/y.txt")
STAGED = ("manifest.json", "sequences.csv", "sequences.parquet", "notes.txt", "sub/x.csv", ".git")
FORMAT = "transit-synth-output/2"

paths = st.one_of(
    st.sampled_from(TOPS), st.builds("{}/{}".format, st.sampled_from(TOPS), st.sampled_from(SUBS))
)
contents = st.binary(max_size=24)
ops = st.one_of(
    st.tuples(st.just("file"), paths, contents),
    st.tuples(st.just("dir"), paths, st.just(b"")),
    st.tuples(st.just("link"), paths, st.sampled_from([b"../outside", b"sub", b"x", b"/"])),
    st.tuples(st.just("edit"), st.sampled_from(TOOL_FILES), contents),
)
forged = st.one_of(
    st.none(),
    st.builds(lambda names: {"entries": names}, st.lists(st.sampled_from(TOPS), max_size=4)),
    st.builds(
        lambda names, dirs, sha: {
            "format": FORMAT,
            "files": {n: {"bytes": 0, "sha256": sha} for n in names},
            "dirs": dirs,
        },
        st.lists(
            st.one_of(paths, st.sampled_from(["../outside/o.txt", "/etc/hostname", "a/../b"])),
            max_size=5,
        ),
        st.lists(st.sampled_from([".git", "sub", "..", "/", "link"]), max_size=3),
        st.sampled_from(["0" * 64, "not a hash"]),  # a claim with the right hash would be proof
    ),
)


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    return {
        "genuine": draw(st.lists(st.sampled_from(TOOL_FILES), unique=True, max_size=4)),
        "ops": draw(st.lists(ops, max_size=8)),
        "forged": draw(forged),
        "force": draw(st.booleans()),
        "add": draw(st.booleans()),
        "staged": draw(st.lists(st.sampled_from(STAGED), unique=True, min_size=1, max_size=3)),
        "inputs": draw(st.lists(paths, max_size=2)),
        "interrupt": draw(st.booleans()),
        "nested_out": draw(st.booleans()),
    }


def _apply(out: Path, op: tuple[str, str, bytes]) -> None:
    kind, rel, data = op
    path = out / rel
    here = out
    for part in rel.split("/"):  # the user's ops stay inside ``out``: never through a symlink
        here = here / part  # (one to "/" made the test write files at the root)
        if here.is_symlink() and (here != path or kind != "link"):
            return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "dir":
            path.mkdir(exist_ok=True)
        elif kind == "link":
            path.symlink_to(data.decode())
        elif kind == "file" or path.is_file():  # "edit": only an existing file
            path.write_bytes(data)
    except OSError:
        pass  # a clash with an existing entry of another kind: the op does not apply


def _walk(root: Path) -> dict[str, object]:
    snap: dict[str, object] = {}
    if not root.is_dir():
        return snap
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(here) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                snap[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                snap[rel] = ("dir",)
            else:
                snap[rel] = ("file", path.read_bytes())
    return snap


def _is_marker_bytes(data: bytes) -> bool:
    try:
        value = json.loads(data)
    except ValueError:
        return False
    return isinstance(value, dict) and (
        value.get("format") == FORMAT
        or (set(value) == {"entries"} and isinstance(value["entries"], list))
    )


def _protected(before: dict[str, object], tool: dict[str, bytes], inputs: set[str]) -> dict:
    """What must survive: everything but the tool's unchanged files, its folders, the marker."""
    keep = {}
    for rel, entry in before.items():
        if rel in inputs:
            keep[rel] = entry
        elif entry[0] == "file" and tool.get(rel) == entry[1]:
            continue
        elif entry[0] == "file" and rel == MARKER and _is_marker_bytes(entry[1]):
            continue
        elif entry[0] == "dir" and rel in tool:
            continue
        else:
            keep[rel] = entry
    return keep


def _write(root: Path, names: list[str], tag: bytes) -> dict[str, bytes]:
    written = {}
    for rel in names:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(tag + rel.encode())
        written[rel] = tag + rel.encode()
    return written


def _genuine(out: Path, names: list[str]) -> dict[str, object]:
    """A real earlier output (the ``sub`` part through a nested call, as ``run`` writes); returns
    the tool's entries as the oracle knows them: files and folders it wrote."""
    if not names:
        return {}
    with release_dir(out, force=False) as stage:
        _write(stage, [n for n in names if not n.startswith("sub/")], b"old:")
        subs = [n[4:] for n in names if n.startswith("sub/")]
        if subs:
            with release_dir(stage / "sub", force=False) as inner:
                _write(inner, subs, b"old:sub/")
    return {r: e[1] if e[0] == "file" else e for r, e in _walk(out).items()}


def check(scenario: dict, base: Path) -> None:
    outside = base / "outside"
    outside.mkdir()
    (outside / "o.txt").write_bytes(b"outside")
    out = base / ("parent/out" if scenario["nested_out"] else "out")
    out.parent.mkdir(parents=True, exist_ok=True)
    tool = _genuine(out, scenario["genuine"])
    out.mkdir(exist_ok=True)
    for op in scenario["ops"]:
        _apply(out, op)
    marker = out / MARKER
    if scenario["forged"] is not None and not marker.is_symlink() and not marker.is_dir():
        (out / MARKER).write_text(json.dumps(scenario["forged"]))
    before = _walk(out)
    inputs = {p for p in scenario["inputs"] if p in before}
    keep = _protected(before, tool, inputs)  # type: ignore[arg-type]
    outside_before = _walk(base / "outside")
    staged: dict[str, bytes] = {}
    ok = False
    try:
        with release_dir(
            out, force=scenario["force"], add=scenario["add"], inputs=[out / p for p in inputs]
        ) as stage:
            staged = _write(stage, scenario["staged"], b"new:")
            if scenario["interrupt"]:
                raise KeyboardInterrupt
        ok = True
    except ConfigError:
        pass
    except KeyboardInterrupt:
        assert scenario["interrupt"]
    after = _walk(out)
    lost = sorted(rel for rel, entry in keep.items() if after.get(rel) != entry)
    assert not lost, f"user entries changed or lost: {lost}"
    assert _walk(base / "outside") == outside_before
    left = [p.name for p in out.parent.iterdir() if ".stage-" in p.name or ".old-" in p.name]
    assert left == [], left
    assert not any(".kept-" in p.name for p in out.parent.iterdir())
    if ok:
        for rel, data in staged.items():
            assert after.get(rel) == ("file", data), rel
    else:
        assert after == before  # refused or interrupted: nothing touched at all


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_no_user_byte_is_ever_changed_or_lost(scenario: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check(scenario, Path(tmp))


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_no_user_byte_is_ever_changed_or_lost_many(scenario: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check(scenario, Path(tmp))


TAXONOMY = "child,parent\nA,line:1\nB,line:1\nline:1,root\n"
TAPS = "card_id,time,stop_id\n" + "".join(
    f"c{i},2024-05-01T08:0{i}:00,{'AB'[i % 2]}\n" for i in range(6)
)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=6), st.booleans(), st.booleans())
def test_the_command_line_keeps_every_user_byte(
    user_ops: list, force: bool, previous: bool
) -> None:
    """The same property through ``transit-synth sequences`` (its input inside ``--out``)."""
    from synth.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        (out / "tax.csv").write_text(TAXONOMY)
        (out / "taps.csv").write_text(TAPS)
        argv = ["sequences", str(out / "taps.csv"), "--taxonomy", str(out / "tax.csv")]
        argv += ["--epsilon", "1", "--height", "2", "--seed", "1", "--quiet", "--out"]
        if previous:
            assert main([*argv, str(out / "rel")]) == 0
        for op in user_ops:
            _apply(out, op)
            _apply(out / "rel", op)
        before = {"": _walk(out)}
        tool = {f"rel/{r}": e[1] for r, e in _walk(out / "rel").items() if e[0] == "file"}
        code = main([*argv, str(out / "rel"), *(["--force"] if force else [])])
        code_top = main([*argv, str(out), *(["--force"] if force else [])])
        assert code in (0, 2) and code_top in (0, 2)
        keep = _protected(before[""], tool if previous else {}, {"taps.csv", "tax.csv"})
        after = _walk(out)
        assert not sorted(r for r, e in keep.items() if after.get(r) != e)


def test_a_stale_stage_is_removed_only_when_the_tool_made_it(tmp_path: Path) -> None:
    """A dead process's stage holding the sentinel goes; a look-alike folder of the user's (no
    sentinel, nothing proven) stays."""
    dead = 2**22 + 12345  # above the default pid_max: no such process
    stage = tmp_path / f".out.stage-{dead}-abc"
    stage.mkdir()
    (stage / ".transit-synth-stage").write_text("x")
    (stage / "half.csv").write_text("half")
    mine = tmp_path / f".out.old-{dead}-xyz"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with release_dir(tmp_path / "out", force=False) as new:
        (new / "manifest.json").write_text("{}")
    assert not stage.exists()
    assert (mine / "notes.txt").read_text() == "mine"


def test_add_beside_a_release_replaces_only_its_own_proven_files(tmp_path: Path) -> None:
    """``export`` into a release (``add``): its own earlier file is replaced, the release and
    the user's notes stay, a user's file of the same name is never overwritten."""
    rel = tmp_path / "rel"
    with release_dir(rel, force=False) as stage:
        (stage / "manifest.json").write_text("{}")
    (rel / "notes.txt").write_text("mine")
    for n in (1, 2):
        with release_dir(rel, force=False, add=True, inputs=[rel]) as stage:
            (stage / "od.csv").write_text(f"od {n}")
    assert (rel / "od.csv").read_text() == "od 2"
    assert (rel / "manifest.json").read_text() == "{}"
    assert (rel / "notes.txt").read_text() == "mine"
    listed = json.loads((rel / MARKER).read_text())["files"]
    assert sorted(listed) == ["manifest.json", "od.csv"]
    (rel / "od.csv").write_text("edited by the user")
    with pytest.raises(ConfigError, match=r"od\.csv"):
        with release_dir(rel, force=False, add=True) as stage:
            (stage / "od.csv").write_text("od 3")
    assert (rel / "od.csv").read_text() == "edited by the user"
    # a plain rerun into the release is refused: notes.txt and the edited od.csv are the user's
    with pytest.raises(ConfigError, match="--force"):
        with release_dir(rel, force=False) as stage:
            (stage / "manifest.json").write_text("{}")


def test_a_forged_marker_listing_an_empty_folder_does_not_take_it(tmp_path: Path) -> None:
    """Found by the slow property: a user's empty folder ``sub`` listed by a forged marker was
    taken for the tool's and removed. An empty folder proves nothing."""
    forged = {"format": FORMAT, "files": {}, "dirs": ["sub"]}
    scenario = {
        "genuine": [],
        "ops": [("dir", "sub", b"")],
        "forged": forged,
        "force": False,
        "add": False,
        "staged": ["manifest.json"],
        "inputs": [],
        "interrupt": False,
        "nested_out": False,
    }
    check(scenario, tmp_path)
    assert (tmp_path / "out" / "sub").is_dir()
