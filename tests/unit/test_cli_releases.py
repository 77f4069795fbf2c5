"""The release of a config table (:func:`synth.cli.releases.make_release`), the registry of
generators behind it, and the demo's settings read from the shipped ``demo`` config."""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path

import pytest

from synth import registry
from synth.cli import demo
from synth.cli.releases import config_table, make_release
from synth.cli.run import plan

ROOT = Path(__file__).resolve().parents[2]


def test_the_registry_names_the_three_kinds_and_their_estimators() -> None:
    assert [s.kind for s in registry.SHIPPED] == ["sequences", "trips", "marginals"]
    names = {s.kind: s.estimator_class().__name__ for s in registry.SHIPPED}
    assert names == {
        "sequences": "PrefixTreeSynthesizer",
        "trips": "ArchetypeSynthesizer",
        "marginals": "OpalMarginals",
    }
    for spec in registry.SHIPPED:
        assert set(spec.required) <= set(config_table(spec.kind))
    assert "card_column" in config_table("sequences") and "card_column" not in config_table("trips")


def test_make_release_writes_a_marginal_release(tmp_path: Path) -> None:
    taps = tmp_path / "taps.csv"
    rows = ["card_id,time,stop_id,mode"]
    rows += [f"c{i},2024-01-01T08:{i % 60:02d}:00,s{i % 3},bus" for i in range(60)]
    taps.write_text("\n".join(rows) + "\n")
    out = tmp_path / "rel"
    summary = make_release(
        "marginals",
        out,
        io={"input": str(taps)},
        params={"epsilon": 1.0, "delta": 1e-6, "bin": 60},
        seed=1,
    )
    assert "marginals" in summary
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parameters"]["generator"] == "opal-marginals"
    with pytest.raises(KeyError):
        make_release("histograms", tmp_path / "x", io={}, params={})


def test_the_shipped_demo_config_is_the_repository_one() -> None:
    from importlib import resources

    from synth.cli.configs import find

    with resources.as_file(find("demo")) as shipped:
        assert Path(shipped).read_bytes() == (ROOT / "configs" / "demo.toml").read_bytes()


def test_the_demo_reads_its_settings_from_the_demo_config() -> None:
    settings = demo.demo_settings()
    config = tomllib.loads((ROOT / "configs" / "demo.toml").read_text(encoding="utf-8"))
    assert sorted(settings) == [
        "marginals",
        "sequences-sube",
        "sequences-sube-timed",
        "trips-sube",
        "trips-taxi",
    ]
    assert settings["marginals"].params == config["marginals"]["parameters"]
    by_name = {t["name"]: t["parameters"] for t in [*config["sequences"], *config["trips"]]}
    for name, params in by_name.items():  # as the generator's table reads them (TOML lists)
        table = registry.get(settings[name].kind).estimator_class().parameter_table
        assert settings[name].params == table.check_config(params, source="demo", section=name)
    assert {p.name: p.params for p in plan(ROOT / "configs" / "demo.toml")} == {
        n: s.params for n, s in settings.items()
    }


def test_the_demo_marginal_release_uses_the_config_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the demo's own code path: change the config's epsilon, the manifest follows."""
    settings = copy.deepcopy(demo.demo_settings())
    settings["marginals"].params["epsilon"] = 3.0
    monkeypatch.setattr(demo, "demo_settings", lambda: settings)
    from synth import datasets

    taps = datasets.sube_taps("wednesday")
    taps = taps[taps["id_tarjeta"].notna()].head(2000).reset_index(drop=True)
    release, _ = demo._marginals(tmp_path, taps, 0, demo._Steps(quiet=True))
    manifest = json.loads((tmp_path / "marginals" / "manifest.json").read_text())
    assert manifest["spent"]["epsilon"] == pytest.approx(3.0)
    assert manifest["parameters"]["days"] == settings["marginals"].params["days"]
    assert release.epsilon == 3.0


def test_make_release_gives_a_release_function_every_option(tmp_path: Path) -> None:
    """A spec's ``release`` gets ``data``, ``seed``, ``progress`` and ``provenance_key`` (None
    when not given), as the registry documents, through the one option signature."""
    from synth.registry import GeneratorSpec

    seen: list[dict] = []

    def release(out: object, io: object, params: object, **options: object) -> str:
        seen.append(options)
        return "released"

    spec = GeneratorSpec(
        kind="optioned",
        generator="test-optioned",
        estimator="synth.marginals.opal:OpalMarginals",
        description="test",
        title="Test",
        summary="Test.",
        release=release,
    )
    registry.register(spec)
    try:
        assert make_release("optioned", tmp_path, io={}, params={}, seed=3) == "released"
    finally:
        registry.unregister("optioned")
    assert seen == [{"data": None, "seed": 3, "progress": None, "provenance_key": None}]
