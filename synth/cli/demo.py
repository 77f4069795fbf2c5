"""``transit-synth demo``: every generator on the embedded real data, evaluated, with one report.

What it runs (budgets per release; each release is a separate use of the same private data, so
publishing all of them would cost the sum: the demo compares them, an agency would pick one):

* **Passenger sequences** (prefix tree, Chen et al. 2012), epsilon 1, beside the non-private
  truncation (epsilon = infinity) as the optimum, evaluated with count queries and top-k sequential
  patterns (Chen et al. 2012, section 5), the timed one with the time statistics (hour of day,
  lengths, gaps, timed transitions): (1) SUBE Wednesday 28/11/2019 boardings, one sequence of lines
  per card, height 8 (real, but small: 10,000 cards spread over 382 lines): the settings of the
  shipped ``demo`` config (the default ``auto`` preset: simple variant, as the line -> mode
  taxonomy barely generalises; one mode holds 373 lines; with the paper's thresholds about 11 empty
  children per node pass and the tree grows as 11^h, Theorem 4.2), and the same cards as (line,
  hour) trajectories (``--time-bin 60``, the ``sequences-sube-timed`` settings); (2) 200,000
  SIMULATED passenger sequences on the Montreal metro of the paper (``synth.simulate``), station ->
  line taxonomy, height 12, the default ``auto`` preset too (no generalized level pays for itself
  under its thresholds: simple variant). Both complete the sequences pruned below a node with the
  tree's Markov chain (``completion="markov"``), its first steps guided by the completion hints.
* **Marginal reference** (SBH / Opal: Asghar et al. 2018; Culnane et al. 2017): the same taps,
  hourly bins, lines, partitions mode x day, the card as the unit (its first 2 tap-ons and 2
  tap-offs of the day), ``consistent`` mode, epsilon 8 and delta 6/8e6 in all (the Opal budget of
  one partition).
* **Trips** (GMM archetypes: GooseDP, NIST 2020 challenge): SUBE Tuesday as public data,
  Wednesday as private, epsilon 1, delta 1e-5 per card; the Chicago taxi sample with 2013 public
  and 2014-2015 private, epsilon 1, delta 2.5e-5 per trip (the sample has no taxi id). Evaluated
  with the k-marginal score and marginal distances.
* **Reference check**: the synthetic SUBE sequences and trips against the SBH release.

Layout of ``--out DIR`` (written atomically as a whole):

* ``DIR/releases/<name>/``: the releases, what may be published: each holds its DP data files and
  ``manifest.json``, nothing else; ``DIR/releases/manifest.json`` states the guarantee of
  publishing them all together, per privacy unit (basic composition: the sums of their epsilons
  and deltas; an upper bound, as some are of other data);
* ``DIR/evaluation-private/``: ``private-report.html`` and ``private-evaluation.json``, the
  comparisons with the original data. They contain exact statistics of the private data: NOT
  private, for the data holder only, never to be published (each says so at its top).
"""

from __future__ import annotations

import argparse
import copy
import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synth.cli.options import add_quiet_option, add_seed_option, warn_if_seeded
from synth.logs import private_message

#: The demo's releases on the SUBE and Chicago data take their settings from the shipped run config
#: ``demo`` (``configs/demo.toml``, :func:`demo_settings`): one source for both.
DEMO_CONFIG = "demo"
SIMULATED_SEQUENCES = 200_000
SIMULATED_HEIGHT = 12
SIMULATION_SEED = 2012
SIMULATED_EPSILON = 1.0
DEFAULT_OUT = "transit-synth-demo"
#: the publishable releases, and the internal evaluation, under --out
RELEASES_DIR = "releases"
EVALUATION_DIR = "evaluation-private"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``demo`` subcommand."""
    parser = subparsers.add_parser(
        "demo",
        help="run every generator on the embedded real data; write releases and a report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"output folder: releases/ (publishable) and {EVALUATION_DIR}/ (internal, NOT "
        "private)",
    )
    add_seed_option(parser)
    add_quiet_option(parser)
    parser.set_defaults(func=run)


class _Steps:
    """Prints each step and its duration on stderr and advances the demo's progress bar (silent
    with --quiet; the bar only on a terminal)."""

    #: calls of a full run (taps, 5 sequences, marginals, 2 trips, reference check)
    TOTAL = 10

    def __init__(self, quiet: bool) -> None:
        from synth.progress import Progress

        self.quiet = quiet
        self.start = time.perf_counter()
        self.progress = Progress(quiet)
        self.bar = self.progress.bar("demo", self.TOTAL, unit="step")

    def __call__(self, message: str | None) -> None:
        """Print ``message`` (None: a hidden private message, :mod:`synth.logs`) and advance."""
        if not self.quiet and message is not None:
            elapsed = time.perf_counter() - self.start
            self.progress.write(f"[{elapsed:6.1f}s] {message}")
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


@dataclass
class _TripRun:
    """One archetype release of the demo: data, public schema, budget, parameters, evaluation."""

    private: Any
    public: Any
    schema: Any
    params: dict[str, Any]
    evaluate: dict[str, Any]
    public_inputs: dict[str, Path]


def demo_settings() -> dict[str, Any]:
    """The releases of the shipped ``demo`` config (``configs/demo.toml``), checked as ``run``
    checks them, by name (:class:`synth.cli.run.Planned`)."""
    from importlib import resources

    from synth.cli.configs import find
    from synth.cli.run import plan

    with resources.as_file(find(DEMO_CONFIG)) as path:
        return {planned.name: planned for planned in plan(path)}


def _seed(base: int | None, offset: int) -> int | None:
    return None if base is None else base + offset


def _wednesday_taps(step: _Steps) -> Any:
    """SUBE Wednesday taps with a card id (the upstream file has a few taps without one)."""
    from synth import datasets

    taps = datasets.sube_taps("wednesday")
    known = taps["id_tarjeta"].notna()
    step(
        private_message(
            f"SUBE Wednesday: {len(taps):,} taps, {int((~known).sum())} without a card id dropped"
        )
    )
    return taps[known].reset_index(drop=True)


def _prefix_tree(
    stage: Path,
    name: str,
    original: Any,
    taxonomy: Any,
    *,
    seed: int | None,
    step: _Steps,
    params: dict[str, Any],
    reading: dict[str, Any],
) -> dict[str, Any]:
    """A prefix-tree release of ``original`` into ``stage/name`` (``params``: the synthesizer's
    tuning; ``reading``: how ``original`` was read, its location column and unknown-location
    rule, recorded in the manifest), evaluated beside the non-private truncation (epsilon =
    infinity)."""
    from prefixtree import PrefixTreeSynthesizer
    from synth.evaluate import evaluate_sequences, evaluate_trajectories
    from synth.records import truncate_sequences

    synthesizer = PrefixTreeSynthesizer(taxonomy=taxonomy, random_state=seed, **params, **reading)
    height = int(params["height"])
    with step.progress.counter(f"{name} tree levels", unit="level") as levels:
        synthesizer.set_params(progress=levels)
        synthesizer.fit(original)
    synthesizer.write(stage / name)  # what the CLI and the API write (one release contract)
    synthetic = synthesizer.sample()  # post-processing of the tree: the sequences written
    manifest = synthesizer.manifest()
    releases = {
        "eps=inf (truncated)": truncate_sequences(original, height),
        str(manifest["parameters"]["variant"]): synthetic,
    }
    results = evaluate_sequences(
        original, releases, universe=taxonomy.leaves(), height=height, ks=(50, 100, 150)
    )
    if params.get("time_bin"):  # a timed release: the time statistics too
        results["trajectories"] = evaluate_trajectories(
            original, releases, height=height, bin_minutes=int(params["time_bin"])
        )
    step(f"{name}: {synthetic['seq_id'].nunique():,} synthetic sequences, evaluated")
    return {"results": results, "manifest": manifest, "synthetic": synthetic}


def _sequences(stage: Path, taps: Any, seed: int | None, step: _Steps) -> dict[str, Any]:
    """Prefix-tree releases: SUBE Wednesday line sequences (real) and simulated Montreal metro."""
    from synth import datasets
    from synth.records import UnknownLocationWarning, load_sequences
    from synth.simulate import simulate_sequences

    settings = demo_settings()
    config = settings["sequences-sube"]
    sube_lines = datasets.sube_taxonomy("line")
    with warnings.catch_warnings():  # the shipped data's own gap: a step note, not a warning
        warnings.simplefilter("ignore", UnknownLocationWarning)
        sube = load_sequences(
            taps,
            taxonomy=sube_lines,
            location_column=config.io["location_column"],
            on_unknown=config.io["on_unknown"],
        )
    dropped = int(sube.attrs.get("dropped_unknown", 0))
    step(
        private_message(
            f"sequences: {sube['seq_id'].nunique():,} SUBE cards, {len(sube):,} boardings, "
            f"{len(sube_lines.leaves())} lines ({dropped} boardings on lines missing from the "
            "published line list left out)"
        )
    )
    metro = datasets.montreal_taxonomy()
    simulated = simulate_sequences(SIMULATED_SEQUENCES, taxonomy=metro, seed=SIMULATION_SEED)
    step(f"sequences: {SIMULATED_SEQUENCES:,} SIMULATED Montreal metro sequences")
    return {
        "sequences-sube": _prefix_tree(
            stage,
            "sequences-sube",
            sube,
            sube_lines,
            seed=_seed(seed, 0),
            step=step,
            params=config.params,
            reading={
                "location_column": config.io["location_column"],
                "on_unknown": config.io["on_unknown"],
            },
        ),
        "sequences-sube-timed": _prefix_tree(
            stage,
            "sequences-sube-timed",
            sube,
            sube_lines,
            seed=_seed(seed, 2),
            step=step,
            params=settings["sequences-sube-timed"].params,
            reading={
                "location_column": config.io["location_column"],
                "on_unknown": config.io["on_unknown"],
            },
        ),
        "sequences-montreal-simulated": _prefix_tree(
            stage,
            "sequences-montreal-simulated",
            simulated,
            metro,
            seed=_seed(seed, 1),
            step=step,
            params={
                "epsilon": SIMULATED_EPSILON,
                "height": SIMULATED_HEIGHT,
            },
            reading={},
        ),
    }


def _marginals(stage: Path, taps: Any, seed: int | None, step: _Steps) -> tuple[Any, Any]:
    """The Opal-style SBH release of the SUBE Wednesday taps (the reference output), and the taps
    it was made from (to measure the release's own error against them)."""
    from synth.marginals.opal import OpalMarginals
    from synth.records import load_taps

    taps = load_taps(taps, location_column="id_linea").rename(
        columns={"id_linea": "stop_id", "modo": "mode"}
    )
    release = OpalMarginals(
        **demo_settings()["marginals"].params, random_state=_seed(seed, 10)
    ).fit(taps)
    release.write(stage / "marginals")
    step("marginals: SBH release (consistent mode) written")
    return release, taps


def _trips(stage: Path, seed: int | None, step: _Steps) -> dict[str, Any]:
    """Archetype releases: SUBE cards (Tuesday public, Wednesday private) and Chicago taxis."""
    from archetypes import (
        ArchetypeSynthesizer,
        chicago_taxi_schema,
        chicago_taxi_trips,
        sube_schema,
        sube_trips,
    )
    from archetypes.release import normalize_params
    from synth import datasets
    from synth.evaluate import evaluate_trips

    sube_public = sube_trips(datasets.sube_taps("tuesday"))
    sube_private = sube_trips(datasets.sube_taps("wednesday"))  # drops taps without a card
    taxi = datasets.chicago_taxi()
    settings = demo_settings()
    taxi_io = settings["trips-taxi"].io
    taxi_public = chicago_taxi_trips(taxi, years=taxi_io["public_years"])
    taxi_private = chicago_taxi_trips(taxi, years=taxi_io["private_years"])
    runs = {
        "trips-sube": _TripRun(
            private=sube_private,
            public=sube_public,
            schema=sube_schema(sube_public, datasets.sube_metadata()),
            params=normalize_params(settings["trips-sube"].params),
            evaluate=dict(
                id_column="card_id",
                time_column="hour",
                origin="line",
                destination=None,
                exclude=("lat", "lon"),
            ),
            public_inputs={"public": datasets.path("sube_tuesday")},
        ),
        "trips-taxi": _TripRun(
            private=taxi_private,
            public=taxi_public,
            schema=chicago_taxi_schema(taxi_public),
            params=normalize_params(settings["trips-taxi"].params),
            evaluate=dict(
                id_column="taxi_id",
                time_column="shift",
                origin="pickup_community_area",
                destination="dropoff_community_area",
            ),
            public_inputs={},  # one file holds the public and the private years
        ),
    }
    out: dict[str, Any] = {}
    for offset, (name, cfg) in enumerate(runs.items()):
        with step.progress.steps(name, 3) as part:
            part("fit")
            synthesizer = ArchetypeSynthesizer(
                schema=cfg.schema,
                random_state=_seed(seed, 20 + offset),
                **cfg.params,
            ).fit(cfg.private, cfg.public)
            part("sample")
            state = copy.deepcopy(synthesizer.rng_)
            synthesizer.write(stage / name, public_inputs=cfg.public_inputs)
            synthesizer.rng_ = state  # evaluate the very trips written: the same draw again
            synthetic = synthesizer.sample()
            manifest = synthesizer.manifest(public_inputs=cfg.public_inputs)
            part("evaluate")
            results = evaluate_trips(cfg.private, {"archetypes": synthetic}, **cfg.evaluate)
        out[name] = {"results": results, "manifest": manifest, "synthetic": synthetic}
        step(f"{name}: {len(synthetic):,} synthetic trips, evaluated")
    return out


#: What each demo release is, for the report's summary.
_TITLES = {
    "sequences-sube": "SUBE (Buenos Aires) Wednesday 28/11/2019 boardings, real: one sequence of "
    "lines per card",
    "sequences-sube-timed": "the same SUBE Wednesday boardings as (line, hour) trajectories: "
    "one timed sequence per card (--time-bin 60)",
    "sequences-montreal-simulated": f"{SIMULATED_SEQUENCES:,} SIMULATED passenger sequences on "
    "the Montreal metro (stations)",
    "marginals": "SUBE Wednesday taps, real: hourly tap-on/tap-off counts per line, mode x day",
    "trips-sube": "SUBE Wednesday trips, real (Tuesday as public data)",
    "trips-taxi": "Chicago taxi trips 2014-2015, real (2013 as public data; no taxi id, so one "
    "trip is the unit)",
}


def _report(
    sequences: dict[str, Any],
    trips: dict[str, Any],
    opal_manifest: dict[str, Any],
    reference: dict[str, Any],
) -> str:
    """The demo's internal HTML report: summary first, then details and manifests per release."""
    from synth.report import (
        ReleaseEntry,
        evaluation_sections,
        manifest_section,
        reference_section,
        reference_verdict,
        render_demo,
    )

    entries, details = [], []
    for name, q in sequences.items():
        key = q["manifest"]["parameters"]["variant"]
        entries.append(ReleaseEntry(name, _TITLES[name], q["manifest"], q["results"], key))
        body = [*evaluation_sections(q["results"]), manifest_section(name, q["manifest"])]
        details.append((f"{name}: {_TITLES[name]}", body))
    own = reference["original taps (the release's own error)"]
    entries.append(
        ReleaseEntry(
            "marginals",
            _TITLES["marginals"],
            opal_manifest,
            verdict="against the original taps: " + reference_verdict(own),
        )
    )
    for name, t in trips.items():
        entries.append(ReleaseEntry(name, _TITLES[name], t["manifest"], t["results"], "archetypes"))
        body = [*evaluation_sections(t["results"]), manifest_section(name, t["manifest"])]
        details.append((f"{name}: {_TITLES[name]}", body))
    details.append(
        (
            "marginals: reference check of the synthetic SUBE data against the marginal release",
            [reference_section(reference), manifest_section("marginals", opal_manifest)],
        )
    )
    intro = (
        "<p>Each release below is differentially private on its own, and each is a separate use "
        "of the same private data: an agency would publish one of them from <code>releases/</code> "
        "(publishing several costs the sum of their epsilons and deltas).</p>"
    )
    return render_demo(entries, details, intro=intro)


def run(args: argparse.Namespace) -> int:
    """Run everything into a staging directory and move it into ``--out`` when all succeeded."""
    warn_if_seeded(args.seed)
    step = _Steps(args.quiet)
    try:
        _run(args, step)
    finally:
        step.close()
    return 0


def _run(args: argparse.Namespace, step: _Steps) -> None:
    """The demo proper (``run`` wraps it to close the progress bar)."""
    import pandas as pd

    from synth.evaluate import against_reference
    from synth.internal import INTERNAL_NOTICE
    from synth.outdir import release_dir
    from synth.release import combined_manifest, write_manifest
    from synth.report import REPORT_FILE, RESULTS_FILE, write_html

    with release_dir(args.out) as stage:
        releases, internal = stage / RELEASES_DIR, stage / EVALUATION_DIR
        releases.mkdir()
        internal.mkdir()
        taps = _wednesday_taps(step)
        sequences = _sequences(releases, taps, args.seed, step)
        opal, opal_taps = _marginals(releases, taps, args.seed, step)
        trips = _trips(releases, args.seed, step)
        synthetic_trips = trips["trips-sube"]["synthetic"]
        sube_trips = pd.DataFrame(  # the synthetic boardings as taps, to match the SBH tables
            {
                "card_id": synthetic_trips["card_id"].astype(str),
                "time": pd.Timestamp(demo_settings()["marginals"].params["days"][0])
                + pd.to_timedelta(synthetic_trips["hour"].astype(int), unit="h"),
                "stop_id": synthetic_trips["line"].astype(str),
                "mode": synthetic_trips["mode"].astype(str),
            }
        )
        reference: dict[str, Any] = {  # each bounded as the release was (k taps per card, side)
            "original taps (the release's own error)": against_reference(opal_taps, opal),
            **{
                name: against_reference(sequences[name]["synthetic"], opal)
                for name in ("sequences-sube", "sequences-sube-timed")
                if name in sequences
            },
            "trips-sube": against_reference(sube_trips, opal),
        }
        step("reference check against the SBH release done")
        summary = {
            "notice": INTERNAL_NOTICE,
            "sequences": {name: q["results"] for name, q in sequences.items()},
            "trips": {name: t["results"] for name, t in trips.items()},
            "reference": {k: v.to_dict(orient="records") for k, v in reference.items()},
        }
        (internal / RESULTS_FILE).write_text(json.dumps(summary, indent=2, default=str))
        opal_manifest = opal.manifest()
        manifests = {
            **{name: q["manifest"] for name, q in sequences.items()},
            "marginals": opal_manifest,
            **{name: t["manifest"] for name, t in trips.items()},
        }
        write_manifest(releases, combined_manifest(manifests))
        write_html(_report(sequences, trips, opal_manifest, reference), internal / REPORT_FILE)
    step.close()
    _summary(Path(args.out), sequences, trips, args.quiet)


def _summary(out: Path, sequences: dict[str, Any], trips: dict[str, Any], quiet: bool) -> None:
    """Where everything went, and the headline figures."""
    print(
        f"releases written to {out / RELEASES_DIR}/ (publishable: data, manifest.json and the "
        "datasheet README.md/datasheet.json; "
        f"{RELEASES_DIR}/manifest.json: the guarantee of publishing them all)"
    )
    print(
        f"internal evaluation (NOT private, do not publish): "
        f"{out / EVALUATION_DIR / 'private-report.html'}"
    )
    if quiet:
        return
    lines = []  # measured against the original data: the holder's, as the evaluation folder
    for data, q in sequences.items():
        for name, release in q["results"]["releases"].items():
            tp = ", ".join(f"TP@{p['k']}={p['tp']}" for p in release["patterns"])
            error = release["count_queries"]["popularity"]["mean_relative_error"]
            lines.append(f"  {data} {name}: {tp}; count-query error (popular) {error:.1%}")
    for name, t in trips.items():
        score = t["results"]["releases"]["archetypes"]["k_marginal"]["score"]
        lines.append(f"  {name}: k-marginal score {score:.0f} / 1000")
    for line in lines:
        text = private_message(line)
        if text is not None:
            print(text)
