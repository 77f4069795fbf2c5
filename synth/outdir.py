"""Output directories: staged beside the target, put in place whole; ownership by proof, not guess.

:func:`release_dir` is the one place where the tool writes an output folder (a release, an
evaluation, an audit, an export, a ``run`` or the demo). Every folder it writes holds a marker,
:data:`MARKER`, listing each file the tool wrote there with its size and SHA-256 (and the folders
it made). An entry of ``--out DIR`` is the tool's only if the marker lists it and it still matches
(a folder: listed, and everything in it the tool's); anything else is the user's: files the marker
does not list, or that changed since, dot-entries, symlinks, a ``manifest.json`` the tool did not
write, a forged marker's claims. The rules:

- ``DIR`` absent (or an empty folder): the staged folder is renamed to ``DIR`` in one atomic step.
- ``DIR`` holds only the tool's entries: it is replaced as a whole, atomically
  (``renameat2(RENAME_EXCHANGE)`` where the kernel has it, else two renames a few microseconds
  apart); the old entries are then removed one by one, each only while it still matches.
- anything else (a user's file, a folder holding the command's input, a file at ``DIR``): refused
  with a :class:`~synth.errors.ConfigError` and nothing touched. ``force=True`` (``--force``)
  writes the output beside the user's entries instead: the tool's matching earlier entries are
  removed or replaced, the user's stay byte for byte, and a name clash with one of them is refused
  before anything moves. ``add=True`` (``export`` or ``evaluate`` into a release) adds beside
  likewise, without ``--force`` and without removing the tool's other entries.

A symlink ``DIR`` is followed (the link is the user's and stays). The input files of the command
(:data:`INPUTS`, set by the command line, or ``inputs=``) are never the tool's to remove.

SIGTERM and SIGHUP are turned into :class:`Terminated` (a ``KeyboardInterrupt``) while a folder is
staged, so they clean up as Ctrl-C does; they are held back while the output is put in place. A
stage left by a killed run (SIGKILL, power loss) is named after its process id and removed by the
next run into the same ``DIR`` once that process is gone: a stage still holding its
:data:`SENTINEL` whole, an old output only by its marker's proof.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from synth.errors import ConfigError, TransitSynthWarning
from synth.outmarker import (
    MARKER,
    SENTINEL,
    Survey,
    claims,
    identity,
    is_marker,
    listing,
    remove,
    survey,
    umask,
    write_marker,
)

__all__ = [
    "FORCE",
    "INPUTS",
    "Terminated",
    "input_paths",
    "release_dir",
    "terminate_on_signals",
]

_STAGE = re.compile(r"\.(?:stage|old)-(\d+)-[A-Za-z0-9_]+$")
#: The command-line options (argparse ``dest``) that name the command's input files or folders.
INPUT_OPTIONS: tuple[str, ...] = ("input", "private", "public", "taxonomy", "config", "synthetic")
INPUT_OPTIONS += ("original", "release", "stops", "schema", "locations", "pairs", "neighbours")
INPUT_OPTIONS += ("provenance_key_file",)


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


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back (delivered on leaving) while the output is placed."""
    held = {getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)}
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "pthread_sigmask"
    ):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _dispose(old: Path, found: Survey | None, shown: Path) -> None:
    """Remove a replaced output or an emptied stage (now at ``old``) by proof; what is left (a
    user's entry that appeared meanwhile) is kept in a visible folder beside ``shown``."""
    if found is not None:
        remove(old, found)
    for name in (MARKER, SENTINEL):
        if is_marker(old / name) or (name == SENTINEL and (old / name).is_file()):
            (old / name).unlink()
    try:
        old.rmdir()
    except FileNotFoundError:
        pass
    except OSError:
        kept = shown.with_name(f"{shown.name}.kept-{os.getpid()}-{os.urandom(3).hex()}")
        os.replace(old, kept)
        warnings.warn(
            f"{shown}: entries that appeared while the output was replaced are kept in {kept}",
            TransitSynthWarning,
            stacklevel=2,
        )


# -- stages -----------------------------------------------------------------------------------
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
    """Remove stages and replaced outputs a killed run left for ``name`` (their process is gone):
    a stage still holding its sentinel whole, anything else only by its marker's proof."""
    with contextlib.suppress(OSError):
        for entry in anchor.glob(f".{glob_escape(name)}.*-*"):
            match = _STAGE.search(entry.name)
            if not (match and entry.name.startswith(f".{name}.") and not _alive(int(match[1]))):
                continue
            if entry.is_symlink() or not entry.is_dir():
                continue
            if (entry / SENTINEL).is_file() and not (entry / SENTINEL).is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
                continue
            with contextlib.suppress(OSError):
                remove(entry, survey(entry))
                if is_marker(entry / MARKER):
                    (entry / MARKER).unlink()
                entry.rmdir()  # fails, and keeps it, if anything unproven is left


def glob_escape(name: str) -> str:
    """``name`` with glob wildcards escaped."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def _renameat2(a: Path, b: Path, flags: int) -> bool:
    """Linux ``renameat2`` (flags 1: no replace, 2: exchange); False when unavailable or failed."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd = -100
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), flags) == 0


def _swap(new: Path, out: Path, aside: Path) -> Path:
    """Put the folder ``new`` in place of the folder ``out`` (atomically where the kernel can);
    returns where the old one now is (``new``, else ``aside``)."""
    if _renameat2(new, out, 2):
        return new
    os.replace(out, aside)
    os.replace(new, out)
    return aside


def _move_new(src: Path, dest: Path, shown: Path) -> None:
    """Move ``src`` to the absent ``dest``, never over an entry that appeared meanwhile."""
    if _renameat2(src, dest, 1):
        return
    if os.path.lexists(dest):
        raise ConfigError(
            f"{shown}: {dest.name} appeared while the output was placed; it is kept (rerun)"
        )
    os.rename(src, dest)


def _make_stage(out: Path, shown: Path) -> Path:
    anchor = out.parent
    while not anchor.is_dir():
        anchor = anchor.parent
    _remove_stale(anchor, out.name)
    try:
        stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.stage-{os.getpid()}-", dir=anchor))
        (stage / SENTINEL).write_text(f"{stage.name}\n", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot write the output here: {exc.strerror or exc}") from exc
    stage.chmod(0o777 & ~umask())  # mkdtemp makes it private; a release gets the usual permissions
    return stage


def _seal(stage: Path) -> dict[str, Any]:
    """Write the staged folder's marker and drop its sentinel; returns the listing."""
    content = listing(stage)
    write_marker(stage, content)
    (stage / SENTINEL).unlink()  # after the marker: a killed run's stage stays removable
    return content


# -- the checks and the placing ---------------------------------------------------------------
def _resolve(out_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """``(where to write, the name to show)``: a symlink ``--out`` is followed."""
    if not str(out_dir).strip():
        raise ConfigError("--out must not be empty (name an output folder)")
    shown = Path(out_dir).absolute()
    if shown.is_symlink() and not shown.exists():
        raise ConfigError(
            f"{shown}: a symlink to {os.readlink(shown)}, which does not exist (choose another "
            "--out)"
        )
    return Path(os.path.realpath(shown)), shown


def _check_target(out: Path, shown: Path, lenient: bool, add: bool) -> Survey | None:
    """Refuse a target that would lose the user's files; returns the survey of an existing
    folder (None when there is none yet)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(
            f"{shown}: output path exists and is not a directory (choose another --out)"
        )
    if not out.is_dir():
        return None
    found = survey(out, INPUTS.get(), add=add)
    if (found.theirs or found.holds_input) and not lenient:
        sample = ", ".join(found.theirs[:3]) + (", ..." if len(found.theirs) > 3 else "")
        what = "the command's input" if found.holds_input else "files this tool cannot prove"
        raise ConfigError(
            f"{shown}: output folder holds {what}{' it wrote' * (not found.holds_input)}"
            f"{f' ({sample})' if sample else ''}; "
            "choose a new or empty folder, or pass --force to write the output beside them "
            "(none of them is deleted or replaced)"
        )
    return found


def _merge(stage: Path, out: Path, shown: Path, found: Survey, add: bool) -> None:
    """Put the staged entries beside ``out``'s: the tool's same-named entries are replaced (with
    ``add``, only those; else its other entries are removed too), the user's stay; a clash
    with one of the user's is refused before anything moves."""
    staged = sorted(n for n in os.listdir(stage) if n != MARKER)
    theirs = set(found.theirs)
    clash = [n for n in staged if n in theirs] + [MARKER] * (MARKER in theirs)
    if clash:
        raise ConfigError(
            f"{shown}: writing here would replace your {', '.join(clash)}; nothing was written "
            "(choose another --out)"
        )
    ours = [n for n in os.listdir(out) if n != MARKER and n not in theirs]
    for name in ours:
        if name not in staged and not add:
            remove(out / name, found, name)
    for name in staged:
        _put(stage / name, out / name, found, shown)
    new_files, new_dirs = claims(stage)
    kept = [n for n in ours if n not in staged and add]
    files = {r: m for r, m in claims(out)[0].items() if r in found.proven}
    files = {r: m for r, m in files.items() if r.split("/")[0] in kept} | new_files
    dirs = {d for d in found.dirs if d.split("/")[0] in kept} | new_dirs
    write_marker(out, {"files": dict(sorted(files.items())), "dirs": sorted(dirs)})
    _dispose(stage, None, shown)


def _put(src: Path, dest: Path, found: Survey, shown: Path) -> None:
    """Put the staged entry ``src`` at ``dest``, replacing the tool's entry there (if any)."""
    name = dest.name
    st = None
    with contextlib.suppress(FileNotFoundError):
        st = dest.lstat()
    if st is not None and stat.S_ISDIR(st.st_mode) and src.is_dir():
        remove(_swap(src, dest, src.with_name(f".old-{name}")), found, name)
        return
    if st is not None and stat.S_ISREG(st.st_mode) and found.proven.get(name) == identity(st):
        if src.is_file():
            os.replace(src, dest)  # the tool's unchanged file, replaced in one step
            return
    if st is not None:
        remove(dest, found, name)
    _move_new(src, dest, shown)


def _place(stage: Path, out: Path, shown: Path, found: Survey | None, add: bool) -> None:
    """Put the sealed ``stage`` in place at ``out`` (rules: module docstring)."""
    if found is None:
        out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(stage, out)
    elif not os.listdir(out):
        os.replace(stage, out)  # an empty folder is replaced in one step
    elif found.theirs or found.holds_input or add:
        _merge(stage, out, shown, found, add)
    else:
        aside = out.with_name(f".{out.name}.old-{os.getpid()}-{os.urandom(4).hex()}")
        _dispose(_swap(stage, out, aside), found, shown)


@contextlib.contextmanager
def release_dir(
    out_dir: str | os.PathLike[str],
    *,
    force: bool | None = None,
    add: bool = False,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Iterator[Path]:
    """Stage an output folder: yield an empty directory, put in place whole on success.

    See the module docstring for the rules; ``force=None`` takes the command line's ``--force``
    (:data:`FORCE`). ``add=True`` (``export`` or ``evaluate`` into a release folder) puts the
    staged entries beside the folder's entries instead of replacing it (the tool's same-named
    entries are replaced; the user's files are kept, a clash with one is refused). ``inputs``:
    files or folders the command reads (besides :data:`INPUTS`), never removed or replaced. On any
    exception (``KeyboardInterrupt``, SIGTERM and SIGHUP included) the stage is deleted and
    ``out_dir`` is left absent or unchanged.
    """
    out, shown = _resolve(out_dir)
    force = FORCE.get() if force is None else force
    lenient = force or add  # adding beside never deletes or replaces the user's files
    extra = input_paths(inputs)
    with INPUTS.adding(extra):
        _check_target(out, shown, lenient, add)  # fail before any work
        stage = _make_stage(out, shown)
        try:
            with terminate_on_signals():
                yield stage
                found = _check_target(out, shown, lenient, add)  # it may have changed
                _seal(stage)
                with _signals_held():
                    _place(stage, out, shown, found, add)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise


def check_out(out_dir: str | os.PathLike[str], *, force: bool = False) -> None:
    """Refuse, before any work, an output folder that :func:`release_dir` would refuse when it
    writes (a release command checks first, so a long fit never ends in that refusal);
    :func:`release_dir` checks again when it writes (the folder may have changed)."""
    out, shown = _resolve(out_dir)
    _check_target(out, shown, force, add=False)


def input_paths(values: Iterable[object]) -> list[Path]:
    """The existing files and folders among ``values`` (paths, or lists of them), resolved."""
    found = []
    for value in values:
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            if isinstance(item, str | os.PathLike) and str(item) and os.path.exists(item):
                found.append(Path(os.path.realpath(item)))
    return found


class _Flag:
    """A process-wide default (the command line sets it once per command)."""

    def __init__(self) -> None:
        self._value = False

    def get(self) -> bool:
        return self._value

    def set(self, value: bool) -> None:
        self._value = bool(value)


class _Paths:
    """The command's input paths (the command line sets them once per command)."""

    def __init__(self) -> None:
        self._value: tuple[Path, ...] = ()

    def get(self) -> tuple[Path, ...]:
        return self._value

    def set(self, values: Iterable[object]) -> None:
        self._value = tuple(input_paths(values))

    def of(self, args: object) -> None:
        """Set from an ``argparse.Namespace``: its :data:`INPUT_OPTIONS`."""
        self.set(getattr(args, name, None) for name in INPUT_OPTIONS)

    @contextlib.contextmanager
    def adding(self, paths: Iterable[Path]) -> Iterator[None]:
        before = self._value
        self._value = (*before, *paths)
        try:
            yield
        finally:
            self._value = before


#: ``--force`` of the command being run (read by :func:`release_dir` when ``force`` is None).
FORCE = _Flag()
#: The input files and folders of the command being run (never removed or replaced).
INPUTS = _Paths()
