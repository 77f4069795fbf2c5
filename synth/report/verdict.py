"""The evaluation report: can this release be published, and for what? (:mod:`synth.report`).

Per release, a short checklist (the guarantee, then each measure against its threshold, in
plain words) and a traffic light per intended use: pattern mining, OD/flows and simulation
input. The thresholds are conventions of this report, fixed here (:data:`THRESHOLDS`) before any
data is read and printed in the report; they are not statistical tests and an agency should
adapt them to its use:

- a TV distance of 0.05 ("within 5%") moves at most 5% of a distribution's mass, about the
  rounding an analyst accepts in a published percentage table; 0.15 is three times that;
- pattern mining is judged against the truncated ceiling (a release of height h can at best find
  what the original cut to h holds): 80% of the ceiling
  means 4 in 5 of the findable top patterns are right; below 50%, most of the list is wrong;
- count queries on busy locations (the popularity workload) are the flows planners read; a
  relative error of 10% is taken as the order of the day-to-day variation of a line's boardings
  that planners already work with (an assumption of this report, not a measured figure), 25% is
  amber;
- trips: the k-marginal score of 1000 x (1 - mean TV) (NIST temporal map challenge) at 900 means
  a mean TV of 0.10 over 2-column distributions. A mean hides one bad column, so simulation input
  also holds every single column to the TV limits (green only when each column's TV is within
  0.05): the light is the worst of the score, the furthest column and the time profile.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from synth.report.formatting import NO_PRIVACY_PREFIX, ReleaseEntry, percent, term_link

__all__ = ["SECTION_ID", "THRESHOLDS", "USES", "fitness", "fitness_section"]

#: the id of the section's heading (the tests find it by it)
SECTION_ID = "verdict"
#: intended uses, in the order shown
USES = ("pattern mining", "OD/flows", "simulation input")
#: measure -> (green at or better, amber at or better): lower is better unless noted
THRESHOLDS: dict[str, tuple[float, float]] = {
    "tp_share_of_ceiling": (0.8, 0.5),  # higher is better
    "count_query_error": (0.10, 0.25),
    "tv": (0.05, 0.15),
    "k_marginal_score": (900.0, 750.0),  # higher is better
    "od_tv": (0.10, 0.25),
    "multi_boarding_ratio": (0.8, 0.5),  # synthetic share / real share; higher is better
}
_RANK = {"green": 0, "amber": 1, "red": 2}


def _light(value: float, key: str, higher: bool = False) -> str:
    green, amber = THRESHOLDS[key]
    if math.isnan(value):
        return "grey"
    if higher:
        return "green" if value >= green else "amber" if value >= amber else "red"
    return "green" if value <= green else "amber" if value <= amber else "red"


def _worst(*lights: str) -> str:
    shown = [x for x in lights if x in _RANK]
    return max(shown, key=_RANK.__getitem__) if shown else "grey"


def _yes(ok: bool) -> str:
    return "yes" if ok else "no"


def _guarantee(manifest: Mapping[str, Any] | None) -> str:
    if not manifest:
        return "guarantee: unknown (no manifest.json beside the release)"
    cap = manifest.get("guarantee") or manifest.get("cap") or {}
    text = f"guarantee: epsilon {float(cap.get('epsilon', math.nan)):g}"
    if float(cap.get("delta", 0.0)):
        text += f", delta {float(cap['delta']):.2g}"
    return text + f" per {manifest.get('privacy_unit')}"


def _baseline(results: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    for name, rel in results["releases"].items():
        if name != key and name.startswith(NO_PRIVACY_PREFIX):
            return rel
    return None


def _sequences(results: Mapping[str, Any], key: str) -> tuple[list[str], dict, list[str]]:
    rel = results["releases"][key]
    base = _baseline(results, key)
    ks = [p["k"] for p in rel["patterns"]]
    k = 100 if 100 in ks else max(ks)
    tp = next(p["tp"] for p in rel["patterns"] if p["k"] == k)
    ceiling = next(p["tp"] for p in base["patterns"] if p["k"] == k) if base else k
    share = tp / ceiling if ceiling else math.nan
    error = float(rel["count_queries"]["popularity"]["mean_relative_error"])
    tv_length = _tv_lengths(results["original"].get("lengths"), rel.get("lengths"))
    real_multi = results["original"].get("multi_share", math.nan)
    ratio = rel.get("multi_share", math.nan) / real_multi if real_multi else math.nan
    traj = ((results.get("trajectories") or {}).get("releases") or {}).get(key)
    tv_hour = float(traj["tv_hour"]) if traj else math.nan
    g_tv, a_tv = THRESHOLDS["tv"]
    g_err, _ = THRESHOLDS["count_query_error"]
    checks = [
        f"{term_link(f'top-{k} patterns', 'Travel pattern')} kept: {tp} (ceiling {ceiling})",
        f"{term_link('count queries', 'Count query')} on busy locations within "
        f"{g_err:.0%}: {_yes(error <= g_err)} ({percent(error)} average error)",
        f"{term_link('length distribution', 'Length distribution')} within {g_tv:.0%}: "
        f"{_yes(tv_length <= g_tv)} (TV {tv_length:.3f})",
        f"{term_link('multi-boarding', 'Multi-boarding share')} passengers: "
        f"{rel.get('multi_share', math.nan):.0%} synthetic, {real_multi:.0%} real",
    ]
    if traj:
        checks.append(
            f"{term_link('hour profile', 'Hour profile')} within {g_tv:.0%}: "
            f"{_yes(tv_hour <= g_tv)} (TV {tv_hour:.3f})"
        )
    shape = [_light(tv_length, "tv"), _light(ratio, "multi_boarding_ratio", higher=True)]
    if traj:
        shape.append(_light(tv_hour, "tv"))
    lights = {
        "pattern mining": (
            _light(share, "tp_share_of_ceiling", higher=True),
            f"{share:.0%} of the ceiling's top-{k} patterns found (green from 80%, amber from 50%)",
        ),
        "OD/flows": (
            _light(error, "count_query_error"),
            f"{percent(error)} average error of counts on busy locations (green to 10%, amber "
            "to 25%)",
        ),
        "simulation input": (
            _worst(*shape),
            f"chain lengths TV {tv_length:.3f}"
            + (f", hour profile TV {tv_hour:.3f}" if traj else "")
            + f", multi-boarding kept at {ratio:.0%} of real (green: every TV within "
            f"{g_tv:.0%} and 80% of the multi-boarding share kept; amber: TV within "
            f"{a_tv:.0%}, 50% kept)",
        ),
    }
    warnings = []
    if ratio < THRESHOLDS["multi_boarding_ratio"][0]:
        warnings.append(
            f"Transfer analysts: passengers with two or more boardings are under-represented "
            f"({rel.get('multi_share', math.nan):.0%} of synthetic passengers against "
            f"{real_multi:.0%} of real ones). Transfer counts and chain-based analyses from this "
            "release will be too low; single-boarding demand is over-stated."
        )
    return checks, lights, warnings


def _tv_lengths(a: Sequence[Sequence[float]] | None, b: Sequence[Sequence[float]] | None) -> float:
    if not a or not b:
        return math.nan
    pa, pb = dict((int(x), y) for x, y in a), dict((int(x), y) for x, y in b)
    return 0.5 * sum(abs(pa.get(n, 0.0) - pb.get(n, 0.0)) for n in set(pa) | set(pb))


def _trips(results: Mapping[str, Any], key: str) -> tuple[list[str], dict, list[str]]:
    rel = results["releases"][key]
    score = float(rel["k_marginal"]["score"])
    one_way = rel["marginals"]["one_way"]
    worst = max(one_way, key=one_way.get) if one_way else None
    g_tv, _ = THRESHOLDS["tv"]
    checks = [f"{term_link('k-marginal score', 'k-marginal score')}: {score:.0f} of 1000"]
    if worst is not None:
        checks.append(
            f"every single column within {g_tv:.0%} ({term_link('TV', 'TV distance')}): "
            f"{_yes(one_way[worst] <= g_tv)} (furthest: {worst}, TV {one_way[worst]:.3f})"
        )
    lights_shape = [_light(score, "k_marginal_score", higher=True)]
    limits = [f"k-marginal score {score:.0f} (green from 900, amber from 750)"]
    if worst is not None:  # a mean score hides one column off by more than the TV limit
        lights_shape.append(_light(float(one_way[worst]), "tv"))
        limits.append(
            f"every single column's TV, furthest {worst} {one_way[worst]:.3f} (green to "
            f"{g_tv:.2f}, amber to {THRESHOLDS['tv'][1]:.2f})"
        )
    if "time_of_day" in rel:
        tv = float(rel["time_of_day"]["tv"])
        checks.append(f"time profile within {g_tv:.0%}: {_yes(tv <= g_tv)} (TV {tv:.3f})")
        lights_shape.append(_light(tv, "tv"))
        limits.append("the time profile TV (green to 0.05, amber to 0.15)")
    od = rel.get("od") or []
    od_tv = sum(b["tv"] for b in od) / len(od) if od else math.nan
    if od:
        checks.append(
            f"{term_link('OD matrices', 'OD matrix')} within 10%: {_yes(od_tv <= 0.10)} "
            f"(mean TV {od_tv:.3f})"
        )
    lights = {
        "pattern mining": ("grey", "does not apply: trips are not linked into journeys"),
        "OD/flows": (
            _light(od_tv, "od_tv"),
            f"mean OD TV {od_tv:.3f} (green to 0.10, amber to 0.25)"
            if od
            else "not measured: the trips have no origin and destination",
        ),
        "simulation input": (
            _worst(*lights_shape),
            "the worst of: " + "; ".join(limits),
        ),
    }
    return checks, lights, []


def fitness(entry: ReleaseEntry) -> tuple[list[str], dict[str, tuple[str, str]], list[str]]:
    """The checklist (HTML items), the traffic light and reason per use, and warnings of
    ``entry``."""
    first = _guarantee(entry.manifest)
    if entry.results is not None and entry.key is not None:
        if entry.results["kind"] == "sequences":
            checks, lights, warnings = _sequences(entry.results, entry.key)
        else:
            checks, lights, warnings = _trips(entry.results, entry.key)
        return [html.escape(first), *checks], lights, warnings
    check = f"reference check: {entry.verdict}" if entry.verdict else "not evaluated"
    lights = {
        "pattern mining": ("grey", "does not apply: counts per stop and time, no sequences"),
        "OD/flows": ("grey", "does not apply: counts per location, no origin-destination pairs"),
        "simulation input": ("grey", "does not apply: aggregate counts, no individual rows"),
    }
    return [html.escape(first), html.escape(check)], lights, []


def fitness_section(entries: Sequence[ReleaseEntry]) -> str:
    """The verdict section: per release (the non-private ceiling left out), its checklist, a
    table of traffic lights per intended use with the thresholds, and warnings."""
    sequences = any(e.results is not None and e.results["kind"] == "sequences" for e in entries)
    ceiling = (
        "; pattern mining is judged against the "
        + term_link("truncated ceiling", "Truncated ceiling")
        if sequences
        else ""
    )
    parts = [
        f'<h2 id="{SECTION_ID}">Fit to publish, and for what?</h2>',
        '<p class="note">Each release is checked against fixed limits: conventions of this '
        "report, stated beside each light and chosen before looking at any data (a TV distance "
        "of 0.05 moves 5% of a distribution, about the rounding of a published percentage "
        f"table{ceiling}). They are not statistical tests: adapt them to your use. "
        + term_link("Traffic light", "Traffic light")
        + ": green fit, amber usable with care, red not fit, grey does not apply.</p>",
    ]
    for e in entries:
        if e.manifest is None and e.name.startswith(NO_PRIVACY_PREFIX):
            continue
        checks, lights, warnings = fitness(e)
        rows = "".join(
            f'<tr><td>{html.escape(use)}</td><td class="light {light}"><span>\u25cf</span> '
            f"{light}</td>"
            f'<td class="text">{html.escape(why)}</td></tr>'
            for use, (light, why) in lights.items()
        )
        parts.append(
            f'<div class="fitness" data-release="{html.escape(e.name)}">'
            f"<h3>{html.escape(e.name)}</h3>"
            '<ul class="checklist">' + "".join(f"<li>{c}</li>" for c in checks) + "</ul>"
            '<table class="verdict"><tr><th>intended use</th><th>verdict</th>'
            f"<th>why (the limits applied)</th></tr>{rows}</table>"
            + "".join(f'<p class="warning">{html.escape(w)}</p>' for w in warnings)
            + "</div>"
        )
    return "".join(parts)
