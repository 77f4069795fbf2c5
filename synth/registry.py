"""The generator registry: one :class:`GeneratorSpec` per generator, read by every command.

A spec says everything the toolkit needs to know about a generator: its release ``kind`` (the
config table ``[kind]`` of ``transit-synth run``, its subcommand when it has one), the name its
manifests give it (``parameters.generator``), its estimator (a :class:`~synth.generator.Generator`),
the keys of its config table, what the report and the datasheet say about it, its empirical audit
runner, how ``evaluate`` and ``export`` read its data, and how a config table becomes a release.
Behaviour is named by dotted paths (``"package.module:name"``) imported on first use, so this
module, part of the foundation, never imports a generator package (``tests/test_layers.py``), and
``--help`` stays fast. :data:`SHIPPED` lists the three shipped generators; :func:`register` adds
one at run time (a plug-in, a test).

Adding a generator is its estimator module, its spec (here, or :func:`register`), and its tests:
``run`` checks its ``[kind]`` table against the spec and the estimator's constructor and writes it
with :func:`~synth.generator.Generator.write` (unless the spec names its own ``release``
function), ``evaluate`` reads its microdata (``data_table``) as its ``evaluation`` kind, the
report and the datasheet describe it from the spec, and ``audit --empirical`` finds its runner.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from synth.errors import ConfigError

__all__ = [
    "DEFAULT_TABLE",
    "SHIPPED",
    "AuditHook",
    "GeneratorSpec",
    "SheetFacts",
    "find",
    "for_estimator",
    "for_manifest",
    "generator_name",
    "get",
    "load",
    "register",
    "specs",
    "unregister",
]

#: a release's data formats (as :data:`synth.release.FORMATS`)
_FORMATS = ("csv", "parquet")
#: the config table of a generator that names none: its private ``input`` and the ``format``
DEFAULT_TABLE: Mapping[str, Any] = MappingProxyType({"input": "path", "format": _FORMATS})


class SheetFacts(NamedTuple):
    """What a release's datasheet (:mod:`synth.datasheet`) says of its method, from the manifest:
    who one privacy ``unit`` is (a phrase; None: "one <unit>"), what was truncated or bounded
    (``bounds``) and the distortions of the method by design (``distortions``)."""

    unit: str | None = None
    bounds: tuple[str, ...] = ()
    distortions: tuple[str, ...] = ()


@dataclass(frozen=True)
class AuditHook:
    """A generator as a mechanism of ``transit-synth audit --empirical``: the ``mechanism`` name
    of ``--empirical``, its ``runner`` (a :data:`synth.audit.empirical.RunnerFactory`, dotted
    path) and the ``help`` listing its ``--param`` keys."""

    mechanism: str
    runner: str | Callable[..., Any]
    help: str


@dataclass(frozen=True)
class GeneratorSpec:
    """One generator, as every command sees it.

    - ``kind``: the release kind: the config table ``[kind]`` of ``run``, the release folder of a
      single table, the subcommand (``command``) when it has one;
    - ``generator``: its name in manifests (``parameters.generator``; nothing else is read),
      defined here only: the estimator's :meth:`~synth.generator.Generator.manifest_name` reads
      it (:func:`for_estimator`);
    - ``estimator``: the :class:`~synth.generator.Generator` class (dotted path or the class);
    - ``description``: one line for the report (what the release is, citing its paper);
      ``details``: params -> the words appended to it (variant, height ...);
    - ``title``, ``summary``: the datasheet's title and paragraph; ``datasheet``: manifest ->
      :class:`SheetFacts`;
    - ``table``: the config-table keys (besides ``name`` and ``parameters``) and their rules
      (:func:`synth.config.check_io`); ``input_map``: the table also takes the input-mapping keys
      (``card_column`` ...); ``gtfs``: and ``gtfs_stations``, ``gtfs_route_rule`` (a GTFS
      taxonomy's options); ``required``: keys that must be given; ``required_unless``: (key,
      parameter) pairs, the key is required unless the parameter is set; ``private_keys``: keys
      naming private inputs (redacted in the copy of the config, the provenance record);
    - ``release``: ``(out, io, params, *, data, seed, progress, provenance_key) -> summary line``
      (dotted path); None: fit the estimator on ``input`` and :meth:`~Generator.write` it;
    - ``command``: (CLI module, one-line help) of its own subcommand, or None (``run`` only);
    - ``data_table``: the stem of its microdata file (``sequences`` -> ``sequences.csv``), or
      None (count tables only); ``evaluation``: how ``evaluate`` and ``export`` read that file
      (``"sequences"``: long-format sequences, ``"trips"``: a trip table), or None;
    - ``report_section``: the report's glossary section of a release shown without an
      evaluation against the original (``"marginals"``: noisy counts);
    - ``audit``: its :class:`AuditHook`, or None.
    """

    kind: str
    generator: str
    estimator: str | type
    description: str
    title: str
    summary: str
    table: Mapping[str, Any] = field(default_factory=lambda: DEFAULT_TABLE)
    input_map: bool = False
    gtfs: bool = False
    required: tuple[str, ...] = ("input",)
    required_unless: tuple[tuple[str, str], ...] = ()
    private_keys: tuple[str, ...] = ("input",)
    release: str | Callable[..., str] | None = None
    command: tuple[str, str] | None = None
    data_table: str | None = None
    evaluation: str | None = None
    report_section: str = "marginals"
    details: str | Callable[[Mapping[str, Any]], str] | None = None
    datasheet: str | Callable[[Mapping[str, Any]], SheetFacts] | None = None
    audit: AuditHook | None = None

    def __post_init__(self) -> None:
        missing = [k for k in self.required if k not in self.table]
        if missing:
            raise ValueError(f"{self.kind}: required key {missing[0]!r} is not in its table")
        if self.evaluation not in (None, "sequences", "trips"):
            raise ValueError(f"{self.kind}: evaluation must be sequences, trips or None")
        if self.evaluation is not None and self.data_table is None:
            raise ValueError(f"{self.kind}: an evaluated release names its data_table")

    def estimator_class(self) -> Any:
        """The estimator class (imported on first use)."""
        return load(self.estimator)

    def other_use(self) -> str:
        """What to do with such a release where a command does not read it."""
        if self.evaluation is not None:
            return f"export it or evaluate it with --kind {self.evaluation}"
        return f"check a {self.kind} release with transit-synth audit"

    def describe(self, params: Mapping[str, Any]) -> str:
        """The report's line: :attr:`description` and its ``details`` of ``params``."""
        if self.details is None:
            return self.description
        return f"{self.description}, {load(self.details)(params)}"

    def sheet_facts(self, manifest: Mapping[str, Any]) -> SheetFacts:
        """The datasheet's facts of ``manifest`` (none when the spec names no ``datasheet``)."""
        return SheetFacts() if self.datasheet is None else load(self.datasheet)(manifest)


def load(target: str | Any) -> Any:
    """The object a dotted path ``"package.module:name"`` names (imported now); any other value
    is returned as given (a spec may hold the object itself)."""
    if not isinstance(target, str):
        return target
    module, _, name = target.partition(":")
    if not name:
        raise ValueError(f"not a dotted path 'module:name': {target!r}")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


# --------------------------------------------------------------------------- the shipped three
#: keys of a ``[sequences]`` table (the input-mapping and GTFS keys too: ``input_map``, ``gtfs``)
_SEQUENCES_TABLE = MappingProxyType(
    {
        "input": "path",
        "taxonomy": "spec",
        "location_column": str,
        "locations": "path",
        "on_unknown": ("error", "drop"),
        "format": _FORMATS,
        "timezone": str,
    }
)
#: keys of a ``[trips]`` table (``run`` and ``trips --config``)
_TRIPS_TABLE = MappingProxyType(
    {
        "private": "path",
        "public": "path",
        "input_format": ("trips", "chicago-taxi", "sube-taps"),
        "public_years": "years",
        "private_years": "years",
        "metadata": "path",
        "schema": "path",
        "format": _FORMATS,
        "sep": str,
    }
)
#: keys of a ``[marginals]`` table (the input-mapping and GTFS keys too)
_MARGINALS_TABLE = MappingProxyType(
    {
        "input": "path",
        "taxonomy": "spec",
        "location_column": str,
        "on_unknown": ("error", "drop"),
        "format": _FORMATS,
        "timezone": str,
    }
)

#: The shipped generators, in the order of ``--help``, ``run``'s error messages and the report.
SHIPPED: tuple[GeneratorSpec, ...] = (
    GeneratorSpec(
        kind="sequences",
        generator="prefixtree",
        estimator="prefixtree.synthesizer:PrefixTreeSynthesizer",
        description="passenger sequences from a noisy prefix tree (Chen et al. 2012)",
        title="Synthetic passenger sequences",
        summary="Synthetic passenger sequences: each sequence is one made-up passenger's "
        "ordered locations (stations, lines or zones) of one day. They come from a noisy prefix "
        "tree of the real sequences (Chen et al. 2012). No row is a real passenger.",
        table=_SEQUENCES_TABLE,
        input_map=True,
        gtfs=True,
        required=("input", "taxonomy"),
        release="synth.cli.releases:make_sequences",
        command=(
            "synth.cli.sequences",
            "DP synthetic passenger sequences (noisy prefix tree, Chen et al. 2012)",
        ),
        data_table="sequences",
        evaluation="sequences",
        report_section="sequences",
        details="synth.datasheet:prefixtree_details",
        datasheet="synth.datasheet:prefixtree_facts",
        audit=AuditHook(
            "prefixtree",
            "prefixtree.audit:prefixtree_runner",
            "the noisy prefix tree's synthetic sequences: epsilon, height, variant, taxonomy "
            "(long-format sequences)",
        ),
    ),
    GeneratorSpec(
        kind="trips",
        generator="archetypes",
        estimator="archetypes.synthesizer:ArchetypeSynthesizer",
        description="trips from GMM archetypes (NIST temporal map challenge, GooseDP team)",
        title="Synthetic trips",
        summary="Synthetic trips: each row is one made-up trip of a made-up individual, drawn "
        "from noisy counts of the real trips (the tables manifest.json lists) and noisy "
        "counts of individuals per archetype (clusters; NIST temporal map challenge, GooseDP "
        "team). No row is a real trip.",
        table=_TRIPS_TABLE,
        # no required_unless: whether public trips are needed is the estimator's rule (fit:
        # not with the joint model, the default, nor with public_stand_in), as for `trips`
        required=("private",),
        private_keys=("private",),
        release="synth.cli.releases:make_trips",
        command=(
            "synth.cli.trips",
            "synthetic trips from GMM archetypes (GooseDP, NIST 2020 challenge)",
        ),
        data_table="trips",
        evaluation="trips",
        report_section="trips",
        details="synth.datasheet:archetypes_details",
        datasheet="synth.datasheet:archetypes_facts",
    ),
    GeneratorSpec(
        kind="marginals",
        generator="opal-marginals",
        estimator="synth.marginals.opal:OpalMarginals",
        description="six marginal tables of tap-ons and tap-offs, stability-based histograms "
        "(Asghar et al. 2018, the Opal release)",
        title="Noisy count tables of tap-ons and tap-offs",
        summary="Noisy counts of tap-ons and tap-offs by mode, day, time bin and location "
        "(the Opal release method, Asghar et al. 2018). Each file is one table of counts; small "
        "noisy counts are suppressed.",
        table=_MARGINALS_TABLE,
        input_map=True,
        gtfs=True,
        release="synth.cli.releases:make_marginals",
        command=(
            "synth.cli.marginals",
            "SBH marginal tables per mode x day (Opal, Asghar et al. 2018)",
        ),
        details="synth.datasheet:opal_details",
        datasheet="synth.datasheet:opal_facts",
        audit=AuditHook(
            "marginals",
            "synth.audit.empirical:marginals_runner",
            "the Opal release: epsilon, delta, mode (sbh|consistent|pure), bin_minutes, "
            "privacy_unit, max_contributions (taps or trips)",
        ),
    ),
)

_REGISTRY: dict[str, GeneratorSpec] = {s.kind: s for s in SHIPPED}


def register(spec: GeneratorSpec) -> GeneratorSpec:
    """Add ``spec`` to the registry (ConfigError when its kind or generator name is taken)."""
    for other in _REGISTRY.values():
        if spec.kind == other.kind or spec.generator == other.generator:
            raise ConfigError(f"a generator {spec.kind!r} ({spec.generator}) is registered")
    _REGISTRY[spec.kind] = spec
    return spec


def unregister(kind: str) -> None:
    """Remove the generator ``kind`` added by :func:`register` (the shipped ones stay)."""
    if any(s.kind == kind for s in SHIPPED):
        raise ConfigError(f"{kind} is a shipped generator")
    _REGISTRY.pop(kind, None)


def specs() -> Iterator[GeneratorSpec]:
    """Every registered generator: the shipped ones first, in order."""
    return iter(list(_REGISTRY.values()))


def get(kind: str) -> GeneratorSpec:
    """The spec of the release ``kind`` (KeyError naming the known kinds otherwise)."""
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise KeyError(f"no generator {kind!r}; known: {', '.join(_REGISTRY)}") from None


def find(kind: str) -> GeneratorSpec | None:
    """The spec of the release ``kind``, None when no generator has that kind."""
    return _REGISTRY.get(kind)


def generator_name(manifest: Mapping[str, Any] | None) -> str | None:
    """The generator a release manifest names (``parameters.generator``), None when it names
    none."""
    params = (manifest or {}).get("parameters") or {}
    if not isinstance(params, Mapping):
        return None
    name = params.get("generator")
    return str(name) if name else None


def for_manifest(manifest: Mapping[str, Any] | None) -> GeneratorSpec | None:
    """The spec of the generator ``manifest`` names; None when it names no registered one."""
    name = generator_name(manifest)
    return next((s for s in _REGISTRY.values() if s.generator == name), None)


def for_estimator(cls: type) -> GeneratorSpec | None:
    """The spec whose ``estimator`` is ``cls`` or its nearest base class (a subclass writes its
    base's manifests), matched by the class, its dotted path, or a dotted path into a module
    already imported that names it (a re-export), so no other estimator is imported; None when
    no registered generator names it."""
    for klass in cls.__mro__:
        path = f"{klass.__module__}:{klass.__qualname__}"
        for spec in _REGISTRY.values():
            if spec.estimator is klass or spec.estimator == path or _names(spec.estimator, klass):
                return spec
    return None


def _names(target: str | Any, cls: type) -> bool:
    """Whether the dotted path ``target`` into an already imported module names ``cls``."""
    if not isinstance(target, str) or target.partition(":")[0] not in sys.modules:
        return False
    try:
        return load(target) is cls
    except AttributeError:
        return False
