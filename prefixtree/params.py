"""The parameter table of :class:`~prefixtree.synthesizer.PrefixTreeSynthesizer` (Chen et al.
2012): one row per constructor keyword, from which its validator, the ``[sequences.parameters]``
config schema and the ``transit-synth sequences`` flags are generated (:mod:`synth.params`)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from prefixtree.factorised import TIME_MODELS
from prefixtree.inputs import INPUT_FORMATS
from prefixtree.presets import PRESETS
from synth.engines.params import ENGINE_ROWS
from synth.params import (
    STRING,
    InstanceOf,
    Interval,
    Options,
    Param,
    ParamTable,
    Satisfies,
)
from synth.taxonomy import Taxonomy
from synth.times import TIMEZONE_PARAM

__all__ = [
    "COMPLETIONS",
    "DEFAULT_MAX_NODES",
    "MAX_HEIGHT",
    "PARAMS",
    "THRESHOLD_RULES",
    "VARIANTS",
    "level_map",
    "level_shares",
    "level_thresholds",
]

VARIANTS = ("hybrid", "simple")
THRESHOLD_RULES = ("paper", "candidates")
COMPLETIONS = ("none", "markov")
DEFAULT_MAX_NODES = 5_000_000
#: the tallest tree the size estimate allows (each level gets epsilon / height)
MAX_HEIGHT = 1000

CHEN = "Chen et al. 2012"


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_numbers(value: object) -> bool:
    if isinstance(value, np.ndarray):
        return value.ndim == 1 and all(_is_number(v) for v in value.tolist())
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str | bytes)
        and all(_is_number(v) for v in value)
    )


def _is_level_map(value: object, low: float = 0.0) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, numbers.Integral)
        and not isinstance(k, bool)
        and _is_number(v)
        and low <= float(v) < math.inf
        for k, v in value.items()
    )


def _positive_numbers(value: object) -> bool:
    return _is_numbers(value) and all(0 < float(v) < math.inf for v in _listed(value))


def _false_children(value: object) -> bool:
    return _is_numbers(value) and all(0 < float(v) <= 1 for v in _listed(value))


def _listed(value: Any) -> list[Any]:
    return value.tolist() if isinstance(value, np.ndarray) else list(value)


def level_map(value: Any, what: str = "VALUE") -> Any:
    """``LEVEL=VALUE[,...]`` (a flag) or a TOML table ``{"1" = 0.3}`` as ``{level: value}``
    (ValueError names what is wrong)."""
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, str):
        items = [part.partition("=")[::2] for part in value.split(",")]
        if any(not level.strip() or not share.strip() for level, share in items):
            raise ValueError(f"expected LEVEL={what}[,...] (e.g. 1=0.3), got {value!r}")
        try:
            items = [(level, float(share)) for level, share in items]
        except ValueError:
            raise ValueError(f"expected LEVEL={what}[,...] (e.g. 1=0.3), got {value!r}") from None
    else:
        return value  # refused by the constraint
    out: dict[int, Any] = {}
    for level, share in items:
        try:
            number = int(level)
        except ValueError:
            raise ValueError(f"{level!r} is not a taxonomy level number") from None
        if number in out:
            raise ValueError(f"level {number} is given twice")
        out[number] = share
    return out


def level_shares(value: Any) -> Any:
    """:func:`level_map` of ``--budget-split LEVEL=SHARE[,...]``."""
    return level_map(value, "SHARE")


def level_thresholds(value: Any) -> Any:
    """:func:`level_map` of ``--thresholds LEVEL=THRESHOLD[,...]``."""
    return level_map(value, "THRESHOLD")


def _one_or_many(values: list[float]) -> float | list[float]:
    return values[0] if len(values) == 1 else values


LEVEL_SHARES = Satisfies(_is_level_map, "a mapping {taxonomy level: share >= 0}")
LEVEL_THRESHOLDS = Satisfies(_is_level_map, "a mapping {taxonomy level: finite threshold >= 0}")
WEIGHTS = Satisfies(_positive_numbers, "a list of numbers > 0 (one per tree level)")
FALSE_CHILDREN = Satisfies(
    _false_children,
    "a list of numbers in (0, 1], one per tree level (above 1 the passing empty nodes branch "
    "without bound: Chen et al. 2012, Theorem 4.2)",
)

PARAMS = ParamTable(
    "PrefixTreeSynthesizer",
    [
        Param("epsilon", (Interval("real", 0, None, "neither"),), "privacy budget", metavar="E"),
        Param(
            "height",
            (Interval("integer", 1, MAX_HEIGHT),),
            f"prefix tree height (1..{MAX_HEIGHT}): sequences are truncated to H locations",
            metavar="H",
            source=CHEN,
        ),
        Param(
            "taxonomy",
            (InstanceOf(Taxonomy, "a synth.taxonomy.Taxonomy"),),
            "the public location taxonomy",
            api_only="a Taxonomy object: the command line and configs name a file instead "
            "(--taxonomy TAX, the taxonomy key of a [sequences] table)",
        ),
        Param(
            "preset",
            (Options(PRESETS),),
            "auto (default): every tuning value below computed from public facts (epsilon, H, "
            "the taxonomy); kdd12: Chen et al. 2012's settings. Explicit flags override either",
            default="auto",
        ),
        Param(
            "variant",
            (None, Options(VARIANTS)),
            "tree variant (default: the preset's). Under auto, hybrid uses only the generalized "
            "taxonomy levels that pay for themselves (none under its thresholds: the tree is then "
            "the simple one, with a warning); --budget-split forces a level",
            default=None,
            source=CHEN,
        ),
        Param(
            "budget_split",
            (None, LEVEL_SHARES),
            "with --variant hybrid: share of each level's budget for generalized taxonomy "
            "level LEVEL (1 = the top), e.g. 1=0.3; the locations get the rest (auto: only levels "
            "that pay for themselves, none under its thresholds; kdd12: the paper's 2/f)",
            default=None,
            metavar="LEVEL=SHARE[,...]",
            parse=level_shares,
            from_toml=level_shares,
            source=f"{CHEN}, section 4.1",
        ),
        Param(
            "thresholds",
            (None, LEVEL_THRESHOLDS),
            "pass threshold of each taxonomy level's sub-level (LEVEL = the taxonomy's height for "
            "the locations), e.g. 1=40,2=12 (default: the --threshold-rule's)",
            default=None,
            metavar="LEVEL=THRESHOLD[,...]",
            parse=level_thresholds,
            from_toml=level_thresholds,
            source=f"{CHEN}, section 4.1",
        ),
        Param(
            "level_weights",
            (None, WEIGHTS),
            "share of epsilon of each tree level, one weight per level (auto: 1, then "
            "max(1, ln(locations) / 2), then a quarter of the level above, floored at 0.02; "
            "kdd12: 1/H each)",
            default=None,
            metavar="W",
            nargs="+",
            parse=float,
        ),
        Param(
            "threshold_rule",
            (None, Options(THRESHOLD_RULES)),
            "pass thresholds: the paper's 2*sqrt(2)/eps, or bounded expected empty children "
            "per node from the public number of candidates (see --false-children; auto's)",
            default=None,
        ),
        Param(
            "false_children",
            (None, Interval("real", 0, 1, "right"), FALSE_CHILDREN),
            "with --threshold-rule candidates: expected empty children passing per node, "
            "in (0, 1]: one number, or one per tree level (auto: 0.2, then 0.2 x the square of the "
            "level's weight relative to the largest, floored at 0.001)",
            default=None,
            metavar="N",
            nargs="+",
            parse=float,
            collect=_one_or_many,
        ),
        Param(
            "completion",
            (None, Options(COMPLETIONS)),
            "sequences that went on below a node through pruned children: released as ending "
            "there (none, the paper) or continued by a Markov chain of the noisy tree (markov; "
            "adds an end-of-sequence cell per node, same budget; auto: markov)",
            default=None,
        ),
        Param(
            "root_share",
            (None, Interval("real", 0, 0.5, "left")),
            "with --completion markov: share of epsilon for a noisy count of sequences, so the "
            "released volume matches it (auto: 0.01; 0 = none)",
            default=None,
            metavar="S",
        ),
        Param(
            "completion_hints",
            (None, Interval("real", 0, 1e6)),
            "with --completion markov and the candidates rule: on the levels whose weight is at "
            "least half the largest, pruned cells whose noisy count reaches the threshold at N "
            "empty cells per node guide where the completion sends that node's pruned sequences "
            "(same histogram; auto: 3; 0 = none)",
            default=None,
            metavar="N",
        ),
        Param(
            "time_bin",
            (None, Interval("integer", 1, 1440)),
            "release trajectories: (location, time bin) nodes with bins of this many minutes",
            default=None,
            metavar="MINUTES",
            renamed_from="time_bins",
            source=f"{CHEN}, section 4.4",
        ),
        Param(
            "coarse_time_bin",
            (None, Interval("integer", 1, 1440)),
            "with --time-bin and the hybrid variant: the generalized sub-levels count coarser "
            "bins of this many minutes (a multiple of --time-bin), refined at the locations",
            default=None,
            metavar="MINUTES",
            renamed_from="coarse_time_bins",
        ),
        Param(
            "time_model",
            (Options(TIME_MODELS),),
            "with --time-bin: factorised (the tree counts locations; times come from two small "
            "noisy tables, a first-tap table and a gap table, sampled per sequence as clock times "
            "HH:MM) or tree ((location, time bin) nodes, Chen et al. 2012 section 4.4); auto: "
            "factorised, or tree with --coarse-time-bin",
            default="auto",
        ),
        Param(
            "length_share",
            (None, Interval("real", 0, 0.5, "left")),
            "share of epsilon for the noisy histogram of sequence lengths that the released "
            "lengths follow (auto: 0.02, 0 with the kdd12 preset or --time-model tree; 0 = none)",
            default=None,
            metavar="S",
        ),
        Param(
            "random_state",
            (None, Satisfies(lambda v: v is not None, "an int or a noise source")),
            "None: secure noise; an int: seeded, NOT private (tests only); or a noise source",
            default=None,
            api_only="the seed is the published --seed (NOT private; the command line warns), "
            "and a config takes it from `run --seed`; a noise object has no text form",
        ),
        Param(
            "max_nodes",
            (Interval("integer", 1),),
            "refuse, before reading the data, a tree expected to exceed N nodes (about 400 "
            "bytes each), and stop one that grows past it (auto tightens its thresholds instead; "
            f"default {DEFAULT_MAX_NODES}). The plan depends on N, never on free memory: a tree "
            "needing over half the free memory is refused, naming the N that fits",
            default=DEFAULT_MAX_NODES,
            metavar="N",
        ),
        *ENGINE_ROWS,
        Param(
            "input_format",
            (Options(INPUT_FORMATS),),
            "layout of INPUT: taps, long-format sequences or trips (auto: from the column names)",
            default="auto",
        ),
        Param(
            "location_column",
            (None, STRING),
            "input column holding the locations (default: location, or stop_id for taps)",
            default=None,
            metavar="COL",
            in_table=True,
        ),
        Param(
            "on_unknown",
            (Options(("error", "drop")),),
            "input locations missing from the taxonomy: fail, or drop those rows",
            default="error",
            in_table=True,
        ),
        TIMEZONE_PARAM,
        Param(
            "per_day",
            (InstanceOf(bool, "true or false"),),
            "taps and trips: one sequence per card and day (the privacy unit is then the "
            "card-day; a card active on d days is covered with d times epsilon)",
            default=False,
            switch=True,
        ),
        Param(
            "progress",
            (None, Satisfies(callable, "a callable progress(done, total)")),
            "called as each histogram of the tree is about to be drawn",
            default=None,
            api_only="a Python callback: the command line shows a progress bar (--quiet: none)",
        ),
    ],
)
