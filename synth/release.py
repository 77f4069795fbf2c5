"""The one owner of a release directory: writing it whole, reading it back, telling its kind.

A release directory is ``manifest.json`` (the privacy ledger's JSON,
:meth:`~synth.privacy.PrivacyLedger.to_dict`) plus its data: ``sequences.csv|parquet`` (prefix
tree), ``trips.csv|parquet`` and ``schema.json`` (archetypes), one file per table (marginals),
and its datasheet for the public, ``README.md`` and ``datasheet.json`` (:mod:`synth.datasheet`,
written with the manifest from public facts only).

The release contract: a fitted :class:`~synth.generator.Generator`'s ``manifest()`` is
:func:`build_manifest` (the one manifest builder: the ledger, the generator's public parameters
under ``generator``, its public inputs; JSON-ready through the one encoder :func:`encode_json`),
and its ``write(out)`` stages the folder with :func:`write_release`, lets the generator write its
data files and writes the manifest. The command line, ``run``, the demo and the Python API all
write through it, so the same fitted generator gives the same manifest whichever
way it is written. :func:`write_manifest` is the only writer of ``manifest.json``, and validates
what it writes. ``run`` and the demo also write a combined manifest
(:func:`combined_manifest`) stating what publishing all their releases together guarantees.
Paths in manifests go through :func:`recorded_path`: as given, relative to the working folder
where possible, ``embedded:NAME`` for the shipped data.

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

from synth import registry
from synth.audit.manifest import validate_manifest
from synth.errors import ConfigError, InputError, UnderspendWarning
from synth.io import atomic_path, read_json, table_format, write_table
from synth.outdir import release_dir

__all__ = [
    "COMBINED",
    "FORMATS",
    "MANIFEST",
    "Release",
    "ReleaseWriter",
    "Written",
    "build_manifest",
    "check_format",
    "combined_manifest",
    "data_kinds",
    "encode_json",
    "find_data_file",
    "guarantee_in_words",
    "manifest_kind",
    "open_release",
    "read_manifest",
    "recorded_path",
    "warn_if_underspent",
    "write_manifest",
    "write_release",
]

MANIFEST = "manifest.json"
#: Data file formats (by extension).
FORMATS = ("csv", "parquet")


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
    if isinstance(obj, Fraction):
        return f"{obj.numerator}" if obj.denominator == 1 else f"{obj.numerator}/{obj.denominator}"
    if isinstance(obj, os.PathLike):
        return recorded_path(obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    raise TypeError(f"cannot write {type(obj).__name__} to a release's JSON")


def encode_json(data: Any, *, sort_keys: bool = True) -> str:
    """The one JSON encoder of release files: sorted keys (unless ``sort_keys`` is False: a
    schema keeps its column order), two-space indent, a final newline;
    numpy numbers and arrays as plain JSON, fractions as exact strings, paths as
    :func:`recorded_path`; any other object is a TypeError (never its ``str``)."""
    return json.dumps(data, sort_keys=sort_keys, indent=2, default=_json_default) + "\n"


def recorded_path(path: str | os.PathLike[str]) -> str:
    """How a manifest records a path: ``embedded:NAME`` for a file of the shipped data
    (:data:`synth.datasets.FILES`, never its local absolute path), else relative to the working
    folder when under it, else as given. A spec that is no path (``fanout:4``) is kept."""
    text = os.fspath(path)
    if not text or (":" in text.split("/")[0] and not Path(text).exists()):
        return text  # a spec (fanout:N, embedded:NAME), not a file path
    from synth import datasets

    given = Path(text)
    resolved = given.resolve() if given.exists() else None
    if resolved is not None:
        for name in datasets.FILES:
            if resolved == datasets.path(name).resolve():
                return f"embedded:{name}"
    if given.is_absolute():
        try:
            return str(given.relative_to(Path.cwd()))
        except ValueError:
            return text
    return text


def build_manifest(
    ledger: Any,
    parameters: Mapping[str, Any],
    public_inputs: Mapping[str, str | os.PathLike[str]] | None = None,
) -> dict[str, Any]:
    """The one manifest builder: the ledger's accounting (:meth:`PrivacyLedger.to_dict`) with the
    generator's public ``parameters`` (naming it under ``generator``) and its ``public_inputs``
    (role -> file, fingerprinted), made JSON-ready by :func:`encode_json` and validated."""
    if "generator" not in parameters:
        raise ValueError("a release manifest names its generator (parameters['generator'])")
    manifest = ledger.to_dict(parameters=dict(parameters), public_inputs=public_inputs)
    manifest["guarantee_in_words"] = guarantee_in_words(manifest)
    manifest = json.loads(encode_json(manifest))
    validate_manifest(manifest, "the manifest")
    return dict(manifest)


def guarantee_in_words(manifest: Mapping[str, Any]) -> str:
    """The manifest's ``guarantee_in_words``: the guarantee (the cap) as the one figure that
    counts, beside which ``spent`` and ``remaining`` are bookkeeping."""
    cap = manifest.get("guarantee") or manifest.get("cap") or {}
    eps, delta = float(cap.get("epsilon", float("nan"))), float(cap.get("delta", 0.0))
    return (
        f"The guarantee is epsilon {eps:g}, delta {delta:g} per {manifest.get('privacy_unit')} "
        f"({manifest.get('neighbouring')}): this is what counts. 'spent' and 'remaining' are "
        "bookkeeping of the noisy steps; spending less than the budget does not strengthen the "
        "guarantee."
    )


#: ``kind`` of the manifest of a ``run`` or demo output (several releases of the same data).
COMBINED = "combined"


def combined_manifest(manifests: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The manifest of several releases of the same private data (``run``, the demo): each
    release's guarantee, and per privacy unit the guarantee of publishing them all together by
    basic composition (the sum of their epsilons and of their deltas; Dwork and Roth 2014,
    Theorem 3.16). Releases with different units are listed per unit (a guarantee per card and
    one per trip do not add up to one number); ``all_releases`` then sums all of them, the bound
    for an individual who is the unit of every release. Built from the releases' manifests only
    (public)."""
    from synth import __version__

    units: dict[str, dict[str, Any]] = {}
    releases = []
    for name, manifest in sorted(manifests.items()):
        params = manifest.get("parameters") or {}
        guarantee = manifest.get("guarantee") or manifest.get("cap") or {}
        unit = str(manifest.get("privacy_unit"))
        releases.append(
            {
                "name": name,
                "generator": params.get("generator"),
                "privacy_unit": unit,
                "neighbouring": manifest.get("neighbouring"),
                "guarantee": dict(guarantee),
            }
        )
        total = units.setdefault(unit, {"eps": Fraction(0), "delta": Fraction(0), "names": []})
        total["eps"] += Fraction(str(guarantee.get("epsilon_exact", guarantee.get("epsilon"))))
        total["delta"] += Fraction(str(guarantee.get("delta_exact", guarantee.get("delta"))))
        total["names"].append(name)
    combined = {
        "kind": COMBINED,
        "software": {"package": "transit-synth", "version": __version__},
        "accounting": "basic composition: publishing all the releases below together is "
        "(sum of their epsilons, sum of their deltas)-DP for each privacy unit; each release "
        "alone keeps its own guarantee (its manifest.json)",
        "releases": releases,
        "guarantee_per_unit": {
            unit: {
                "epsilon": float(t["eps"]),
                "delta": float(t["delta"]),
                "epsilon_exact": _json_default(t["eps"]),
                "delta_exact": _json_default(t["delta"]),
                "releases": t["names"],
            }
            for unit, t in sorted(units.items())
        },
    }
    if len(units) > 1:
        eps = sum((t["eps"] for t in units.values()), Fraction(0))
        delta = sum((t["delta"] for t in units.values()), Fraction(0))
        combined["all_releases"] = {
            "epsilon": float(eps),
            "delta": float(delta),
            "epsilon_exact": _json_default(eps),
            "delta_exact": _json_default(delta),
        }
        combined["note"] = (
            "the releases name different privacy units: each unit's guarantee covers the "
            "releases listed under it. Where two units name the same individual (a card and "
            "its card_id column), that individual's guarantee is the sum of theirs; "
            "all_releases is the sum over every release (for an individual who is the unit "
            "of each). A guarantee per trip protects a card with k trips only k times weaker."
        )
    return json.loads(encode_json(combined))


def _validate_combined(manifest: Mapping[str, Any]) -> None:
    """ValueError unless ``manifest`` is a well-formed combined manifest (names, guarantees)."""
    releases = manifest.get("releases")
    per_unit = manifest.get("guarantee_per_unit")
    if not isinstance(releases, list) or not releases or not isinstance(per_unit, dict):
        raise ValueError("a combined manifest lists its releases and its guarantee per unit")
    named = sorted(str(r.get("name")) for r in releases)
    listed = sorted(n for g in per_unit.values() for n in g.get("releases", []))
    if named != listed:
        raise ValueError("a combined manifest lists each release under exactly one unit")


def write_manifest(folder: str | os.PathLike[str], manifest: Mapping[str, Any]) -> Path:
    """Write ``folder/manifest.json`` (:func:`encode_json`), the only writer of manifests: a
    release's (validated as :func:`~synth.audit.manifest.validate_manifest` reads it, naming its
    generator) or the combined one of a ``run`` or demo (:func:`combined_manifest`)."""
    if manifest.get("kind") == COMBINED:
        _validate_combined(manifest)
    else:
        validate_manifest(dict(manifest), "the manifest to write")
        params = manifest.get("parameters") or {}
        if not params.get("generator"):
            raise ValueError("a release manifest names its generator (parameters.generator)")
    path = Path(folder) / MANIFEST
    text = encode_json(manifest)
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    return path


class ReleaseWriter:
    """The files of one release being written into ``path`` (a staged folder); ``names``:
    public location names for a ``location_name`` column (None: no such column)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.names: Mapping[str, str] | None = None
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def file(self, name: str) -> Path:
        """The path of the release file ``name`` (a plain file name, no folders)."""
        if not name or Path(name).name != name or name.startswith("."):
            raise ValueError(f"not a release file name: {name!r}")
        return self.path / name

    def table(self, frame: pd.DataFrame, stem: str, format: str = "csv") -> Path:
        """Write ``frame`` as ``stem.csv`` or ``stem.parquet`` (with a ``location_name`` column
        when :attr:`names`, public location names, are set)."""
        path = self.file(f"{stem}.{check_format(format)}")
        if self.names is not None:
            from synth.datasheet import with_location_names

            frame = with_location_names(frame, self.names)
        write_table(frame, path)
        return path

    def json(self, name: str, data: Any) -> Path:
        """Write ``data`` as the JSON file ``name`` (e.g. ``schema.json``)."""
        path = self.file(name)
        path.write_text(encode_json(data, sort_keys=False), encoding="utf-8")
        return path

    def manifest(
        self,
        manifest: Mapping[str, Any],
        public_inputs: Mapping[str, str | os.PathLike[str]] | None = None,
    ) -> Path:
        """Write the release's ``manifest.json`` (its privacy claim), then its datasheet
        (``README.md`` and ``datasheet.json``, :mod:`synth.datasheet`) from the manifest, the
        data files' headers and the ``public_inputs`` (a GTFS taxonomy or a names file gives
        location names): call it once the data files are written."""
        path = write_manifest(self.path, manifest)
        self.datasheet(manifest, public_inputs)
        return path

    def datasheet(
        self,
        manifest: Mapping[str, Any],
        public_inputs: Mapping[str, str | os.PathLike[str]] | None = None,
    ) -> Path:
        """Write ``README.md`` and ``datasheet.json`` (public facts and the manifest only)."""
        from synth.datasheet import DATASHEET_JSON, DATASHEET_README, build_datasheet, render_readme

        sheet = build_datasheet(self.path, manifest, public_inputs)
        self.file(DATASHEET_JSON).write_text(encode_json(sheet, sort_keys=False), encoding="utf-8")
        path = self.file(DATASHEET_README)
        path.write_text(render_readme(sheet), encoding="utf-8")
        return path

    @property
    def complete(self) -> bool:
        """Whether the manifest has been written."""
        return (self.path / MANIFEST).is_file()


@dataclass(frozen=True)
class Written:
    """A release folder a generator wrote (:meth:`~synth.generator.Generator.write`): its
    ``path``, and ``counts`` of what its data files hold (rows, sequences, cells: outputs of the
    release, as public as the files). Usable as a path (``os.fspath``)."""

    path: Path
    counts: Mapping[str, int]

    def __fspath__(self) -> str:
        return os.fspath(self.path)


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
    if isinstance(manifest, dict) and manifest.get("kind") == COMBINED:
        names = ", ".join(str(r.get("name")) for r in manifest.get("releases") or [])
        raise InputError(
            f"{root}: a run or demo output of several releases (its manifest.json states their "
            f"combined guarantee); give one of its release folders: {names}"
        )
    validate_manifest(manifest, str(path))
    return dict(manifest)


def manifest_kind(manifest: Mapping[str, Any]) -> str | None:
    """The release kind of ``manifest``: that of the registered generator it names
    (:func:`synth.registry.for_manifest`); None when it names no known generator."""
    spec = registry.for_manifest(manifest)
    return None if spec is None else spec.kind


def data_kinds() -> tuple[str, ...]:
    """The kinds whose release holds one microdata table (``sequences.csv`` ...) that
    ``evaluate`` and ``export`` read: the registered generators with a ``data_table``."""
    return tuple(s.kind for s in registry.specs() if s.data_table is not None)


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
        """The release kind of the generator the manifest names (:mod:`synth.registry`; None:
        not stated or not registered)."""
        return manifest_kind(self.manifest)

    def data_kind(
        self, accepted: Sequence[str] | None = None, *, what: str = "this command"
    ) -> str:
        """The kind of this release among ``accepted`` (default :func:`data_kinds`): the
        manifest's, else the one data file present. InputError when the release is of another
        kind or no single data file says."""
        accepted = data_kinds() if accepted is None else accepted
        kind = self.kind
        if kind is not None:
            if kind not in accepted:
                raise InputError(
                    f"{self.path}: a {kind} release (transit-synth {kind}); {what} reads "
                    f"{' or '.join(accepted)} releases; {registry.get(kind).other_use()}"
                )
            return kind
        present = [k for k in accepted if find_data_file(self.path, _stem(k)) is not None]
        if len(present) != 1:
            names = " or ".join(f"{_stem(k)}.csv, {_stem(k)}.parquet" for k in accepted)
            many = " (more than one: keep one)" if present else ""
            raise InputError(f"{self.path}: release directory has no single {names}{many}")
        return present[0]

    def data_file(self, kind: str | None = None) -> Path:
        """The data file of ``kind`` (default: :meth:`data_kind`); InputError when missing."""
        kind = kind or self.data_kind()
        stem = _stem(kind)
        path = find_data_file(self.path, stem)
        if path is None:
            stated = f"the manifest describes a {self.kind} release but " if self.kind else ""
            raise InputError(f"{self.path}: {stated}{stem}.csv or {stem}.parquet is missing")
        return path

    def table_files(self) -> list[Path]:
        """Every data table file (CSV or Parquet), sorted by name, hidden files excluded."""
        return [
            f
            for f in sorted(self.path.iterdir())
            if f.is_file() and not f.name.startswith(".") and table_format(f) is not None
        ]


def _stem(kind: str) -> str:
    """The stem of the microdata file of a ``kind`` release (its spec's ``data_table``)."""
    return registry.get(kind).data_table or kind


def open_release(directory: str | os.PathLike[str]) -> Release:
    """Read a release directory: its manifest, loaded and validated (InputError otherwise)."""
    root = Path(directory)
    return Release(root, read_manifest(root))


def warn_if_underspent(ledger: Any, what: str) -> None:
    """Warn when a release's ledger spent less than its cap (the guarantee stays the cap)."""
    note = ledger.underspent_note()
    if note is not None:
        warnings.warn(f"{what}: {note}", UnderspendWarning, stacklevel=2)
