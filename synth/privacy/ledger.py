"""Privacy budget ledger and release manifest.

Accounting is basic (epsilon, delta) composition (Dwork and Roth 2014, Theorem 3.16): spends in one
sequential ledger add up; a parallel group over disjoint partitions of the privacy units (McSherry
2009, Theorem 4) costs, in each coordinate, the max over its branches of the branch's total. Totals
are exact rationals: a float is read through its shortest repr (``0.1`` is 1/10), so ``0.1 + 0.2``
spends exactly 3/10 and a cap is never passed through rounding. Every spend is checked against the
cap before it is recorded, and mechanisms record before drawing noise, so an overspend raises
:class:`~synth.errors.BudgetExceededError` before any noise exists.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from synth.errors import BudgetExceededError, ConfigError
from synth.privacy.calibration import analytic_gaussian_sigma, discrete_gaussian_privacy

__all__ = [
    "NOISE_RTOL",
    "LedgerBranch",
    "ParallelGroup",
    "PrivacyLedger",
    "Spend",
    "check_noise",
    "exact",
]

ACCOUNTING = (
    "basic composition, exact rational arithmetic: sequential spends add (epsilon and delta "
    "separately); a parallel group over disjoint partitions costs the max over its branches of "
    "each branch's total (epsilon and delta separately); floats enter through their shortest repr"
)
NORMS = ("l1", "l2")
#: A spend this close to the cap counts as the cap in :meth:`PrivacyLedger.underspent`: a relative
#: 1e-9. Budget shares are exact fractions (archetypes.budget), but a float epsilon or delta
#: computed outside (a calibrated delta, a share typed as 0.333) may miss the cap by a few units in
#: its 16th digit; a mechanism that stopped early leaves whole shares, far above this.
UNDERSPEND_TOLERANCE = Fraction(1, 10**9)
#: relative tolerance of :func:`check_noise`: a scale may fall this far below its calibration
#: (float rounding of callers computing ``sensitivity / epsilon``; the analytic Gaussian
#: calibration is solved to 1e-12); 1e-9 of the scale moves epsilon by about 1e-9 of itself
NOISE_RTOL = 1e-9
#: what the manifest says of the private input (no name, size, hash or count of it is published)
PRIVATE_INPUT_NOTE = (
    "not recorded: no name, size, hash or count of the private input is published; the data "
    "holder's provenance record (--provenance-key-file) is kept outside the release directory"
)


def exact(value: float | int | Fraction | str, name: str) -> Fraction:
    """``value`` as an exact Fraction (floats through ``repr``); ConfigError unless finite, >= 0."""
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if isinstance(value, float | np.floating):
        if not math.isfinite(value):
            raise ConfigError(f"{name} must be finite, got {value!r}")
        value = repr(float(value))
    try:
        q = Fraction(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name} must be a number, got {value!r}") from exc
    if q < 0:
        raise ConfigError(f"{name} must be >= 0, got {value!r}")
    return q


def check_budget(
    epsilon: float | Fraction, delta: float | Fraction = 0.0, *, need_delta: bool = False
) -> tuple[Fraction, Fraction]:
    """Exact (epsilon, delta) of a budget; ConfigError unless epsilon > 0 and delta in [0, 1)
    (in (0, 1) with ``need_delta``, as mechanisms such as the Gaussian require)."""
    numeric = isinstance(epsilon, int | float | Fraction) and not isinstance(epsilon, bool)
    if numeric and epsilon <= 0:  # NaN falls through to exact(): "must be finite"
        raise ConfigError(f"epsilon must be > 0, got {epsilon!r}")
    eps, dlt = exact(epsilon, "epsilon"), exact(delta, "delta")
    if dlt >= 1 or (need_delta and dlt == 0):
        interval = "(0, 1)" if need_delta else "[0, 1)"
        raise ConfigError(f"delta must be in {interval}, got {delta!r}")
    return eps, dlt


def _fmt(q: Fraction) -> str:
    return f"{q.numerator}" if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def _amount(eps: Fraction, delta: Fraction) -> dict[str, Any]:
    return {
        "epsilon": float(eps),
        "delta": float(delta),
        "epsilon_exact": _fmt(eps),
        "delta_exact": _fmt(delta),
    }


@dataclass(frozen=True)
class Spend:
    """One mechanism application: what was spent, on what, with which noise, in which group."""

    label: str
    mechanism: str
    epsilon: Fraction
    delta: Fraction
    sensitivity: float
    sensitivity_norm: str
    scale: float | None
    threshold: float | None
    unit: str
    note: str
    group: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (exact budget as strings alongside floats)."""
        return {
            "type": "spend",
            "label": self.label,
            "mechanism": self.mechanism,
            **_amount(self.epsilon, self.delta),
            "sensitivity": self.sensitivity,
            "sensitivity_norm": self.sensitivity_norm,
            "scale": self.scale,
            "threshold": self.threshold,
            "unit": self.unit,
            "note": self.note,
            "group": self.group,
        }


def _noise_family(mechanism: str) -> str | None:
    """``"laplace"``, ``"gaussian"``, ``"discrete_gaussian"`` or None (a mechanism the ledger
    does not calibrate, recorded as given)."""
    name = mechanism.lower()
    if "laplace" in name or name == "threshold_histogram":
        return "laplace"
    if name == "discrete_gaussian":
        return "discrete_gaussian"
    return "gaussian" if "gaussian" in name else None


def check_noise(
    label: str,
    mechanism: str,
    epsilon: Fraction,
    delta: Fraction,
    sensitivity: float,
    norm: str,
    scale: float | None,
) -> None:
    """ConfigError unless a spend's noise is at least what its (epsilon, delta, sensitivity) need.

    - Laplace (discrete or not; ``threshold_histogram``): ``scale >= sensitivity / epsilon``
      (L1), the Laplace mechanism's calibration (Dwork and Roth 2014, Theorem 3.6; Ghosh,
      Roughgarden and Sundararajan 2009 for the two-sided geometric).
    - Gaussian: ``scale`` (sigma) at least the analytic calibration of Balle and Wang (2018) for
      (epsilon, delta, sensitivity) (L2). The discrete Gaussian may also meet it through its own
      exact privacy on a count of that sensitivity (Canonne, Kamath and Steinke 2020,
      Theorem 7), which at large epsilon needs up to ~0.3% less sigma than the continuous one.

    Both allow :data:`NOISE_RTOL` relative slack. A noise mechanism must state its scale; other
    mechanism names are recorded as given.
    """
    family = _noise_family(mechanism)
    if family is None:
        return
    where = f"spend {label!r} ({mechanism})"
    if scale is None:
        raise ConfigError(f"{where} must state its noise scale")
    if epsilon == 0:
        raise ConfigError(f"{where}: noise of finite scale {scale:g} at epsilon 0 is not private")
    if family == "laplace":
        if norm != "l1":
            raise ConfigError(f"{where}: Laplace noise is calibrated to an L1 sensitivity")
        need = float(Fraction(sensitivity) / epsilon)
        if scale < need * (1 - NOISE_RTOL):
            raise ConfigError(
                f"{where}: scale {scale:g} is below sensitivity / epsilon = {need:g}: the noise "
                f"drawn gives less privacy than epsilon {float(epsilon):g} claims"
            )
        return
    if delta <= 0:
        raise ConfigError(f"{where}: Gaussian noise needs delta > 0")
    eps, dlt = float(epsilon), float(delta)
    need = analytic_gaussian_sigma(eps, dlt, float(sensitivity))
    if scale >= need * (1 - NOISE_RTOL):
        return
    if family == "discrete_gaussian" and float(sensitivity) == math.ceil(sensitivity):
        achieved = discrete_gaussian_privacy(scale, eps, int(sensitivity))
        if achieved <= dlt * (1 + NOISE_RTOL):
            return
    raise ConfigError(
        f"{where}: sigma {scale:g} is below the analytic Gaussian calibration {need:g} for "
        f"epsilon {eps:g}, delta {dlt:g}, sensitivity {float(sensitivity):g} (Balle and Wang 2018)"
    )


class LedgerBranch:
    """A sequential list of spends and parallel groups (the root ledger is one too)."""

    def __init__(
        self, name: str, root: PrivacyLedger, path: str, group: ParallelGroup | None = None
    ) -> None:
        self.name = name
        self.root = root  # the ledger holding the cap
        self._path = path
        self._group = group  # the parallel group this list is a branch of (None: the root)
        self._items: list[Spend | ParallelGroup] = []
        self._cost = (Fraction(0), Fraction(0))  # running sum, kept by spend()

    def cost(self) -> tuple[Fraction, Fraction]:
        """Exact (epsilon, delta) of this sequential list."""
        return self._cost

    def _raise_by(
        self, eps: Fraction, delta: Fraction
    ) -> list[tuple[LedgerBranch | ParallelGroup, tuple[Fraction, Fraction]]]:
        """The new costs of this list and of every list and group above it after a spend.

        Costs only grow (spends are non-negative), so a parallel group's maximum can be updated
        from the one branch that changed: each spend costs O(depth), not O(size of the ledger).
        """
        updates: list[tuple[LedgerBranch | ParallelGroup, tuple[Fraction, Fraction]]] = []
        branch: LedgerBranch = self
        new = (branch._cost[0] + eps, branch._cost[1] + delta)
        while True:
            updates.append((branch, new))
            group = branch._group
            if group is None:
                return updates
            old_group = group._cost
            new_group = (max(old_group[0], new[0]), max(old_group[1], new[1]))
            updates.append((group, new_group))
            branch = group._parent
            new = (
                branch._cost[0] - old_group[0] + new_group[0],
                branch._cost[1] - old_group[1] + new_group[1],
            )

    @property
    def spends(self) -> list[Spend]:
        """Every spend under this list, depth first, in the order recorded."""
        out: list[Spend] = []
        for item in self._items:
            if isinstance(item, Spend):
                out.append(item)
            else:
                for branch in item.branches.values():
                    out.extend(branch.spends)
        return out

    def spend(
        self,
        *,
        label: str,
        mechanism: str,
        epsilon: float | Fraction,
        delta: float | Fraction = 0.0,
        sensitivity: float = 1,
        sensitivity_norm: str = "l1",
        scale: float | None = None,
        threshold: float | None = None,
        unit: str | None = None,
        note: str = "",
    ) -> Spend:
        """Record a spend; BudgetExceededError (nothing recorded) if it would pass the cap, and
        ConfigError if its noise ``scale`` is below what (epsilon, delta, sensitivity) need
        (:func:`check_noise`: Laplace ``sensitivity / epsilon``, Gaussian the analytic sigma)."""
        root = self.root
        if not isinstance(label, str) or not label:
            raise ConfigError("a spend needs a non-empty label")
        eps, dlt = exact(epsilon, "epsilon"), exact(delta, "delta")
        if not (isinstance(sensitivity, numbers.Real) and 0 < sensitivity < math.inf):
            raise ConfigError(f"sensitivity must be a positive finite number, got {sensitivity!r}")
        if sensitivity_norm not in NORMS:
            raise ConfigError(f"sensitivity_norm must be one of {NORMS}, got {sensitivity_norm!r}")
        if scale is not None and not (0 < scale < math.inf):
            raise ConfigError(f"scale must be a positive finite number, got {scale!r}")
        check_noise(label, mechanism, eps, dlt, sensitivity, sensitivity_norm, scale)
        if unit is not None and unit != root.unit:
            raise ConfigError(
                f"spend {label!r} is for privacy unit {unit!r} "
                f"but the ledger composes over {root.unit!r}"
            )
        item = Spend(
            label=label,
            mechanism=mechanism,
            epsilon=eps,
            delta=dlt,
            sensitivity=float(sensitivity),
            sensitivity_norm=sensitivity_norm,
            scale=None if scale is None else float(scale),
            threshold=None if threshold is None else float(threshold),
            unit=root.unit,
            note=note,
            group=self._path,
        )
        updates = self._raise_by(eps, dlt)
        total_eps, total_delta = updates[-1][1]
        if total_eps > root.cap_epsilon or total_delta > root.cap_delta:
            spent_eps, spent_delta = root.cost()
            raise BudgetExceededError(
                f"spend {label!r} (epsilon={float(eps):g}, delta={float(dlt):g}"
                f"{' in ' + self._path if self._path else ''}) would bring the total to "
                f"epsilon={float(total_eps):g}, delta={float(total_delta):g}, past the cap "
                f"epsilon={float(root.cap_epsilon):g}, delta={float(root.cap_delta):g} "
                f"(already spent epsilon={float(spent_eps):g}, delta={float(spent_delta):g})"
            )
        self._items.append(item)
        for node, cost in updates:
            node._cost = cost
        return item

    @contextmanager
    def parallel(self, name: str, *, disjoint_by: str) -> Iterator[ParallelGroup]:
        """A parallel group: branches over disjoint partitions of the units (``disjoint_by``)."""
        if not disjoint_by:
            raise ConfigError(f"parallel group {name!r} must state why its branches are disjoint")
        group = ParallelGroup(name, disjoint_by, self)
        self._items.append(group)
        yield group

    def to_list(self) -> list[dict[str, Any]]:
        """The composition tree under this list."""
        return [item.to_dict() for item in self._items]


class ParallelGroup:
    """Branches that each touch a disjoint set of privacy units; cost = max over branches."""

    def __init__(self, name: str, disjoint_by: str, parent: LedgerBranch) -> None:
        self.name = name
        self.disjoint_by = disjoint_by
        self._parent = parent
        self.branches: dict[str, LedgerBranch] = {}
        self._cost = (Fraction(0), Fraction(0))  # running max over branches, kept by spend()

    def branch(self, name: str) -> LedgerBranch:
        """The sequential sub-ledger of one partition (created on first use)."""
        if name not in self.branches:
            prefix = f"{self._parent._path} / " if self._parent._path else ""
            path = f"{prefix}{self.name}: {name}"
            self.branches[name] = LedgerBranch(name, self._parent.root, path, self)
        return self.branches[name]

    def cost(self) -> tuple[Fraction, Fraction]:
        """Exact (max epsilon, max delta) over the branches."""
        return self._cost

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready group with its branches."""
        return {
            "type": "parallel",
            "name": self.name,
            "disjoint_by": self.disjoint_by,
            **_amount(*self.cost()),
            "branches": [
                {"name": name, **_amount(*b.cost()), "items": b.to_list()}
                for name, b in self.branches.items()
            ],
        }


class PrivacyLedger(LedgerBranch):
    """The budget cap (epsilon, delta) of one release and everything spent under it.

    Example::

        ledger = PrivacyLedger(epsilon=1.0, delta=1e-6, unit="card",
                               neighbouring="add or remove one card's records")
        ledger.spend(label="level 1", mechanism="discrete_laplace", epsilon=0.5, scale=2.0)
        with ledger.parallel("level 2", disjoint_by="children of distinct nodes") as par:
            par.branch("line 1").spend(
                label="counts", mechanism="discrete_laplace", epsilon=0.5, scale=2.0
            )
    """

    def __init__(
        self,
        epsilon: float | Fraction,
        delta: float | Fraction = 0.0,
        *,
        unit: str = "card",
        neighbouring: str | None = None,
    ) -> None:
        super().__init__("release", self, "")
        self.cap_epsilon, self.cap_delta = check_budget(epsilon, delta)
        self.unit = unit
        self.neighbouring = neighbouring or f"add or remove all records of one {unit}"
        self.stopped_early: str | None = None  # what a mechanism that stopped early ran out of

    @property
    def spent_epsilon(self) -> float:
        """Total epsilon spent (float of the exact total)."""
        return float(self.cost()[0])

    @property
    def spent_delta(self) -> float:
        """Total delta spent (float of the exact total)."""
        return float(self.cost()[1])

    def stop_early(self, reason: str) -> None:
        """Record that a mechanism stopped before spending its whole share (``reason``: what
        it ran out of, e.g. "no node left to count after level 2"): only then does the release
        warn and its manifest say ``spent_below_budget``."""
        self.stopped_early = reason

    def underspent(self) -> bool:
        """Whether a mechanism stopped early (:meth:`stop_early`) and the total spent is below
        the cap by more than :data:`UNDERSPEND_TOLERANCE` of it, in epsilon or delta."""
        if self.stopped_early is None:
            return False
        eps, delta = self.cost()
        keep = 1 - UNDERSPEND_TOLERANCE
        return eps < self.cap_epsilon * keep or delta < self.cap_delta * keep

    def underspent_note(self) -> str | None:
        """A sentence for the user when a mechanism stopped early and the release spent less
        than its cap (:meth:`underspent`), else ``None``."""
        if not self.underspent():
            return None
        eps, delta = self.cost()
        spent = f"epsilon {float(eps):g} of the {float(self.cap_epsilon):g} asked" + (
            f", delta {float(delta):g} of {float(self.cap_delta):g}" if self.cap_delta else ""
        )
        cap = f"epsilon {float(self.cap_epsilon):g}" + (
            f", delta {float(self.cap_delta):g}" if self.cap_delta else ""
        )
        return (
            f"the release spent {spent} (it stopped early: {self.stopped_early}); its guarantee "
            f"is the budget asked ({cap}), since where it stops depends on noisy counts "
            "(manifest: spent_below_budget)"
        )

    @property
    def remaining_epsilon(self) -> float:
        """Epsilon left under the cap."""
        return float(self.cap_epsilon - self.cost()[0])

    @property
    def remaining_delta(self) -> float:
        """Delta left under the cap."""
        return float(self.cap_delta - self.cost()[1])

    def to_dict(
        self,
        parameters: dict[str, Any] | None = None,
        public_inputs: Mapping[str, str | os.PathLike[str]] | None = None,
    ) -> dict[str, Any]:
        """The ledger part of a release manifest (see the module docstring for the accounting);
        :func:`synth.release.build_manifest` adds the generator and makes it JSON-ready.

        ``public_inputs`` (role -> file or directory: taxonomy, location list, public trips, ...)
        are listed with a fingerprint. Nothing about the private input is recorded, not even a
        hash, size or name: those are noise-free functions of the private data (the operator's
        provenance record lives outside the release, :mod:`synth.provenance`).
        """
        from synth import __version__
        from synth.io import fingerprint

        eps, delta = self.cost()
        public = [
            {
                "role": str(role),
                "file": Path(os.fspath(path)).name,
                "fingerprint": fingerprint(path),
            }
            for role, path in sorted((public_inputs or {}).items())
        ]
        return {
            "software": {"package": "transit-synth", "version": __version__},
            "privacy_unit": self.unit,
            "neighbouring": self.neighbouring,
            "accounting": ACCOUNTING,
            "cap": _amount(self.cap_epsilon, self.cap_delta),
            "spent": _amount(eps, delta),
            "remaining": _amount(self.cap_epsilon - eps, self.cap_delta - delta),
            # what the release guarantees is the cap: whether it stops short of it (e.g. a tree
            # with no node left to count) depends on the data through noisy decisions
            "guarantee": _amount(self.cap_epsilon, self.cap_delta),
            "spent_below_budget": self.underspent(),
            "composition": self.to_list(),
            "spends": [s.to_dict() for s in self.spends],
            # as given: synth.release.build_manifest makes the manifest JSON-ready (one encoder)
            "parameters": dict(parameters or {}),
            "inputs": {"private": PRIVATE_INPUT_NOTE, "public": public},
        }
