"""The generator registry (:mod:`synth.registry`): the shipped specs, lookups, registration."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth import registry
from synth.errors import ConfigError
from synth.generator import Generator
from synth.marginals import OpalMarginals
from synth.registry import GeneratorSpec
from synth.release import data_kinds, manifest_kind
from synth.report.formatting import ReleaseEntry
from synth.report.summary import entry_kinds, release_description


def _spec(**changes: object) -> GeneratorSpec:
    fields: dict[str, object] = {
        "kind": "counts",
        "generator": "test-counts",
        "estimator": "synth.marginals.opal:OpalMarginals",
        "description": "test counts",
        "title": "Test counts",
        "summary": "Counts.",
    }
    return GeneratorSpec(**{**fields, **changes})  # type: ignore[arg-type]


def test_the_shipped_specs_name_their_generators_and_hooks() -> None:
    assert [(s.kind, s.generator) for s in registry.SHIPPED] == [
        ("sequences", "prefixtree"),
        ("trips", "archetypes"),
        ("marginals", "opal-marginals"),
    ]
    for spec in registry.SHIPPED:  # every dotted path resolves
        for target in (spec.estimator, spec.release, spec.details, spec.datasheet):
            assert callable(registry.load(target))
        assert spec.command is not None and spec.command[0] == f"synth.cli.{spec.kind}"
    assert [s.audit.mechanism for s in registry.SHIPPED if s.audit] == ["prefixtree", "marginals"]
    assert data_kinds() == ("sequences", "trips")


def test_a_manifest_names_its_generator_under_generator_only() -> None:
    assert manifest_kind({"parameters": {"generator": "archetypes"}}) == "trips"
    assert manifest_kind({"parameters": {"release": "opal-marginals"}}) is None
    assert registry.for_manifest({"parameters": ["not", "a", "table"]}) is None
    assert registry.for_manifest(None) is None


def test_register_refuses_a_taken_name_and_unregister_a_shipped_one() -> None:
    with pytest.raises(ConfigError):
        registry.register(_spec(kind="trips"))
    with pytest.raises(ConfigError):
        registry.register(_spec(generator="prefixtree"))
    with pytest.raises(ConfigError):
        registry.unregister("sequences")
    with pytest.raises(KeyError, match="known: sequences, trips, marginals"):
        registry.get("counts")


def test_a_spec_is_checked_when_made() -> None:
    with pytest.raises(ValueError, match="required key 'private'"):
        _spec(required=("private",))
    with pytest.raises(ValueError, match="evaluation"):
        _spec(evaluation="histograms")
    with pytest.raises(ValueError, match="data_table"):
        _spec(evaluation="trips")
    with pytest.raises(ValueError, match="dotted path"):
        registry.load("synth.registry")


def test_the_report_describes_a_registered_generator_from_its_spec() -> None:
    registry.register(_spec(details=lambda p: f"{p['cells']} cells", report_section="trips"))
    try:
        manifest = {"parameters": {"generator": "test-counts", "cells": 7}}
        assert release_description(manifest) == "test counts, 7 cells"
        assert entry_kinds([ReleaseEntry("r", "t", manifest)]) == {"trips"}
        assert manifest_kind(manifest) == "counts" and "counts" not in data_kinds()
    finally:
        registry.unregister("counts")
    assert release_description(manifest) == "a synthetic table"
    assert entry_kinds([ReleaseEntry("r", "t", manifest)]) == {"marginals"}


class Tallies(OpalMarginals):
    """A generator named through another name (``Tally``) of its module."""


Tally = Tallies


def test_a_generator_s_manifest_name_is_written_once_in_its_spec() -> None:
    """Issue 27: the estimator's manifests name it by its spec's ``generator`` (the one place
    the name is written), so renaming a spec renames its manifests; before, each estimator also
    wrote its name as a literal in ``parameters()``."""
    for spec in registry.SHIPPED:
        assert spec.estimator_class().manifest_name() == spec.generator
    root = Path(__file__).resolve().parents[2]
    names = "|".join(re.escape(s.generator) for s in registry.SHIPPED)
    literal = re.compile(rf"[\"']generator[\"']\s*:\s*[\"']({names})[\"']")
    sources = [p for d in ("synth", "prefixtree", "archetypes") for p in (root / d).rglob("*.py")]
    repeated = [
        str(p.relative_to(root))
        for p in sources
        if p.name != "registry.py" and literal.search(p.read_text(encoding="utf-8"))
    ]
    assert not repeated, repeated

    class Counts(OpalMarginals):
        """A subclass writes its base's name until a spec names it."""

    assert Counts.manifest_name() == "opal-marginals"
    rng = np.random.default_rng(0)
    taps = pd.DataFrame(
        {
            "mode": "bus",
            "on_time": pd.Timestamp("2016-07-25 08:00")
            + pd.to_timedelta(rng.integers(0, 60, 50), "m"),
            "on_stop": rng.choice(["a", "b"], 50),
        }
    )
    registry.register(_spec(estimator=Counts))
    try:
        assert Counts.manifest_name() == "test-counts"
        fitted = Counts(random_state=1).fit(taps)
        assert fitted.parameters()["generator"] == "test-counts"
        assert registry.for_manifest(fitted.manifest()) is registry.get("counts")
    finally:
        registry.unregister("counts")

    registry.register(_spec(estimator=f"{__name__}:Tally"))  # a path through a re-export
    try:
        assert Tallies.manifest_name() == "test-counts"
    finally:
        registry.unregister("counts")

    class Unregistered(Generator):
        """No spec names it (nor a base of it)."""

    with pytest.raises(ConfigError, match="Unregistered is not a registered generator"):
        Unregistered.manifest_name()
