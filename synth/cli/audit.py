"""``transit-synth audit``: the Opal assessment's checks on a release, and empirical DP tests.

``transit-synth audit RELEASE_DIR [--out DIR] [--route ORIGIN DESTINATION MINUTES ...]
[--pairs FILE]`` runs scale recovery, the zero-count check and differencing on a release directory.
``transit-synth audit --empirical MECHANISM --neighbours D D_PRIME --param epsilon=E ...`` runs the
statistical harness on a mechanism of the library. Findings go to stdout; with ``--out`` also
``DIR/audit.json`` and ``DIR/audit.html`` (written atomically).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from synth.cli.options import add_quiet_option
from synth.errors import ConfigError


def _mechanisms() -> list[str]:
    """The mechanisms of ``--empirical``: the audit's and the registered generators'."""
    from synth.audit.empirical import mechanisms

    return list(mechanisms())


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``audit`` subcommand."""
    p = subparsers.add_parser(
        "audit",
        help="privacy audit of a release (scale recovery, zero counts, differencing) or of a "
        "mechanism (empirical DP)",
        description=(
            "Run the attacks of the Opal privacy assessment (Culnane et al. 2017) on a release "
            "directory: "
            "noise-scale recovery from paired counts, the unperturbed-zero check (Theorem 1) and "
            "differencing across tables (Theorem 5); or, with --empirical, estimate a lower "
            "bound on a mechanism's epsilon from two tiny neighbouring datasets."
        ),
    )
    p.add_argument("release", nargs="?", metavar="RELEASE_DIR", help="release directory")
    p.add_argument("--out", metavar="DIR", help="write audit.json and audit.html into DIR")
    p.add_argument(
        "--route",
        nargs=3,
        action="append",
        default=[],
        metavar=("ORIGIN", "DESTINATION", "MINUTES"),
        help="a point-to-point service: tap-ons at ORIGIN are tap-offs at DESTINATION MINUTES "
        "later (repeatable; pairs for scale recovery)",
    )
    p.add_argument(
        "--pairs",
        metavar="FILE",
        help="pairs of cells sharing one raw value: columns table_a, table_b and key columns "
        "suffixed _a / _b (mode_a, day_a, time_a, location_a, ...)",
    )
    p.add_argument(
        "--model",
        choices=("auto", "laplace", "discrete", "gaussian"),
        default="auto",
        help="noise model of the scale fit (default: from the manifest)",
    )
    p.add_argument("--min-count", type=int, metavar="N", help="use pairs with both counts >= N")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence of every interval")
    emp = p.add_argument_group("empirical DP (instead of, or besides, RELEASE_DIR)")
    emp.add_argument(
        "--empirical",
        metavar="MECHANISM",
        help=f"mechanism to test: {', '.join(_mechanisms())}",
    )
    emp.add_argument(
        "--neighbours",
        nargs=2,
        metavar=("D", "D_PRIME"),
        help="neighbouring datasets (CSV/Parquet)",
    )
    emp.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="mechanism parameter (repeatable), e.g. epsilon=1 delta=1e-3 columns=stop_id",
    )
    emp.add_argument("--trials", type=int, default=2000, help="runs per dataset")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed the mechanism runs of --empirical, to repeat a test exactly; the audit "
        "releases no data, so seeding changes no release's privacy (default: fresh randomness)",
    )
    add_quiet_option(p)
    p.set_defaults(func=run)


def _value(text: str) -> Any:
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text.strip()


def _params(items: list[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--param {item!r}: expected KEY=VALUE")
        out[key.strip()] = _value(value)
    return out


def run(args: argparse.Namespace) -> int:
    """Run the requested checks, print the findings, write the report."""
    from synth.audit.report import add_findings, audit_release, base_report, write_report
    from synth.io import read_table

    if args.release is None and args.empirical is None:
        raise ConfigError("give a RELEASE_DIR, or --empirical MECHANISM --neighbours D D_PRIME")
    if args.empirical is not None and args.neighbours is None:
        raise ConfigError("--empirical needs --neighbours D D_PRIME")
    report = base_report(None)
    lines: list[str] = []  # printed once the report is written: a refused --out prints one line
    if args.release is not None:
        routes = []
        for origin, destination, minutes in args.route:
            try:
                routes.append((origin, destination, int(minutes)))
            except ValueError:
                raise ConfigError(f"--route: MINUTES must be an integer, got {minutes!r}") from None
        keys = {f"{k}_{s}": str for k in ("mode", "day", "time", "location") for s in "ab"}
        pairs = None if args.pairs is None else read_table(args.pairs, dtype=keys)
        report = audit_release(
            args.release,
            routes=routes,
            pairs=pairs,
            model=args.model,
            confidence=args.confidence,
            min_count=args.min_count,
        )
    if args.empirical is not None:
        from synth.audit.empirical import empirical_epsilon

        d, d_prime = (read_table(f) for f in args.neighbours)
        result = empirical_epsilon(
            args.empirical,
            d,
            d_prime,
            params=_params(args.param),
            trials=args.trials,
            confidence=args.confidence,
            seed=args.seed,
        )
        emp = result.to_dict()
        report["empirical"] = emp
        verdict = "REFUTED" if result.violated else "not refuted"
        line = (
            f"empirical: epsilon >= {emp['epsilon_lower_bound']:.3f} with confidence "
            f"{emp['confidence']:g} ({emp['trials']} trials per dataset after "
            f"{emp['selection_trials']} to choose events; event '{emp['event'] or '-'}'); "
            f"claimed epsilon {emp['claimed_epsilon']:g}, delta {emp['claimed_delta']:g}: {verdict}"
        )
        lines.append(line)
        finding = {
            "check": "empirical",
            "severity": "high" if result.violated else "info",
            "title": f"{args.empirical}: claimed epsilon {verdict}",
            "detail": line,
            "remedy": "Fix the mechanism before any release."
            if result.violated
            else "None needed (a test bounds epsilon from below; it is not a proof).",
            "data": emp,
        }
        add_findings(report, [finding])
    out = None if args.out is None else write_report(report, args.out)
    for line in lines:
        print(line)
    if not args.quiet:
        for f in report["findings"]:
            if f["check"] != "empirical":
                print(f"[{f['severity']}] {f['check']}: {f['title']}")
        if out is not None:
            print(f"audit report -> {out}/audit.html, {out}/audit.json", file=sys.stderr)
    return 0
