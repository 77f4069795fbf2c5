"""The generator contract shared by the three generators (scikit-learn estimator conventions).

:class:`Generator` gives a subclass what ``sklearn.base.BaseEstimator`` gives an estimator, without
importing scikit-learn (``import prefixtree`` stays light):

- ``__init__`` takes keyword-only parameters and stores each one unchanged under its own name;
- :meth:`~Generator.get_params` / :meth:`~Generator.set_params` (nested ``a__b`` names included),
  so ``sklearn.base.clone`` returns an unfitted copy with equal parameters;
- a ``repr`` listing the parameters that differ from their defaults;
- ``_parameter_constraints``: a declarative table ``{name: [constraint, ...]}`` (a value passes
  when it satisfies one of the listed constraints; ``None`` in the list allows ``None``) checked by
  ONE validator, :meth:`~Generator._validate_params`, that ``fit`` calls before reading any data;
  a failure is a :class:`~synth.errors.ConfigError` naming the parameter;
- :class:`~synth.errors.NotFittedError`, with one message, from every method that needs a fit
  (:meth:`~Generator._check_fitted`); ``ledger_`` (the privacy spends) marks a fitted model.

``fit(data)`` reads private data, spends budget in ``ledger_`` and returns ``self``;
``sample()``/``iter_sample()`` are post-processing of the fitted state only.

The release contract (:mod:`synth.release`): :meth:`~Generator.manifest` is the fitted
generator's manifest (its ledger, its public parameters under ``generator``, its public inputs)
and :meth:`~Generator.write` writes its release directory, atomically. Every way of making a
release (the command line, ``run``, the demo, the Python API) calls ``write``, so the same fitted
generator gives the same manifest whichever way it is written.
"""

from __future__ import annotations

import inspect
import os
import warnings
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

import pandas as pd

from synth import registry
from synth.errors import ConfigError, InputError, NotFittedError
from synth.io import read_table
from synth.params import Constraint, ParamTable, validate_params

if TYPE_CHECKING:
    from synth.release import ReleaseWriter, Written

#: The release that drops the deprecated ``fit`` keywords (CHANGELOG.md, "Deprecations").
FIT_KEYWORDS_REMOVED_IN = "0.3.0"

__all__ = ["Generator", "read_data"]

_REPR_WIDTH = 60


def read_data(data: object, what: str = "data") -> pd.DataFrame:
    """A DataFrame as given, or a CSV/Parquet table read from a path (``what`` names it in
    errors)."""
    if isinstance(data, pd.DataFrame):
        return data
    if isinstance(data, str | os.PathLike):
        if str(data) == "":
            raise InputError(f"{what}: the path is empty")
        return read_table(data)
    raise InputError(f"{what} must be a DataFrame or a CSV/Parquet path, got {type(data).__name__}")


class Generator:
    """Base class of the DP generators: the scikit-learn estimator contract (see the module)."""

    #: the generator's parameter table (:mod:`synth.params`): one row per constructor keyword,
    #: from which its constraints, config keys and flags come (None: a generator without one)
    parameter_table: ClassVar[ParamTable | None] = None
    #: {parameter: [constraint, ...]}: checked by :meth:`_validate_params` at the start of fit
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {}
    #: the fitted attribute whose presence means "fitted"
    _fitted_attribute: ClassVar[str] = "ledger_"
    #: the privacy ledger of the fit (:class:`~synth.privacy.PrivacyLedger`); set by ``fit``
    ledger_: Any

    # -- parameters --------------------------------------------------------------------------------
    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The keyword-only parameters of ``__init__``, sorted (as scikit-learn does)."""
        signature = inspect.signature(cls.__init__)
        names = []
        for p in signature.parameters.values():
            if p.name == "self" or p.kind == p.VAR_KEYWORD:
                continue
            if p.kind != p.KEYWORD_ONLY:
                raise TypeError(f"{cls.__name__}.__init__ must take keyword-only parameters")
            names.append(p.name)
        return sorted(names)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters as stored; with ``deep``, also ``name__sub`` entries of
        parameters that have ``get_params`` themselves."""
        out: dict[str, Any] = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params: Any) -> Self:
        """Set constructor parameters (``name__sub`` for a nested one); returns ``self``. Values
        are validated at the next ``fit``."""
        valid = self._get_param_names()
        table = self.parameter_table
        if table is not None and table.old_names() & set(params):  # deprecated names
            old = {k: v for k, v in params.items() if k in table.old_names()}
            params = {**{k: v for k, v in params.items() if k not in old}, **table.renamed(old)}
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ConfigError(
                    f"invalid parameter {name!r} for {type(self).__name__}; "
                    f"valid parameters: {', '.join(valid)}"
                )
            if sub:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            getattr(self, name).set_params(**sub_params)
        return self

    def __repr__(self) -> str:
        defaults = {
            p.name: p.default
            for p in inspect.signature(type(self).__init__).parameters.values()
            if p.name != "self"
        }
        parts = []
        for name in self._get_param_names():
            value = getattr(self, name, None)
            default = defaults.get(name, inspect.Parameter.empty)
            if default is not inspect.Parameter.empty and _same(value, default):
                continue
            text = repr(value)
            if len(text) > _REPR_WIDTH:
                text = text[: _REPR_WIDTH - 3] + "..."
            parts.append(f"{name}={text}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def _validate_params(self) -> None:
        """The one parameter check: the declarative ``_parameter_constraints`` table, then the
        cross-parameter rules of :meth:`_check_params` (ConfigError)."""
        validate_params(self._parameter_constraints, self.get_params(deep=False))
        self._check_params()

    def _check_params(self) -> None:
        """Rules the table cannot state (between parameters); subclasses extend it."""

    def _deprecated_fit_args(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The effective values of parameters that used to be ``fit`` arguments: the constructor's,
        unless passed to ``fit`` (non-None), which still works with a DeprecationWarning until
        :data:`FIT_KEYWORDS_REMOVED_IN`. The parameters themselves are not changed (``fit`` never
        changes them)."""
        out = {name: getattr(self, name) for name in given}
        for name, value in given.items():
            if value is None:
                continue
            warnings.warn(
                f"{type(self).__name__}.fit({name}=...) is deprecated and will be removed in "
                f"transit-synth {FIT_KEYWORDS_REMOVED_IN}: pass {name}= to the constructor (or "
                "set_params)",
                DeprecationWarning,
                stacklevel=3,
            )
            out[name] = value
        return out

    # -- fitted state ------------------------------------------------------------------------------
    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, self._fitted_attribute)

    def _check_fitted(self) -> None:
        """NotFittedError (one message for every generator) unless ``fit`` has run."""
        if not self.__sklearn_is_fitted__():
            raise NotFittedError(self)

    def iter_sample(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        """The release in chunks; the default yields :meth:`sample`'s whole result once."""
        yield self.sample(*args, **kwargs)

    def sample(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - overridden
        """The synthetic release (post-processing of the fitted state only)."""
        raise NotImplementedError

    # -- the release -------------------------------------------------------------------------------
    @classmethod
    def manifest_name(cls) -> str:
        """The name this generator's manifests give it (``parameters.generator``), as its
        registry spec defines it (:func:`synth.registry.for_estimator`: the one place the name
        is written); ConfigError for a class no registered generator names."""
        spec = registry.for_estimator(cls)
        if spec is None:
            raise ConfigError(
                f"{cls.__name__} is not a registered generator: give it a spec "
                "(synth.registry.register) to name its manifests"
            )
        return spec.generator

    def parameters(self) -> dict[str, Any]:  # pragma: no cover - overridden
        """The public parameters of the fitted release, as its manifest records them (with
        ``generator``, :meth:`manifest_name`)."""
        raise NotImplementedError

    def public_inputs(self) -> dict[str, str | os.PathLike[str]]:
        """The public files the fitted generator read (role -> path: a taxonomy file ...),
        fingerprinted in its manifest; none by default."""
        return {}

    def manifest(
        self, public_inputs: Mapping[str, str | os.PathLike[str]] | None = None
    ) -> dict[str, Any]:
        """The release manifest (:func:`synth.release.build_manifest`): the privacy ledger, the
        public :meth:`parameters`, and the public inputs (:meth:`public_inputs` and the given
        ``public_inputs``, role -> file, e.g. a location list), never the private ones."""
        from synth.release import build_manifest

        self._check_fitted()
        inputs = {**self.public_inputs(), **dict(public_inputs or {})}
        return build_manifest(self.ledger_, self.parameters(), inputs)

    def write(
        self,
        out: str | os.PathLike[str],
        *,
        format: str = "csv",
        public_inputs: Mapping[str, str | os.PathLike[str]] | None = None,
        force: bool | None = None,
        location_names: bool = False,
    ) -> Written:
        """Write the release directory ``out``: the data files (``format`` "csv" or "parquet"),
        :meth:`manifest` and the datasheet (``README.md``, ``datasheet.json``), staged and put
        in place whole (:func:`synth.release.write_release`:
        an existing folder of the user's is never replaced; ``force`` as ``--force``).
        ``location_names``: the data files get a ``location_name`` column from the public names
        (:func:`synth.datasheet.location_names`: a ``names`` input or a GTFS taxonomy)."""
        from synth.release import Written, check_format, write_release

        self._check_fitted()
        check_format(format)
        manifest = self.manifest(public_inputs)
        inputs = {**self.public_inputs(), **dict(public_inputs or {})}
        names = None
        if location_names:
            from synth.datasheet import location_names as public_names

            names = public_names(inputs)
        with write_release(out, force=force) as release:
            release.names = names
            counts = self._write_data(release, format)
            release.manifest(manifest, inputs)  # and the datasheet (README.md, datasheet.json)
        return Written(Path(out), dict(counts))

    def _write_data(
        self, release: ReleaseWriter, format: str
    ) -> dict[str, int]:  # pragma: no cover - overridden
        """Write the data files into ``release``; returns counts of what they hold."""
        raise NotImplementedError


def _same(value: object, default: object) -> bool:
    """``value`` equals the default, of the same type (so 1 is not 1.0 nor True)."""
    if value is default:
        return True
    if type(value) is not type(default):
        return False
    if isinstance(value, Collection) and not isinstance(value, str | bytes | tuple | frozenset):
        return False
    try:
        return bool(value == default)
    except (TypeError, ValueError):
        return False
