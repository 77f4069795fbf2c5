"""The floor plan as a test: no import cycles, no upward imports, no private names across modules.

Layers, bottom to top:

* **foundation**: ``synth`` (records, taxonomy, privacy, engines, marginals, evaluate, audit,
  export, ...). It never imports a generator package or a command-line module.
* **generators**: ``prefixtree`` and ``archetypes``. They may import the foundation, never a
  command-line module.
* **command line**: the ``synth.cli`` package (the only argparse: one module per command, the
  ``COMMANDS`` table, ``run`` and ``demo``) and ``synth.__main__``.

Every import counts, module-level or inside a function (a function-level import hides a cycle; it
does not remove it). ``KNOWN_DEBT`` lists the violations that existed when this test was written;
it may only shrink: a new violation fails, and so does an entry that no longer occurs (remove it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("synth", "prefixtree", "archetypes")
GENERATORS = ("prefixtree", "archetypes")


def _is_cli(module: str) -> bool:
    """Command-line modules: the ``synth.cli`` package (argparse, one module per command, ``run``,
    ``demo``) and the ``python -m synth`` entry point."""
    return module in {"synth.cli", "synth.__main__"} or module.startswith("synth.cli.")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(module: str, level: int, target: str | None, is_package: bool) -> str:
    if level == 0:
        return target or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _owner(name: str) -> str | None:
    """The project module that ``name`` (a module or a module.attribute) lives in."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> Iterator[tuple[str, str | None, int]]:
    """(imported project module, imported name or None, line) for every import in ``module``.

    ``alias._name`` on a name bound to a project module counts as importing ``_name`` from it.
    """
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                owner = _owner(alias.name)
                if owner:
                    if alias.asname:
                        bound[alias.asname] = owner
                    yield owner, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, node.level, node.module, is_package)
            for alias in node.names:
                submodule = _owner(f"{base}.{alias.name}")
                if submodule and submodule != _owner(base):
                    bound[alias.asname or alias.name] = submodule
                    yield submodule, None, node.lineno
                elif (owner := _owner(base)) is not None:
                    yield owner, alias.name, node.lineno
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
        ):
            yield bound[node.value.id], node.attr, node.lineno


def _edges() -> list[tuple[str, str, str | None, int]]:
    return [(m, dep, name, line) for m in MODULES for dep, name, line in _imports(m) if dep != m]


def _upward(src: str, dst: str) -> bool:
    src_top, dst_top = src.split(".")[0], dst.split(".")[0]
    if _is_cli(src):
        return False
    if _is_cli(dst):
        return True
    return src_top == "synth" and dst_top in GENERATORS


def _private(src: str, dst: str, name: str | None) -> bool:
    if name is None or not name.startswith("_") or name.startswith("__"):
        return False
    return dst != src


def violations() -> set[str]:
    """Every cycle, upward import and cross-module private import, as stable strings."""
    found: set[str] = set()
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for src, dst, name, _line in _edges():
        # a module importing its own parent package: Python has initialised the parent first
        if not src.startswith(dst + "."):
            graph.add_edge(src, dst)
        if _upward(src, dst):
            found.add(f"upward: {src} -> {dst}")
        if _private(src, dst, name):
            found.add(f"private: {src} imports {dst}.{name}")
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            found.add("cycle: " + " <-> ".join(sorted(component)))
    return found


# The state of the house when this guard was built (issue 16). Shrink it; never grow it.
KNOWN_DEBT: set[str] = set()


def test_module_discovery_sees_the_three_packages() -> None:
    assert {m.split(".")[0] for m in MODULES} == set(PACKAGES)
    assert "synth.privacy.ledger" in MODULES and "prefixtree.tree" in MODULES


def test_the_detector_finds_each_kind_of_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Canary: a cycle, an upward import and a private import in fake modules are all found."""
    fake = {
        "synth.a": "from synth.b import thing\n",
        "synth.b": "def f():\n    from synth.a import _hidden\n",
        "synth.c": "import prefixtree.tree\n",
    }
    real_parse = ast.parse

    def parse(source: str, filename: str = "<unknown>", **kw: object) -> ast.Module:
        for name, text in fake.items():
            if filename.endswith(name.replace(".", "/") + ".py"):
                return real_parse(text)
        return real_parse(source, filename=filename)

    for name in fake:
        MODULES[name] = ROOT / (name.replace(".", "/") + ".py")
    monkeypatch.setattr(ast, "parse", parse)
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: "")
    try:
        found = violations()
    finally:
        for name in fake:
            MODULES.pop(name)
    assert "cycle: synth.a <-> synth.b" in found
    assert "upward: synth.c -> prefixtree.tree" in found
    assert "private: synth.b imports synth.a._hidden" in found


def test_argparse_lives_in_the_cli_package_only() -> None:
    """The command line is one layer: no module outside ``synth.cli`` imports argparse."""
    outside = []
    for module, path in MODULES.items():
        if _is_cli(module):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n.split(".")[0] == "argparse" for n in names):
                outside.append(module)
    assert not outside, f"argparse outside synth.cli: {sorted(set(outside))}"


def test_no_new_layer_violations() -> None:
    new = sorted(violations() - KNOWN_DEBT)
    assert not new, "layer violations (see tests/test_layers.py):\n" + "\n".join(new)


def test_known_debt_is_still_owed() -> None:
    paid = sorted(KNOWN_DEBT - violations())
    assert not paid, "remove from KNOWN_DEBT, it is fixed:\n" + "\n".join(paid)


# ---------------------------------------------------------------------------- sizes (issue 16)
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def module_sizes() -> dict[str, int]:
    """Lines of every module of the three packages."""
    return {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in MODULES.items()}


def function_sizes() -> dict[str, int]:
    """Lines of every function and method (decorators excluded, nested functions on their own),
    keyed ``module:Qualified.name``."""
    found: dict[str, int] = {}

    def walk(node: ast.AST, module: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    assert child.end_lineno is not None
                    found[f"{module}:{name}"] = child.end_lineno - child.lineno + 1
                walk(child, module, name + ".")
            else:
                walk(child, module, prefix)

    for module, path in MODULES.items():
        walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), module, "")
    return found


# Modules over MAX_MODULE_LINES and functions over MAX_FUNCTION_LINES when this guard was built
# (issue 16). Shrink them; never grow them.
KNOWN_LONG_MODULES: set[str] = set()
KNOWN_LONG_FUNCTIONS: set[str] = set()


def test_the_size_checks_measure_lines() -> None:
    """Canary: the measures see a known module and a known function at their real size."""
    import inspect

    from synth.records import truncate_sequences

    lines, _ = inspect.getsourcelines(truncate_sequences)
    assert function_sizes()["synth.records.sequences:truncate_sequences"] == len(lines)
    text = (ROOT / "synth" / "errors.py").read_text(encoding="utf-8")
    assert module_sizes()["synth.errors"] == len(text.splitlines())


def test_no_module_over_600_lines() -> None:
    long = {m for m, n in module_sizes().items() if n > MAX_MODULE_LINES}
    new = sorted(long - KNOWN_LONG_MODULES)
    assert not new, f"modules over {MAX_MODULE_LINES} lines (split them):\n" + "\n".join(new)
    paid = sorted(KNOWN_LONG_MODULES - long)
    assert not paid, "remove from KNOWN_LONG_MODULES, it is short now:\n" + "\n".join(paid)


def test_no_function_over_80_lines() -> None:
    long = {f for f, n in function_sizes().items() if n > MAX_FUNCTION_LINES}
    new = sorted(long - KNOWN_LONG_FUNCTIONS)
    assert not new, f"functions over {MAX_FUNCTION_LINES} lines (split them):\n" + "\n".join(new)
    paid = sorted(KNOWN_LONG_FUNCTIONS - long)
    assert not paid, "remove from KNOWN_LONG_FUNCTIONS, it is short now:\n" + "\n".join(paid)
