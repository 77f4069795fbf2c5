"""The audit's findings: one section per check, with remedies (:mod:`synth.audit.report`)."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import pandas as pd

from synth import registry
from synth.audit.differencing import difference_tables
from synth.audit.release import AuditedRelease
from synth.audit.scale import Model, fit_scale, named_pairs, paired_counts, route_pairs
from synth.audit.zeros import check_zeros

SEVERITIES: tuple[str, ...] = ("high", "medium", "low", "info")


MAX_LISTED = 25


def make_finding(
    check: str,
    severity: str,
    title: str,
    detail: str,
    remedy: str,
    *,
    command: str | None = None,
    **data: Any,
) -> dict:
    return {
        "check": check,
        "severity": severity,
        "title": title,
        "detail": detail,
        "remedy": remedy,
        "command": command,
        "data": data,
    }


#: Upper-case words of a remedy's command that the audit cannot know, and what to put there.
PLACEHOLDERS = {
    "INPUT": "the private table the release was made from",
    "TAX": "the public location taxonomy (CSV edge list or GTFS zip)",
    "MODES": "the public comma-separated list of modes",
    "DAYS": "the public days (comma-separated ISO dates, or FIRST:LAST)",
    "EPSILON": "the epsilon to spend",
    "DELTA": "the delta to spend",
    "NEW_DIR": "a new release directory",
}


def marginals_command(release: AuditedRelease, kind: str) -> str:
    """A ``transit-synth marginals`` command re-making ``release`` with ``--consistent`` or
    ``--pure``: its public parameters from the manifest, placeholders (:data:`PLACEHOLDERS`) for
    the rest."""
    p = release.parameters
    marginals = registry.get("marginals")  # the Opal release's command makes the remedy
    opal = registry.for_manifest(release.manifest) is marginals
    argv = ["transit-synth", marginals.kind, "INPUT", f"--{kind}"]
    argv += ["--epsilon", _number(p.get("epsilon_per_partition"), "EPSILON") if opal else "EPSILON"]
    argv += ["--delta", _number(p.get("delta_per_partition"), "DELTA") if opal else "DELTA"]
    if opal and p.get("location_column"):
        argv += ["--location-column", str(p["location_column"])]
    if opal and p.get("bin_minutes"):
        argv += ["--bin", str(int(p["bin_minutes"]))]
    if opal and p.get("taxonomy"):
        argv += ["--taxonomy", str(p["taxonomy"])]
        if p.get("level") is not None:
            argv += ["--level", str(int(p["level"]))]
    elif kind == "pure":
        argv += ["--taxonomy", "TAX"]
    modes, days = (p.get("modes"), p.get("days")) if opal else (None, None)
    if modes or kind == "pure":
        argv += ["--modes", ",".join(map(str, modes)) if modes else "MODES"]
    if days or kind == "pure":
        argv += ["--days", ",".join(map(str, days)) if days else "DAYS"]
    if opal and str(p.get("budget_scope", "")).startswith("the whole release"):
        argv += ["--privacy-unit", str(p.get("privacy_unit"))]
        argv += ["--max-contributions", str(int(p.get("max_contributions") or 1))]
    return shlex.join([*argv, "--out", "NEW_DIR"])


def _min_count_hint(release: AuditedRelease, tables: set[str], current: int | None) -> int:
    """A --min-count above the suppression threshold of the paired tables (twice the largest)."""
    thresholds = [
        float(s["threshold"])
        for s in release.spends
        if s.get("label") in tables and s.get("threshold") is not None
    ]
    return max(int(2 * max(thresholds, default=10)), 2 * (current or 0), 1)


def _number(value: Any, placeholder: str) -> str:
    return placeholder if value is None else f"{float(value):g}"


def _audit_command(release: AuditedRelease, routes: Sequence[tuple[str, str, int]], n: int) -> str:
    argv = ["transit-synth", "audit", str(release.path)]
    for origin, destination, minutes in routes:
        argv += ["--route", origin, destination, str(minutes)]
    return shlex.join([*argv, "--min-count", str(n)])


# --------------------------------------------------------------------------- scale
def scale_section(
    release: AuditedRelease,
    routes: Sequence[tuple[str, str, int]],
    pairs: pd.DataFrame | None,
    model: str,
    confidence: float,
    min_count: int | None,
) -> tuple[dict[str, Any], list[dict]]:
    frames, tables = [], set()
    for origin, destination, minutes in routes:
        frames.append(route_pairs(release, origin, destination, minutes))
        tables |= {"on_time_location", "off_time_location"}
    if pairs is not None:
        frames.append(named_pairs(release, pairs))
        tables |= set(pairs["table_a"].astype(str)) | set(pairs["table_b"].astype(str))
    findings = _missing_scale_findings(release)
    if not frames:  # not a finding: the page says how to run it
        return {"run": False}, findings
    data = paired_counts(frames, min_count)
    noises = [n for n in (release.noise(t) for t in sorted(tables)) if n is not None]
    if model == "auto":
        model = _noise_model(noises)
    diffs = (data["a"].astype(float) - data["b"].astype(float)).to_numpy()
    section: dict[str, Any] = {
        "run": True,
        "pairs": len(data),
        "unpaired": int(data.attrs.get("missing", 0)),
        "model": model,
        "differences": diffs.astype(int).tolist() if np.all(diffs == np.round(diffs)) else [],
    }
    if len(data) < 2:
        findings.append(
            make_finding(
                "scale",
                "info",
                "Too few released pairs to recover the scale",
                f"{len(data)} pair(s) had both counts released "
                f"({section['unpaired']} had a suppressed side).",
                "Name more pairs, or none is needed: the manifest states the scale.",
            )
        )
        return section, findings
    est = fit_scale(diffs, model=cast(Model, model), confidence=confidence)
    section["estimate"] = est.to_dict()
    stated = sorted({n.scale for n in noises})
    section["manifest_scales"] = stated
    ci = f"{est.scale:.3g} ({confidence:.0%} interval {est.lower:.3g} to {est.upper:.3g})"
    base = (
        f"From {est.n} paired counts ({section['unpaired']} pairs had a suppressed side), the "
        f"noise scale is {ci}, fitted as {model} noise."
    )

    def hint() -> str:  # only the "low" finding needs it
        return _audit_command(release, routes, _min_count_hint(release, tables, min_count))

    findings.append(_scale_verdict(est, base, stated, hint))
    return section, findings


def _missing_scale_findings(release: AuditedRelease) -> list[dict]:
    missing_scale = sorted({str(s.get("label")) for s in release.spends if s.get("scale") is None})
    if not missing_scale:
        return []
    return [
        make_finding(
            "scale",
            "medium",
            "The manifest does not publish every noise scale",
            f"No scale is recorded for: {', '.join(missing_scale)}. The scale can be "
            "recovered from the data anyway (Culnane et al. 2017, section 2); hiding it "
            "only hurts analysts.",
            "Publish the mechanism, its scale and threshold for every table.",
        )
    ]


def _noise_model(noises: Sequence[Any]) -> str:
    """The model ``auto`` picks from the manifest's noises."""
    return (
        "gaussian"
        if any(n.gaussian for n in noises)
        else "discrete"
        if noises and all(n.discrete for n in noises)
        else "laplace"
    )


def _scale_verdict(est: Any, base: str, stated: list[float], command: Callable[[], str]) -> dict:
    """The finding comparing the recovered scale ``est`` with the ``stated`` ones."""
    if not stated:
        return make_finding(
            "scale",
            "medium",
            f"Noise scale recovered from the data: {est.scale:.3g}",
            base + " The manifest does not state it.",
            "Publish the scale: it is recoverable anyway, and analysts need it.",
            recovered=est.scale,
        )
    if any(s > est.upper for s in stated):
        return make_finding(
            "scale",
            "high",
            "The release carries less noise than its manifest states",
            base + f" The manifest states {', '.join(f'{s:g}' for s in stated)}, above the "
            "interval: the privacy claim may be overstated (or the pairs do not share one "
            "raw value).",
            "Check the noise generation before publishing; re-run the release.",
            recovered=est.scale,
            stated=stated,
        )
    if any(s < est.lower for s in stated):
        return make_finding(
            "scale",
            "low",
            "The paired counts differ more than the stated noise explains",
            base + f" The manifest states {', '.join(f'{s:g}' for s in stated)}, below the "
            "interval: the pairs probably do not share one raw value (people who do not tap "
            "off, trips across bins), or pairs near the threshold were kept.",
            "Check the pairs named; raise --min-count to drop pairs near the threshold.",
            command=command(),
            recovered=est.scale,
            stated=stated,
        )
    return make_finding(
        "scale",
        "info",
        "The recovered noise scale matches the manifest",
        base + f" The manifest states {', '.join(f'{s:g}' for s in stated)}. Anyone can "
        "recover it, which is fine: differential privacy does not rely on its secrecy.",
        "None needed; keep publishing the parameters.",
        recovered=est.scale,
        stated=stated,
    )


# --------------------------------------------------------------------------- zeros
def zeros_section(release: AuditedRelease) -> tuple[dict[str, Any], list[dict]]:
    checks = check_zeros(release)
    findings = [f for f in (_zeros_finding(c, release) for c in checks) if f is not None]
    bounds = [c.theorem1_delta for c in checks if c.theorem1_delta is not None]
    exact = [c.delta_lower_bound for c in checks if c.delta_lower_bound is not None]
    section = {
        "checks": [c.to_dict() for c in checks],
        "theorem1_delta": max(bounds) if bounds else None,
        "delta_lower_bound": max(exact) if exact else None,
    }
    return section, findings


def _zeros_finding(c: Any, release: AuditedRelease) -> dict | None:
    """The finding of one zero-count check (none when zeros are known unperturbed and no bound
    applies)."""
    where = f"'{c.label}' ({c.mechanism}, applied {c.applications}x)"
    if c.zeros_perturbed is True:
        return make_finding(
            "zeros",
            "info",
            f"{c.label}: cells absent from the input can be released",
            f"{where} perturbs every cell of its public domain, zeros included, so a "
            "released cell does not prove that anyone was there.",
            "None needed.",
            label=c.label,
        )
    elif c.zeros_perturbed is None:
        return make_finding(
            "zeros",
            "medium",
            f"{c.label}: the manifest does not say whether zero counts were perturbed",
            f"{where}: if only non-zero counts were perturbed, a released cell proves "
            "presence (Culnane et al. 2017, Theorem 1) and the release cannot be pure "
            "epsilon-DP.",
            "Record in the manifest whether every cell of the public domain was perturbed.",
            label=c.label,
        )
    elif c.delta_lower_bound is not None:
        groups = ", ".join(f"{g}: {p:.2g}" for g, p in c.group_delta.items())
        detail = (
            f"{where} perturbs only counts present in the data (threshold {c.threshold:g}, "
            f"scale {c.scale:g}). A released cell can only come from a non-zero count, so it "
            "proves that at least one person was there. The chance that one person alone in "
            f"a cell is revealed is {c.delta_lower_bound:.3g} (Theorem 1 of Culnane et al. "
            f"2017 as published: "
            f"{c.theorem1_delta:.3g}); for groups of {groups}."
        )
        if c.understated:
            return make_finding(
                "zeros",
                "high",
                f"{c.label}: claims delta = {c.claimed_delta:g}, but Theorem 1 proves "
                f"delta >= {c.delta_lower_bound:.3g}",
                detail + " No epsilon-DP claim can hold for this table.",
                "Perturb every cell of the public domain, zeros included (transit-synth "
                "marginals --pure), or state the delta honestly.",
                command=marginals_command(release, "pure"),
                label=c.label,
                theorem1_delta=c.theorem1_delta,
                delta_lower_bound=c.delta_lower_bound,
            )
        else:
            return make_finding(
                "zeros",
                "low",
                f"{c.label}: a released cell proves presence with probability "
                f"<= {c.delta_lower_bound:.3g} (accounted for in its delta)",
                detail + f" The manifest's delta {c.claimed_delta:.3g} covers it: the "
                "release is (epsilon, delta)-DP by design.",
                "Acceptable if that probability is; for pure epsilon-DP perturb zeros "
                "too (transit-synth marginals --pure).",
                command=marginals_command(release, "pure"),
                label=c.label,
                theorem1_delta=c.theorem1_delta,
                delta_lower_bound=c.delta_lower_bound,
            )
    return None


# --------------------------------------------------------------------------- differencing
def differencing_section(
    release: AuditedRelease, confidence: float
) -> tuple[dict[str, Any], list[dict]]:
    rows = difference_tables(release, confidence=confidence)
    findings = []
    section: dict[str, Any] = {"confidence": confidence, "skipped": rows.attrs["skipped"]}
    pairs = []
    for (fine, coarse), g in rows.groupby(["fine", "coarse"], sort=True):
        flagged = g.loc[g["flagged"]].sort_values("lower", ascending=False)
        info: dict[str, Any] = {
            "fine": fine,
            "coarse": coarse,
            "rows": len(g),
            "flagged": len(flagged),
            "flagged_family": int(g["flagged_family"].sum()),
            "derived": bool(g["derived"].all()),
            "expected_false_flags": len(g) * (1 - confidence) / 2,  # one-sided, no leak
            "flagged_rows": flagged.head(MAX_LISTED).to_dict(orient="records"),
        }
        pairs.append(info)
        findings.append(_pair_finding(release, g, flagged, info, confidence))
    section["pairs"] = pairs
    section["flagged"] = int(rows["flagged"].sum()) if len(rows) else 0
    return section, findings


def _pair_finding(
    release: AuditedRelease,
    g: pd.DataFrame,
    flagged: pd.DataFrame,
    info: dict[str, Any],
    confidence: float,
) -> dict:
    """The finding of one (fine, coarse) pair of tables: derived or differenced."""
    fine, coarse = info["fine"], info["coarse"]
    what = f"'{coarse}' against '{fine}'"
    if info["derived"]:
        off = int((g["estimate"] != 0).sum())
        if off:
            return make_finding(
                "differencing",
                "medium",
                f"{coarse}: stated as summed from {fine}, but {off} row(s) do not add up",
                f"The manifest says {what} is derived, yet {off} of {len(g)} coarse "
                "counts differ from the sum of the released fine cells.",
                "Re-derive the coarse table from the released fine table "
                "(transit-synth marginals --consistent does).",
                command=marginals_command(release, "consistent"),
                **{k: v for k, v in info.items() if k != "flagged_rows"},
            )
        else:
            return make_finding(
                "differencing",
                "info",
                f"{coarse} is the sum of {fine}: nothing to recover",
                f"Every one of the {len(g)} counts of {what} equals the sum of the "
                "released fine cells, so differencing reveals nothing about suppressed "
                "cells (the consistent release that Culnane et al. 2017, section 4, "
                "recommend).",
                "None needed.",
                **{k: v for k, v in info.items() if k != "flagged_rows"},
            )
    chance = len(g) * (1 - confidence) / 2
    if info["flagged_family"] or len(flagged) > chance + 2 * chance**0.5:
        top = flagged.iloc[0]
        return make_finding(
            "differencing",
            "medium" if info["flagged_family"] else "low",
            f"{len(flagged)} suppressed total(s) of {fine} recovered from {coarse}",
            f"Differencing {what} ({len(g)} rows) estimates the total of the suppressed "
            f"cells of a row; in {len(flagged)} rows the {confidence:.0%} interval is "
            f"above zero ({info['flagged_family']} remain so after a Bonferroni "
            f"correction over the rows; about {info['expected_false_flags']:.1f} would "
            f"by chance). Largest: {top['cell']}: {int(top['estimate'])} people "
            f"(between {top['lower']:g} and {top['upper']:g}) in cells the fine table "
            "suppressed. This stays within the stated epsilon (the tables' budgets "
            "add up), but suppression does not hide those cells.",
            "Release only the fine table with noise and derive the coarse tables by "
            "summing it (transit-synth marginals --consistent).",
            command=marginals_command(release, "consistent"),
            **{k: v for k, v in info.items() if k != "flagged_rows"},
        )
    else:
        return make_finding(
            "differencing",
            "info",
            f"{coarse} vs {fine}: no suppressed total recovered",
            f"{len(flagged)} of the {len(g)} rows of {what} have an interval above zero, "
            f"no more than chance gives (about {chance:.1f}), and none after a Bonferroni "
            "correction over the rows.",
            "None needed.",
            **{k: v for k, v in info.items() if k != "flagged_rows"},
        )
