"""Which ``k`` events of a card a card-unit SBH release keeps (its contribution bounding).

Asghar, Tyler and Kaafar (2018, section 4.1) count trips; with a card as the privacy unit each
card's events must first be bounded to ``k`` per side so that the sensitivities of
:func:`synth.marginals.calibrate` hold. Any rule that looks at one card's own events (and public
settings or independent randomness) keeps that guarantee; the rule decides only what the release
describes:

- ``"uniform"`` (the default): each card keeps a uniformly random ``k`` of its events per side:
  those of lowest priority, a SipHash of the event's own fields keyed by a secret drawn from the
  secure source (:class:`synth.privacy.SecureNoise`, seedable for tests), so the choice is per
  card (a card's kept events depend on its own events and the key only). A card
  with ``n > k`` events keeps each with probability ``k/n`` whatever its time or place, so the
  bounded tables are the true tables scaled per card, not reshaped: the hour profile of the
  bounded taps is the true one in expectation at any ``k``.
- ``"earliest"``: each card keeps its first ``k`` events by (time, partition, location, input
  row). Deterministic, but it describes early taps. On the public SUBE Tuesday taps
  (``benchmarks/bench_bounding.py``, hourly bins) the hour profile of the kept tap-ons is TV
  0.24 / 0.14 / 0.077 / 0.0035 from all tap-ons at ``k`` = 1 / 2 / 3 / 7 under "earliest", and
  0.021 / 0.015 / 0.008 / 0.0008 under "uniform" (the same share of taps is kept).

The evaluation (:func:`synth.evaluate.against_reference`) puts the microdata it compares through
the same rule, so like is compared with like: the first ``k`` by time for "earliest"; for
"uniform", whose key is secret, the expectation over the choice with its variance per cell
(:func:`expected_tables`).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd

from synth.engines.kernels import bound_rank
from synth.errors import ConfigError
from synth.privacy import noise_source

__all__ = [
    "BOUNDING_RULES",
    "Bounding",
    "check_bounding",
    "event_priority",
    "expected_tables",
    "keep_bounded",
    "selection_source",
]

Bounding = Literal["uniform", "earliest"]
#: the bounding rules of a card-unit release (module docstring)
BOUNDING_RULES: tuple[str, ...] = ("uniform", "earliest")


def check_bounding(rule: object) -> str:
    """``rule`` if it is one of :data:`BOUNDING_RULES`, else a ConfigError."""
    if rule not in BOUNDING_RULES:
        raise ConfigError(f"bounding must be one of {', '.join(BOUNDING_RULES)}, got {rule!r}")
    return str(rule)


def selection_source(random_state: object) -> Any:
    """The source of a uniform choice: its own :class:`~synth.privacy.SecureNoise` (the OS
    CSPRNG, or seeded with the same int: reproducible, NOT private) so the release's noise draws
    are those of the seed whatever is chosen; a noise-source object (tests) is used itself."""
    return noise_source(random_state, methods=("choice",))


_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _key(source: Any) -> str:
    """A 16-character SipHash key: 16 distinct symbols of 62 drawn from ``source`` (93 bits)."""
    return "".join(_ALPHABET[int(i)] for i in source.choice(len(_ALPHABET), 16))


def _mix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser (a bijection of uint64 with full avalanche)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _keyed(labels: np.ndarray, codes: np.ndarray, key: str) -> np.ndarray:
    """SipHash-2-4 (keyed by ``key``) of the label of each code."""
    return pd.util.hash_array(np.asarray(labels, dtype=object), hash_key=key)[codes]


def event_priority(events: Any, key: str) -> np.ndarray:
    """Each event's pseudo-random priority: a keyed hash of its own fields only (card label, mode
    label, location label, side, day, minute), so a card's choice depends on its own events and
    the secret ``key``, never on the other cards (adding a card moves no other card's choice).
    Identical events get the same priority; which of them is kept does not change any count."""
    rest = (
        (events.side.astype(np.uint64) << np.uint64(62))
        ^ (events.day.astype(np.int64).astype(np.uint64) << np.uint64(20))
        ^ (events.minute.astype(np.int64) + 1).astype(np.uint64)
    )
    mixed = _keyed(events.modes, events.mode, key) ^ _mix(rest)
    mixed = _keyed(events.locations, events.location, key) ^ _mix(mixed)
    return _mix(_keyed(events.units, events.unit, key) ^ _mix(mixed))


def keep_bounded(
    among: np.ndarray,
    events: Any,
    k: int,
    random_state: object = None,
    *,
    rule: str = "uniform",
    order: list[np.ndarray] | None = None,
) -> np.ndarray:
    """``among`` (a mask of all ``events``) narrowed to at most ``k`` events per (unit, side).

    ``rule="earliest"``: the first ``k`` by ``order`` (arrays over all events, e.g. minute,
    partition, location), then input row. ``rule="uniform"``: the ``k`` of lowest
    :func:`event_priority` under a key drawn from ``random_state`` (:func:`selection_source`):
    a pseudo-random uniform ``k``-subset of each group's distinct events (SipHash is a PRF), the
    same on every engine, each card's depending on its own events only.
    """
    check_bounding(rule)
    groups = [events.unit[among].astype(np.int64), events.side[among].astype(np.int64)]
    if rule == "uniform":
        if events.units is None:
            raise ConfigError("a uniform bounding needs the unit labels")
        priority = event_priority(events, _key(selection_source(random_state)))
        rank = bound_rank(groups, [priority[among]])
    else:
        rank = bound_rank(groups, [o[among] for o in order or []])
    out = np.zeros(among.size, dtype=bool)
    out[np.flatnonzero(among)[rank < int(k)]] = True
    return out


def expected_tables(
    events: Any, part: np.ndarray, loc: np.ndarray, grid: Any, among: np.ndarray, k: int
) -> dict[str, pd.DataFrame]:
    """The tables of ``events[among]`` as the uniform choice gives them in expectation, with the
    choice's variance per cell (what the reference check compares a uniform release with).

    A card with ``n > k`` events on a side keeps ``k`` of them uniformly: ``m`` of its events in
    a cell contribute ``m k / n`` in expectation, and the kept number is hypergeometric, of
    variance ``k (m/n) (1 - m/n) (n - k) / (n - 1)``; cards are independent, so a cell's mean
    and variance are the sums over cards. Columns as :meth:`Grid.frame`, ``count`` (float) and
    ``variance``.
    """
    from types import SimpleNamespace

    from synth.marginals.grid import TABLES, table_keys

    side, unit = events.side[among].astype(np.int64), events.unit[among].astype(np.int64)
    group, size = np.unique(unit * 2 + side, return_inverse=True, return_counts=True)[1:]
    view = SimpleNamespace(side=events.side[among], minute=events.minute[among])
    out: dict[str, pd.DataFrame] = {}
    for s in sorted(set(events.side[among].tolist())):
        keys = table_keys(view, part[among], loc[among], grid, int(s))  # type: ignore[arg-type]
        on = side == s
        for name, key in keys.items():
            cells = grid.size(name)
            pair, m = np.unique(group[on] * cells + key, return_counts=True)
            g = pair // cells
            nn, kk, share = size[g].astype(float), np.minimum(float(k), size[g]), m / size[g]
            mean = m * kk / nn
            var = np.where(nn > 1, kk * share * (1 - share) * (nn - kk) / np.maximum(nn - 1, 1), 0)
            present, inverse = np.unique(pair % cells, return_inverse=True)
            frame = grid.frame(name, present, np.zeros(present.size, np.int64))
            frame["count"] = np.bincount(inverse, weights=mean, minlength=present.size)
            frame["variance"] = np.bincount(inverse, weights=var, minlength=present.size)
            out[name] = frame
    return {name: out[name] for name in TABLES if name in out}
