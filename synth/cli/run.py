"""``transit-synth run CONFIG.toml [--out DIR] [--seed N] [--quiet]``: run what a config describes.

A config holds one or more releases, each a table named after the subcommand that makes it:

* ``[sequences]`` (prefix tree): ``input`` (taps or long-format sequences), ``taxonomy`` (CSV edge
  list, GTFS zip or ``fanout:N``), optional ``location_column``, ``locations`` (the public list for
  ``fanout:N``), ``on_unknown`` (``error`` | ``drop``), ``gtfs_stations`` (``true``: a GTFS zip's
  parent stations as the locations), ``format`` (``csv`` | ``parquet``), ``timezone`` (how times
  are read, as ``--timezone``; default the wall clock as written);
* ``[trips]`` (GMM archetypes): ``private``, optional ``public`` (without it the joint model,
  the default, or ``parameters.public_stand_in`` stands in for it, as in ``trips``),
  ``input_format`` (``trips`` | ``chicago-taxi`` | ``sube-taps``), ``public_years``,
  ``private_years``, ``metadata``, ``schema``, ``format``;
* ``[marginals]`` (SBH / Opal): ``input`` (trips or taps), optional ``taxonomy``,
  ``location_column`` (default ``stop_id``), ``on_unknown``, ``gtfs_stations``, ``format``,
  ``timezone``;
* a generator registered in :mod:`synth.registry` adds its own ``[KIND]`` table (its spec's keys;
  by default ``input`` and ``format``);
* both ``[sequences]`` and ``[marginals]`` also take the input mapping keys
  (:data:`synth.cli.inputmap.INPUT_MAP_KEYS`), ``names`` (a public ``location,name`` file, as
  ``--names``) and ``location_names`` (``true``: a ``location_name`` column, as
  ``--location-names``);

each with a sub-table ``parameters`` of the generator's constructor parameters
(:class:`~prefixtree.PrefixTreeSynthesizer`, :class:`~archetypes.ArchetypeSynthesizer`,
:class:`~synth.marginals.opal.OpalMarginals`; ``random_state`` comes from ``--seed`` and the
taxonomy or schema objects from the keys above). Several releases of one kind are an array of tables
(``[[sequences]]``) with a ``name`` each (e.g. an epsilon sweep); a single table is named after its
kind. Paths are relative to the config file's folder (absolute paths are allowed);
``embedded:NAME`` is a file of the embedded data (:data:`synth.datasets.FILES`, e.g.
``embedded:sube_wednesday``, ``embedded:montreal_taxonomy``); as the ``input`` of a sequences or
marginals release, the embedded SUBE taps lose their few taps without a card id, as in the demo.

Every release is written into ``DIR/<name>/`` exactly as its subcommand writes it (data files and
``manifest.json``); ``DIR/manifest.json`` states the guarantee of publishing them all together, per
privacy unit (basic composition: the sums of their epsilons and of their deltas); the config is
copied to ``DIR/config.toml`` with its private input paths (``input`` of sequences and marginals,
``private`` of trips) redacted. The whole config is checked
before any data is read: an unknown key or a value of the wrong type is an error naming the key and
the file. The run is staged and moved into DIR at the end, so an error leaves nothing half-written.
With ``--seed N``, release ``i`` gets seed ``N + i`` (from 0, kinds in the order they first appear,
releases of a kind in file order).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth import registry
from synth.cli.options import (
    add_provenance_option,
    add_quiet_option,
    add_seed_option,
    warn_if_seeded,
)
from synth.cli.releases import config_table, make_release
from synth.config import check_io, dump_config, load_config
from synth.errors import ConfigError
from synth.provenance import provenance_key

__all__ = ["Planned", "plan", "register", "run", "run_config"]


@dataclass
class Planned:
    """One release of a config, checked: its kind, folder name, IO settings and parameters."""

    kind: str
    name: str
    io: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    embedded: dict[str, str] = field(default_factory=dict)  # key -> embedded file name


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``run`` subcommand."""
    p = subparsers.add_parser(
        "run",
        help="run the releases a TOML config describes (transit-synth configs: the shipped ones)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("config", metavar="CONFIG.toml", help="the run configuration")
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="output directory (default: <config name>-release)",
    )
    add_seed_option(p)
    add_quiet_option(p)
    add_provenance_option(p)
    p.set_defaults(func=run)


def _check_parameters(kind: str, params: Any, *, source: Path, section: str) -> dict[str, Any]:
    """The ``parameters`` sub-table against the generator's parameter table
    (:mod:`synth.params`: exact key names, values the validator accepts)."""
    if not isinstance(params, dict):
        raise ConfigError(f"{source}: key 'parameters' in [{section}] must be a table")
    table = registry.get(kind).estimator_class().parameter_table
    checked = table.check_config(params, source=source, section=section)
    missing = [name for name in table.required() if name not in checked]
    if missing:
        raise ConfigError(f"{source}: missing key '{missing[0]}' in [{section}]")
    return checked


def _check_table(
    kind: str,
    table: Mapping[str, Any],
    *,
    source: Path,
    section: str,
    base: Path,
    check_files: bool,
) -> Planned:
    """Check one release table of a config: its IO keys and its ``parameters`` sub-table."""
    spec = registry.get(kind)
    io, embedded = check_io(
        config_table(kind),
        table,
        source=source,
        section=section,
        base=base,
        check_files=check_files,
        required=spec.required,
    )
    params = _check_parameters(
        kind,
        table.get("parameters", {}),
        source=source,
        section=section.replace(kind, f"{kind}.parameters", 1),
    )
    for key, parameter in spec.required_unless:
        if key not in io and not params.get(parameter):
            raise ConfigError(
                f"{source}: missing key '{key}' in [{section}] "
                f"(or set {parameter} in its parameters)"
            )
    return Planned(
        kind=kind, name=str(table.get("name", kind)), io=io, params=params, embedded=embedded
    )


def plan(path: str | os.PathLike[str], *, check_files: bool = True) -> list[Planned]:
    """Read and check a run config; returns its releases in file order (nothing is run).

    ``check_files=False`` skips checking that the input files exist (to inspect a config)."""
    source = Path(path)
    config = load_config(source)
    base = source.resolve().parent
    kinds = [spec.kind for spec in registry.specs()]
    unknown = [key for key in config if key not in kinds]
    if unknown:
        hint = (
            " (this is the old `transit-synth trips --config` form: write it as a [trips] table "
            "with a [trips.parameters] sub-table)"
            if set(config) & {"input", "archetypes"}
            else ""
        )
        raise ConfigError(
            f"{source}: unknown key '{unknown[0]}' (allowed tables: {', '.join(kinds)}){hint}"
        )
    releases: list[Planned] = []
    for kind, value in config.items():
        single = isinstance(value, dict)
        tables = [value] if single else value
        if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
            raise ConfigError(f"{source}: key '{kind}' must be a table or an array of tables")
        for i, table in enumerate(tables):
            name = table.get("name", kind if single else None)
            if not isinstance(name, str):
                raise ConfigError(
                    f"{source}: key 'name' in [[{kind}]] number {i + 1} is "
                    + ("missing" if name is None else f"not a string ({name!r})")
                )
            if not name or name.startswith(".") or "/" in name or "\\" in name:
                raise ConfigError(
                    f"{source}: key 'name' in [{kind}]: {name!r} is not a folder name"
                )
            if any(r.name == name for r in releases) or name == "config.toml":
                raise ConfigError(f"{source}: key 'name' in [{kind}]: {name!r} is used twice")
            section = kind if single else f"{kind}, name = {name!r}"
            planned = _check_table(
                kind, table, source=source, section=section, base=base, check_files=check_files
            )
            planned.name = name
            releases.append(planned)
    if not releases:
        tables = " or ".join(f"[{kind}]" for kind in kinds)
        raise ConfigError(f"{source}: no release ({tables}) in the file")
    return releases


def _input(planned: Planned) -> Any:
    """The ``input`` of a sequences or marginals release: its path, or for the embedded SUBE taps
    the frame the demo uses (the upstream file has 10 Wednesday taps without a card id: dropped)."""
    if "input" not in planned.io:  # trips read their public and private files themselves
        return None
    name = planned.embedded.get("input")
    days = {"sube_tuesday": "tuesday", "sube_wednesday": "wednesday"}
    if name not in days:
        return planned.io["input"]
    from synth import datasets

    taps = datasets.sube_taps(days[name])
    return taps[taps["id_tarjeta"].notna()].reset_index(drop=True)


def _release(planned: Planned, out: Path, seed: int | None, progress: Any) -> str:
    """Write one planned release into ``out`` (:func:`synth.cli.releases.make_release`)."""
    return make_release(
        planned.kind,
        out,
        io=planned.io,
        params=planned.params,
        data=_input(planned),
        seed=seed,
        progress=progress,
    )


REDACTED = "<private input: not published>"


def redacted_config(path: str | os.PathLike[str]) -> str:
    """The config ``path`` as copied into a run's folder: its private input paths replaced by
    :data:`REDACTED` (public inputs stay as written, relative to the config's folder): the
    ``private_keys`` of each kind's spec."""
    config = load_config(Path(path))
    for kind, value in config.items():
        for table in [value] if isinstance(value, dict) else value:
            spec = registry.find(kind)
            for key in spec.private_keys if spec is not None else ():
                if key in table:
                    table[key] = REDACTED
    header = (
        f"{Path(path).name}, as transit-synth run read it; private input paths redacted "
        "(comments not kept)"
    )
    return dump_config(config, header)


@contextlib.contextmanager
def _warnings_naming(stages: list[Path], out: str | os.PathLike[str]) -> Iterator[None]:
    """Warnings raised inside re-raised once it succeeded, naming ``out``, never the hidden
    staging folder (the last of ``stages``); on an error they are dropped with the run's output,
    so a bad config prints one line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        text = str(w.message)
        if stages:
            text = text.replace(str(stages[-1]), str(out))
        warnings.warn_explicit(text, w.category, w.filename, w.lineno)


def run_config(
    config: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    seed: int | None = None,
    quiet: bool = True,
    provenance_key: bytes | None = None,
) -> list[str]:
    """Check ``config``, run its releases into ``out`` (atomically); returns the summary lines.

    With ``provenance_key``, one operator-only record of every release's private input is written
    beside ``out`` (:mod:`synth.provenance`), never inside it."""
    from synth.outdir import release_dir
    from synth.progress import Progress
    from synth.provenance import private_inputs, write_provenance
    from synth.release import combined_manifest, read_manifest, write_manifest

    releases = plan(config)
    provenance = None
    if provenance_key is not None:
        provenance = private_inputs(
            provenance_key,
            {
                f"{r.name}: {key}": r.io[key]
                for r in releases
                for key in registry.get(r.kind).private_keys
                if key in r.io
            },
        )
    progress = Progress(quiet)
    summaries: list[str] = []
    inputs = [v for r in releases for v in r.io.values() if isinstance(v, str) and os.path.isabs(v)]
    stages: list[Path] = []
    # warnings and summaries wait until every release is in place: a late error prints one line
    with _warnings_naming(stages, out), release_dir(out, inputs=inputs) as stage:
        stages.append(stage)  # never over an input the config names
        (stage / "config.toml").write_text(redacted_config(config), encoding="utf-8")
        for i, planned in enumerate(progress.iterate(releases, "releases")):
            summary = _release(
                planned, stage / planned.name, None if seed is None else seed + i, progress
            )
            summary = summary.replace(str(stage), str(out))  # name the final place, not the stage
            # "NAME: summary", without the subcommand's own "KIND: " prefix
            summary = re.sub(rf"^(transit-synth )?{planned.kind}:\s*", "", summary)
            summaries.append(f"{planned.name}: {summary}")
        manifests = {r.name: read_manifest(stage / r.name) for r in releases}
        write_manifest(stage, combined_manifest(manifests))
    for line in summaries if not quiet else ():
        progress.write(line)
    if provenance is not None:
        write_provenance(out, provenance, command="run")
    return summaries


def run(args: argparse.Namespace) -> int:
    """``transit-synth run``."""
    warn_if_seeded(args.seed)
    out = Path(args.out) if args.out is not None else Path(f"{Path(args.config).stem}-release")
    summaries = run_config(
        args.config,
        out,
        seed=args.seed,
        quiet=args.quiet,
        provenance_key=provenance_key(args.provenance_key_file),
    )
    print(f"{len(summaries)} release(s) written to {out}/", file=sys.stdout)
    if not args.quiet and len(summaries) > 1:
        print(
            "note: each release spends its own budget on the same data; publishing several "
            "costs the sum of their budgets",
            file=sys.stderr,
        )
    return 0
