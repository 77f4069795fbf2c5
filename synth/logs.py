"""Messages that state exact private quantities: labelled for the data holder, hidden on request.

A release directory holds only what may be published. What the tool prints while making one is
the data holder's: a warning such as "dropped 68 rows (7 distinct locations)" or the demo's card
and boarding totals states exact statistics of the private input, and logs get pasted into
tickets. Every such message goes through :func:`private_message`, the one helper: it labels the
message ``private: for the data holder``, or returns None (print nothing) while
:func:`private_logs` hides them (``--log-private hide``; ``--quiet`` prints none at all).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["LOG_PRIVATE", "PRIVATE_LABEL", "private_logs", "private_message"]

#: the label of every message stating exact private quantities
PRIVATE_LABEL = "private: for the data holder"
#: the values of ``--log-private``
LOG_PRIVATE = ("show", "hide")

_state = {"show": True}
_lock = threading.Lock()


def private_message(message: str) -> str | None:
    """``message`` (which states exact private quantities) labelled for the data holder, or
    None while such messages are hidden (:func:`private_logs`): the caller then prints nothing."""
    if not _state["show"]:
        return None
    return f"{message} [{PRIVATE_LABEL}]"


@contextlib.contextmanager
def private_logs(show: bool) -> Iterator[None]:
    """While inside, :func:`private_message` labels (``show``) or hides its messages (all
    threads: an engine's worker thread logs as the command does)."""
    with _lock:
        previous = _state["show"]
        _state["show"] = bool(show)
    try:
        yield
    finally:
        with _lock:
            _state["show"] = previous
