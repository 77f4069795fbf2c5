"""The parameter table of :class:`~synth.marginals.opal.OpalMarginals` (Asghar et al. 2018): one row
per constructor keyword, from which its validator, the ``[marginals.parameters]`` config schema
and the ``transit-synth marginals`` flags are generated (:mod:`synth.params`)."""

from __future__ import annotations

import numbers

import pandas as pd

from synth.engines.params import ENGINE_ROWS
from synth.marginals.bounding import BOUNDING_RULES
from synth.marginals.grid import DEFAULT_SPLIT
from synth.params import (
    SEQUENCE,
    STRING,
    InstanceOf,
    Interval,
    Options,
    Param,
    ParamTable,
    Satisfies,
    comma_list,
)
from synth.taxonomy import Taxonomy
from synth.times import TIMEZONE_PARAM

__all__ = ["MODES", "PARAMS", "days"]

MODES = ("sbh", "consistent", "pure")
OPAL = "Asghar et al. 2018"


def days(spec: str) -> list[str]:
    """``a,b,c`` or ``FIRST:LAST`` (inclusive) as ISO dates (ValueError if not dates)."""
    try:
        if ":" in spec:
            first, last = spec.split(":", 1)
            return [str(d.date()) for d in pd.date_range(first.strip(), last.strip(), freq="D")]
        return [str(pd.Timestamp(d.strip()).date()) for d in spec.split(",") if d.strip()]
    except ValueError:
        raise ValueError(f"expected ISO dates 'a,b' or 'FIRST:LAST', got {spec!r}") from None


def _divides_a_day(value: object) -> bool:
    return (
        isinstance(value, numbers.Integral)
        and not isinstance(value, bool)
        and 1 <= int(value) <= 1440
        and 1440 % int(value) == 0
    )


def _is_noise(value: object) -> bool:
    return value is not None


PARAMS = ParamTable(
    "OpalMarginals",
    [
        Param(
            "epsilon",
            (Interval("real", 0, None, "neither"),),
            "epsilon per partition (row unit) or in all",
            default=8.0,
            metavar="E",
            source=f"{OPAL}, section 4.2",
        ),
        Param(
            "delta",
            (Interval("real", 0, 1, "neither"),),
            "delta per partition (row unit) or in all",
            default=6 / 8_000_000,
            metavar="D",
            source=f"{OPAL}, section 4.2",
        ),
        Param(
            "split",
            (SEQUENCE,),
            "epsilon shares of the six tables (tap-on/off time, location, time x location)",
            default=DEFAULT_SPLIT,
            metavar="W",
            nargs="+",
            parse=float,
            collect=tuple,
            source=f"{OPAL}, section 4.2",
        ),
        Param(
            "mode",
            (Options(MODES),),
            "sbh: the stability-based histogram of every table; consistent: noise only the time x "
            "location tables, derive the one-way tables by summing; pure: perturb every "
            "public-domain cell, zeros included (pure epsilon-DP; needs --taxonomy, --modes and "
            "--days)",
            default="sbh",
            shorthands={"--consistent": "consistent", "--pure": "pure"},
        ),
        Param(
            "bin",
            (Satisfies(_divides_a_day, "a whole number of minutes dividing 1440"),),
            "time bin in minutes (divides 1440)",
            default=15,
            metavar="MINUTES",
            parse=int,
            renamed_from="bin_minutes",
        ),
        Param(
            "taxonomy",
            (None, InstanceOf(Taxonomy, "a Taxonomy")),
            "the public location taxonomy",
            default=None,
            api_only="a Taxonomy object: the command line and configs name a file instead "
            "(--taxonomy TAX, the taxonomy key of a [marginals] table)",
        ),
        Param(
            "level",
            (None, Interval("integer", 0)),
            "taxonomy level the locations are collapsed to",
            default=None,
            metavar="N",
        ),
        Param(
            "modes",
            (None, SEQUENCE),
            "public comma-separated list of modes (the partition domain)",
            default=None,
            metavar="MODES",
            parse=comma_list,
        ),
        Param(
            "days",
            (None, SEQUENCE),
            "public comma-separated ISO dates, or FIRST:LAST (inclusive)",
            default=None,
            metavar="DAYS",
            parse=days,
        ),
        Param(
            "privacy_unit",
            (None, STRING),
            "protect whole cards: the card column (default: one trip or tap, as in Opal)",
            default=None,
            metavar="COLUMN",
        ),
        Param(
            "max_contributions",
            (Interval("integer", 1),),
            "with --privacy-unit: events kept per card and side over all partitions",
            default=1,
            metavar="K",
        ),
        Param(
            "bounding",
            (Options(BOUNDING_RULES),),
            "with --privacy-unit: which K events a card keeps: a uniform random choice (the "
            "default: the kept taps keep the card's profile) or the earliest by time",
            default="uniform",
            source="Culnane et al. 2017; rule from benchmarks/bench_bounding.py",
        ),
        Param(
            "random_state",
            (None, Satisfies(_is_noise, "an int or a noise source")),
            "None: secure noise; an int: reproducible, NOT private (tests only)",
            default=None,
            api_only="the seed is the published --seed (NOT private; the command line warns), "
            "and a config takes it from `run --seed`; a noise object has no text form",
        ),
        *ENGINE_ROWS,
        Param(
            "on_unknown",
            (Options(("error", "drop")),),
            "with --taxonomy: locations missing from it fail the release, or their events are "
            "dropped",
            default="error",
            in_table=True,
        ),
        TIMEZONE_PARAM,
        Param(
            "location_column",
            (STRING,),
            "location column of taps (e.g. id_linea for SUBE lines)",
            default="stop_id",
            metavar="COL",
            in_table=True,
        ),
    ],
)
