"""Operator-only provenance: which private input produced a release, kept OUTSIDE the release.

A release's ``manifest.json`` records nothing about the private input (a hash, size or name of it
is a noise-free function of the private data). A data holder who wants to know later which file
produced a release asks for a provenance record with ``--provenance-key-file FILE`` (or the
environment variable :data:`ENV_VAR` holding the key itself): a keyed HMAC-SHA256 of each private
input file under the secret key, written to ``<out>.provenance-private.json`` BESIDE the release
directory, never inside it. Without the key the record is not written. The record is for the data
holder only: never publish it, nor the key (anyone holding both could test candidate files).

To check a file later: :func:`input_hmac` with the same key, compared with the record.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from synth.errors import ConfigError, InputError

__all__ = [
    "ENV_VAR",
    "MIN_KEY_BYTES",
    "NOTICE",
    "SUFFIX",
    "input_hmac",
    "private_inputs",
    "provenance_key",
    "record_path",
    "write_provenance",
]

#: environment variable holding the key itself (used when no key file is given)
ENV_VAR = "TRANSIT_SYNTH_PROVENANCE_KEY"
#: the record is ``<out>`` + this suffix, beside the release directory
SUFFIX = ".provenance-private.json"
#: the shortest key accepted (a short key could be guessed from the record)
MIN_KEY_BYTES = 16
NOTICE = (
    "INTERNAL - NOT PRIVATE: keyed hashes of the private input of a release; for the data holder "
    "only; do not publish."
)


def provenance_key(key_file: str | os.PathLike[str] | None = None) -> bytes | None:
    """The secret key: the bytes of ``key_file`` (one trailing newline dropped), else the value of
    :data:`ENV_VAR`, else None (no record). ConfigError for a missing or short key."""
    if key_file is not None:
        path = Path(key_file)
        if not path.is_file():
            raise ConfigError(f"--provenance-key-file {path}: file not found")
        key = path.read_bytes()
        key = key[:-2] if key.endswith(b"\r\n") else key[:-1] if key.endswith(b"\n") else key
        source = f"--provenance-key-file {path}"
    else:
        value = os.environ.get(ENV_VAR)
        if value is None:
            return None
        key, source = value.encode("utf-8"), f"${ENV_VAR}"
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(
            f"{source}: the provenance key must be at least {MIN_KEY_BYTES} bytes "
            f"(got {len(key)}); e.g. python -c 'import secrets; print(secrets.token_hex(32))'"
        )
    return key


def record_path(out: str | os.PathLike[str]) -> Path:
    """Where the record of release directory ``out`` goes: ``<out>.provenance-private.json``."""
    out = Path(os.path.abspath(os.fspath(out)))
    return out.with_name(out.name + SUFFIX)


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(f for f in path.rglob("*") if f.is_file())
    if path.is_file():
        return [path]
    raise InputError(f"{path}: file not found (provenance record)")


def input_hmac(key: bytes, path: str | os.PathLike[str]) -> str:
    """``"hmac-sha256:<hex>"`` of a file's bytes under ``key``; a directory: of its files in
    sorted relative-path order, each as its relative path, a NUL, its length and its bytes."""
    root = Path(path)
    mac = hmac.new(key, digestmod=hashlib.sha256)
    files = _files(root)
    for f in files:
        if root.is_dir():
            mac.update(f.relative_to(root).as_posix().encode("utf-8") + b"\0")
            mac.update(f"{f.stat().st_size}\0".encode())
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                mac.update(block)
    return f"hmac-sha256:{mac.hexdigest()}"


def input_provenance(key: bytes | None, input: object) -> list[dict[str, Any]] | None:
    """The holder's record of a release's one private ``input`` (:func:`private_inputs`), or
    None without a provenance key."""
    return None if key is None else private_inputs(key, {"input": input})


def private_inputs(key: bytes, inputs: Mapping[str, object]) -> list[dict[str, Any]]:
    """One entry per private input (role -> path; a non-path, e.g. an in-memory frame, is listed
    as not recorded)."""
    out: list[dict[str, Any]] = []
    for role, value in inputs.items():
        if isinstance(value, str | os.PathLike):
            path = Path(value)
            out.append({"role": role, "path": str(path.resolve()), "hmac": input_hmac(key, path)})
        else:
            out.append({"role": role, "path": None, "hmac": None, "note": "not a file"})
    return out


def write_provenance(
    out: str | os.PathLike[str],
    inputs: Sequence[dict[str, Any]],
    *,
    command: str,
) -> Path:
    """Write the record of release directory ``out`` (already written) atomically beside it.

    ``inputs`` come from :func:`private_inputs` (computed before the release was written). The
    record also holds the SHA-256 of each ``manifest.json`` under ``out`` (public files), which
    ties it to the release.
    """
    from synth import __version__
    from synth.io import atomic_path

    root = Path(out)
    manifests = {
        m.relative_to(root).as_posix(): "sha256:" + hashlib.sha256(m.read_bytes()).hexdigest()
        for m in sorted(root.rglob("manifest.json"))
    }
    record = {
        "notice": NOTICE,
        "release_directory": str(root.resolve()),
        "command": command,
        "software": {"package": "transit-synth", "version": __version__},
        "algorithm": "HMAC-SHA256 under the data holder's secret key (synth.provenance)",
        "private_inputs": list(inputs),
        "manifests": manifests,
    }
    target = record_path(root)
    with atomic_path(target) as tmp:
        Path(tmp).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return target
