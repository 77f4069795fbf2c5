"""Empirical differential privacy: the statistical harness as a test of any mechanism.

The user gives two tiny neighbouring datasets D and D' (one privacy unit added, removed or
replaced). The mechanism runs ``trials`` times on each; every output is reduced to cells (a table
cell, or a distinct synthetic sequence / record) with a count. Candidate events ("cell released",
"cell count >= t") are chosen on a first share of the runs (the most distinguishing ones), and the
lower bound on epsilon is computed on the remaining runs only, with exact Clopper-Pearson intervals
(:func:`synth.privacy.harness.audit_epsilon`), so choosing the events does not bias it. A bound
above the claimed epsilon refutes the claim at that confidence; a bound below it is evidence, not
proof.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError
from synth.privacy import PrivacyLedger, SecureNoise
from synth.privacy.harness import EpsilonAudit, audit_epsilon

__all__ = [
    "MECHANISMS",
    "EmpiricalResult",
    "RunnerFactory",
    "cells_of",
    "empirical_epsilon",
    "loop_runner",
    "marginals_runner",
    "mechanisms",
]

Cells = dict[str, int]
Runner = Callable[[pd.DataFrame, int], list[Cells]]
#: Builds a mechanism's runner from its parameters, D, D' and the noise source: how a generator
#: lends a mechanism to the audit (its spec's ``audit`` hook, :mod:`synth.registry`, a dotted
#: path imported on use), so the foundation never imports a generator.
RunnerFactory = Callable[[dict[str, Any], pd.DataFrame, pd.DataFrame, Any], Runner]

#: Share of the trials used to choose the events (the rest estimate the bound).
SELECT_SHARE = 0.2
#: How many events are kept for the final bound (Bonferroni over them).
MAX_EVENTS = 6
_ABSENT = -(2**62)  # the count of a cell an output does not release


def cells_of(output: pd.DataFrame | Mapping[str, pd.DataFrame]) -> Cells:
    """Cells and counts of one output: table rows with a ``count`` column by their key; long
    sequences (``seq_id, pos, location``) as one cell per distinct path; other rows by value."""
    frames = dict(output) if isinstance(output, Mapping) else {"": output}
    cells: Cells = {}
    for name, df in frames.items():
        if "count" in df:
            keys = [c for c in df.columns if c != "count"]
            labels = df[keys].astype(str).agg("|".join, axis=1) if keys else pd.Series([""])
            for label, count in zip(labels, df["count"].to_numpy(), strict=False):
                cells[f"{name}:{label}"] = int(count)
        elif {"seq_id", "pos", "location"} <= set(df.columns):
            paths = (
                df.sort_values(["seq_id", "pos"])
                .groupby("seq_id", sort=False)["location"]
                .agg(lambda s: " > ".join(map(str, s)))
            )
            for path, count in Counter(paths).items():
                cells[f"{name}:{path}"] = count
        else:
            for row, count in Counter(df.astype(str).agg("|".join, axis=1)).items():
                cells[f"{name}:{row}"] = count
    return cells


def _columns(params: dict[str, Any], data: pd.DataFrame) -> list[str]:
    cols = params.pop("columns", None)
    if cols is None:
        return [c for c in data.columns if c != params.get("privacy_unit")]
    out = [c.strip() for c in str(cols).split(",") if c.strip()]
    missing = [c for c in out if c not in data]
    if missing:
        raise InputError(f"missing column(s): {', '.join(missing)}")
    return out


def _histogram_runner(kind: str, params: dict[str, Any], domain: list[str], noise: Any) -> Runner:
    from synth.privacy import DiscreteGaussian, DiscreteLaplace

    cols = params.pop("_columns")
    mech: DiscreteLaplace | DiscreteGaussian
    if kind == "discrete_laplace":
        mech = DiscreteLaplace(**params)
    else:
        mech = DiscreteGaussian(**params)
    index = pd.Index(domain)

    def run(data: pd.DataFrame, n: int) -> list[Cells]:
        labels = data[cols].astype(str).agg("|".join, axis=1)
        counts = np.bincount(index.get_indexer(labels), minlength=len(domain))
        ledger = PrivacyLedger(epsilon=mech.epsilon, delta=mech.delta)  # n runs, one vector
        noisy = mech.release(np.tile(counts, n), noise=noise, ledger=ledger, label="trials")
        return [dict(zip(domain, map(int, row), strict=True)) for row in noisy.reshape(n, -1)]

    return run


def _sbh_runner(params: dict[str, Any], domain: list[str], noise: Any) -> Runner:
    from synth.marginals import stability_histogram

    cols = params.pop("_columns")
    pure = bool(params.pop("pure", False))
    unit = params.get("privacy_unit")

    def run(data: pd.DataFrame, n: int) -> list[Cells]:
        reps = pd.concat([data] * n, ignore_index=True)
        trial = np.repeat(np.arange(n), len(data))
        reps["_cell"] = data[cols].astype(str).agg("|".join, axis=1).tolist() * n
        reps["_trial"] = trial
        if unit is not None:  # the same card in two trials is two units
            codes = np.tile(pd.factorize(data[unit])[0], n)
            reps[unit] = trial * len(data) + codes
        out = stability_histogram(
            reps,
            ["_trial", "_cell"],
            domain={"_trial": range(n), "_cell": domain} if pure else None,
            random_state=noise,
            **params,
        )
        result: list[Cells] = [{} for _ in range(n)]
        for t, cell, count in out[["_trial", "_cell", "count"]].itertuples(index=False):
            result[int(t)][f":{cell}"] = int(count)
        return result

    return run


def loop_runner(fit: Callable[[pd.DataFrame], Any]) -> Runner:
    def run(data: pd.DataFrame, n: int) -> list[Cells]:
        return [cells_of(fit(data)) for _ in range(n)]

    return run


def marginals_runner(
    params: dict[str, Any], d: pd.DataFrame, d_prime: pd.DataFrame, noise: Any
) -> Runner:
    """The Opal release (:class:`~synth.marginals.OpalMarginals`, Asghar et al. 2018) as an audit
    mechanism: its six tables, fitted on D or D' (the ``marginals`` spec's audit hook)."""
    from synth.marginals import OpalMarginals

    del d, d_prime  # the release's domains are its parameters
    return loop_runner(lambda d: OpalMarginals(random_state=noise, **params).fit(d).release())


#: The mechanisms of the audit itself, with the parameters each accepts (``--param KEY=VALUE``);
#: :func:`mechanisms` adds those of the registered generators.
MECHANISMS: dict[str, str] = {
    "discrete_laplace": "histogram of COLUMNS + discrete Laplace: epsilon, sensitivity, columns",
    "discrete_gaussian": "histogram + discrete Gaussian: epsilon, delta, sensitivity, columns",
    "sbh": "stability histogram (000 Algorithm 1): epsilon, delta, columns, privacy_unit, "
    "max_contributions, pure",
}


def mechanisms() -> dict[str, str]:
    """Every mechanism ``audit --empirical`` can test: :data:`MECHANISMS`, then the audit hook of
    each registered generator (:mod:`synth.registry`), with their parameters."""
    from synth import registry

    hooks = {s.audit.mechanism: s.audit.help for s in registry.specs() if s.audit is not None}
    return {**MECHANISMS, **hooks}


def _registered_runners() -> dict[str, Any]:
    """Mechanism -> the runner factory of the registered generator lending it (imported now)."""
    from synth import registry

    hooks = [s.audit for s in registry.specs() if s.audit is not None]
    return {h.mechanism: h.runner for h in hooks}


@dataclass(frozen=True)
class EmpiricalResult:
    """The estimated lower bound on epsilon and what was claimed."""

    mechanism: str
    claimed_epsilon: float
    claimed_delta: float
    audit: EpsilonAudit
    selection_trials: int

    @property
    def violated(self) -> bool:
        """The claim is refuted at the stated confidence."""
        return self.audit.violates(self.claimed_epsilon)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        a = self.audit
        return {
            "mechanism": self.mechanism,
            "claimed_epsilon": self.claimed_epsilon,
            "claimed_delta": self.claimed_delta,
            "epsilon_lower_bound": a.epsilon_lower_bound,
            "confidence": a.confidence,
            "event": a.event,
            "direction": a.direction,
            "trials": a.trials,
            "selection_trials": self.selection_trials,
            "violated": self.violated,
            "rates": {k: list(v) for k, v in a.rates.items()},
        }


def _runner(
    mechanism: str,
    params: dict[str, Any],
    d: pd.DataFrame,
    d_prime: pd.DataFrame,
    noise: Any,
    runners: Mapping[str, RunnerFactory],
) -> Runner:
    if mechanism in runners:
        return runners[mechanism](params, d, d_prime, noise)
    registered = _registered_runners()
    if mechanism in registered:
        from synth import registry

        return registry.load(registered[mechanism])(params, d, d_prime, noise)
    if mechanism in ("discrete_laplace", "discrete_gaussian", "sbh"):
        cols = _columns(params, d)
        _columns({"columns": ",".join(cols)}, d_prime)
        labels = pd.concat([d[cols], d_prime[cols]]).astype(str).agg("|".join, axis=1)
        domain = sorted(set(labels))
        params["_columns"] = cols
        if mechanism == "sbh":
            return _sbh_runner(params, domain, noise)
        return _histogram_runner(mechanism, params, domain, noise)
    raise ConfigError(f"unknown mechanism {mechanism!r}; choose one of {', '.join(mechanisms())}")


def _events(sel_d: list[Cells], sel_p: list[Cells]) -> dict[str, Callable[[Any], np.ndarray]]:
    """The most distinguishing events on the selection runs (plug-in log ratio, add-one)."""
    cells = sorted(set().union(*sel_d, *sel_p)) if sel_d or sel_p else []
    candidates: list[tuple[float, str, str, int | None]] = []
    for cell in cells:
        a = np.array([o.get(cell, _ABSENT) for o in sel_d])
        b = np.array([o.get(cell, _ABSENT) for o in sel_p])
        present = np.concatenate([a, b])
        values = np.unique(present[present > _ABSENT])
        thresholds: list[int | None] = [None]
        if values.size > 1:
            thresholds += sorted({int(v) for v in np.quantile(values, [0.1, 0.3, 0.5, 0.7, 0.9])})
        for t in thresholds:
            lo = _ABSENT + 1 if t is None else t
            ka, kb = int((a >= lo).sum()), int((b >= lo).sum())
            score = abs(math.log((ka + 1) / (a.size + 2)) - math.log((kb + 1) / (b.size + 2)))
            name = f"{cell} released" if t is None else f"{cell} >= {t}"
            candidates.append((score, name, cell, t))
    candidates.sort(key=lambda c: (-c[0], c[1]))
    return {name: _cell_event(cell, t) for _, name, cell, t in candidates[:MAX_EVENTS]}


def _cell_event(cell: str, at_least: int | None) -> Callable[[Any], np.ndarray]:
    """Per run: ``cell`` is released (with a count ``>= at_least``)."""
    lo = _ABSENT + 1 if at_least is None else at_least

    def event(outs: list[Cells]) -> np.ndarray:
        return np.array([o.get(cell, _ABSENT) >= lo for o in outs], dtype=bool)

    return event


def empirical_epsilon(
    mechanism: str,
    d: pd.DataFrame,
    d_prime: pd.DataFrame,
    *,
    params: Mapping[str, Any],
    trials: int = 2000,
    confidence: float = 0.95,
    seed: int | None = None,
    runners: Mapping[str, RunnerFactory] | None = None,
) -> EmpiricalResult:
    """Lower-bound the epsilon of ``mechanism`` (a key of :func:`mechanisms`) on D, D'.

    ``params`` are the mechanism's keyword parameters (``epsilon`` is required; ``delta`` is the
    claimed delta where the mechanism has one). ``seed`` makes the runs reproducible (NOT private,
    which does not matter for a test on made-up data). ``runners`` (mechanism -> factory) adds
    mechanisms to those of the registered generators (their specs' audit hooks).
    """
    known = mechanisms()
    if mechanism not in known and mechanism not in (runners or {}):
        raise ConfigError(f"unknown mechanism {mechanism!r}; choose one of {', '.join(known)}")
    if trials < 10:
        raise ConfigError(f"trials must be >= 10, got {trials}")
    if len(d) == 0 or len(d_prime) == 0:
        raise InputError("the neighbouring datasets must not be empty")
    p = dict(params)
    if "epsilon" not in p:
        raise ConfigError("give the mechanism's epsilon (--param epsilon=...)")
    eps = float(p["epsilon"])
    # a pure mechanism claims delta 0: discrete Laplace, or any whose parameters ask for the pure
    # mode (the SBH's pure=true, the Opal release's mode=pure)
    pure = mechanism == "discrete_laplace" or bool(p.get("pure") or p.get("mode") == "pure")
    delta = 0.0 if pure else float(p.get("delta", 0.0))
    noise = SecureNoise(seed=seed)
    n_sel = max(5, int(trials * SELECT_SHARE))
    try:
        run = _runner(mechanism, p, d, d_prime, noise, runners or {})
        events = _events(run(d, n_sel), run(d_prime, n_sel))
    except TypeError as exc:  # an unknown keyword in --param
        raise ConfigError(f"{mechanism}: bad parameters ({exc})") from exc
    if not events:
        raise InputError("the mechanism released nothing on either dataset: no event to test")
    audit = audit_epsilon(
        run, d, d_prime, events, trials=trials - n_sel, delta=delta, confidence=confidence
    )
    return EmpiricalResult(mechanism, eps, delta, audit, n_sel)
