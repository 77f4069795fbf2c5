"""The joint mode's ``k`` without public trips (issue 28): the median of the RELEASED
trips-per-individual histogram, paid for in the ledger, and the measurement's sensitivity is
computed with that released ``k``; and that ``k`` bounds an individual's measured trips whatever
the private frame's index."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from archetypes.measure import spread_individuals
from tests.conftest import riders
from tests.unit.test_archetypes_joint import joint


def test_without_public_data_k_is_the_noisy_median_and_sets_the_sensitivity(
    zero_noise: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every card rides once (the exact median is 1), but the released trips-per-card histogram
    (the first draw, 16 cells) says three: ``k`` is read from the released histogram, never the
    exact one, and the measurement's sensitivity is computed with that released ``k``. Reading
    the exact counts, or measuring with another ``k``, fails here; the old ``1 <= k <= 3`` bound
    held for either."""
    from synth.privacy import SecureNoise

    draws: list[int] = []

    def shifted(self: object, sigma: float, size: int) -> np.ndarray:
        out = np.zeros(int(size), dtype=np.int64)
        if not draws:  # the trips-per-card histogram: cell 3 (three trips) gets 10,000
            out[2] = 10_000
        draws.append(int(size))
        return out

    monkeypatch.setattr(SecureNoise, "discrete_gaussian", shifted)
    private = riders(300, 1).drop_duplicates("card")
    syn = joint().fit(private)
    assert draws[0] == 16  # the histogram came first (its median sets k)
    assert syn.joint_k_ == 3
    measured = syn.measurements_[0]
    assert measured.k == 3
    norm = sum(w * w for w in measured.weights)
    assert measured.mechanism.sensitivity == pytest.approx(3 * np.sqrt(norm))
    assert syn.manifest()["parameters"]["joint"]["max_records_per_individual"] == 3


def test_a_repeated_index_does_not_multiply_an_individuals_trips(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two private frames concatenated without ``ignore_index`` (every label twice): the joint
    measurement counts at most ``k`` trips per card, as on the same rows with a fresh index, and
    the release is the same. The bounding (``spread_individuals``) selected rows by label, so
    each kept label brought back every row holding it: 2,005 trips measured for 600 cards at
    k = 2 (at most 1,200)."""
    import pandas as pd

    import archetypes.jointtables
    from archetypes.measure import measure

    counted: list[np.ndarray] = []

    def spy(codes: np.ndarray, *args: object, **kwargs: object) -> object:
        counted.append(codes)
        return measure(codes, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(archetypes.jointtables, "measure", spy)
    repeated = pd.concat([riders(300, 1), riders(300, 2)])
    assert not repeated.index.is_unique
    fresh = repeated.reset_index(drop=True)
    a = joint(random_state=1).fit(fresh)
    b = joint(random_state=1).fit(repeated)
    assert a.joint_k_ == b.joint_k_
    assert len(counted[1]) == len(counted[0]) <= a.joint_k_ * fresh["card"].nunique()
    pd.testing.assert_frame_equal(a.sample(), b.sample())


def test_spread_individuals_keeps_rows_by_position_under_a_repeated_index() -> None:
    """Two frames joined without ``ignore_index`` repeat every label: the spread still keeps at
    most k rows per individual, the same rows as on a fresh index (by label it gave back every
    row of a kept label)."""
    one = pd.DataFrame({"card": ["x"] * 5 + ["y"] * 3, "hour": [9, 1, 5, 7, 3, 2, 8, 4]})
    doubled = pd.concat([one, one.assign(card=one["card"] + "2")])
    got = spread_individuals(doubled, "card", 2, "hour")
    assert got.groupby("card").size().to_dict() == {"x": 2, "x2": 2, "y": 2, "y2": 2}
    fresh = spread_individuals(doubled.reset_index(drop=True), "card", 2, "hour")
    assert got.reset_index(drop=True).equals(fresh.reset_index(drop=True))
