"""The one owner of a release directory: writing it whole, reading it back, telling its kind.

A release directory is ``manifest.json`` (the privacy ledger's JSON,
:meth:`~synth.privacy.PrivacyLedger.to_dict`) plus its data: ``sequences.csv|parquet`` (prefix
tree), ``trips.csv|parquet`` and ``schema.json`` (archetypes), one file per table (marginals).

Writing: :func:`write_release` stages the folder through :func:`synth.outdir.release_dir` (the
single owner of atomic replacement and ``--force``) and yields a :class:`ReleaseWriter`; the
folder only appears once its manifest is written. Reading: :func:`open_release` loads and
validates the manifest (:func:`synth.audit.manifest.validate_manifest`), :meth:`Release.kind`
tells what it holds from the generator named in it, and :meth:`Release.data_file` finds the data
file, all with one set of errors (:class:`~synth.errors.InputError`).
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from synth.audit.manifest import validate_manifest
from synth.errors import ConfigError, InputError, UnderspendWarning
from synth.io import atomic_path, read_json, table_format, write_table
from synth.outdir import release_dir

__all__ = [
    "DATA_KINDS",
    "FORMATS",
    "GENERATOR_KINDS",
    "MANIFEST",
    "Release",
    "ReleaseWriter",
    "check_format",
    "find_data_file",
    "manifest_kind",
    "open_release",
    "read_manifest",
    "warn_if_underspent",
    "write_manifest",
    "write_release",
]

MANIFEST = "manifest.json"
#: Generator named in a manifest (``parameters.generator``, else ``parameters.release``) -> kind.
GENERATOR_KINDS: dict[str, str] = {
    "prefixtree": "sequences",
    "archetypes": "trips",
    "opal-marginals": "marginals",
}
#: Kinds whose data is one microdata table named after the kind (``sequences.csv`` ...).
DATA_KINDS = ("sequences", "trips")
#: Data file formats (by extension).
FORMATS = ("csv", "parquet")
#: What to do with a release of a kind that a command does not read.
_OTHER_USES = {
    "sequences": "export it or evaluate it with --kind sequences",
    "trips": "export it or evaluate it with --kind trips",
    "marginals": "check a marginal release with transit-synth audit",
}


def check_format(format: str) -> str:
    """``format`` if it is a release data format, else a ConfigError."""
    if format not in FORMATS:
        raise ConfigError(f"format must be 'csv' or 'parquet', got {format!r}")
    return format


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Fraction | os.PathLike):
        return str(os.fspath(obj) if isinstance(obj, os.PathLike) else obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    return str(obj)


def write_manifest(folder: str | os.PathLike[str], manifest: Mapping[str, Any]) -> Path:
    """Write ``folder/manifest.json`` (deterministic JSON: sorted keys, two-space indent)."""
    validate_manifest(dict(manifest), "the manifest to write")
    path = Path(folder) / MANIFEST
    text = json.dumps(manifest, sort_keys=True, indent=2, default=_json_default) + "\n"
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    return path


class ReleaseWriter:
    """The files of one release being written into ``path`` (a staged folder)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def file(self, name: str) -> Path:
        """The path of the release file ``name`` (a plain file name, no folders)."""
        if not name or Path(name).name != name or name.startswith("."):
            raise ValueError(f"not a release file name: {name!r}")
        return self.path / name

    def table(self, frame: pd.DataFrame, stem: str, format: str = "csv") -> Path:
        """Write ``frame`` as ``stem.csv`` or ``stem.parquet``."""
        path = self.file(f"{stem}.{check_format(format)}")
        write_table(frame, path)
        return path

    def json(self, name: str, data: Any) -> Path:
        """Write ``data`` as the JSON file ``name`` (e.g. ``schema.json``)."""
        path = self.file(name)
        path.write_text(json.dumps(data, indent=2, default=_json_default) + "\n", encoding="utf-8")
        return path

    def manifest(self, manifest: Mapping[str, Any]) -> Path:
        """Write the release's ``manifest.json`` (its privacy claim)."""
        return write_manifest(self.path, manifest)

    @property
    def complete(self) -> bool:
        """Whether the manifest has been written."""
        return (self.path / MANIFEST).is_file()


@contextlib.contextmanager
def write_release(
    out: str | os.PathLike[str], *, force: bool | None = None
) -> Iterator[ReleaseWriter]:
    """Stage the release folder ``out`` (rules of :func:`synth.outdir.release_dir`); it is put in
    place whole when the block ends, and only if a manifest was written (else RuntimeError)."""
    with release_dir(out, force=force) as stage:
        writer = ReleaseWriter(stage)
        yield writer
        if not writer.complete:
            raise RuntimeError(f"{out}: a release without {MANIFEST} is not written")


def read_manifest(directory: str | os.PathLike[str], *, required: bool = True) -> dict[str, Any]:
    """The validated manifest of the release directory ``directory`` (``{}`` when it has none and
    ``required`` is False)."""
    root = Path(directory)
    if not root.is_dir():
        raise InputError(f"{root}: not a release directory (no such folder)")
    path = root / MANIFEST
    if not path.is_file():
        if not required:
            return {}
        raise InputError(
            f"{root}: no manifest.json (not a release directory; every release has one)"
        )
    try:
        manifest = read_json(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not a readable JSON manifest ({exc})") from exc
    validate_manifest(manifest, str(path))
    return dict(manifest)


def manifest_kind(manifest: Mapping[str, Any]) -> str | None:
    """The release kind (:data:`GENERATOR_KINDS`) of ``manifest``; None when it names no known
    generator."""
    params = manifest.get("parameters") or {}
    if not isinstance(params, dict):
        return None
    generator = params.get("generator") or params.get("release")
    return GENERATOR_KINDS.get(str(generator)) if generator else None


def find_data_file(directory: str | os.PathLike[str], stem: str) -> Path | None:
    """``directory/stem.csv`` or ``.parquet`` (None when absent; InputError when both are)."""
    root = Path(directory)
    found = [root / f"{stem}.{ext}" for ext in FORMATS]
    found = [p for p in found if p.is_file()]
    if len(found) > 1:
        raise InputError(f"{root}: both {found[0].name} and {found[1].name}; keep one")
    return found[0] if found else None


@dataclass(frozen=True)
class Release:
    """A release directory read back: its ``path`` and validated ``manifest``."""

    path: Path
    manifest: dict[str, Any]

    @property
    def parameters(self) -> dict[str, Any]:
        """The manifest's ``parameters`` (empty when absent)."""
        params = self.manifest.get("parameters") or {}
        return params if isinstance(params, dict) else {}

    @property
    def kind(self) -> str | None:
        """``sequences``, ``trips`` or ``marginals`` from the manifest (None: not stated)."""
        return manifest_kind(self.manifest)

    def data_kind(self, accepted: Sequence[str] = DATA_KINDS, *, what: str = "this command") -> str:
        """The kind of this release among ``accepted``: the manifest's, else the one data file
        present. InputError when the release is of another kind or no single data file says."""
        kind = self.kind
        if kind is not None:
            if kind not in accepted:
                raise InputError(
                    f"{self.path}: a {kind} release (transit-synth {kind}); {what} reads "
                    f"{' or '.join(accepted)} releases; {_OTHER_USES[kind]}"
                )
            return kind
        present = [k for k in accepted if find_data_file(self.path, k) is not None]
        if len(present) != 1:
            names = " or ".join(f"{k}.csv, {k}.parquet" for k in accepted)
            many = " (more than one: keep one)" if present else ""
            raise InputError(f"{self.path}: release directory has no single {names}{many}")
        return present[0]

    def data_file(self, kind: str | None = None) -> Path:
        """The data file of ``kind`` (default: :meth:`data_kind`); InputError when missing."""
        kind = kind or self.data_kind()
        path = find_data_file(self.path, kind)
        if path is None:
            stated = f"the manifest describes a {self.kind} release but " if self.kind else ""
            raise InputError(f"{self.path}: {stated}{kind}.csv or {kind}.parquet is missing")
        return path

    def table_files(self) -> list[Path]:
        """Every data table file (CSV or Parquet), sorted by name, hidden files excluded."""
        return [
            f
            for f in sorted(self.path.iterdir())
            if f.is_file() and not f.name.startswith(".") and table_format(f) is not None
        ]


def open_release(directory: str | os.PathLike[str]) -> Release:
    """Read a release directory: its manifest, loaded and validated (InputError otherwise)."""
    root = Path(directory)
    return Release(root, read_manifest(root))


def warn_if_underspent(ledger: Any, what: str) -> None:
    """Warn when a release's ledger spent less than its cap (the guarantee stays the cap)."""
    note = ledger.underspent_note()
    if note is not None:
        warnings.warn(f"{what}: {note}", UnderspendWarning, stacklevel=2)
