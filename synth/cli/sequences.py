"""``transit-synth sequences``: a differentially private release of passenger sequences.

The hybrid-granularity noisy prefix tree of Chen et al. 2012 (KDD).

``transit-synth sequences INPUT --taxonomy TAX --epsilon E --height H --out DIR
[--variant hybrid|simple] [--location-column COL] [--time-bin MINUTES] [--format csv|parquet]
[--locations FILE] [--on-unknown error|drop] [--seed N] [--quiet] [--engine memory|duckdb|spark
[--engine-temp-dir DIR] [--engine-memory-limit SIZE] [--spark-master URL]]``

INPUT holds taps or long-format sequences (one sequence per card); TAX is a CSV edge list
(child,parent), a GTFS zip, or ``fanout:N`` over the public location list given with ``--locations``
(never read off the private data). DIR receives ``sequences.csv`` (or ``.parquet``) and
``manifest.json``, atomically.
"""

from __future__ import annotations

import argparse
import sys

from prefixtree.release import read_locations, release_sequences, write_release
from prefixtree.synthesizer import COMPLETIONS, THRESHOLD_RULES, VARIANTS
from synth.cli.options import (
    add_engine_options,
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

__all__ = ["read_locations", "register", "release_sequences", "run", "write_release"]


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
    p.add_argument("--height", required=True, type=int, metavar="H", help="prefix tree height")
    p.add_argument("--out", required=True, metavar="DIR", help="release directory")
    p.add_argument("--variant", choices=VARIANTS, default="hybrid", help="tree variant")
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
    p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="output format")
    p.add_argument(
        "--threshold-rule",
        choices=THRESHOLD_RULES,
        default="paper",
        help="pass thresholds: the paper's 2*sqrt(2)/eps, or bounded expected empty children "
        "per node from the public number of candidates (see --false-children)",
    )
    p.add_argument(
        "--false-children",
        type=float,
        nargs="+",
        default=[1.0],
        metavar="N",
        help="with --threshold-rule candidates: expected empty children passing per node, "
        "in (0, 1]: one number, or one per tree level (default 1)",
    )
    p.add_argument(
        "--completion",
        choices=COMPLETIONS,
        default="none",
        help="sequences that went on below a node through pruned children: released as ending "
        "there (none, the paper) or continued by a Markov chain of the noisy tree (markov; adds "
        "an end-of-sequence cell per node, same budget)",
    )
    p.add_argument(
        "--level-weights",
        type=float,
        nargs="+",
        default=None,
        metavar="W",
        help="share of epsilon of each tree level, one weight per level (default: 1/H each)",
    )
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
    add_timezone_option(p)
    add_seed_option(p)
    add_quiet_option(p)
    add_engine_options(p)
    add_provenance_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load, fit, release; returns the exit status."""
    warn_if_seeded(args.seed)
    summary = release_sequences(
        args.input,
        args.out,
        taxonomy=str(args.taxonomy),
        params={
            "epsilon": args.epsilon,
            "height": args.height,
            "variant": args.variant,
            "time_bins": args.time_bin,
            "coarse_time_bins": args.coarse_time_bin,
            "threshold_rule": args.threshold_rule,
            "false_children": (
                args.false_children[0] if len(args.false_children) == 1 else args.false_children
            ),
            "completion": args.completion,
            "level_weights": args.level_weights,
            **engine_params(args),
        },
        location_column=args.location_column,
        locations=args.locations,
        on_unknown=args.on_unknown,
        gtfs_stations=args.gtfs_stations,
        format=args.format,
        seed=args.seed,
        progress=Progress(args.quiet),
        timezone=args.timezone,
        provenance_key=provenance_key(args.provenance_key_file),
    )
    if not args.quiet:
        print(summary, file=sys.stderr)
    return 0
