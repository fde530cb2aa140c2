"""The package's layout shows its architecture: no module imports itself in a circle,
no module grows past 600 lines, and data flows one way (the store never reaches up
into retrieval, benchmarks or the surfaces)."""

from __future__ import annotations

import ast
from pathlib import Path

import anamnesis

PACKAGE = Path(anamnesis.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every anamnesis module that ``name`` imports, at any depth of its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                found.add(submodule if submodule in modules else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return groups


def test_no_module_imports_itself_in_a_circle() -> None:
    assert _cycles(_graph()) == []


def test_no_module_is_past_600_lines() -> None:
    """A module that grows past ~500 lines is usually two modules."""
    long = {
        name: length
        for name, path in _modules().items()
        if (length := len(path.read_text().splitlines())) > 600
    }
    assert long == {}


def test_the_store_never_imports_what_sits_above_it() -> None:
    above = ("anamnesis.retrieve", "anamnesis.bench", "anamnesis.memory", "anamnesis.cli")
    graph = _graph()
    wrong = {
        (module, target)
        for module, targets in graph.items()
        if module.startswith("anamnesis.store")
        for target in targets
        if target.startswith(above)
    }
    assert wrong == set()
