"""Statistical privacy testing: a lower bound on epsilon from runs on neighbouring inputs.

A mechanism M claims (ε, δ)-DP. Run it ``trials`` times on D and on a neighbour D' (one privacy
unit added), count how often each chosen event E happens, and bound the probabilities with exact
one-sided Clopper-Pearson intervals (Clopper and Pearson 1934; ``scipy.stats.beta``). Since
``P[M(D) in E] <= e^ε P[M(D') in E] + δ`` must hold in both directions,

    ε >= ln((p_lo(D, E) - δ) / p_hi(D', E))      (and with D, D' swapped)

holds with the stated confidence (Bonferroni over all events, directions and interval ends). A
mechanism whose lower bound exceeds its claimed ε is certainly broken (at that confidence); a bound
below it is evidence, not proof, of privacy (Ding et al. 2018, "Detecting violations of
differential privacy"; Jagielski, Ullman and Oprea 2020 use the same bound for auditing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import beta

from synth.errors import ConfigError

__all__ = ["EpsilonAudit", "audit_epsilon", "clopper_pearson", "tail_events"]

# run(data, n) -> the outputs of n independent runs of the mechanism on data (any container)
Runner = Callable[[Any, int], Any]
# event(outputs) -> bool array of length n: whether each run's output is in the event
Event = Callable[[Any], np.ndarray]


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided exact bounds: P(p >= lo) >= 1 - alpha and P(p <= hi) >= 1 - alpha."""
    lo = 0.0 if k == 0 else float(beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha, k + 1, n - k))
    return lo, hi


@dataclass(frozen=True)
class EpsilonAudit:
    """Result of :func:`audit_epsilon`.

    ``epsilon_lower_bound`` holds with probability >= ``confidence`` (``0.0`` when no event gives
    a positive bound); ``event`` and ``direction`` tell where it was attained; ``rates`` maps every
    event to its empirical frequencies on (D, D').
    """

    epsilon_lower_bound: float
    event: str
    direction: str
    confidence: float
    trials: int
    delta: float
    rates: dict[str, tuple[float, float]]

    def violates(self, epsilon: float) -> bool:
        """True when the claimed ``epsilon`` is refuted at this confidence."""
        return self.epsilon_lower_bound > epsilon


def audit_epsilon(
    run: Runner,
    d: Any,
    d_prime: Any,
    events: Mapping[str, Event],
    *,
    trials: int,
    delta: float = 0.0,
    confidence: float = 0.99,
) -> EpsilonAudit:
    """Lower-bound the ε of mechanism ``run`` on the neighbours ``d``, ``d_prime``.

    ``run(data, n)`` returns n independent outputs; each event maps them to a bool array.
    """
    if not events:
        raise ConfigError("give at least one event")
    if trials < 1 or not 0 < confidence < 1 or not 0 <= delta < 1:
        raise ConfigError("need trials >= 1, 0 < confidence < 1 and 0 <= delta < 1")
    alpha = (1 - confidence) / (4 * len(events))  # 4 one-sided intervals per event
    outputs = run(d, trials), run(d_prime, trials)
    best = (0.0, "", "")
    rates: dict[str, tuple[float, float]] = {}
    for name, event in events.items():
        hits = [int(np.count_nonzero(event(out))) for out in outputs]
        rates[name] = (hits[0] / trials, hits[1] / trials)
        bounds = [clopper_pearson(k, trials, alpha) for k in hits]
        for a, b, direction in ((0, 1, "D vs D'"), (1, 0, "D' vs D")):
            numerator = bounds[a][0] - delta
            if numerator > 0:
                eps = math.log(numerator / bounds[b][1])
                if eps > best[0]:
                    best = (eps, name, direction)
    return EpsilonAudit(best[0], best[1], best[2], confidence, trials, delta, rates)


def _tail(value: Callable[[Any], np.ndarray], t: Any, upper: bool) -> Event:
    def event(out: Any) -> np.ndarray:
        v = value(out)
        return v >= t if upper else v <= t

    return event


def tail_events(thresholds: Any, column: int | None = None) -> dict[str, Event]:
    """Events ``output >= t`` and ``output <= t`` for scalar outputs (or one ``column``)."""

    def value(out: Any) -> np.ndarray:
        arr = np.asarray(out)
        return arr if column is None else arr[:, column]

    events: dict[str, Event] = {}
    for t in thresholds:
        events[f">= {t}"] = _tail(value, t, upper=True)
        events[f"<= {t}"] = _tail(value, t, upper=False)
    return events
