"""The measurements of the ``joint`` mode (issue 28), mixed into
:class:`~archetypes.jointfit.JointSampling`: the noisy one- and two-way tables of the bounded
private trips in one discrete Gaussian (:func:`archetypes.measure.measure`), or in two rounds over
compressed domains (MST's, McKenna, Miklau and Sheldon 2021), and the consistent tables estimated
from them (:func:`archetypes.joint.consistent_tables`; with public trips
:meth:`~archetypes.jointpublic.PublicDesign._public_tables`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from archetypes.budget import split_budget
from archetypes.joint import compression, consistent_tables, rake_table
from archetypes.jointpublic import Bounded, public_table
from archetypes.measure import Discretiser, Measurement, measure
from synth.privacy import SecureNoise

__all__ = ["ONE_WAY_SHARE", "JointTables"]

#: without public trips: the one-way round's part of the joint budget (the two-way round: the rest)
ONE_WAY_SHARE = 0.4


class JointTables:
    """The joint mode's measuring and estimating methods."""

    discretiser_: Discretiser
    measurements_: list[Measurement]
    joint_maps_: list[np.ndarray] | None
    joint_one_: list[np.ndarray]
    ledger_: Any
    unit: str

    def _joint_options(self) -> dict[str, Any]:  # pragma: no cover - JointSampling's
        raise NotImplementedError

    def _joint_weight(self, table: tuple[int, ...]) -> int:  # pragma: no cover - JointSampling's
        raise NotImplementedError

    def _public_tables(
        self,
        measured: Measurement,
        tables: list[tuple[int, ...]],
        public_codes: np.ndarray,
        bounded: Bounded,
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:  # pragma: no cover - PublicDesign's
        raise NotImplementedError

    def _cell_caps(self, tables: list[tuple[int, ...]]) -> list[int | None]:  # pragma: no cover
        raise NotImplementedError  # PublicDesign's

    def _joint_tables(
        self,
        codes: np.ndarray,
        ids: np.ndarray,
        tree: list[tuple[int, int]],
        pairs: list[tuple[int, int]],
        k: int,
        budget: tuple[float, float],
        noise: SecureNoise,
        public_codes: np.ndarray | None,
        bounded: Bounded | None,
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[tuple[int, int]]]:
        """Measure the one-way tables and the two-way tables of ``pairs`` of the bounded private
        ``codes`` (of the individuals ``ids``: the per-cell caps, :meth:`_cell_caps`) and
        estimate consistent tables; the views' code maps and the tree edges left
        unmeasured (with public trips: their public table raked to the margins) are added as
        fixed tables. Returns the one-way tables, the two-way tables and their pairs."""
        disc = self.discretiser_
        sizes = list(disc.sizes)
        d = len(sizes)
        tables = [(i,) for i in range(d)] + [tuple(e) for e in pairs]
        self.joint_maps_: list[np.ndarray] | None = None
        if public_codes is not None or not self._joint_options()["compress"]:
            weights = [self._joint_weight(t) for t in tables]
            caps = self._cell_caps(tables)
            m = self._count(codes, sizes, tables, k, budget, noise, "", weights, ids, caps)
            self.measurements_ = [m]
            if bounded is not None and public_codes is not None:
                one, two = self._public_tables(m, tables, public_codes, bounded)
            else:
                one, two = consistent_tables(
                    m.estimates, tables, m.sigmas, [None] * len(tables), d, views=disc.views
                )
        else:
            one, two = self._compressed(codes, sizes, tables, k, budget, noise)
        for view, (parent, mapping) in disc.views.items():  # public tables: a view's code map
            fixed = np.zeros((sizes[parent], sizes[view]))
            fixed[np.arange(sizes[parent]), mapping] = one[parent]
            two.append(fixed)
            pairs = [*pairs, (parent, view)]
        for e in tree:  # tree edges left unmeasured: the public table, raked to the margins
            if public_codes is not None and tuple(sorted(e)) not in pairs:
                i, j = sorted(e)
                prior = public_table(public_codes, (i, j), sizes) * one[i].sum()
                two.append(rake_table(prior, one[i], one[j]))
                pairs = [*pairs, (i, j)]
        return one, two, pairs

    def _count(
        self,
        codes: np.ndarray,
        sizes: list[int],
        tables: list[tuple[int, ...]],
        k: int,
        budget: tuple[float, float],
        noise: SecureNoise,
        what: str,
        weights: list[int] | None = None,
        ids: np.ndarray | None = None,
        caps: list[int | None] | None = None,
    ) -> Measurement:
        return measure(
            codes,
            sizes,
            tables,
            k=k,
            epsilon=budget[0],
            delta=budget[1],
            noise=noise,
            ledger=self.ledger_,
            unit=self.unit,
            names=self.discretiser_.model,
            what=what,
            weights=weights,
            ids=ids,
            caps=caps,
        )

    def _compressed(
        self,
        codes: np.ndarray,
        sizes: list[int],
        tables: list[tuple[int, ...]],
        k: int,
        budget: tuple[float, float],
        noise: SecureNoise,
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Two rounds (MST's): the one-way tables with ``ONE_WAY_SHARE`` of the budget, then the
        two-way tables over domains compressed by them (values under 3 sigma share a code)."""
        d = len(sizes)
        one_way, pairs = tables[:d], tables[d:]
        b1, b2 = split_budget(budget, [ONE_WAY_SHARE, 1 - ONE_WAY_SHARE])
        m1 = self._count(codes, sizes, one_way, k, b1, noise, "one-way")
        views = self.discretiser_.views
        self.joint_one_ = consistent_tables(
            m1.estimates, one_way, m1.sigmas, [None] * d, d, views=views
        )[0]
        maps = self.joint_maps_ = [compression(y, 3 * m1.mechanism.sigma) for y in m1.estimates]
        csizes = [int(m.max()) + 1 for m in maps]
        ccodes = np.stack([maps[i][codes[:, i]] for i in range(d)], axis=1)
        m2 = self._count(ccodes, csizes, pairs, k, b2, noise, "two-way, compressed domains, ")
        self.measurements_ = [m1, m2]
        cone = [
            np.bincount(maps[i], weights=self.joint_one_[i], minlength=csizes[i]) for i in range(d)
        ]
        sigmas = [*m1.sigmas, *m2.sigmas]
        return consistent_tables(
            [*cone, *m2.estimates], tables, sigmas, [None] * len(tables), d, views=views
        )
