"""Utility of releases: count queries, sequential patterns, marginals (docs/design.md section 6).

Sequences follow Chen et al. 2012 (sections 3.3 and 5.1); trips follow the NIST temporal map
challenge's k-marginal scoring. :func:`evaluate_sequences` / :func:`evaluate_trips` run everything
and return JSON-ready dictionaries; :mod:`synth.report` turns them into an HTML report.
"""

from __future__ import annotations

from synth.evaluate.counts import (
    CountIndex,
    Workload,
    count_query_errors,
    paper_workload,
    relative_errors,
)
from synth.evaluate.marginals import (
    discretise,
    k_marginal_score,
    marginal_tv,
    marginal_tvd,
    od_error,
    time_of_day,
    trips_per_individual,
)
from synth.evaluate.patterns import (
    Pattern,
    mine_top_k,
    pattern_support,
    pattern_utility,
    top_k_patterns,
    utility_curve,
)
from synth.evaluate.reference import against_reference
from synth.evaluate.suite import PAPER_KS, evaluate_sequences, evaluate_trips
from synth.evaluate.trajectories import evaluate_trajectories, trajectory_stats

__all__ = [
    "PAPER_KS",
    "CountIndex",
    "Pattern",
    "Workload",
    "against_reference",
    "count_query_errors",
    "discretise",
    "evaluate_sequences",
    "evaluate_trajectories",
    "evaluate_trips",
    "k_marginal_score",
    "marginal_tv",
    "marginal_tvd",
    "mine_top_k",
    "od_error",
    "paper_workload",
    "pattern_support",
    "pattern_utility",
    "relative_errors",
    "time_of_day",
    "top_k_patterns",
    "trajectory_stats",
    "trips_per_individual",
    "utility_curve",
]
