"""The paper's private counts of :class:`~archetypes.synthesizer.ArchetypeSynthesizer` (GooseDP,
NIST DP Temporal Map Challenge, sprint 3, "Step 1: Private Analysis"): the exact histograms of
individuals per archetype, per category and (optional) per binned value of the ``marginals``
columns, their discrete Gaussian mechanisms (analytic calibration, Balle and Wang 2018) and their
noisy release into the privacy ledger, whose neighbouring relation names the unit.

Each individual (its first ``max_records_per_individual`` trips) is ONE value in each histogram,
so the archetype and category histograms have L2 sensitivity 1 and the ``m`` marginal histograms,
released together, sqrt(m).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from archetypes.jointfit import JointSampling
from archetypes.model import bound_individuals, majority
from archetypes.reading import source_of, trip_ids
from synth.errors import InputError
from synth.privacy import DiscreteGaussian, PrivacyLedger, SecureNoise

__all__ = ["PrivateCounts"]


class PrivateCounts(JointSampling):
    """The private queries and their release (mixed into the synthesizer)."""

    epsilon: float
    delta: float
    marginals: Any
    tie_breaks_: SecureNoise
    archetype_mechanism_: DiscreteGaussian
    category_mechanism_: DiscreteGaussian
    marginal_mechanism_: DiscreteGaussian | None

    def _set_mechanisms(self, budgets: list[tuple[float, float]]) -> None:
        """The discrete Gaussian of each release, from its (epsilon, delta) share."""
        (eps1, delta1), (eps2, delta2) = budgets[:2]
        self.archetype_mechanism_ = DiscreteGaussian(epsilon=eps1, delta=delta1, sensitivity=1)
        self.category_mechanism_ = DiscreteGaussian(epsilon=eps2, delta=delta2, sensitivity=1)
        self.marginal_mechanism_: DiscreteGaussian | None = None
        marginals = self._marginal_columns()
        if marginals:
            eps3, delta3 = budgets[2]
            self.marginal_mechanism_ = DiscreteGaussian(
                epsilon=eps3,
                delta=delta3,
                sensitivity=math.sqrt(len(marginals)),
                single_coordinate=len(marginals) == 1,
            )

    def _query(self, private: pd.DataFrame) -> list[np.ndarray]:
        """The exact histograms released: individuals per archetype, per category and (when
        ``marginals``) per binned value of each marginal column, the latter concatenated. Each
        individual (its first ``max_records_per_individual`` trips) is ONE value in each."""
        marginals = self._marginal_columns()
        columns = list(dict.fromkeys([*self.features_, self.category_column, *marginals]))
        order = [] if self.order_column in (None, *columns) else [self.order_column]
        private = self.schema_.derive(private)  # coordinates read off their labels, per trip
        missing = [c for c in [self.id_column, *columns, *order] if c not in private.columns]
        if missing:
            raise InputError(f"private data: missing column(s) {', '.join(map(repr, missing))}")
        private = private[list(dict.fromkeys([self.id_column, *columns, *order]))]
        source = source_of(private)  # per value (issue 25), messages name the file
        private = trip_ids(private, self.id_column, source)
        private = self.schema_.conform(private, source=source, columns=columns)
        private = bound_individuals(
            private, self.id_column, self.max_records_per_individual, self._order(private)
        )
        id_codes, _ = pd.factorize(private[self.id_column], sort=False)
        ties = self.tie_breaks_  # secure: the private ties never touch a numpy generator
        archetypes = self.model_.assign(private, ties).to_numpy()
        n_cat = len(self.category_values_)
        category = majority(id_codes, self._codes(private, self.category_column), n_cat, ties)
        out = [
            np.bincount(archetypes, minlength=self.archetypes),
            np.bincount(category[category >= 0], minlength=n_cat),
        ]
        for column in marginals:
            n_cells = self._n_cells(column)
            value = majority(id_codes, self._bin(private, column), n_cells, ties)
            if self.marginals_by_archetype:  # the cell (archetype, value): still one per column
                value = np.where(value >= 0, archetypes * n_cells + value, -1)
            out.append(np.bincount(value[value >= 0], minlength=self._n_released(column)))
        return out if not marginals else [out[0], out[1], np.concatenate(out[2:])]

    def _marginal_columns(self) -> list[str]:
        """The per-individual one-way marginals released (none in joint mode)."""
        return [] if self._joint_on() else list(self.marginals)

    def _new_ledger(self) -> PrivacyLedger:
        return PrivacyLedger(
            epsilon=self.epsilon,
            delta=self.delta,
            unit=self.unit,
            neighbouring=f"add or remove one {self.unit}: " + self._unit_rows(),
        )

    def _unit_rows(self) -> str:
        """What one unit is in the input: the rows sharing one id value (the guarantee, always),
        one row when the layout gives each row its own id
        (:func:`~archetypes.trip_sources.one_row_per_id`)."""
        if getattr(self, "one_row_per_id_", False):
            return f"one row (the input layout gives each row its own {self.id_column})"
        k = self.max_records_per_individual
        return f"all the rows that share one {self.id_column} value (at most {k} of them used)"

    def _release(
        self,
        histograms: list[np.ndarray],
        noise: SecureNoise,
        ledger: PrivacyLedger | None = None,
    ) -> list[np.ndarray]:
        """Noise the histograms of :meth:`_query` and record each spend in ``ledger`` (default: a
        new :attr:`ledger_`; the spend is recorded before the noise is drawn)."""
        if ledger is None:
            self.ledger_ = ledger = self._new_ledger()
        raw = [
            self.archetype_mechanism_.release(
                histograms[0],
                noise=noise,
                ledger=ledger,
                label="archetype histogram",
                note=f"{self.archetypes} archetypes; each {self.unit} in exactly one (the "
                "archetype of most of its trips), so L2 sensitivity 1",
            ),
            self.category_mechanism_.release(
                histograms[1],
                noise=noise,
                ledger=ledger,
                label=f"{self.category_column} histogram",
                note=f"{len(histograms[1])} values of the public domain; each {self.unit} counted "
                "once under its most frequent value, so L2 sensitivity 1",
            ),
        ]
        if self.marginal_mechanism_ is not None:
            m = len(self._marginal_columns())
            per = " per archetype" if self.marginals_by_archetype else ""
            cell = "(archetype, value) cell" if per else "(binned) value"
            raw.append(
                self.marginal_mechanism_.release(
                    histograms[2],
                    noise=noise,
                    ledger=ledger,
                    label=f"one-way histograms{per} of {', '.join(self.marginals)}",
                    note=f"each {self.unit} counted once per column under its most frequent "
                    f"{cell}: one cell in each of {m} histograms, L2 sensitivity sqrt({m})",
                )
            )
        return [np.asarray(r, dtype=np.int64) for r in raw]
