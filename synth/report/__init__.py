"""The evaluation report: a self-contained HTML page for the data holder (docs/design.md section 6).

The page compares synthetic releases with the ORIGINAL data, so it is an internal file: its first
heading says so (:data:`synth.internal.INTERNAL_NOTICE`) and its file name starts with ``private-``.
It opens with a summary, one row per release: what it is, its privacy unit, epsilon and delta in
words, and a one-line verdict against the original with the figure behind it. Then, per evaluation,
small figures (labels computed from the data) and tables: for sequences the measures of Chen et al.
2012 (count-query error per query-length subset, their Figure 3; top-k sequential patterns, TP and
FD, their Table 3); for trips the k-marginal score of the NIST temporal map challenge, one-way
distances, the time distribution, trips per individual and the origin-destination error. Each
release's privacy manifest appears once, collapsed, as a table of its spends.

The package: :mod:`~synth.report.formatting`, :mod:`~synth.report.summary` (summary table and
verdicts), :mod:`~synth.report.sections` (per evaluation), :mod:`~synth.report.manifests` and
:mod:`~synth.report.pages` (whole pages).
"""

from synth.report.formatting import GLOSSARY, REPORT_FILE, RESULTS_FILE, glossary
from synth.report.manifests import manifest_section, reference_section, table_section
from synth.report.pages import render_demo, render_page, render_report, write_html, write_report
from synth.report.sections import evaluation_sections
from synth.report.summary import (
    ReleaseEntry,
    privacy_in_words,
    reference_verdict,
    release_description,
    summary_section,
    verdict,
)

__all__ = [
    "GLOSSARY",
    "REPORT_FILE",
    "RESULTS_FILE",
    "ReleaseEntry",
    "evaluation_sections",
    "glossary",
    "manifest_section",
    "privacy_in_words",
    "reference_section",
    "reference_verdict",
    "release_description",
    "render_demo",
    "render_page",
    "render_report",
    "summary_section",
    "table_section",
    "verdict",
    "write_html",
    "write_report",
]
