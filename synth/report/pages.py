"""The evaluation report: whole pages, rendered and written (:mod:`synth.report`)."""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from synth import __version__
from synth.internal import INTERNAL_NOTICE
from synth.io import atomic_path
from synth.report.formatting import STYLE, ReleaseEntry, glossary, link_terms
from synth.report.manifests import manifest_section
from synth.report.sections import evaluation_sections
from synth.report.summary import entry_kinds, summary_section
from synth.report.verdict import fitness_section


# --------------------------------------------------------------------------- pages
def render_page(title: str, sections: Sequence[str], *, notice: str | None = None) -> str:
    """A self-contained HTML page; ``notice`` (for an internal page :data:`INTERNAL_NOTICE`) is its
    first heading, above the title."""
    banner = "" if notice is None else f'<h1 class="internal">{html.escape(notice)}</h1>'
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>{banner}<h1>{html.escape(title)}</h1>"
        f'<p class="note">transit-synth {__version__}.</p>'
        + "\n".join(sections)
        + "</body></html>\n"
    )


def render_demo(
    entries: Sequence[ReleaseEntry],
    details: Sequence[tuple[str, Sequence[str]]],
    *,
    title: str = "transit-synth demo",
    intro: str = "",
) -> str:
    """The demo's page: summary, then each (heading, sections) of ``details``, then manifests."""
    sections = [intro] if intro else []
    sections += [summary_section(entries), fitness_section(entries)]
    for heading, body in details:
        sections.append(f"<h2>{html.escape(heading)}</h2>")
        sections.extend(body)
    sections.append(glossary(entry_kinds(entries)))
    return link_terms(render_page(title, sections, notice=INTERNAL_NOTICE))


def render_report(
    results: Mapping[str, Any],
    manifests: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    notice: str = INTERNAL_NOTICE,
) -> str:
    """HTML text of the report of ``evaluate_sequences`` / ``evaluate_trips`` results (internal:
    it compares with the original, so ``notice`` heads it)."""
    manifests = manifests or {}
    entries = [
        ReleaseEntry(
            name=name,
            title=f"synthetic {results['kind']}"
            + ("" if name in manifests else " (no manifest.json beside the table)"),
            manifest=manifests.get(name),
            results=results,
            key=name,
        )
        for name in results["releases"]
    ]
    kind = "passenger sequences" if results["kind"] == "sequences" else "trips"
    sections = [
        summary_section(entries),
        fitness_section(entries),
        f"<h2>Details: {kind} against the original</h2>",
        *evaluation_sections(results),
        *(manifest_section(n, m) for n, m in manifests.items()),
        glossary(entry_kinds(entries)),
    ]
    return link_terms(render_page(f"transit-synth evaluation ({kind})", sections, notice=notice))


def write_html(text: str, path: str | os.PathLike[str]) -> Path:
    """Write an HTML page atomically to ``path``."""
    target = Path(path)
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return target


def write_report(
    results: Mapping[str, Any],
    path: str | os.PathLike[str],
    *,
    manifests: Mapping[str, Mapping[str, Any]] | None = None,
    notice: str = INTERNAL_NOTICE,
) -> Path:
    """Write the report atomically to ``path`` (``notice``: its first heading)."""
    return write_html(render_report(results, manifests, notice=notice), path)
