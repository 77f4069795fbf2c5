"""A fourth generator, registered in a few lines here, goes through every command.

``NoisyOD`` counts trips per (origin, destination, hour) over a public domain (its parameters),
adds discrete Laplace noise to every cell (zeros included; one trip changes one cell by one, so
epsilon-DP per trip), releases the counts and trips re-drawn from them. Its spec, registered by
the fixture, names nothing the commands know: ``run`` must find its ``[odcounts]`` table,
``evaluate`` its ``odtrips`` file, the report and the datasheet its description, ``audit
--empirical`` its runner, all through :mod:`synth.registry` (a hard-coded kind list fails here).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest

from synth import registry
from synth.audit.empirical import Runner, loop_runner
from synth.cli import main
from synth.generator import Generator, read_data
from synth.params import COLUMNS, SEQUENCE, Interval, Param, ParamTable, Satisfies
from synth.privacy import DiscreteLaplace, PrivacyLedger
from synth.privacy.noise import noise_source
from synth.registry import AuditHook, GeneratorSpec, SheetFacts
from synth.release import ReleaseWriter


class NoisyOD(Generator):
    """Trips per (origin, destination, hour), discrete Laplace noise on every public cell."""

    #: its one parameter table (:mod:`synth.params`): validator and ``run`` config keys
    parameter_table: ClassVar[ParamTable] = ParamTable(
        "NoisyOD",
        [
            Param("epsilon", (Interval("real", 0, None, "neither"),), "budget", default=1.0),
            Param("stops", (COLUMNS,), "public stop list", default=()),
            Param("hours", (SEQUENCE,), "public hours", default=tuple(range(24))),
            Param(
                "random_state",
                (None, Satisfies(lambda _: True, "an int or a noise source")),
                "seed or noise source",
                default=None,
                api_only="a noise object has no text form",
            ),
        ],
    )
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = parameter_table.constraints()

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        stops: Sequence[str] = (),
        hours: Sequence[int] = tuple(range(24)),
        random_state: Any = None,
    ) -> None:
        self.epsilon, self.stops, self.hours, self.random_state = (
            epsilon,
            stops,
            hours,
            random_state,
        )

    def fit(self, data: Any) -> NoisyOD:
        self._validate_params()
        trips = read_data(data, "trips")
        hours = pd.to_datetime(trips["on_time"], format="ISO8601").dt.hour
        cells = pd.MultiIndex.from_product([list(self.stops), list(self.stops), list(self.hours)])
        true = (
            pd.Series(1, index=[trips["on_stop"], trips["off_stop"], hours])
            .groupby(level=[0, 1, 2])
            .sum()
        )
        self.ledger_ = PrivacyLedger(epsilon=self.epsilon, unit="trip")
        noisy = DiscreteLaplace(epsilon=self.epsilon).release(
            true.reindex(cells, fill_value=0).to_numpy(),
            noise=noise_source(self.random_state),
            ledger=self.ledger_,
            label="counts",
            note="every public-domain cell perturbed",
        )
        self.counts_ = cells.to_frame(index=False, name=["on_stop", "off_stop", "hour"])
        self.counts_["count"] = noisy
        return self

    def sample(self) -> pd.DataFrame:
        self._check_fitted()
        rows = self.counts_.loc[self.counts_.index.repeat(np.maximum(self.counts_["count"], 0))]
        times = rows["hour"].map(lambda h: f"2024-01-01T{h:02d}:00:00")
        return pd.DataFrame(
            {"card_id": [f"s{i}" for i in range(len(rows))], "on_time": times.to_numpy()}
        ).assign(on_stop=rows["on_stop"].to_numpy(), off_stop=rows["off_stop"].to_numpy())

    def parameters(self) -> dict[str, Any]:
        return {
            "generator": self.manifest_name(),
            "epsilon": self.epsilon,
            "stops": list(self.stops),
        }

    def _write_data(self, release: ReleaseWriter, format: str) -> dict[str, int]:
        trips = self.sample()
        release.table(self.counts_, "counts", format)
        release.table(trips, "odtrips", format)
        return {"cells": len(self.counts_), "trips": len(trips)}


def od_runner(params: dict, d: pd.DataFrame, d_prime: pd.DataFrame, noise: Any) -> Runner:
    """The audit hook: the counts of NoisyOD over the stops of D and D'."""
    stops = sorted(set(d["on_stop"]) | set(d["off_stop"]) | set(d_prime["on_stop"]))
    return loop_runner(
        lambda x: NoisyOD(stops=stops, hours=(7, 8, 9), random_state=noise, **params).fit(x).counts_
    )


SPEC = GeneratorSpec(
    kind="odcounts",
    generator="test-od",
    estimator=f"{__name__}:NoisyOD",
    description="noisy origin-destination counts per hour (a test generator)",
    title="Noisy OD counts (test)",
    summary="Trips per origin, destination and hour, with discrete Laplace noise.",
    data_table="odtrips",
    evaluation="trips",
    datasheet=lambda m: SheetFacts("one trip", ("stops from the public list",), ()),
    audit=AuditHook("odcounts", f"{__name__}:od_runner", "epsilon"),
)


@pytest.fixture
def od_spec() -> Iterator[GeneratorSpec]:
    registry.register(SPEC)
    yield SPEC
    registry.unregister(SPEC.kind)


def _trips(path: Path, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    stops = np.array(["a", "b", "c"])
    pd.DataFrame(
        {
            "card_id": [f"c{i}" for i in range(n)],
            "on_time": [f"2024-01-01T{h:02d}:10:00" for h in rng.integers(7, 10, n)],
            "on_stop": rng.choice(stops, n),
            "off_stop": rng.choice(stops, n),
        }
    ).to_csv(path, index=False)
    return path


def test_a_registered_generator_runs_evaluates_reports_and_audits(
    od_spec: GeneratorSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = _trips(tmp_path / "trips.csv", 300, 0)
    config = tmp_path / "od.toml"
    config.write_text(
        '[odcounts]\ninput = "trips.csv"\n[odcounts.parameters]\nepsilon = 2.0\n'
        'stops = ["a", "b", "c"]\n'
    )
    out = tmp_path / "rel"
    assert main(["run", str(config), "--out", str(out), "--seed", "1", "--quiet"]) == 0
    release = out / "odcounts"
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["parameters"]["generator"] == "test-od" and manifest["privacy_unit"] == "trip"
    assert json.loads((out / "manifest.json").read_text())["releases"][0]["generator"] == "test-od"
    readme = (release / "README.md").read_text()
    assert "Noisy OD counts (test)" in readme and "one trip" in readme
    assert "stops from the public list" in readme

    evaluation = tmp_path / "eval"
    assert main(["evaluate", str(original), str(release), "--out", str(evaluation), "--quiet"]) == 0
    results = json.loads((evaluation / "private-evaluation.json").read_text())
    assert results["kind"] == "trips" and list(results["releases"]) == ["odcounts"]
    assert results["inputs"]["odcounts"].endswith("odtrips.csv")
    report = (evaluation / "private-report.html").read_text(encoding="utf-8")
    assert SPEC.description in report

    audit = tmp_path / "audit"
    assert main(["audit", str(release), "--out", str(audit), "--quiet"]) == 0
    audited = json.loads((audit / "audit.json").read_text())
    assert audited["release_kind"] == "test-od"
    d = _trips(tmp_path / "d.csv", 30, 1)  # D' = D without its last trip
    pd.read_csv(d).iloc[:29].to_csv(tmp_path / "d_prime.csv", index=False)
    argv = [
        "audit",
        "--empirical",
        "odcounts",
        "--neighbours",
        str(d),
        str(tmp_path / "d_prime.csv"),
    ]
    argv += [
        "--param",
        "epsilon=1",
        "--trials",
        "60",
        "--seed",
        "2",
        "--out",
        str(tmp_path / "emp"),
    ]
    assert main([*argv, "--quiet"]) == 0, capsys.readouterr().err
    empirical = json.loads((tmp_path / "emp" / "audit.json").read_text())["empirical"]
    assert empirical["mechanism"] == "odcounts" and not empirical["violated"]


def test_an_unregistered_generator_is_unknown_to_every_command(tmp_path: Path) -> None:
    """The same table without the spec: ``run`` refuses it, so the test above is not vacuous."""
    config = tmp_path / "od.toml"
    _trips(tmp_path / "trips.csv", 10, 0)
    config.write_text('[odcounts]\ninput = "trips.csv"\n')
    assert main(["run", str(config), "--out", str(tmp_path / "rel")]) == 2
    assert registry.find("odcounts") is None
