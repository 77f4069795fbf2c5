"""``transit-synth demo``: the whole product on the embedded real data.

Loads the SUBE Buenos Aires taps embedded in the package, builds passenger sequences and the
branch -> line -> mode taxonomy from the public line metadata, and prints a summary of the data.
"""

from __future__ import annotations

import argparse
import sys

from synth import datasets
from synth.cli import add_quiet_option, add_seed_option, warn_if_seeded
from synth.records import load_sequences


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``demo`` subcommand."""
    parser = subparsers.add_parser(
        "demo",
        help="run the generators on the embedded real data and write a release with a report",
        description=__doc__,
    )
    parser.add_argument("--out", default="demo-release", help="release directory (demo-release)")
    add_seed_option(parser)
    add_quiet_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the embedded data, build sequences and the taxonomy, print a summary."""
    warn_if_seeded(args.seed)
    taxonomy = datasets.sube_taxonomy("branch")
    sequences = load_sequences(
        datasets.path("sube_tuesday"),
        taxonomy=taxonomy,
        location_column="id_ramal",
        on_unknown="drop",
    )
    lengths = sequences.groupby("seq_id", sort=False).size()
    stats = taxonomy.fanout_stats()
    print(
        f"SUBE Tuesday 27/11/2019: {len(sequences):,} boardings by {len(lengths):,} cards; "
        f"mean sequence length {lengths.mean():.2f}, max {lengths.max()}",
        file=sys.stdout,
    )
    print(
        f"taxonomy branch -> line -> mode: {len(taxonomy.leaves())} branches, height "
        f"{taxonomy.height}, fan-out {stats}",
        file=sys.stdout,
    )
    return 0
