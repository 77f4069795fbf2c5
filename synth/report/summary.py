"""The evaluation report: the summary table, privacy in words and verdicts (:mod:`synth.report`)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from synth import registry
from synth.report.formatting import NO_PRIVACY_PREFIX, ReleaseEntry, percent


# --------------------------------------------------------------------------- summary
def budget_cap(manifest: Mapping[str, Any]) -> tuple[float, float, float]:
    """(epsilon, delta) guaranteed (the cap) and the epsilon actually spent."""
    spent = manifest.get("spent") or {}
    cap = manifest.get("guarantee") or manifest.get("cap") or spent
    return (
        float(cap.get("epsilon", math.nan)),
        float(cap.get("delta", 0.0)),
        float(spent.get("epsilon", math.nan)),
    )


def privacy_in_words(manifest: Mapping[str, Any] | None) -> str:
    """Epsilon and delta of a manifest in a sentence an analyst can read."""
    if not manifest or not (manifest.get("cap") or manifest.get("spent")):
        return "unknown: the release has no privacy manifest"
    eps, delta, spent = budget_cap(manifest)
    factor = math.exp(eps)
    text = f"epsilon = {eps:g}"
    if spent < eps * (1 - 1e-9):
        text += f" (the budget asked, which is the guarantee; {spent:.3g} spent)"
    shown = f"{factor:.2f}" if factor < 10 else f"{factor:,.0f}"
    unit = str(manifest.get("privacy_unit") or "unit")
    text += f": adding or removing one {unit} changes the chance of any output by at most a "
    text += f"factor of {shown}; "
    if delta == 0:
        text += "delta = 0 (pure differential privacy)"
    else:
        text += f"delta = {delta:.2g} (a 1-in-{round(1 / delta):,} chance that this bound fails)"
    return text


def _unit(manifest: Mapping[str, Any] | None) -> str:
    if not manifest:
        return "unknown"
    unit = str(manifest.get("privacy_unit") or "unknown")
    neighbouring = manifest.get("neighbouring")
    height = (manifest.get("parameters") or {}).get("height")
    if neighbouring and height is not None:  # the prefix tree's "first h locations"
        neighbouring = str(neighbouring).replace(" first h ", f" first {height} ")
    return f"{unit}: {neighbouring}" if neighbouring else unit


def release_description(manifest: Mapping[str, Any] | None) -> str:
    """What a release is, from its manifest: its generator's description and details
    (:meth:`synth.registry.GeneratorSpec.describe`: variant, height ...)."""
    spec = registry.for_manifest(manifest)
    if spec is None:
        return "a synthetic table"
    return spec.describe((manifest or {}).get("parameters") or {})


def _baseline(results: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    for name, rel in results["releases"].items():
        if name != key and name.startswith(NO_PRIVACY_PREFIX):
            return rel
    return None


def _sequence_verdict(results: Mapping[str, Any], key: str) -> str:
    rel = results["releases"][key]
    ks = [p["k"] for p in rel["patterns"]]
    k = 100 if 100 in ks else max(ks)
    tp = next(p["tp"] for p in rel["patterns"] if p["k"] == k)
    base = _baseline(results, key)
    error = rel["count_queries"]["popularity"]["mean_relative_error"]
    if base is None:
        return (
            f"top-{k} travel patterns: {tp} of {k} found; count queries: "
            f"{percent(error)} average relative error"
        )
    best = next(p["tp"] for p in base["patterns"] if p["k"] == k)
    best_error = base["count_queries"]["popularity"]["mean_relative_error"]
    return (
        f"top-{k} travel patterns: {tp} found, {best} possible without privacy; count queries: "
        f"{percent(error)} average relative error ({percent(best_error)} without privacy)"
    )


def _trip_verdict(results: Mapping[str, Any], key: str) -> str:
    rel = results["releases"][key]
    one_way = rel["marginals"]["one_way"]
    worst = max(one_way, key=one_way.get) if one_way else None
    text = f"k-marginal score {rel['k_marginal']['score']:.0f} of 1000"
    if worst is not None:
        text += f"; column furthest from the original: {worst} (TV {one_way[worst]:.2f})"
    return text


def verdict(results: Mapping[str, Any], key: str) -> str:
    """One line judging release ``key`` of ``results`` against the original, with its figure."""
    if results["kind"] == "sequences":
        return _sequence_verdict(results, key)
    return _trip_verdict(results, key)


def reference_verdict(table: Any, beta: float = 0.05) -> str:
    """One line from an ``against_reference`` table: cells outside the SBH error bound."""
    rows = table[table["compared"]] if "compared" in table else table
    cells = int(rows["cells"].sum())
    outside = int(rows["outside_bound"].sum())
    if cells == 0:
        return "no table could be compared"
    return (
        f"{outside:,} of {cells:,} cells ({outside / cells:.1%}) outside the "
        f"{1 - beta:.0%} error bound (at most {beta:.0%} expected)"
    )


def summary_section(entries: Sequence[ReleaseEntry]) -> str:
    """The opening table: per release, what it is, unit, epsilon/delta in words, verdict."""
    rows = []
    for e in entries:
        line = e.verdict
        if line is None and e.results is not None and e.key is not None:
            line = verdict(e.results, e.key)
        what = f"<b>{html.escape(e.title)}</b><br>{html.escape(release_description(e.manifest))}"
        unit, privacy = _unit(e.manifest), privacy_in_words(e.manifest)
        if e.manifest is None and e.name.startswith(NO_PRIVACY_PREFIX):
            what = "<b>the original, truncated</b><br>for comparison: not a release"
            unit, privacy = "-", "none (epsilon = infinity): the truncated ceiling, see below"
        rows.append(
            f"<tr><td><b>{html.escape(e.name)}</b></td><td>{what}</td>"
            f"<td>{html.escape(unit)}</td><td>{html.escape(privacy)}</td>"
            f'<td class="verdict">{html.escape(line or "not evaluated")}</td></tr>'
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("release", "what it is", "privacy unit", "privacy", "against the original")
    )
    return (
        "<h2>Summary</h2>"
        f'<table class="summary"><tr>{head}</tr>{"".join(rows)}</table>'
        '<p class="note">Terms are explained in the <a href="#glossary">glossary</a> at the end; '
        "the verdict per intended use follows.</p>"
    )


def entry_kinds(entries: Sequence[ReleaseEntry]) -> set[str]:
    """The report sections of ``entries``: the kind of their evaluation, else (a release shown
    without one) its generator's ``report_section`` (noisy counts: marginals)."""
    return {str(e.results["kind"]) if e.results else _section(e.manifest) for e in entries}


def _section(manifest: Mapping[str, Any] | None) -> str:
    spec = registry.for_manifest(manifest)
    return "marginals" if spec is None else spec.report_section
