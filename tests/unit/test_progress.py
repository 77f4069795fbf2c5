"""``synth.progress``: bars only on a terminal and without quiet; library callbacks."""

from __future__ import annotations

import io

from prefixtree import PrefixTreeSynthesizer
from synth.datasets import montreal_taxonomy
from synth.progress import Progress
from synth.simulate import simulate_sequences


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _exercise(progress: Progress) -> None:
    with progress.steps("work", 2) as step:
        step("one")
        step("two")
    for _ in progress.iterate(range(3), "items"):
        pass
    with progress.counter("levels") as tick:
        tick(1, 4)
        tick(4, 4)
    progress.write("a line")


def test_silent_when_not_a_terminal_or_quiet() -> None:
    for stream, quiet in ((io.StringIO(), False), (_Terminal(), True)):
        progress = Progress(quiet, stream=stream)
        assert not progress.enabled
        _exercise(progress)
        assert stream.getvalue() == "a line\n"  # plain lines still go through


def test_bars_on_a_terminal() -> None:
    stream = _Terminal()
    progress = Progress(stream=stream)
    assert progress.enabled
    _exercise(progress)
    text = stream.getvalue()
    assert "work" in text and "items" in text and "levels" in text and "a line" in text


def test_prefix_tree_reports_its_levels() -> None:
    calls: list[tuple[int, int]] = []
    seqs = simulate_sequences(500, seed=1)
    PrefixTreeSynthesizer(
        epsilon=1.0,
        height=4,
        taxonomy=montreal_taxonomy(),
        random_state=0,
        progress=lambda done, total: calls.append((done, total)),
    ).fit(seqs)
    assert calls and calls[0][0] == 0 and calls[-1][0] == calls[-1][1]
    assert len({total for _, total in calls}) == 1
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
