"""The whole evaluation of one original table against one or more synthetic releases.

:func:`evaluate_sequences` runs the utility measures of Chen et al. 2012 (sections 3.3, 5.1):
count queries on the uniform and popularity workloads, and TP / FP / FD of the top-k sequential
patterns for several k (Table 3). :func:`evaluate_trips` runs the marginal measures of trip tables.
Both return plain JSON-ready dictionaries that :mod:`synth.report` renders; several releases are
compared side by side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from synth.errors import ConfigError, InputError
from synth.evaluate.counts import SANITY_FRACTION, CountIndex, count_query_errors, paper_workload
from synth.evaluate.marginals import (
    discretise,
    k_marginal_score,
    marginal_tvd,
    od_error,
    time_axis,
    time_of_day,
    trips_per_individual,
)
from synth.evaluate.patterns import top_k_patterns, utility_curve
from synth.evaluate.shape import length_profile, pattern_supports, sample_rows

__all__ = ["evaluate_sequences", "evaluate_trips"]

#: The k values of the paper's Table 3.
PAPER_KS = (100, 150, 200, 250, 300)
N_TOP_SHOWN = 20


def _releases(synthetic: Mapping[str, pd.DataFrame]) -> Mapping[str, pd.DataFrame]:
    if not synthetic:
        raise ConfigError("give at least one synthetic release to evaluate")
    return synthetic


def evaluate_sequences(
    original: pd.DataFrame,
    synthetic: Mapping[str, pd.DataFrame],
    *,
    universe: Sequence[str] | None = None,
    height: int = 12,
    n_queries: int = 40_000,
    ks: Sequence[int] = PAPER_KS,
    seed: int = 0,
    sanity_fraction: float = SANITY_FRACTION,
) -> dict[str, Any]:
    """Count-query errors and top-k pattern TP/FP/FD of each synthetic release against ``original``.

    ``universe`` is the public location universe the queries draw from (e.g. the taxonomy leaves);
    when ``None`` it is the set of locations of ``original`` (never of a synthetic release), and
    the result says so. ``height`` is the ``h`` of the workload (subset i has lengths in ``[1,
    i*h/4]``).
    """
    releases = _releases(synthetic)
    if not ks or min(ks) < 1:
        raise ConfigError("ks must be positive integers")
    source = "given" if universe is not None else "original data"
    locations = sorted(
        map(str, universe if universe is not None else original["location"].unique())
    )
    orig_index = CountIndex.from_sequences(original, locations)
    workloads = [
        paper_workload(len(locations), height, n_queries=n_queries, seed=seed),
        paper_workload(
            len(locations), height, n_queries=n_queries, weights=orig_index.support_, seed=seed + 1
        ),
    ]
    answers = [orig_index.count(w.queries) for w in workloads]
    k_max = max(ks)
    orig_top = top_k_patterns(original, k_max)
    result: dict[str, Any] = {
        "kind": "sequences",
        "parameters": {
            "height": height,
            "n_queries": n_queries,
            "seed": seed,
            "sanity_fraction": sanity_fraction,
            "ks": sorted(ks),
            "universe_source": source,
            "universe_size": len(locations),
        },
        "original": {
            "n_sequences": orig_index.n_sequences_,
            "n_records": len(original),
            "records_outside_universe": orig_index.n_outside_,
            "top_patterns": [[list(p), s] for p, s in orig_top[:N_TOP_SHOWN]],
            **length_profile(original, height),
        },
        "releases": {},
    }
    shown = [p for p, _ in orig_top[:N_TOP_SHOWN]]
    for name, synth in releases.items():
        index = CountIndex.from_sequences(synth, locations)
        top = top_k_patterns(synth, k_max)
        result["releases"][name] = {
            "n_sequences": index.n_sequences_,
            "n_records": len(synth),
            "records_outside_universe": index.n_outside_,
            "count_queries": {
                w.kind: count_query_errors(
                    true,
                    index.count(w.queries),
                    w,
                    orig_index.n_sequences_,
                    sanity_fraction=sanity_fraction,
                )
                for w, true in zip(workloads, answers, strict=True)
            },
            "patterns": utility_curve(orig_top, top, sorted(ks)),
            "top_patterns": [[list(p), s] for p, s in top[:N_TOP_SHOWN]],
            "original_top_supports": pattern_supports(synth, shown),
            **length_profile(synth, height),
            "sample_rows": sample_rows(synth),
        }
    return result


def evaluate_trips(
    original: pd.DataFrame,
    synthetic: Mapping[str, pd.DataFrame],
    *,
    id_column: str = "card_id",
    time_column: str = "on_time",
    origin: str | None = "on_stop",
    destination: str | None = "off_stop",
    exclude: Sequence[str] = (),
    n_marginals: int = 50,
    seed: int = 0,
    n_bins: int = 10,
    max_categories: int = 50,
) -> dict[str, Any]:
    """Marginal TV distances, the k-marginal score, OD error and trip distributions of each release.

    Every column of ``original`` except ``id_column`` and ``exclude`` enters the marginals; a
    release lacking one of them (or having columns the original lacks) is refused with
    :class:`InputError`. Measures whose columns the original does not have (or that do not apply,
    such as trips per individual when every individual has one trip) are explained in plain words
    under ``skipped``.
    """
    releases = _releases(synthetic)
    skip_cols = {id_column, *exclude}
    columns = [c for c in original.columns if c not in skip_cols]
    result: dict[str, Any] = {
        "kind": "trips",
        "parameters": {
            "id_column": id_column,
            "time_column": time_column,
            "origin": origin,
            "destination": destination,
            "n_marginals": n_marginals,
            "seed": seed,
            "n_bins": n_bins,
            "max_categories": max_categories,
            "columns": columns,
        },
        "original": {"n_trips": len(original)},
        "releases": {},
        "skipped": [],
    }
    skipped = _not_measured(original, id_column, time_column, origin, destination)
    result["skipped"] = list(skipped.values())
    has_id = "trips_per_individual" not in skipped
    has_time = "time_of_day" not in skipped
    has_od = "od" not in skipped
    if id_column in original.columns:
        result["original"]["n_individuals"] = int(original[id_column].nunique())
    if has_time:
        result["parameters"]["time_axis"] = time_axis(original[time_column], time_column)
    for name, synth in releases.items():
        entry = _marginal_entry(
            name, original, synth, columns, skip_cols, n_marginals, seed, n_bins, max_categories
        )
        if has_id:
            entry["trips_per_individual"] = trips_per_individual(
                original, synth, id_column=id_column
            )
            entry["n_individuals"] = int(synth[id_column].nunique())
        if has_time:
            entry["time_of_day"] = time_of_day(original, synth, time_column=time_column)
        if has_od:
            entry["od"] = od_error(
                original,
                synth,
                origin=str(origin),
                destination=str(destination),
                time_column=time_column,
            )
        entry["sample_rows"] = sample_rows(synth)
        result["releases"][name] = entry
    return result


def _marginal_entry(
    name: str,
    original: pd.DataFrame,
    synth: pd.DataFrame,
    columns: list[str],
    skip_cols: set[str],
    n_marginals: int,
    seed: int,
    n_bins: int,
    max_categories: int,
) -> dict[str, Any]:
    """A release's trip count, k-marginal score and marginal TV distances (its schema checked)."""
    extra = sorted(set(synth.columns) - set(original.columns) - skip_cols)
    if extra:
        raise InputError(
            f"release {name!r}: schemas differ: columns {', '.join(extra)} not in the original"
        )
    try:
        codes_o, codes_s, cols = discretise(
            original, synth, columns=columns, n_bins=n_bins, max_categories=max_categories
        )
    except InputError as exc:
        raise InputError(f"release {name!r}: {exc}") from None
    return {
        "n_trips": len(synth),
        "k_marginal": k_marginal_score(codes_o, codes_s, cols, n_marginals=n_marginals, seed=seed),
        "marginals": marginal_tvd(codes_o, codes_s, cols),
    }


def _not_measured(
    original: pd.DataFrame,
    id_column: str,
    time_column: str,
    origin: str | None,
    destination: str | None,
) -> dict[str, str]:
    """Per trip measure that cannot be computed on ``original``, a plain sentence saying why."""
    out = {}
    cols = set(original.columns)
    if id_column not in cols:
        out["trips_per_individual"] = (
            f"Trips per individual: not measured: the original has no individual id column "
            f"'{id_column}' (transit-synth evaluate --id-column names it)."
        )
    elif original[id_column].nunique() == len(original):
        out["trips_per_individual"] = (
            "Trips per individual: not applicable: every individual of the original has exactly "
            f"one trip ('{id_column}' does not link the trips of one person or vehicle)."
        )
    if time_column not in cols:
        out["time_of_day"] = (
            f"Time of day: not measured: the original has no time column '{time_column}' "
            "(transit-synth evaluate --time-column names it)."
        )
    if origin is None or destination is None:
        side = "origin" if origin is None else "destination"
        out["od"] = (
            f"Origin-destination matrices: not measured: the trips record no {side} (only "
            f"where each trip {'ends' if origin is None else 'starts'}), so there is no "
            "origin-destination pair to compare."
        )
    elif time_column not in cols or not {origin, destination} <= cols:
        lacking = [c for c in (origin, destination, time_column) if c not in cols]
        out["od"] = (
            "Origin-destination matrices: not measured: the original has no column "
            + ", ".join(f"'{c}'" for c in lacking)
            + " (transit-synth evaluate --origin-column, --destination-column and --time-column "
            "name them)."
        )
    return out
