"""User-facing errors: the CLI turns each into one line on stderr and exit status 2."""

from __future__ import annotations


class TransitSynthError(Exception):
    """Base class of every error caused by the user's input, configuration or budget."""


class InputError(TransitSynthError):
    """Bad input data: missing columns, unparsable values, unknown locations, empty input."""


class ConfigError(TransitSynthError, ValueError):
    """Bad parameters or configuration (epsilon <= 0, delta >= 1, unknown config key, ...).

    A ``ValueError`` too: scikit-learn's convention for invalid estimator parameters."""


class BudgetExceededError(TransitSynthError):
    """A spend would take the privacy ledger past its cap; raised before any noise is drawn."""


class NotFittedError(ConfigError):
    """A method that needs a fitted model was called before ``fit`` (one message for every
    generator; a ``ValueError`` as in scikit-learn, and a :class:`ConfigError` for the CLI)."""

    def __init__(self, estimator: object) -> None:
        self.estimator_name = type(estimator).__name__
        super().__init__(f"this {self.estimator_name} is not fitted yet: call fit(data) first")


class TransitSynthWarning(UserWarning):
    """Base class of the tool's own warnings (the CLI prints each as one ``warning:`` line)."""


class UnderspendWarning(TransitSynthWarning):
    """A release spent less than its cap because a mechanism stopped early (nothing left to
    count); its guarantee stays the cap."""


class SeededWarning(TransitSynthWarning):
    """A seed makes the noise reproducible: the release is not differentially private."""


class RenamedParameterWarning(TransitSynthWarning, DeprecationWarning):
    """A renamed constructor keyword or config key was used (:mod:`synth.params`): it still
    works until the release CHANGELOG.md names, under its new name (the flag's)."""


class RenamedClassWarning(TransitSynthWarning, DeprecationWarning):
    """A renamed public class was used under its old name (``OpalRelease``, now
    :class:`~synth.marginals.OpalMarginals`): it still works until the release CHANGELOG.md names
    (:data:`synth.params.RENAMED_REMOVED_IN`)."""
