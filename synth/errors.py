"""User-facing errors: the CLI turns each into one line on stderr and exit status 2."""

from __future__ import annotations


class TransitSynthError(Exception):
    """Base class of every error caused by the user's input, configuration or budget."""


class InputError(TransitSynthError):
    """Bad input data: missing columns, unparsable values, unknown locations, empty input."""


class ConfigError(TransitSynthError):
    """Bad parameters or configuration (epsilon <= 0, delta >= 1, unknown config key, ...)."""


class BudgetExceededError(TransitSynthError):
    """A spend would take the privacy ledger past its cap; raised before any noise is drawn."""
