"""The generator registry (:mod:`synth.registry`): the shipped specs, lookups, registration."""

from __future__ import annotations

import pytest

from synth import registry
from synth.errors import ConfigError
from synth.registry import GeneratorSpec
from synth.release import data_kinds, manifest_kind
from synth.report.formatting import ReleaseEntry
from synth.report.summary import entry_kinds, release_description


def _spec(**changes: object) -> GeneratorSpec:
    fields: dict[str, object] = {
        "kind": "counts",
        "generator": "test-counts",
        "estimator": "synth.marginals.opal:OpalRelease",
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
