"""The zero-count check and Theorem 1's delta bound (paper 001 section 3, Appendix C)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth.audit import audit_release, check_zeros, load_release, second_algorithm, theorem1_delta
from synth.audit.release import zeros_perturbed
from synth.audit.zeros import presence_probability
from synth.marginals.opal import OpalMarginals
from synth.privacy import threshold_delta
from synth.taxonomy import Taxonomy


def _taps(n: int = 4000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    time = pd.Timestamp("2016-07-25") + pd.to_timedelta(rng.integers(0, 1440, n), unit="m")
    return pd.DataFrame(
        {
            "time": time,
            "stop_id": rng.choice(["s0", "s1", "s2", "s3"], n, p=[0.55, 0.25, 0.15, 0.05]),
            "mode": "bus",
            "tap": rng.choice(["on", "off"], n),
        }
    )


def _release(tmp_path: Path, mode: str) -> Path:
    kwargs: dict = {}
    if mode == "pure":
        edges = [(f"s{i}", "zone") for i in range(4)] + [("zone", "root")]
        kwargs = {"taxonomy": Taxonomy.from_edges(edges), "modes": ["bus"], "days": ["2016-07-25"]}
    out = tmp_path / mode
    OpalMarginals(epsilon=8, delta=1e-5, mode=mode, bin=60, random_state=1, **kwargs).fit(
        _taps()
    ).write(out)
    return out


@pytest.fixture
def second(tmp_path: Path) -> Path:
    """The 'Second Algorithm': zeros unperturbed, threshold 18, Laplace scale 1.4."""
    counts = pd.DataFrame(
        {"location": [f"s{i}" for i in range(40)], "count": np.arange(40) % 20 * 3}
    )
    return second_algorithm(
        {"off_location": counts}, tmp_path / "second", rng=np.random.default_rng(0)
    )


def test_theorem1_as_published() -> None:
    assert theorem1_delta(1.4, 18) == pytest.approx(math.exp(-17 / 1.4) / 2.8)
    assert theorem1_delta(1.4, 18) == pytest.approx(1.9e-6, rel=0.02)  # "about 0.000002"


def test_presence_probability_matches_the_privacy_core() -> None:
    for scale, tau in ((2.0, 29), (1.0, 15), (0.5, 8)):
        core = threshold_delta(scale, tau, 1)  # max(P(Z >= tau - 1), 1 * P(Z >= tau - 1))
        ours = presence_probability(scale, tau, 1, discrete=True)
        assert ours == pytest.approx(core, rel=1e-8)
    # continuous Laplace: P(1 + L >= 18) = exp(-17/p)/2
    assert presence_probability(1.4, 18, 1, discrete=False) == pytest.approx(
        math.exp(-17 / 1.4) / 2
    )
    # the paper's groups: 5 people ~ 0.00004, 12 people ~ 0.005 (with its density formula)
    assert theorem1_delta(1.4, 18 - 4) == pytest.approx(4e-5, rel=0.25)
    assert theorem1_delta(1.4, 18 - 11) == pytest.approx(5e-3, rel=0.05)


def test_second_algorithm_gives_theorem1_bound(second: Path) -> None:
    (check,) = check_zeros(load_release(second))
    assert check.zeros_perturbed is False
    assert check.theorem1_delta == pytest.approx(1.9e-6, rel=0.02)
    assert check.delta_lower_bound == pytest.approx(math.exp(-17 / 1.4) / 2)
    assert check.claimed_delta == 0 and check.understated
    assert check.group_delta[5] > check.group_delta[1]
    report = audit_release(second)
    assert report["zeros"]["theorem1_delta"] == pytest.approx(1.9e-6, rel=0.02)
    high = [f for f in report["findings"] if f["severity"] == "high"]
    assert [f["check"] for f in high] == ["zeros"]


def test_pure_mode_reports_no_bound(tmp_path: Path) -> None:
    release = load_release(_release(tmp_path, "pure"))
    checks = check_zeros(release)
    assert len(checks) == 6 and all(c.zeros_perturbed is True for c in checks)
    assert all(c.theorem1_delta is None and not c.understated for c in checks)
    report = audit_release(release.path)
    assert report["zeros"]["theorem1_delta"] is None
    assert all(f["severity"] == "info" for f in report["findings"] if f["check"] == "zeros")


def test_sbh_mode_bound_is_covered_by_its_delta(tmp_path: Path) -> None:
    checks = check_zeros(load_release(_release(tmp_path, "sbh")))
    assert len(checks) == 6
    for c in checks:
        assert c.zeros_perturbed is False and c.delta_lower_bound is not None
        assert 0 < c.delta_lower_bound <= c.claimed_delta and not c.understated


@pytest.mark.parametrize(
    ("mechanism", "delta", "note", "expected"),
    [
        ("discrete_laplace", 0.0, "every public-domain cell perturbed, zeros included", True),
        ("discrete_laplace_threshold", 1e-6, "present cells only", False),
        ("threshold_histogram", 1e-6, "", False),
        ("threshold_histogram", 0.0, "", True),
        ("discrete_gaussian", 1e-6, "values of the public domain", True),
        ("laplace_threshold_nonzero", 0.0, "", False),
        ("mystery", 0.0, "", None),
    ],
)
def test_zero_classification(
    mechanism: str, delta: float, note: str, expected: bool | None
) -> None:
    assert zeros_perturbed(mechanism, delta, note) is expected
