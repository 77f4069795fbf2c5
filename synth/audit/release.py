"""A release directory as the audit sees it: its tables, its manifest, and the noise of each table.

Every release of the library is ``DIR/manifest.json`` (the ledger's JSON) plus data files (CSV or
Parquet). The noise of a table is read from the manifest: ``parameters.tables`` (the Opal release
writes the calibration of each table there, with ``derived_from`` for the summed one-way tables of
the consistent mode), else the spend whose label is the table's name.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from synth.audit.manifest import validate_manifest
from synth.errors import InputError
from synth.io import read_table, table_columns, table_format

__all__ = ["AuditedRelease", "TableNoise", "load_release", "zeros_perturbed"]

#: Mechanisms that add noise to every cell of the vector they are given (zeros included).
_EVERY_CELL = ("discrete_laplace", "discrete_gaussian", "laplace", "gaussian")
#: Words of a spend note saying that only the cells present in the data were perturbed.
_PRESENT_ONLY = ("present cells only", "zeros not perturbed", "zero counts are not perturbed")
#: Words of a spend note saying that the empty cells of the public domain were perturbed too.
_ZEROS_INCLUDED = ("zeros included", "every public-domain cell perturbed", "every candidate child")


def zeros_perturbed(mechanism: str, delta: float, note: str) -> bool | None:
    """Whether a spend perturbed the cells whose true count is zero (001 section 3).

    ``None`` when the manifest does not say (an unknown mechanism with no telling note). A
    ``threshold_histogram`` without a public domain spends a positive delta for its threshold; with
    one (every empty cell perturbed) it spends none.
    """
    text = note.lower()
    if any(w in text for w in _PRESENT_ONLY) or mechanism.endswith("_nonzero"):
        return False
    if any(w in text for w in _ZEROS_INCLUDED):
        return True
    if mechanism == "discrete_laplace_threshold":
        return False
    if mechanism == "threshold_histogram":
        return delta == 0
    if mechanism in _EVERY_CELL:
        return True
    return None


@dataclass(frozen=True)
class TableNoise:
    """The noise one released table carries, from the manifest.

    ``mechanism``: the spend's mechanism name; ``scale``: the noise scale (Laplace b, Gaussian
    sigma); ``threshold``: a noisy count is kept when it is ``>= threshold`` (``None``: no
    threshold); ``derived_from``: the table it was summed from (consistent mode), else ``None``.
    """

    table: str
    mechanism: str
    scale: float
    threshold: int | None
    derived_from: str | None

    @property
    def discrete(self) -> bool:
        """Integer noise (discrete Laplace or Gaussian) rather than a rounded continuous one."""
        return self.mechanism.startswith("discrete") or self.mechanism == "threshold_histogram"

    @property
    def gaussian(self) -> bool:
        """Gaussian noise (``scale`` is sigma)."""
        return "gaussian" in self.mechanism


@dataclass
class AuditedRelease:
    """A loaded release directory: ``tables`` (file stem -> DataFrame) and ``manifest`` (dict)."""

    path: Path
    manifest: dict[str, Any]
    tables: dict[str, pd.DataFrame]

    @property
    def parameters(self) -> dict[str, Any]:
        """The ``parameters`` block of the manifest (empty when absent)."""
        params = self.manifest.get("parameters") or {}
        return params if isinstance(params, dict) else {}

    @property
    def spends(self) -> list[dict[str, Any]]:
        """Every spend of the manifest."""
        return [s for s in self.manifest.get("spends") or [] if isinstance(s, dict)]

    def _spend(self, table: str) -> dict[str, Any] | None:
        for spend in self.spends:
            if spend.get("label") == table:
                return spend
        return None

    def noise(self, table: str) -> TableNoise | None:
        """The noise of ``table`` according to the manifest (``None`` when it does not say)."""
        info = (self.parameters.get("tables") or {}).get(table)
        source = table
        if isinstance(info, dict) and info.get("derived_from"):
            source = str(info["derived_from"])
        spend = self._spend(source)
        if spend is None and not isinstance(info, dict):
            return None
        spend = spend or {}
        info = info if isinstance(info, dict) else {}
        scale = info.get("scale", spend.get("scale"))
        if scale is None:
            return None
        threshold = info.get("threshold", spend.get("threshold"))
        return TableNoise(
            table=table,
            mechanism=str(spend.get("mechanism") or ("discrete_laplace" if info else "unknown")),
            scale=float(scale),
            threshold=None if threshold is None else int(float(threshold)),
            derived_from=None if source == table else source,
        )


def _columns(path: Path, fmt: str) -> list[str]:
    """Column names of a table file, read from its header only (InputError if unreadable)."""
    return table_columns(path)


def load_release(path: str | os.PathLike[str]) -> AuditedRelease:
    """Read ``DIR/manifest.json`` and every count table (CSV / Parquet with a ``count`` column)."""
    root = Path(path)
    if not root.is_dir():
        raise InputError(f"{root}: not a release directory")
    manifest_path = root / "manifest.json"
    if not manifest_path.is_file():
        raise InputError(f"{root}: no manifest.json (every release writes one)")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{manifest_path}: not a readable JSON manifest ({exc})") from exc
    validate_manifest(manifest, str(manifest_path))
    tables: dict[str, pd.DataFrame] = {}
    for f in sorted(root.iterdir()):
        fmt = table_format(f)
        if f.is_file() and not f.name.startswith(".") and fmt is not None:
            if "count" in _columns(f, fmt):  # count tables only: microdata is not audited here
                keys = {c: str for c in ("mode", "day", "time", "location")}
                tables[f.name.split(".")[0]] = read_table(f, dtype=keys)
    return AuditedRelease(root, manifest, tables)
