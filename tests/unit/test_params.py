"""One parameter table per generator (synth.params, issue 27): every constructor parameter has
exactly one row, one flag and one config key, with the same name modulo dashes; the validator,
the flags' ``--help`` and the config schema come from the table; renamed names are deprecated."""

from __future__ import annotations

import argparse
import datetime
import inspect
from collections.abc import Mapping
from typing import Any

import pytest
from sklearn.base import clone

from archetypes.synthesizer import ArchetypeSynthesizer
from prefixtree.synthesizer import PrefixTreeSynthesizer
from synth import registry
from synth.cli import build_parser, main
from synth.errors import ConfigError, RenamedParameterWarning
from synth.marginals.opal import OpalMarginals
from synth.params import REQUIRED, Param, ParamTable, naming, spell
from synth.taxonomy import Taxonomy

#: generator -> its command (and ``run`` config table)
GENERATORS: dict[str, type] = {
    "sequences": PrefixTreeSynthesizer,
    "trips": ArchetypeSynthesizer,
    "marginals": OpalMarginals,
}

#: The only parameters without a flag of their own name, and why (the test fails on any other).
EXCEPTIONS: dict[str, dict[str, str]] = {
    "sequences": {
        "taxonomy": "api_only",  # an object; --taxonomy names a file
        "random_state": "api_only",  # --seed
        "progress": "api_only",  # a callback
        "engine_options": "no_flag",  # --engine-temp-dir, --engine-memory-limit, --spark-*
    },
    "trips": {"random_state": "api_only"},
    "marginals": {
        "taxonomy": "api_only",
        "random_state": "api_only",
        "engine_options": "no_flag",
    },
}


def _constructor_parameters(cls: type) -> list[str]:
    return [
        p.name
        for p in inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]
        if p.name != "self" and p.kind is not p.VAR_KEYWORD
    ]


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser(command)
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings if s.startswith("--")}


def problems(
    cls: type,
    table: ParamTable,
    parser: argparse.ArgumentParser,
    io_keys: Mapping[str, Any],
    exceptions: Mapping[str, str],
) -> list[str]:
    """What breaks "one table, one flag, one config key, one name" for a generator."""
    found: list[str] = []
    params = _constructor_parameters(cls)
    rows = [row.name for row in table]
    for name in params:
        if rows.count(name) != 1:
            found.append(f"{name}: {rows.count(name)} table rows")
    found += [f"{name}: a row but no constructor parameter" for name in set(rows) - set(params)]
    if set(getattr(cls, "_parameter_constraints", {})) != set(params):
        found.append("_parameter_constraints does not cover every parameter")
    flags = _flags(parser)
    keys = table.keys()
    for row in table:
        if row.name not in params:
            continue
        kind = "api_only" if row.api_only else "no_flag" if row.no_flag else None
        if kind is not None or row.name in exceptions:
            if exceptions.get(row.name) != kind:
                found.append(f"{row.name}: undeclared exception ({kind})")
            continue
        flag = "--" + row.name.replace("_", "-")
        by_dest = [s for s, a in flags.items() if a.dest == row.name]
        extra = sorted(set(by_dest) - {flag} - set(row.shorthands))
        if flag not in flags or flags[flag].dest != row.name or extra:
            found.append(f"{row.name}: flags {sorted(by_dest)}, expected exactly {flag}")
        elif flags[flag].help != row.help_text(show_default=not flags[flag].required):
            found.append(f"{row.name}: {flag}'s help is not the table's")
        in_parameters, in_table = row.name in keys, row.name in io_keys
        if in_parameters + in_table != 1 or in_table != row.in_table:
            found.append(f"{row.name}: config keys in parameters {in_parameters}, table {in_table}")
    return found


@pytest.mark.parametrize("command", sorted(GENERATORS))
def test_one_row_one_flag_one_config_key_per_parameter(command: str) -> None:
    cls = GENERATORS[command]
    table = cls.parameter_table  # type: ignore[attr-defined]
    io_keys = registry.get(command).table
    assert problems(cls, table, _subparser(command), io_keys, EXCEPTIONS[command]) == []
    assert len(_constructor_parameters(cls)) == len(table.rows)
    if command == "sequences":  # all of them, not the 7 of before
        assert len(cls._parameter_constraints) == 27  # type: ignore[attr-defined]


def test_a_parameter_without_a_row_fails_the_check() -> None:
    """Canary: a constructor parameter added without a row, a row without a parameter, a second
    flag for a parameter and an undeclared exception are all found."""

    class Wider(PrefixTreeSynthesizer):
        def __init__(self, *, shiny: int = 1, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.shiny = shiny

    base = list(inspect.signature(PrefixTreeSynthesizer.__init__).parameters.values())
    shiny = inspect.Parameter("shiny", inspect.Parameter.KEYWORD_ONLY, default=1)
    Wider.__init__.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [*base[:-1], shiny, base[-1]]
    )
    table = PrefixTreeSynthesizer.parameter_table
    io_keys = registry.get("sequences").table
    parser = _subparser("sequences")
    assert problems(Wider, table, parser, io_keys, EXCEPTIONS["sequences"]) == [
        "shiny: 0 table rows",
        "_parameter_constraints does not cover every parameter",
    ]
    longer = ParamTable("P", [*table.rows, Param("extra", (None,), "x", default=None)])
    found = problems(PrefixTreeSynthesizer, longer, parser, io_keys, EXCEPTIONS["sequences"])
    assert found == ["extra: a row but no constructor parameter"]
    parser.add_argument("--tree-height", dest="height", type=int)
    found = problems(PrefixTreeSynthesizer, table, parser, io_keys, EXCEPTIONS["sequences"])
    assert found == ["height: flags ['--height', '--tree-height'], expected exactly --height"]
    fewer = {k: v for k, v in EXCEPTIONS["sequences"].items() if k != "progress"}
    found = problems(PrefixTreeSynthesizer, table, _subparser("sequences"), io_keys, fewer)
    assert found == ["progress: undeclared exception (api_only)"]


@pytest.mark.parametrize("command", sorted(GENERATORS))
def test_the_config_schema_is_the_table(command: str) -> None:
    """Each key of the parameters sub-table is a row's name; an API-only parameter is no key."""
    table = GENERATORS[command].parameter_table  # type: ignore[attr-defined]
    for row in table:
        if row.name not in table.keys():
            with pytest.raises(ConfigError, match=f"unknown key '{row.name}'"):
                table.check_config({row.name: 1}, source="c.toml", section=command)
            continue
        with pytest.raises(ConfigError) as info:  # a TOML date: no parameter takes one
            table.check_config({row.name: datetime.date(2026, 1, 1)}, source="c", section=command)
        assert f"key '{row.name}' in [{command}]" in str(info.value)
        assert "unknown key" not in str(info.value)
    required = [row.name for row in table if row.default is REQUIRED and not row.api_only]
    assert table.required() == required


def test_the_validator_checks_every_parameter_before_any_data() -> None:
    """Parameters that nothing checked before fit read data (7 of 27 were in the table)."""
    tax = Taxonomy.from_edges([("a", "L"), ("b", "L"), ("L", "root")])
    common = {"epsilon": 1.0, "height": 2, "taxonomy": tax}
    for bad, name in [
        ({"per_day": "yes"}, "per_day"),
        ({"engine": "polars"}, "engine"),
        ({"threshold_rule": "x"}, "threshold_rule"),
        ({"time_bin": 0}, "time_bin"),
        ({"level_weights": ["a"]}, "level_weights"),
        ({"thresholds": {"1": 3.0}}, "thresholds"),
        ({"level_weights": [1.0, 0.0]}, "level_weights"),  # was a planning error
        ({"false_children": [0.5, 2.0]}, "false_children"),
        ({"budget_split": {1: -0.1}}, "budget_split"),
    ]:
        with pytest.raises(ConfigError, match=rf"^{name} must be "):
            PrefixTreeSynthesizer(**common, **bad).check_params()
    with pytest.raises(ConfigError, match=r"^level_weights needs one weight per tree level \(2\)"):
        PrefixTreeSynthesizer(**common, level_weights=[1, 1, 1]).check_params()
    with pytest.raises(ConfigError, match=r"^archetypes must be a positive integer"):
        ArchetypeSynthesizer(
            epsilon=1.0, delta=1e-6, key_columns=["a"], category_column="c", archetypes=0
        )._validate_params()
    with pytest.raises(ConfigError, match=r"^bin must be a whole number of minutes dividing 1440"):
        OpalMarginals(bin=7)._validate_params()


def test_errors_name_the_flag_on_the_command_line(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "seqs.csv"
    data.write_text("seq_id,pos,location\n1,0,a\n")
    tax = tmp_path / "tax.csv"
    tax.write_text("child,parent\na,L\nb,L\nL,root\n")
    argv = ["sequences", str(data), "--taxonomy", str(tax), "--epsilon", "1", "--height", "2"]
    assert main([*argv, "--out", str(tmp_path / "o"), "--root-share", "0.7"]) == 2
    err = capsys.readouterr().err
    assert (
        "--root-share must be a number in [0, 0.5) or None, got 0.7" in err
        and "root_share" not in err
    )
    assert not (tmp_path / "o").exists()
    with naming("flag"):
        assert spell("max_nodes") == "--max-nodes"


@pytest.mark.parametrize(
    ("cls", "old", "new", "kwargs"),
    [
        (PrefixTreeSynthesizer, "time_bins", "time_bin", {"epsilon": 1.0, "height": 2}),
        (PrefixTreeSynthesizer, "coarse_time_bins", "coarse_time_bin", {"epsilon": 1.0}),
        (OpalMarginals, "bin_minutes", "bin", {}),
        (ArchetypeSynthesizer, "n_archetypes", "archetypes", {"epsilon": 1.0, "delta": 1e-6}),
    ],
)
def test_a_renamed_keyword_still_works_with_a_dated_deprecation(
    cls: type, old: str, new: str, kwargs: dict[str, Any]
) -> None:
    if cls is PrefixTreeSynthesizer:
        kwargs = {"height": 2, **kwargs, "taxonomy": Taxonomy.from_edges([("a", "r")])}
    if cls is ArchetypeSynthesizer:
        kwargs = {**kwargs, "key_columns": ["a"], "category_column": "c"}
    with pytest.warns(RenamedParameterWarning, match=rf"{old}=.*0\.3\.0.*{new}="):
        model = cls(**kwargs, **{old: 60})
    assert getattr(model, new) == 60 and not hasattr(model, old)
    assert getattr(clone(model), new) == 60  # the estimator contract sees the new name only
    with pytest.warns(RenamedParameterWarning, match=rf"{old}="):
        model.set_params(**{old: 30})
    assert getattr(model, new) == 30
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        cls(**kwargs, nope=1)


def test_help_lines_come_from_the_table() -> None:
    sub = _subparser("marginals")
    text = " ".join(sub.format_help().split())
    row = OpalMarginals.parameter_table["mode"]
    assert " ".join(row.help_text().split()) in text
    assert "--consistent the same as --mode consistent" in text
    assert "[Asghar et al. 2018, section 4.2]" in text  # the paper, by author and year
    args = sub.parse_args(["in.csv", "--epsilon", "1", "--delta", "1e-6", "--out", "o", "--pure"])
    assert args.mode == "pure"
    assert "(default: 8.0)" not in text  # --epsilon is required here: no default to show
    with pytest.raises(SystemExit):
        sub.parse_args(
            ["i", "--epsilon", "1", "--delta", "1", "--out", "o", "--pure", "--mode", "sbh"]
        )


def test_structured_values_on_the_command_line() -> None:
    """The trips flags of structured parameters read TOML values, as the config does."""
    from archetypes.params import PARAMS
    from synth.cli.params import params_from_args

    sub = _subparser("trips")
    argv = ["p.csv", "--out", "o", "--joint", "{ rounds = 2 }", "--budget-split", "0.2", "0.8"]
    argv += ["--completion", '[["fare", ["trip_miles"]]]', "--features", "a, b", "--joint", "false"]
    given = params_from_args(sub.parse_args(argv), PARAMS)
    assert given == {
        "features": ["a", "b"],
        "completion": [("fare", ("trip_miles",))],
        "budget_split": (0.2, 0.8),
        "joint": False,
    }
    with pytest.raises(SystemExit):
        sub.parse_args(["p.csv", "--out", "o", "--joint", "{ rounds ="])
