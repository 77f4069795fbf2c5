"""The evaluation report: the time section of a timed release (:mod:`synth.report`).

Shows, real against synthetic, the statistics of :mod:`synth.evaluate.trajectories`: the
hour-of-day profile, the sequence-length distribution, the gaps (in bins) between consecutive
points, and how many of the original's top timed and untimed transitions each release keeps, each
with its TV distance. The curves leave out the non-private truncation (``eps=inf``): it is the
original's own curve (its figures stay in the table).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from synth.report.formatting import NO_PRIVACY_PREFIX, html_table, new_figure, png_img

#: the id of the section's heading (a link target; the tests find the section by it)
SECTION_ID = "time"

_PANELS = (
    ("hour", "taps by hour of day", "hour of day", "share of taps"),
    ("length", "sequence length", "points per sequence (truncated to h)", "share of sequences"),
    ("gap", "gap between consecutive taps", "bins between taps", "share of gaps"),
)


def _figure(traj: Mapping[str, Any]) -> str:
    releases: Mapping[str, Any] = traj["releases"]
    fig, axes = new_figure("Time: real against synthetic", len(_PANELS) + 1)
    for ax, (key, title, xlabel, ylabel) in zip(axes, _PANELS, strict=False):
        xs, ys = zip(*traj["original"][key], strict=True) if traj["original"][key] else ((), ())
        ax.plot(xs, ys, color="black", lw=2, label="original", zorder=3)
        for name, rel in releases.items():
            if rel[key] and not name.startswith(NO_PRIVACY_PREFIX):  # the original itself
                rx, ry = zip(*rel[key], strict=True)
                ax.plot(rx, ry, marker=".", label=f"{name} (TV {rel['tv_' + key]:.3f})")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    ax = axes[-1]
    names = list(releases)
    top = traj["parameters"]["top"]
    width = 0.4
    at = list(range(len(names)))
    ax.bar(
        [x - width / 2 for x in at],
        [releases[n]["transitions_kept"] for n in names],
        width,
        label="location -> location",
    )
    ax.bar(
        [x + width / 2 for x in at],
        [releases[n]["timed_transitions_kept"] for n in names],
        width,
        label="(location, bin) -> (location, bin)",
    )
    ax.set_xticks(at, names, rotation=20, ha="right", fontsize=8)
    ax.set_ylim(0, top * 1.3)
    ax.set_title(f"top-{top} transitions kept")
    ax.set_ylabel(f"shared with the original's top {top}")
    ax.legend(fontsize=7, loc="upper right")
    return png_img(fig)


def trajectory_section(traj: Mapping[str, Any]) -> list[str]:
    """HTML of the ``trajectories`` entry of the results (empty when no release is timed)."""
    releases: Mapping[str, Any] = traj.get("releases") or {}
    if not releases:
        return []
    p = traj["parameters"]
    top = p["top"]
    rows = [
        [
            name,
            r["n_sequences"],
            round(r["mean_length"], 3),
            round(r["tv_length"], 4),
            round(r["tv_hour"], 4),
            round(r["tv_first_hour"], 4),
            round(r["tv_gap"], 4),
            r["transitions_kept"],
            r["timed_transitions_kept"],
        ]
        for name, r in releases.items()
    ]
    header = [
        "release",
        "sequences",
        "mean length",
        "TV length",
        "TV hour of day",
        "TV first hour",
        "TV gap",
        f"top-{top} transitions kept",
        f"top-{top} timed transitions kept",
    ]
    orig = traj["original"]
    intro = (
        f'<h3 id="{SECTION_ID}">Time: the daily profile, chain lengths and timed transitions</h3>'
        f"<p>Every sequence cut to its first h = {p['height']} taps, times floored to "
        f"{p['bin_minutes']}-minute bins and to hours; gaps in bins (capped at {p['gap_cap']}). "
        f"The original has {orig['n_sequences']:,} sequences of mean length "
        f"{orig['mean_length']:.2f}. TV: total variation distance to the original (0 = the "
        f"same); transitions kept: of the original's {top} most frequent, how many are among the "
        f"release's {top} most frequent.</p>"
    )
    timed = [f"{a}@{ab} → {b}@{bb}" for a, ab, b, bb in orig["top_timed_transitions"]]
    out = [intro, html_table(header, rows), _figure(traj)]
    out.append(
        "<details><summary>Most frequent timed transitions of the original (location@bin, "
        "exact)</summary>" + html_table(["transition"], [[t] for t in timed]) + "</details>"
    )
    if traj.get("untimed"):
        out.append(
            '<p class="note">Without times (not in this section): '
            + html.escape(", ".join(map(str, traj["untimed"])))
            + ".</p>"
        )
    return out
