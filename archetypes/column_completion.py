"""Remaining columns completed from PUBLIC k-way marginals (GooseDP write-up, Table 1).

A plan is an ordered list of ``(target, conditioning columns)``. Targets are filled one after
another, so a later target may condition on an earlier one (``tips`` on ``fare``). For each
synthetic row the target is drawn from the empirical distribution of the target among the public
trips that share the row's values of the conditioning columns. When that combination never occurs in
the public data the conditioning is made coarser by dropping its LAST column, repeatedly, down to
the target's one-way public marginal; list the conditioning columns most important first. (The
original falls back in one step to shift x pickup x dropoff; the chain generalises it.) Pure
public-data post-processing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from synth.errors import ConfigError, InputError

__all__ = ["ColumnCompleter", "Plan"]

Plan = Sequence[tuple[str, Sequence[str]]]


@dataclass(frozen=True)
class _Level:
    """The public target values grouped by one conditioning prefix."""

    columns: tuple[str, ...]
    keys: pd.Index  # unique conditioning combinations, position = group id
    starts: np.ndarray  # group g's values are values[starts[g] : starts[g] + sizes[g]]
    sizes: np.ndarray
    values: np.ndarray


class ColumnCompleter:
    """Fill the targets of ``plan`` row by row from public conditionals, with fallback."""

    def __init__(self, *, plan: Plan) -> None:
        self.plan = plan

    def fit(self, public: pd.DataFrame) -> ColumnCompleter:
        """Index the public data by every conditioning prefix of every target."""
        plan = [(str(t), tuple(c)) for t, c in self.plan]
        targets = [t for t, _ in plan]
        if len(set(targets)) != len(targets):
            raise ConfigError("completion: a column is completed twice")
        for target, cond in plan:
            if target in cond:
                raise ConfigError(f"completion: '{target}' conditions on itself")
        needed = list(dict.fromkeys(c for t, cond in plan for c in (t, *cond)))
        missing = [c for c in needed if c not in public.columns]
        if missing:
            raise InputError(f"public data: missing column(s) {', '.join(map(repr, missing))}")
        if len(public) == 0 and plan:
            raise InputError("public data: no trips to complete columns from")
        self.levels_: dict[str, list[_Level]] = {}
        for target, cond in plan:
            self.levels_[target] = [
                _index(public, cond[:n], target) for n in range(len(cond), -1, -1)
            ]
        self.plan_ = plan
        return self

    def complete(
        self, synthetic: pd.DataFrame, rng: np.random.Generator
    ) -> tuple[pd.DataFrame, dict[str, list[int]]]:
        """Return ``synthetic`` with every target filled, and for each target how many rows were
        drawn at each conditioning depth (full conditioning first, one-way marginal last)."""
        out = synthetic.copy()
        fallbacks: dict[str, list[int]] = {}
        for target, cond in self.plan_:
            missing = [c for c in cond if c not in out.columns]
            if missing:
                raise ConfigError(
                    f"completion: '{target}' conditions on {missing}, not yet synthesised"
                )
            result = np.empty(len(out), dtype=self.levels_[target][0].values.dtype)
            todo = np.arange(len(out))
            counts: list[int] = []
            for level in self.levels_[target]:
                if len(todo) == 0:
                    counts.append(0)
                    continue
                if level.columns:
                    rows = out.iloc[todo]
                    probe = (
                        pd.MultiIndex.from_frame(rows[list(level.columns)])
                        if len(level.columns) > 1
                        else pd.Index(rows[level.columns[0]])
                    )
                    group = np.asarray(level.keys.get_indexer(probe), dtype=np.int64)
                else:
                    group = np.zeros(len(todo), dtype=np.int64)
                hit = group >= 0
                g = group[hit]
                pick = level.starts[g] + np.floor(rng.random(len(g)) * level.sizes[g]).astype(
                    np.int64
                )
                result[todo[hit]] = level.values[pick]
                counts.append(int(hit.sum()))
                todo = todo[~hit]
            out[target] = result
            fallbacks[target] = counts
        return out, fallbacks


def _index(public: pd.DataFrame, cond: tuple[str, ...], target: str) -> _Level:
    """Group the public target values by ``cond`` (sorted by group, with start offsets)."""
    values = public[target].to_numpy()
    if not cond:
        return _Level((), pd.Index([0]), np.array([0]), np.array([len(values)]), values)
    codes, uniques = pd.factorize(
        pd.MultiIndex.from_frame(public[list(cond)]) if len(cond) > 1 else public[cond[0]],
        sort=False,
    )
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=len(uniques))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    keys = uniques if isinstance(uniques, pd.Index) else pd.Index(uniques)
    return _Level(cond, keys, starts, sizes, values[order])
