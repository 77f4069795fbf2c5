"""Output directories: staged beside the target, then put in place whole; the user's files are kept.

:func:`release_dir` is the one place where the tool writes an output folder (a release, an
evaluation, an audit, an export, a ``run`` or the demo). The rules, for ``--out DIR``:

- ``DIR`` absent (or an empty folder): the staged folder is renamed to ``DIR`` in one atomic step.
- ``DIR`` holds a previous output of this tool (its ``manifest.json``, ``audit.json``,
  ``evaluation.json``, ``export-*.json``, or only such folders, as ``run`` writes) and nothing else:
  it is replaced as a whole, atomically (``renameat2(RENAME_EXCHANGE)`` where the kernel has it,
  else two renames a few microseconds apart); no stale file of the old output survives.
- anything else (a folder with other files, such as the input's own folder; a file): refused with
  a :class:`~synth.errors.ConfigError` and nothing touched. ``force=True`` (``--force``) adds the
  output beside the other files instead: the tool's own earlier entries are replaced, every other
  file is kept, and a name clash with one of them is refused. Files the tool did not write are
  never deleted or replaced; the entries it wrote there are listed in :data:`MARKER`.

SIGTERM and SIGHUP are turned into :class:`Terminated` (a ``KeyboardInterrupt``) while a folder is
staged, so they clean up as Ctrl-C does. A stage left by a killed run (SIGKILL, power loss) is
named after its process id and removed by the next run into the same ``DIR`` once that process
is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import re
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from synth.errors import ConfigError

__all__ = ["MARKER", "Terminated", "is_tool_output", "release_dir", "terminate_on_signals"]

#: Written only when ``force`` put an output beside the user's files: the entries the tool wrote.
MARKER = ".transit-synth-output.json"
#: Files whose presence (and valid JSON object content) marks a folder as this tool's output.
SIGNATURES = ("manifest.json", "audit.json", "evaluation.json", "private-evaluation.json")
#: The only files beside the sub-folders of a ``run`` or demo output.
CONTAINER_FILES = ("config.toml", "report.html")
#: Suffixes of the files the tool writes into an output folder (other files are the user's).
TOOL_SUFFIXES = (".csv", ".parquet", ".json", ".html", ".png", ".svg", ".xml", ".gz", ".toml")
#: Files the tool writes by exact name (a release's datasheet, :mod:`synth.datasheet`).
TOOL_FILES = ("README.md",)
_STAGE = re.compile(r"\.(?:stage|old)-(\d+)-[A-Za-z0-9_]+$")


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP received; cleans up like Ctrl-C (``signum``: the signal)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def terminate_on_signals() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`Terminated` (main thread only; a handler the
    application installed itself is left alone)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) in (signal.SIG_DFL, None):
            previous[sig] = signal.signal(sig, _raise_terminated)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _json_object(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as fh:
            return isinstance(json.load(fh), dict)
    except (OSError, ValueError):
        return False


def is_tool_output(folder: Path, _depth: int = 0) -> bool:
    """Whether ``folder`` holds an output of this tool (a signature file, an export record, or
    only sub-folders that are outputs, as ``run`` and the demo write)."""
    if not folder.is_dir():
        return False
    if (folder / MARKER).is_file():
        return True
    if any(_json_object(folder / name) for name in SIGNATURES):
        return True
    if any(_json_object(p) for p in folder.glob("export-*.json")):
        return True
    entries = _entries(folder)
    subdirs = [e for e in entries if e.is_dir()]
    files_ok = all(e.is_dir() or e.name in CONTAINER_FILES for e in entries)
    return (
        _depth < 2
        and files_ok
        and bool(subdirs)
        and all(is_tool_output(d, _depth + 1) for d in subdirs)
    )


def _entries(folder: Path) -> list[Path]:
    """The entries of ``folder``, stale stages and the marker excluded."""
    return [e for e in folder.iterdir() if e.name != MARKER and not _STAGE.search(e.name)]


def _split(out: Path) -> tuple[list[Path], list[Path]]:
    """``out``'s entries as (written by the tool, the user's)."""
    entries = _entries(out)
    marker = out / MARKER
    if marker.is_file():
        try:
            listed = set(json.loads(marker.read_text(encoding="utf-8")).get("entries", []))
        except (OSError, ValueError, AttributeError):
            listed = set()
        return [e for e in entries if e.name in listed], [
            e for e in entries if e.name not in listed
        ]
    if not is_tool_output(out):
        return [], entries
    ours = [
        e
        for e in entries
        if (e.is_dir() and is_tool_output(e, 1))
        or (e.is_file() and e.name.lower().endswith(TOOL_SUFFIXES))
        or (e.is_file() and e.name in TOOL_FILES)
        or e.name.startswith(".")  # the tool's own temporary files
    ]
    return ours, [e for e in entries if e not in ours]


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _remove_stale(anchor: Path, name: str) -> None:
    """Remove stages and replaced folders a killed run left for ``name`` (their process is gone)."""
    with contextlib.suppress(OSError):
        for entry in anchor.glob(f".{glob_escape(name)}.*-*"):
            match = _STAGE.search(entry.name)
            if match and entry.name.startswith(f".{name}.") and not _alive(int(match.group(1))):
                shutil.rmtree(entry, ignore_errors=True)


def glob_escape(name: str) -> str:
    """``name`` with glob wildcards escaped."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False when unavailable."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return result == 0


def _replace_whole(stage: Path, out: Path) -> None:
    """Put ``stage`` in place of the folder ``out``; the old folder is deleted afterwards."""
    if _exchange(stage, out):
        shutil.rmtree(stage, ignore_errors=True)  # now holds the old output
        return
    old = out.with_name(f".{out.name}.old-{os.getpid()}-{os.urandom(4).hex()}")
    os.replace(out, old)
    os.replace(stage, out)
    shutil.rmtree(old, ignore_errors=True)


def _merge(
    stage: Path, out: Path, remove: list[Path], keep: list[Path], theirs: list[Path]
) -> None:
    """Put the staged entries beside ``out``'s other entries: ``remove`` (the tool's old entries)
    go away, ``keep`` (the tool's) and ``theirs`` (the user's) stay; a clash with the user's is
    refused before anything moves."""
    taken = {e.name for e in theirs}
    clash = sorted(e.name for e in stage.iterdir() if e.name in taken)
    if clash:
        raise ConfigError(
            f"{out}: writing here would replace your {', '.join(clash)}; nothing was written "
            "(choose another --out)"
        )
    for entry in remove:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    names = sorted(e.name for e in stage.iterdir())
    for name in names:
        dest = out / name
        if dest.is_dir() and not dest.is_symlink():  # the tool's own earlier folder of that name
            shutil.rmtree(dest)
        os.replace(stage / name, dest)
    if theirs or (out / MARKER).is_file():
        written = sorted({*names, *(e.name for e in keep)})
        (out / MARKER).write_text(json.dumps({"entries": written}, indent=1) + "\n", "utf-8")
    stage.rmdir()


def _check_target(out: Path, force: bool) -> tuple[list[Path], list[Path]]:
    """Refuse a target that would lose the user's files; returns its (ours, theirs) entries."""
    if out.exists() and not out.is_dir():
        raise ConfigError(
            f"{out}: output path exists and is not a directory (choose another --out)"
        )
    if not out.is_dir():
        return [], []
    ours, theirs = _split(out)
    if theirs and not force:
        sample = ", ".join(sorted(e.name for e in theirs)[:3])
        raise ConfigError(
            f"{out}: output folder holds files this tool did not write ({sample}"
            f"{', ...' if len(theirs) > 3 else ''}); choose a new or empty folder, or pass "
            "--force to add the output beside them (none of them is deleted or replaced)"
        )
    return ours, theirs


def _make_stage(out: Path) -> Path:
    anchor = out.parent
    while not anchor.is_dir():
        anchor = anchor.parent
    _remove_stale(anchor, out.name)
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.stage-{os.getpid()}-", dir=anchor))
    except OSError as exc:
        raise ConfigError(f"{out}: cannot write the output here: {exc.strerror or exc}") from exc
    umask = os.umask(0)
    os.umask(umask)
    stage.chmod(0o777 & ~umask)  # mkdtemp makes it private; a release gets the usual permissions
    return stage


@contextlib.contextmanager
def release_dir(
    out_dir: str | os.PathLike[str], *, force: bool | None = None, add: bool = False
) -> Iterator[Path]:
    """Stage an output folder: yield an empty directory, put in place whole on success.

    See the module docstring for the rules; ``force=None`` takes the command line's ``--force``
    (:data:`FORCE`). ``add=True`` (``export`` or ``evaluate`` into a release folder) puts the
    staged entries beside the folder's entries instead of replacing it (the tool's same-named
    entries are replaced; the user's files are kept, a clash with one is refused). On any exception
    (``KeyboardInterrupt``, SIGTERM and SIGHUP included) the stage is deleted and ``out_dir`` is
    left absent or unchanged.
    """
    if not str(out_dir).strip():
        raise ConfigError("--out must not be empty (name an output folder)")
    out = Path(out_dir).absolute()
    force = FORCE.get() if force is None else force
    lenient = force or add  # adding beside never deletes or replaces the user's files
    _check_target(out, lenient)  # fail before any work
    stage = _make_stage(out)
    try:
        with terminate_on_signals():
            yield stage
            ours, theirs = _check_target(out, lenient)  # the folder may have changed meanwhile
            if not out.exists() or not _entries(out):
                out.parent.mkdir(parents=True, exist_ok=True)
                if out.is_dir():
                    with contextlib.suppress(FileNotFoundError):
                        (out / MARKER).unlink()
                os.replace(stage, out)
            elif add:
                staged = {e.name for e in stage.iterdir()}
                remove = [e for e in ours if e.name in staged]
                _merge(stage, out, remove, [e for e in ours if e not in remove], theirs)
            elif not theirs:
                _replace_whole(stage, out)
            else:
                _merge(stage, out, ours, [], theirs)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


class _Flag:
    """A process-wide default (the command line sets it once per command)."""

    def __init__(self) -> None:
        self._value = False

    def get(self) -> bool:
        return self._value

    def set(self, value: bool) -> None:
        self._value = bool(value)


#: ``--force`` of the command being run (read by :func:`release_dir` when ``force`` is None).
FORCE = _Flag()
