"""The parameter table of :class:`~archetypes.synthesizer.ArchetypeSynthesizer` (GooseDP, the NIST
2020 challenge): one row per constructor keyword, from which its validator, the
``[trips.parameters]`` config schema and the ``transit-synth trips`` flags are generated
(:mod:`synth.params`)."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from archetypes.schema import TripSchema
from synth.params import (
    COLUMNS,
    STRING,
    InstanceOf,
    Interval,
    Param,
    ParamTable,
    Satisfies,
    comma_list,
    toml_value,
)

__all__ = ["PARAMS", "completion_plan"]

GOOSE = "GooseDP, NIST 2020"


def _is_plan(value: object) -> bool:
    return isinstance(value, Sequence) and all(
        isinstance(step, Sequence)
        and not isinstance(step, str)
        and len(step) == 2
        and isinstance(step[0], str)
        and isinstance(step[1], Sequence)
        and all(isinstance(c, str) for c in step[1])
        for step in value
    )


def _is_shares(value: object) -> bool:
    if isinstance(value, np.ndarray):
        return value.ndim == 1 and _is_shares(value.tolist())
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in value)
    )


def completion_plan(value: Any) -> Any:
    """A config's or a flag's completion plan (TOML lists) as ``[(target, (columns...)), ...]``."""
    if isinstance(value, str):
        value = toml_value(value)
    if not isinstance(value, list):
        return value  # refused by the constraint
    try:
        return [(str(t), tuple(c)) for t, c in value]
    except (TypeError, ValueError):
        raise ValueError("expected [[TARGET, [COLUMN, ...]], ...]") from None


def _shares(value: Any) -> Any:
    return tuple(value) if isinstance(value, list | tuple) else value


SWITCH_OR_OPTIONS = InstanceOf((bool, Mapping), "true, false or a table of options")

PARAMS = ParamTable(
    "ArchetypeSynthesizer",
    [
        Param(
            "epsilon",
            (Interval("real", 0, None, "neither"),),
            "total epsilon per individual (required unless the --config file gives it)",
            metavar="E",
        ),
        Param(
            "delta",
            (Interval("real", 0, 1, "neither"),),
            "total delta per individual (required unless the --config file gives it)",
            metavar="D",
        ),
        Param(
            "key_columns",
            (COLUMNS,),
            "comma-separated key columns: modelled by the joint model (joint = false: drawn "
            "jointly per archetype)",
            metavar="COLS",
            parse=comma_list,
        ),
        Param(
            "category_column",
            (STRING,),
            "per-individual category column (its noisy histogram is released)",
            metavar="COL",
        ),
        Param(
            "id_column",
            (STRING,),
            "the individual's id column",
            default="individual_id",
            metavar="COL",
        ),
        Param(
            "archetypes",
            (Interval("integer", 1),),
            "number of archetypes (components of the mixture)",
            default=10,
            metavar="K",
            renamed_from="n_archetypes",
            source=GOOSE,
        ),
        Param(
            "features",
            (None, COLUMNS),
            "comma-separated numeric columns the mixture clusters (default: the numeric key "
            "columns)",
            default=None,
            metavar="COLS",
            parse=comma_list,
        ),
        Param(
            "completion",
            (Satisfies(_is_plan, "a list of [target, [conditioning columns]]"),),
            "columns filled after the key columns, in order, as TOML: "
            '\'[["fare", ["trip_miles"]], ...]\' (default: none)',
            default=(),
            metavar="PLAN",
            parse=completion_plan,
            from_toml=completion_plan,
        ),
        Param(
            "schema",
            (None, InstanceOf((TripSchema, str, Path), "a TripSchema or a JSON path")),
            "public column domains (JSON)",
            default=None,
            metavar="FILE",
            in_table=True,
        ),
        Param(
            "budget_split",
            (Satisfies(_is_shares, "a list of shares"),),
            "shares of (epsilon, delta) for the archetype and the category histograms, a third "
            "for --marginals, and a first one for the stand-in; they may sum to less than 1 (in "
            "the joint mode they split what the joint tables leave, and the stand-in's and "
            "marginals' shares go to the tables)",
            default=(0.1, 0.9),
            metavar="S",
            nargs="+",
            parse=float,
            collect=tuple,
            from_toml=_shares,
        ),
        Param(
            "marginals",
            (COLUMNS,),
            "comma-separated extra columns whose one-way histograms are released (joint = false; "
            "the joint model measures every column)",
            default=(),
            metavar="COLS",
            parse=comma_list,
        ),
        Param(
            "marginals_by_archetype",
            (InstanceOf(bool, "true or false"),),
            "release the --marginals per archetype (archetype x value cells)",
            default=False,
            switch=True,
        ),
        Param(
            "marginal_bins",
            (Interval("integer", 1),),
            "numeric marginal columns with more distinct public values get this many bins at "
            "public quantiles",
            default=64,
            metavar="N",
        ),
        Param(
            "public_stand_in",
            (None, SWITCH_OR_OPTIONS),
            "no public trips, even if the --config names some: the joint model stands in for "
            "them; with joint = false an SBH release of PRIVATE does, on the first budget_split "
            "share (public_stand_in in the --config parameters sets its options)",
            default=None,
            switch=True,
        ),
        Param(
            "joint",
            (None, SWITCH_OR_OPTIONS),
            "the joint model (archetypes.jointfit): true, false (the paper's algorithm), or its "
            "options as a TOML table, e.g. '{ pairs = \"all\" }' (keys: share, "
            "max_records_per_individual, pool, pairs, max_cells, compress, prior_cells, fine_bins, "
            "cell_cap)",
            default=True,
            metavar="TOML",
            parse=toml_value,
        ),
        Param(
            "max_records_per_individual",
            (Interval("integer", 1),),
            "contribution bound: an individual's first N trips (by --order-column) are kept; the "
            "joint tables count at most this many of them",
            default=200,
            metavar="N",
        ),
        Param(
            "order_column",
            (None, STRING),
            "orders an individual's trips (bounding, and the synthetic trip chains)",
            default=None,
            metavar="COL",
        ),
        Param(
            "n_records",
            (None, Interval("integer", 0)),
            "number of synthetic trips (default: the trips of as many individuals as the noisy "
            "counts say)",
            default=None,
            metavar="N",
        ),
        Param(
            "unit",
            (STRING,),
            "name of the privacy unit in the ledger (taxi, card, ...)",
            default="individual",
            metavar="NAME",
        ),
        Param(
            "random_state",
            (None, InstanceOf((int, np.integer), "an int")),
            "None: secure noise; an int: reproducible, NOT private (tests only)",
            default=None,
            api_only="the seed is the published --seed (NOT private; the command line warns), "
            "and a config takes it from `run --seed`",
        ),
    ],
)
