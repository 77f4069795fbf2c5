"""The zero-count check (paper 001 section 3, Theorem 1, Appendix C).

A mechanism that adds noise only to the cells present in the data (zeros are released as zero, or
never enumerated) and then suppresses small noisy counts can emit a cell only if someone is in it:
a released cell proves presence. Against the neighbour without that person the output has
probability zero, so no epsilon holds without a delta at least the probability that one person's
records, alone in a cell, pass the threshold. Theorem 1 states it for Laplace(p) noise and the
threshold t (a count is kept when it reaches t) as ``delta >= exp(-(t-1)/p) / (2p)``; the exact
bound for the noise actually used is ``P(k + X >= t)``, ``k`` the most one unit adds to one cell.
For a group of ``g`` units it is ``P(g k + X >= t)``. A release that perturbs every cell of its
public domain (zeros included) can emit any cell and has no such bound.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from synth.audit.release import AuditedRelease, zeros_perturbed
from synth.errors import ConfigError

__all__ = ["ZeroCheck", "check_zeros", "presence_probability", "theorem1_delta"]

#: Group sizes whose detection probability is reported (001 section 3: individuals, 5, 12).
GROUPS: tuple[int, ...] = (1, 2, 5, 12)


def theorem1_delta(scale: float, threshold: float) -> float:
    """Theorem 1 of 001 as published: ``exp(-(t - 1)/p) / (2p)`` (p = 1.4, t = 18: ~1.9e-6)."""
    if scale <= 0:
        raise ConfigError(f"scale must be > 0, got {scale!r}")
    return math.exp(-(threshold - 1) / scale) / (2 * scale)


def presence_probability(scale: float, threshold: float, count: int, *, discrete: bool) -> float:
    """``P(count + X >= threshold)``: a cell holding only ``count`` records is released.

    ``X`` is discrete Laplace (``P(X >= m) = p^m / (1 + p)``, ``p = e^(-1/scale)``, m >= 1) or
    continuous Laplace (``P(X >= m) = e^(-m/scale) / 2``, m >= 0).
    """
    m = threshold - count
    if discrete:
        m = math.ceil(m)
        p = math.exp(-1.0 / scale)
        if m <= 0:
            return 1.0 - p ** (1 - m) / (1 + p)
        return p**m / (1 + p)
    if m <= 0:
        return 1.0 - math.exp(m / scale) / 2
    return math.exp(-m / scale) / 2


@dataclass(frozen=True)
class ZeroCheck:
    """The zero-count check of one spend (mechanism application) of a release.

    ``zeros_perturbed``: ``True`` (absent cells can be emitted), ``False`` (a released cell proves
    presence) or ``None`` (the manifest does not say). When ``False``: ``theorem1_delta`` (the
    published bound), ``delta_lower_bound`` (exact, for the noise used and ``linf`` records of one
    unit in one cell), ``group_delta`` (group size -> probability) and ``claimed_delta``.
    """

    label: str
    mechanism: str
    zeros_perturbed: bool | None
    scale: float | None
    threshold: float | None
    linf: int
    claimed_delta: float
    applications: int
    theorem1_delta: float | None = None
    delta_lower_bound: float | None = None
    group_delta: dict[int, float] = field(default_factory=dict)

    @property
    def understated(self) -> bool:
        """The manifest claims a delta below what Theorem 1 proves necessary."""
        bound = self.delta_lower_bound
        return bound is not None and self.claimed_delta < bound

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (group sizes as string keys)."""
        out = asdict(self)
        out["group_delta"] = {str(k): v for k, v in self.group_delta.items()}
        out["understated"] = self.understated
        return out


def check_zeros(release: AuditedRelease) -> list[ZeroCheck]:
    """One :class:`ZeroCheck` per distinct spend of the manifest (partitions share one)."""
    tables = release.parameters.get("tables") or {}
    seen: dict[tuple[Any, ...], list[Any]] = {}
    for spend in release.spends:
        key = (
            spend.get("label"),
            spend.get("mechanism"),
            spend.get("scale"),
            spend.get("threshold"),
            spend.get("delta"),
            spend.get("note"),
        )
        seen.setdefault(key, [spend, 0])[1] += 1
    out = []
    for spend, n in seen.values():
        label, mechanism = str(spend.get("label")), str(spend.get("mechanism"))
        delta = float(spend.get("delta") or 0.0)
        info = tables.get(label) if isinstance(tables, dict) else None
        zeros = zeros_perturbed(mechanism, delta, str(spend.get("note") or ""))
        if isinstance(info, dict) and info.get("pure") is True:
            zeros = True
        scale = spend.get("scale")
        threshold = spend.get("threshold")
        if isinstance(info, dict) and info.get("linf"):
            linf = int(info["linf"])
        else:
            linf = max(1, int(float(spend.get("sensitivity") or 1)))
        check = ZeroCheck(
            label=label,
            mechanism=mechanism,
            zeros_perturbed=zeros,
            scale=None if scale is None else float(scale),
            threshold=None if threshold is None else float(threshold),
            linf=linf,
            claimed_delta=delta,
            applications=int(n),
        )
        if zeros is False and scale is not None and threshold is not None:
            discrete = mechanism.startswith("discrete") or mechanism == "threshold_histogram"
            t, b = float(threshold), float(scale)
            groups = {g: presence_probability(b, t, g * linf, discrete=discrete) for g in GROUPS}
            check = ZeroCheck(
                **{
                    **asdict(check),
                    "theorem1_delta": theorem1_delta(b, t - linf + 1),
                    "delta_lower_bound": groups[1],
                    "group_delta": groups,
                }
            )
        out.append(check)
    return out
