"""Progress bars for the command line (tqdm on stderr), in one place.

Bars are shown only when they are wanted (no ``--quiet``) and stderr is a terminal; otherwise every
helper here is a no-op, so scripts, pipes and tests see no progress output. Library code never
prints: it accepts a ``progress`` callable ``(done, total)`` (e.g.
:meth:`prefixtree.PrefixTreeSynthesizer.fit`) and the command line passes :meth:`Progress.counter`.

``tqdm`` is imported only when a bar is actually drawn.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["Progress", "ProgressCallback"]

T = TypeVar("T")

#: ``progress(done, total)``: ``done`` of ``total`` units of a step are finished.
ProgressCallback = Callable[[int, int], None]


class _NoBar:
    """Stands in for a tqdm bar when bars are off."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass


class Progress:
    """Progress bars on stderr, silent with ``quiet`` or when stderr is not a terminal."""

    def __init__(self, quiet: bool = False, *, stream: Any = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = not quiet and bool(isatty is not None and isatty())

    def bar(self, desc: str, total: int | None, unit: str = "it") -> Any:
        """A tqdm bar (``update(n)``, ``set_postfix_str(s)``, ``close()``), or a no-op stand-in."""
        if not self.enabled:
            return _NoBar()
        from tqdm import tqdm

        return tqdm(
            total=total,
            desc=desc,
            unit=unit,
            file=self.stream,
            leave=False,
            dynamic_ncols=True,
        )

    def write(self, message: str) -> None:
        """Print a line on the stream without breaking a bar that is being drawn."""
        if self.enabled:
            from tqdm import tqdm

            tqdm.write(message, file=self.stream)
        else:
            print(message, file=self.stream, flush=True)

    def iterate(self, items: Iterable[T], desc: str, total: int | None = None) -> Iterator[T]:
        """``items`` with a bar (``total`` defaults to ``len(items)`` when it has one)."""
        if total is None and isinstance(items, Sequence):
            total = len(items)
        bar = self.bar(desc, total)
        try:
            for item in items:
                yield item
                bar.update(1)
        finally:
            bar.close()

    @contextmanager
    def steps(self, desc: str, total: int) -> Iterator[Callable[[str], None]]:
        """A bar over ``total`` named steps: call ``step(name)`` when each step starts."""
        bar = self.bar(desc, total, unit="step")
        started = [False]

        def step(name: str) -> None:
            if started[0]:
                bar.update(1)
            started[0] = True
            bar.set_postfix_str(name)

        try:
            yield step
        finally:
            bar.close()

    @contextmanager
    def counter(self, desc: str, unit: str = "it") -> Iterator[ProgressCallback]:
        """A ``progress(done, total)`` callable for library code; the bar is drawn on first use."""
        state: dict[str, Any] = {"bar": None, "done": 0}

        def progress(done: int, total: int) -> None:
            if not self.enabled:
                return
            if state["bar"] is None:
                state["bar"] = self.bar(desc, total, unit=unit)
            bar = state["bar"]
            if bar.total != total:
                bar.total = total
            bar.update(max(0, done - state["done"]))
            state["done"] = max(done, state["done"])

        try:
            yield progress
        finally:
            if state["bar"] is not None:
                state["bar"].close()
