"""``transit-synth sequences``: a differentially private release of passenger sequences.

The hybrid-granularity noisy prefix tree of Chen et al. 2012 (KDD).

``transit-synth sequences INPUT --taxonomy TAX --epsilon E --height H --out DIR
[--preset auto|kdd12] [--max-nodes N] [--variant hybrid|simple] [--budget-split L=S,...]
[--location-column COL] [--time-bin MINUTES [--time-model auto|factorised|tree]] [--length-share S]
[--format csv|parquet] [--locations FILE]
[--on-unknown error|drop] [--seed N] [--quiet] [--engine memory|duckdb|spark [--engine-temp-dir DIR]
[--engine-memory-limit SIZE] [--spark-master URL]]``

INPUT holds taps or long-format sequences (one sequence per card); TAX is a CSV edge list
(child,parent), a GTFS zip, or ``fanout:N`` over the public location list given with ``--locations``
(never read off the private data). DIR receives ``sequences.csv`` (or ``.parquet``) and
``manifest.json``, atomically.
"""

from __future__ import annotations

import argparse
import sys

from prefixtree.presets import PRESETS
from prefixtree.release import release_sequences
from prefixtree.synthesizer import (
    COMPLETIONS,
    DEFAULT_MAX_NODES,
    MAX_HEIGHT,
    THRESHOLD_RULES,
    VARIANTS,
)
from synth.cli.inputmap import add_input_map_options, input_map_from_args, mapped_input
from synth.cli.options import (
    add_engine_options,
    add_gtfs_route_rule_option,
    add_names_option,
    add_provenance_option,
    add_quiet_option,
    add_seed_option,
    add_timezone_option,
    engine_params,
    warn_if_seeded,
)
from synth.progress import Progress
from synth.provenance import (
    provenance_key,
)

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sequences`` subcommand."""
    p = subparsers.add_parser(
        "sequences",
        help="DP synthetic passenger sequences (noisy prefix tree, Chen et al. 2012)",
        description="\n\n".join(__doc__.split("\n\n")[:2]) if __doc__ else None,
    )
    p.add_argument("input", metavar="INPUT", help="taps or long-format sequences (CSV or Parquet)")
    p.add_argument(
        "--taxonomy",
        required=True,
        metavar="TAX",
        help="location taxonomy: CSV edge list (child,parent), GTFS zip, or fanout:N",
    )
    p.add_argument("--epsilon", required=True, type=float, metavar="E", help="privacy budget")
    p.add_argument(
        "--height",
        required=True,
        type=int,
        metavar="H",
        help=f"prefix tree height (1..{MAX_HEIGHT}): sequences are truncated to H locations",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="release directory")
    _tuning_options(p)
    _input_options(p)
    add_input_map_options(p)
    add_timezone_option(p)
    add_seed_option(p)
    add_quiet_option(p)
    add_engine_options(p)
    add_provenance_option(p)
    add_names_option(p)
    p.set_defaults(func=run)


def _tuning_options(p: argparse.ArgumentParser) -> None:
    """The prefix tree's tuning flags: the preset, and what it chooses (each overridable)."""
    p.add_argument(
        "--preset",
        choices=PRESETS,
        default="auto",
        help="auto (default): every tuning value below computed from public facts (epsilon, H, "
        "the taxonomy); kdd12: Chen et al. 2012's settings. Explicit flags override either",
    )
    p.add_argument(
        "--variant",
        choices=VARIANTS,
        default=None,
        help="tree variant (default: the preset's). Under auto, hybrid uses only the generalized "
        "taxonomy levels that pay for themselves (none under its thresholds: the tree is then "
        "the simple one, with a warning); --budget-split forces a level",
    )
    p.add_argument(
        "--max-nodes",
        type=int,
        default=DEFAULT_MAX_NODES,
        metavar="N",
        help="refuse, before reading the data, a tree expected to exceed N nodes (about 400 "
        "bytes each), and stop one that grows past it (auto tightens its thresholds instead; "
        f"default {DEFAULT_MAX_NODES}). The plan depends on N, never on free memory: a tree "
        "needing over half the free memory is refused, naming the N that fits",
    )
    p.add_argument(
        "--budget-split",
        type=_budget_split,
        default=None,
        metavar="LEVEL=SHARE[,...]",
        help="with --variant hybrid: share of each level's budget for generalized taxonomy "
        "level LEVEL (1 = the top), e.g. 1=0.3; the locations get the rest (auto: only levels "
        "that pay for themselves, none under its thresholds; kdd12: the paper's 2/f)",
    )
    p.add_argument(
        "--threshold-rule",
        choices=THRESHOLD_RULES,
        default=None,
        help="pass thresholds: the paper's 2*sqrt(2)/eps, or bounded expected empty children "
        "per node from the public number of candidates (see --false-children; auto's)",
    )
    p.add_argument(
        "--false-children",
        type=float,
        nargs="+",
        default=None,
        metavar="N",
        help="with --threshold-rule candidates: expected empty children passing per node, "
        "in (0, 1]: one number, or one per tree level (auto: 0.2, then 0.2 x the square of the "
        "level's weight relative to the largest, floored at 0.001)",
    )
    _completion_options(p)


def _completion_options(p: argparse.ArgumentParser) -> None:
    """The Markov completion, its hints, the sequence count and the level weights (tuning)."""
    p.add_argument(
        "--completion",
        choices=COMPLETIONS,
        default=None,
        help="sequences that went on below a node through pruned children: released as ending "
        "there (none, the paper) or continued by a Markov chain of the noisy tree (markov; adds "
        "an end-of-sequence cell per node, same budget; auto: markov)",
    )
    p.add_argument(
        "--root-share",
        type=float,
        default=None,
        metavar="S",
        help="with --completion markov: share of epsilon for a noisy count of sequences, so the "
        "released volume matches it (auto: 0.01; 0 = none)",
    )
    p.add_argument(
        "--completion-hints",
        type=float,
        default=None,
        metavar="N",
        help="with --completion markov and the candidates rule: on the levels whose weight is at "
        "least half the largest, pruned cells whose noisy count reaches the threshold at N empty "
        "cells per node guide where the completion sends that node's pruned sequences (same "
        "histogram; auto: 3; 0 = none)",
    )
    p.add_argument(
        "--level-weights",
        type=float,
        nargs="+",
        default=None,
        metavar="W",
        help="share of epsilon of each tree level, one weight per level (auto: 1, then "
        "max(1, ln(locations) / 2), then a quarter of the level above, floored at 0.02; "
        "kdd12: 1/H each)",
    )


def _budget_split(text: str) -> dict[int, float]:
    """``LEVEL=SHARE[,...]`` as ``{level: share}``; the shares are checked by the synthesizer."""
    out: dict[int, float] = {}
    for part in text.split(","):
        level, sep, share = part.partition("=")
        try:
            if not sep:
                raise ValueError(part)
            number = int(level)
            value = float(share)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected LEVEL=SHARE[,...] (e.g. 1=0.3), got {text!r}"
            ) from None
        if number in out:
            raise argparse.ArgumentTypeError(f"level {number} is given twice in {text!r}")
        out[number] = value
    return out


def _input_options(p: argparse.ArgumentParser) -> None:
    """How the input is read and the release written."""
    p.add_argument(
        "--location-column",
        default=None,
        metavar="COL",
        help="input column holding the locations (default: location, or stop_id for taps)",
    )
    p.add_argument(
        "--time-bin",
        type=int,
        default=None,
        metavar="MINUTES",
        help="release trajectories: (location, time bin) nodes with bins of this many minutes",
    )
    p.add_argument(
        "--coarse-time-bin",
        type=int,
        default=None,
        metavar="MINUTES",
        help="with --time-bin and the hybrid variant: the generalized sub-levels count coarser "
        "bins of this many minutes (a multiple of --time-bin), refined at the locations",
    )
    p.add_argument(
        "--time-model",
        choices=("auto", "factorised", "tree"),
        default="auto",
        help="with --time-bin: factorised (the tree counts locations; times come from two small "
        "noisy tables, a first-tap table and a gap table, sampled per sequence as clock times "
        "HH:MM) or tree ((location, time bin) nodes, Chen et al. 2012 section 4.4); auto: "
        "factorised, or tree with --coarse-time-bin",
    )
    p.add_argument(
        "--length-share",
        type=float,
        default=None,
        metavar="S",
        help="share of epsilon for the noisy histogram of sequence lengths that the released "
        "lengths follow (auto: 0.02, 0 with the kdd12 preset or --time-model tree; 0 = none)",
    )
    p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="output format")
    p.add_argument(
        "--locations",
        default=None,
        metavar="FILE",
        help="public list of locations (required by fanout:N taxonomies)",
    )
    p.add_argument(
        "--on-unknown",
        choices=("error", "drop"),
        default="error",
        help="input locations missing from the taxonomy: fail, or drop those rows",
    )
    p.add_argument(
        "--gtfs-stations",
        action="store_true",
        help="with a GTFS zip taxonomy: the parent stations are the locations (the taps name "
        "stations), not the platforms",
    )
    add_gtfs_route_rule_option(p)


def run(args: argparse.Namespace) -> int:
    """Load, fit, release; returns the exit status."""
    warn_if_seeded(args.seed)
    data, location_column, columns = mapped_input(
        args.input, input_map_from_args(args), time_bin=args.time_bin
    )
    summary = release_sequences(
        data,
        args.out,
        taxonomy=str(args.taxonomy),
        params={
            "epsilon": args.epsilon,
            "height": args.height,
            "preset": args.preset,
            "variant": args.variant,
            "budget_split": args.budget_split,
            "max_nodes": args.max_nodes,
            "root_share": args.root_share,
            "time_bins": args.time_bin,
            "coarse_time_bins": args.coarse_time_bin,
            "time_model": args.time_model,
            "length_share": args.length_share,
            "threshold_rule": args.threshold_rule,
            "false_children": (
                None
                if args.false_children is None
                else args.false_children[0]
                if len(args.false_children) == 1
                else args.false_children
            ),
            "completion": args.completion,
            "completion_hints": args.completion_hints,
            "level_weights": args.level_weights,
            **engine_params(args),
        },
        location_column=location_column,
        locations=args.locations,
        on_unknown=args.on_unknown,
        gtfs_stations=args.gtfs_stations,
        gtfs_route_rule=args.gtfs_route_rule,
        format=args.format,
        seed=args.seed,
        progress=Progress(args.quiet),
        timezone=args.timezone,
        source=args.input,
        provenance_key=provenance_key(args.provenance_key_file),
        names=args.names,
        location_names=args.location_names,
    )
    if not args.quiet:
        if columns:
            print(columns, file=sys.stderr)
        print(summary, file=sys.stderr)
    return 0
