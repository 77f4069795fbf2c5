"""The manifest as the audit reads it: its schema, and whether its numbers agree with each other.

:func:`validate_manifest` names every malformed field in one line (``InputError``), so the checks
after it never meet a list where a table is expected or a string where a number is.
:func:`consistency_findings` recomputes, for each spend, what its noise scale and sensitivity
imply: a Laplace-family spend of sensitivity ``Δ`` and scale ``b`` is ``Δ/b``-DP (Dwork et al.
2006); a Gaussian one needs ``σ`` at least the analytic minimum for its (ε, δ) (Balle and Wang
2018); a threshold spend's δ is at least that of its threshold (Chen et al. 2012; Wilson et al.
2020, Algorithm 1). A claim smaller than what the noise gives (epsilons edited down, scales
untouched) is a high-severity finding.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any

from synth.errors import InputError

__all__ = ["consistency_findings", "consistency_summary", "validate_manifest"]

_LAPLACE = ("discrete_laplace", "laplace", "discrete_laplace_threshold", "threshold_histogram")
_GAUSSIAN = ("discrete_gaussian", "gaussian")
_THRESHOLD = ("discrete_laplace_threshold", "threshold_histogram")
_RTOL = 1e-6  # float rounding of scales (rounded up) and of their JSON text
_GAUSS_TOL = 0.9  # discrete Gaussians calibrated exactly may sit a little below the analytic sigma


def _number(value: Any) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _describe(value: Any) -> str:
    kinds = {list: "a list", dict: "an object", str: "a string", bool: "a boolean"}
    return kinds.get(type(value), "null" if value is None else type(value).__name__)


def _numbers(
    where: str, block: dict[str, Any], fields: dict[str, tuple[str, bool]], problems: list[str]
) -> None:
    """Each field: (rule, required); rule is 'positive', 'probability' or 'number'."""
    for name, (rule, required) in fields.items():
        if name not in block or block[name] is None:
            if required:
                problems.append(f"{where}.{name} is missing")
            continue
        value = block[name]
        ok = _number(value) and (
            (rule == "positive" and value > 0)
            or (rule == "probability" and 0 <= value <= 1)
            or (rule == "number" and value >= 0)
        )
        if not ok:
            want = {
                "positive": "a number > 0",
                "probability": "a number in [0, 1]",
                "number": "a number >= 0",
            }[rule]
            problems.append(f"{where}.{name} must be {want}, got {_describe(value)} {value!r}")


def validate_manifest(manifest: Any, source: str) -> None:
    """InputError listing every malformed field of a release manifest (all on one line)."""
    if not isinstance(manifest, dict):
        raise InputError(f"{source}: the manifest must be a JSON object, got {_describe(manifest)}")
    problems: list[str] = []
    for name, kind in (("parameters", dict), ("spent", dict), ("spends", list)):
        if name in manifest and manifest[name] is not None and not isinstance(manifest[name], kind):
            want = "an object" if kind is dict else "a list"
            problems.append(f"{name} must be {want}, got {_describe(manifest[name])}")
    unit = manifest.get("privacy_unit")
    if unit is not None and not isinstance(unit, str):
        problems.append(f"privacy_unit must be a string, got {_describe(unit)}")
    if isinstance(manifest.get("spent"), dict):
        rules = {"epsilon": ("number", False), "delta": ("probability", False)}
        _numbers("spent", manifest["spent"], rules, problems)
    spends = manifest.get("spends")
    for i, spend in enumerate(spends if isinstance(spends, list) else []):
        where = f"spends[{i}]"
        if not isinstance(spend, dict):
            problems.append(f"{where} must be an object, got {_describe(spend)}")
            continue
        for name in ("label", "mechanism"):
            if name in spend and not isinstance(spend[name], str):
                problems.append(f"{where}.{name} must be a string, got {_describe(spend[name])}")
        rules = {
            "epsilon": ("number", True),
            "delta": ("probability", False),
            "scale": ("positive", False),
            "sensitivity": ("positive", False),
            "threshold": ("number", False),
        }
        _numbers(where, spend, rules, problems)
    params = manifest.get("parameters")
    tables = params.get("tables") if isinstance(params, dict) else None
    if tables is not None and not isinstance(tables, dict):
        got = _describe(tables)
        problems.append(f"parameters.tables must be an object (table name -> its noise), got {got}")
    elif isinstance(tables, dict):
        for name, info in tables.items():
            where = f"parameters.tables.{name}"
            if not isinstance(info, dict):
                problems.append(f"{where} must be an object, got {_describe(info)}")
                continue
            rules = {"scale": ("positive", False), "threshold": ("number", False)}
            _numbers(where, info, rules, problems)
            origin = info.get("derived_from")
            if origin is not None and not isinstance(origin, str):
                problems.append(f"{where}.derived_from must be a string or null")
    if problems:
        raise InputError(f"{source}: malformed manifest: {'; '.join(problems)}")


def _finding(severity: str, title: str, detail: str, remedy: str, **data: Any) -> dict[str, Any]:
    return {
        "check": "consistency",
        "severity": severity,
        "title": title,
        "detail": detail,
        "remedy": remedy,
        "data": data,
    }


def _exact_disagrees(spend: dict[str, Any], name: str) -> bool:
    text = spend.get(f"{name}_exact")
    if not isinstance(text, str) or not _number(spend.get(name)):
        return False
    try:
        exact = Fraction(text)
    except (ValueError, ZeroDivisionError):
        return True
    value = float(spend[name])
    return abs(float(exact) - value) > _RTOL * max(abs(value), 1e-300)


def _linf(manifest: dict[str, Any], label: str, sensitivity: float) -> int:
    """The largest change of one cell (a table's ``linf``, else the spend's sensitivity)."""
    params = manifest.get("parameters") or {}
    info = (params.get("tables") or {}).get(label) if isinstance(params, dict) else None
    if isinstance(info, dict) and _number(info.get("linf")):
        return max(1, int(info["linf"]))
    return max(1, math.ceil(sensitivity))


def _spend_findings(manifest: dict[str, Any], spend: dict[str, Any]) -> list[dict[str, Any]]:
    from synth.privacy.mechanisms import threshold_delta

    label = str(spend.get("label", "?"))
    mechanism = str(spend.get("mechanism", ""))
    eps, delta = float(spend.get("epsilon", 0.0)), float(spend.get("delta") or 0.0)
    scale, sens = spend.get("scale"), spend.get("sensitivity")
    out: list[dict[str, Any]] = []
    for name in ("epsilon", "delta"):
        if _exact_disagrees(spend, name):
            out.append(
                _finding(
                    "high",
                    f"Spend '{label}': {name} and {name}_exact disagree",
                    f"The manifest states {name} {spend.get(name)!r} and {name}_exact "
                    f"{spend.get(name + '_exact')!r}; one of them was edited.",
                    "Do not publish; regenerate the release and its manifest.",
                    spend=label,
                )
            )
    if scale is None or sens is None:
        return out
    scale, sens = float(scale), float(sens)
    if mechanism in _LAPLACE:
        implied = sens / scale
        if eps < implied * (1 - _RTOL):
            out.append(
                _finding(
                    "high",
                    f"Spend '{label}' claims epsilon {eps:g}, its noise gives {implied:g}",
                    f"Laplace noise of scale {scale:g} on a query of sensitivity {sens:g} is "
                    f"{implied:g}-DP, not {eps:g}: the manifest understates the privacy loss "
                    "(epsilons edited, or the wrong noise applied).",
                    "Do not publish. Regenerate the release, or correct the manifest to the "
                    "epsilon its noise gives and recompose the budget.",
                    spend=label,
                    claimed=eps,
                    implied=implied,
                )
            )
        elif eps > implied * (1 + 1e-3):
            out.append(
                _finding(
                    "medium",
                    f"Spend '{label}' claims epsilon {eps:g}, its noise gives {implied:g}",
                    f"Scale {scale:g} at sensitivity {sens:g} gives epsilon {implied:g}, less "
                    "than claimed: the claim is conservative but the manifest is inconsistent.",
                    "Check how the manifest was produced; regenerate it from the release run.",
                    spend=label,
                    claimed=eps,
                    implied=implied,
                )
            )
    elif mechanism in _GAUSSIAN:
        out += _gaussian_findings(label, eps, delta, scale, sens)
    threshold = spend.get("threshold")
    if mechanism in _THRESHOLD and delta > 0 and threshold is not None:
        needed = threshold_delta(scale, int(float(threshold)), _linf(manifest, label, sens))
        if needed > delta * (1 + _RTOL):
            out.append(
                _finding(
                    "high",
                    f"Spend '{label}': threshold {float(threshold):g} gives delta {needed:.3g}, "
                    f"claimed {delta:.3g}",
                    f"With noise scale {scale:g}, an absent cell passes threshold "
                    f"{float(threshold):g} with probability up to {needed:.3g}, more than the "
                    "claimed delta: the manifest understates the privacy loss.",
                    "Do not publish; regenerate the release (or correct delta and recompose).",
                    spend=label,
                    claimed=delta,
                    implied=needed,
                )
            )
    return out


def _gaussian_findings(
    label: str, eps: float, delta: float, sigma: float, sens: float
) -> list[dict[str, Any]]:
    from synth.errors import ConfigError
    from synth.privacy.calibration import analytic_gaussian_sigma

    try:
        least = analytic_gaussian_sigma(eps, delta, sens)
    except ConfigError:  # delta = 0 or epsilon out of range: Gaussian noise cannot give it
        least = math.inf
    if sigma >= _GAUSS_TOL * least:
        return []
    return [
        _finding(
            "high",
            f"Spend '{label}': sigma {sigma:g} is too small for ({eps:g}, {delta:g})-DP",
            f"Gaussian noise on a query of L2 sensitivity {sens:g} needs sigma >= {least:.4g} "
            f"for the claimed (epsilon {eps:g}, delta {delta:g}) (Balle and Wang 2018): the "
            "manifest understates the privacy loss.",
            "Do not publish; regenerate the release, or correct the manifest and recompose.",
            spend=label,
            sigma=sigma,
            least_sigma=least,
        )
    ]


def consistency_findings(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Findings where a spend's (epsilon, delta, threshold) disagree with its scale and
    sensitivity (none when all agree: :func:`consistency_summary` says how many were checked)."""
    spends = [s for s in manifest.get("spends") or [] if isinstance(s, dict)]
    return [f for spend in spends for f in _spend_findings(manifest, spend)]


def consistency_summary(manifest: dict[str, Any], findings: list[dict[str, Any]]) -> dict[str, Any]:
    """How many spends could be checked (they state a scale and a sensitivity) and disagreed."""
    spends = [s for s in manifest.get("spends") or [] if isinstance(s, dict)]
    checked = sum(s.get("scale") is not None and s.get("sensitivity") is not None for s in spends)
    return {
        "spends": len(spends),
        "checked": checked,
        "high": sum(f["severity"] == "high" for f in findings),
        "medium": sum(f["severity"] == "medium" for f in findings),
    }
