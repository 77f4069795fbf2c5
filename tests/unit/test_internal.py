"""synth.internal (where internal evaluations may go) and synth.provenance (the operator record)."""

from __future__ import annotations

from pathlib import Path

import pytest

from synth.errors import ConfigError, InputError
from synth.internal import (
    check_outside_releases,
    default_evaluation_dir,
    is_publishable,
    publishable_root,
)
from synth.provenance import ENV_VAR, input_hmac, provenance_key, record_path


def _release(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text("{}")
    (folder / "sequences.csv").write_text("seq_id,pos,location\n")
    return folder


def test_release_run_and_demo_folders_are_publishable(tmp_path: Path) -> None:
    single = _release(tmp_path / "single")
    run = tmp_path / "run"
    _release(run / "a")
    _release(run / "b")
    (run / "config.toml").write_text("")
    demo = tmp_path / "demo"
    _release(demo / "releases" / "x")
    (demo / "evaluation-private").mkdir()
    assert is_publishable(single) and is_publishable(run) and is_publishable(demo / "releases")
    assert not is_publishable(demo) and not is_publishable(demo / "evaluation-private")
    assert publishable_root(run / "a") == run and publishable_root(run / "a" / "x") == run
    assert publishable_root(demo / "releases" / "x") == demo / "releases"
    # a project folder that merely holds a config and a release among other files is not one
    project = tmp_path / "project"
    _release(project / "rel")
    (project / "config.toml").write_text("")
    (project / "notes.txt").write_text("")
    assert not is_publishable(project) and publishable_root(project / "rel") == project / "rel"


def test_default_evaluation_dir_is_beside_the_outermost_release(tmp_path: Path) -> None:
    single = _release(tmp_path / "single")
    assert default_evaluation_dir(single) == tmp_path / "single-evaluation-private"
    assert default_evaluation_dir(single / "sequences.csv") == default_evaluation_dir(single)
    run = tmp_path / "run"
    _release(run / "a")
    (run / "config.toml").write_text("")
    assert default_evaluation_dir(run / "a") == tmp_path / "a-evaluation-private"
    demo = tmp_path / "demo"
    _release(demo / "releases" / "x")
    assert default_evaluation_dir(demo / "releases" / "x") == demo / "x-evaluation-private"
    loose = tmp_path / "loose.csv"
    loose.write_text("seq_id,pos,location\n")
    assert default_evaluation_dir(loose) == tmp_path / "loose-evaluation-private"
    for out in (single, single / "eval", run, run / "a" / "b", demo / "releases" / "y"):
        with pytest.raises(InputError, match="release directory"):
            check_outside_releases(out)
    check_outside_releases(tmp_path / "single-evaluation-private")
    check_outside_releases(demo / "evaluation-private")


def test_provenance_key_from_file_or_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert provenance_key(None) is None  # not asked for: no record
    key = tmp_path / "key"
    key.write_text("0123456789abcdef0123\n")
    assert provenance_key(key) == b"0123456789abcdef0123"  # one trailing newline dropped
    monkeypatch.setenv(ENV_VAR, "z" * 20)
    assert provenance_key(None) == b"z" * 20
    assert provenance_key(key) == b"0123456789abcdef0123"  # the file wins
    key.write_text("short\n")
    with pytest.raises(ConfigError, match="at least 16 bytes"):
        provenance_key(key)
    with pytest.raises(ConfigError, match="not found"):
        provenance_key(tmp_path / "missing")
    assert record_path(tmp_path / "rel") == tmp_path / "rel.provenance-private.json"


def test_input_hmac_is_keyed_and_covers_directories(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_text("x\n1\n")
    (data / "b.csv").write_text("x\n2\n")
    k = b"k" * 16
    one = input_hmac(k, data)
    assert one.startswith("hmac-sha256:") and one != input_hmac(b"j" * 16, data)
    (data / "b.csv").write_text("x\n3\n")
    assert input_hmac(k, data) != one
    assert input_hmac(k, data / "a.csv") != input_hmac(k, data / "b.csv")
    with pytest.raises(InputError):
        input_hmac(k, tmp_path / "missing.csv")
