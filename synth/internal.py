"""Internal (non-private) outputs: their names, their notice, and where they may be written.

A release directory holds only DP outputs and their ``manifest.json``: what a user may publish.
Evaluations of a release against the original (``transit-synth evaluate``, the demo's report and
reference checks) hold exact statistics of the private data; they go to a folder whose name ends in
``evaluation-private``, their file names start with ``private-`` and their first line or heading
says :data:`INTERNAL_NOTICE`. They are never written into a release directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from synth.errors import InputError

__all__ = [
    "EVALUATION_SUFFIX",
    "INTERNAL_NOTICE",
    "PRIVATE_PREFIX",
    "check_outside_releases",
    "default_evaluation_dir",
    "is_publishable",
    "publishable_root",
]

INTERNAL_NOTICE = (
    "INTERNAL - NOT PRIVATE: contains exact statistics of the original data; for the data "
    "holder only; do not publish."
)
PRIVATE_PREFIX = "private-"
EVALUATION_SUFFIX = "evaluation-private"


def _holds_only_releases(folder: Path, extra: str | None = None) -> bool:
    """Whether every entry of ``folder`` (hidden ones aside) is a release directory, apart from
    one file named ``extra``, and there is at least one release."""
    try:
        entries = [e for e in folder.iterdir() if not e.name.startswith(".")]
    except OSError:
        return False
    releases = [e for e in entries if e.is_dir() and (e / "manifest.json").is_file()]
    rest = [e for e in entries if e not in releases]
    return bool(releases) and all(e.name == extra and e.is_file() for e in rest)


def is_publishable(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` is (part of) what a user publishes: a release directory (it holds a
    ``manifest.json``), a ``transit-synth run`` output (``config.toml`` and release directories,
    nothing else) or the demo's ``releases/`` folder (release directories only)."""
    path = Path(folder)
    if not path.is_dir():
        return False
    if (path / "manifest.json").is_file():
        return True
    if (path / "config.toml").is_file():
        return _holds_only_releases(path, "config.toml")
    return path.name == "releases" and _holds_only_releases(path)


def publishable_root(folder: str | os.PathLike[str]) -> Path | None:
    """The outermost publishable folder holding ``folder`` (itself included); None if none."""
    path = Path(os.path.abspath(os.fspath(folder)))
    root = None
    for candidate in (path, *path.parents):
        if is_publishable(candidate):
            root = candidate
    return root


def default_evaluation_dir(release: str | os.PathLike[str]) -> Path:
    """Where an evaluation of ``release`` (a release directory, or a table file) goes by default:
    ``<name>-evaluation-private`` beside the outermost publishable folder holding it (for a plain
    folder or file: beside it), never inside a release."""
    path = Path(os.path.abspath(os.fspath(release)))
    if path.is_file():
        path = path.parent if is_publishable(path.parent) else path.with_name(path.stem)
    root = publishable_root(path) or path
    return root.parent / f"{path.name}-{EVALUATION_SUFFIX}"


def check_outside_releases(out: str | os.PathLike[str], flag: str = "--out") -> None:
    """InputError when ``out`` is, or is inside, a publishable folder (a release directory)."""
    root = publishable_root(out)
    if root is not None:
        raise InputError(
            f"{flag} {out}: {root} is a release directory (what may be published); internal "
            "evaluations hold exact statistics of the original and are never written there"
        )
