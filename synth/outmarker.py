"""The marker of an output folder: what the tool wrote there, and the proof that it still is.

Every folder :func:`synth.outdir.release_dir` writes holds :data:`MARKER`, listing each file the
tool wrote (relative path, size, SHA-256) and each folder it made. :func:`survey` sorts an
existing folder's entries into the tool's (listed, and still matching: a regular file reached
through real folders only, of the listed size and hash; a listed folder of such entries) and the
user's (everything else: unlisted or changed files, dot-entries, symlinks, a ``manifest.json`` the
tool did not write, a forged marker's claims, paths outside the folder). :func:`remove` deletes
only the tool's entries, each only while the survey's identity of it still holds.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "MARKER",
    "SENTINEL",
    "Survey",
    "claims",
    "digest",
    "is_marker",
    "is_tool_output",
    "listing",
    "remove",
    "survey",
    "write_marker",
]

#: In every output folder: the files (size, SHA-256) and folders the tool wrote there.
MARKER = ".transit-synth-output.json"
FORMAT = "transit-synth-output/2"
#: Inside a stage while it is being written (a stale stage holding it is removed whole).
SENTINEL = ".transit-synth-stage"
_CHUNK = 1 << 20


def digest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Size and SHA-256 of a regular file (a symlink is not followed: OSError)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        sha = hashlib.sha256()
        size = 0
        while chunk := fh.read(_CHUNK):
            sha.update(chunk)
            size += len(chunk)
    return {"bytes": size, "sha256": sha.hexdigest()}


def listing(root: Path) -> dict[str, Any]:
    """The marker content for the folder ``root`` the tool just wrote (its marker excluded)."""
    files: dict[str, Any] = {}
    dirs: list[str] = []
    for here, subdirs, names in os.walk(root):
        rel = Path(here).relative_to(root)
        for d in subdirs:
            if not os.path.islink(os.path.join(here, d)):
                dirs.append((rel / d).as_posix())
        for name in names:
            path = os.path.join(here, name)
            if (rel == Path(".") and name in (MARKER, SENTINEL)) or not os.path.isfile(path):
                continue
            if not os.path.islink(path):
                files[(rel / name).as_posix()] = digest(path)
    return {"format": FORMAT, "files": dict(sorted(files.items())), "dirs": sorted(dirs)}


def write_marker(folder: Path, listing: Mapping[str, Any]) -> None:
    note = (
        "written by transit-synth: the files it wrote here (size, SHA-256); a later run into "
        "this folder removes or replaces only these, and only while they still match"
    )
    text = json.dumps({"format": FORMAT, "note": note, **listing}, indent=1) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f"{MARKER}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~umask())
        os.replace(tmp, folder / MARKER)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _safe(rel: object) -> bool:
    """Whether a marker entry is a plain relative path inside the folder."""
    if not isinstance(rel, str) or not rel or "\0" in rel or rel.startswith("/"):
        return False
    parts = rel.split("/")
    return all(p not in ("", ".", "..") for p in parts) and rel != MARKER


def _load(path: Path) -> Any:
    """The JSON in ``path`` when it is a regular file (not a symlink); None otherwise."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode) or path.lstat().st_size > 64 << 20:
            return None
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


def is_marker(path: Path) -> bool:
    """Whether ``path`` is a marker (this version's, or an earlier version's ``entries`` list):
    the tool's own bookkeeping, rewritten freely. Anything else at that name is the user's."""
    data = _load(path)
    if not isinstance(data, dict):
        return False
    return data.get("format") == FORMAT or (
        set(data) == {"entries"} and isinstance(data["entries"], list)
    )


def claims(folder: Path) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """The files and folders ``folder``'s marker claims (well-formed entries only)."""
    data = _load(folder / MARKER)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}, set()
    files, dirs = data.get("files"), data.get("dirs")
    claimed = {
        rel: meta
        for rel, meta in (files.items() if isinstance(files, dict) else ())
        if _safe(rel)
        and isinstance(meta, dict)
        and isinstance(meta.get("bytes"), int)
        and isinstance(meta.get("sha256"), str)
    }
    return claimed, {d for d in (dirs if isinstance(dirs, list) else ()) if _safe(d)}


def regular(folder: Path, rel: str) -> os.stat_result | None:
    """The stat of ``folder/rel`` when every component is a real folder and it a regular file."""
    path = folder
    parts = rel.split("/")
    try:
        for i, part in enumerate(parts):
            path = path / part
            st = path.lstat()
            if not (stat.S_ISREG if i == len(parts) - 1 else stat.S_ISDIR)(st.st_mode):
                return None
    except OSError:
        return None
    return st


def identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


# -- surveying an existing folder -------------------------------------------------------------
class Survey(NamedTuple):
    """What ``--out`` holds: the tool's proven files (relative path -> identity), the folders its
    marker lists, and the top-level names that are the user's (or hold the command's input)."""

    proven: dict[str, tuple[int, int, int, int]]
    dirs: set[str]
    theirs: list[str]
    holds_input: bool


def _proven(folder: Path) -> tuple[dict[str, tuple[int, int, int, int]], set[str]]:
    claimed, dirs = claims(folder)
    proven = {}
    for rel, meta in claimed.items():
        st = regular(folder, rel)
        if st is None or st.st_size != meta["bytes"]:
            continue
        try:
            if digest(folder / rel)["sha256"] == meta["sha256"]:
                proven[rel] = identity(st)
        except OSError:
            continue
    return proven, dirs


def _ours(folder: Path, rel: str, proven: Mapping[str, Any], dirs: set[str]) -> bool:
    """Whether the entry ``rel`` of ``folder`` is wholly the tool's (proven, or a listed folder
    of such entries holding at least one: an empty folder proves nothing, since a forged marker
    can list any name)."""
    try:
        st = (folder / rel).lstat()
    except OSError:
        return False
    if stat.S_ISREG(st.st_mode):
        return rel in proven and proven[rel] == identity(st)
    if not stat.S_ISDIR(st.st_mode) or rel not in dirs:
        return False
    try:
        names = os.listdir(folder / rel)
    except OSError:
        return False
    return bool(names) and all(_ours(folder, f"{rel}/{n}", proven, dirs) for n in names)


def _input_names(folder: Path, inputs: Iterable[Path]) -> tuple[set[str], bool]:
    """The top-level entries of ``folder`` holding an input, and whether ``folder`` is or lies
    inside an input folder."""
    names, whole = set(), False
    for path in inputs:
        if path == folder or path in folder.parents:
            whole = True
        elif folder in path.parents:
            names.add(path.relative_to(folder).parts[0])
    return names, whole


def survey(folder: Path, inputs: Iterable[Path] = (), *, add: bool = False) -> Survey:
    """Survey the existing folder ``folder`` (see :class:`Survey`). A folder that is, or lies
    inside, an input folder is all the user's unless ``add`` (which replaces same-named entries
    only)."""
    proven, dirs = _proven(folder)
    input_names, whole = _input_names(folder, inputs)
    theirs = []
    for name in sorted(os.listdir(folder)):
        if name == MARKER and name not in input_names and is_marker(folder / name):
            continue
        if (whole and not add) or name in input_names or not _ours(folder, name, proven, dirs):
            theirs.append(name)
    return Survey(proven, dirs, theirs, whole or bool(input_names))


def is_tool_output(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` is a non-empty folder holding only entries the tool can prove it
    wrote."""
    path = Path(folder)
    if path.is_symlink() or not path.is_dir():
        return False
    found = survey(path)
    return not found.theirs and bool(found.proven or found.dirs)


def _unlink_if(path: Path, expected: tuple[int, int, int, int]) -> None:
    """Remove the file ``path`` only if it is still the regular file the survey proved."""
    with contextlib.suppress(OSError):
        st = path.lstat()
        if stat.S_ISREG(st.st_mode) and identity(st) == expected:
            path.unlink()


def remove(base: Path, found: Survey, top: str | None = None) -> None:
    """Remove the tool's proven entries, each only while unchanged (files) or empty (folders):
    all of them (``top`` None; ``base`` the surveyed folder, or where it was moved), or those of
    the top-level entry ``top`` (``base``: where that entry is now)."""

    def place(rel: str) -> str | None:
        if top is None or rel == top:
            return "" if rel == top else rel
        return rel[len(top) + 1 :] if rel.startswith(f"{top}/") else None

    for rel in sorted(found.proven, key=lambda r: -r.count("/")):
        sub = place(rel)
        if sub == "":
            _unlink_if(base, found.proven[rel])
        elif sub is not None and regular(base, sub) is not None:
            _unlink_if(base / sub, found.proven[rel])
    for rel in sorted(found.dirs, key=lambda r: -r.count("/")):
        sub = place(rel)
        path = base / sub if sub else base
        if sub is not None and (not sub or _regular_dir(base, sub)):
            with contextlib.suppress(OSError):
                path.rmdir()


def _regular_dir(base: Path, rel: str) -> bool:
    """Whether every component of ``base/rel`` is a real folder (no symlink)."""
    path = base
    for part in rel.split("/"):
        path = path / part
        try:
            if not stat.S_ISDIR(path.lstat().st_mode):
                return False
        except OSError:
            return False
    return True
