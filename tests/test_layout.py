"""The package's layout shows its architecture: data flows one way.

Every module belongs to a layer (``LAYERS``, lowest first) and imports only from its
own layer or the ones below: the store never reaches up into retrieval, retrieval
never into the ``Memory`` facade, the facade never into the surfaces, and nothing
outside ``anamnesis/bench`` imports the benchmarks, which sit on top. The imports are
read statically (``ast``) at every depth of a module's code, so an import inside a
function or under ``TYPE_CHECKING`` counts: a lazy upward import is still an upward
import. The one way into the benchmarks is by name: the CLI's ``bench`` command
(``anamnesis.cli.LAZY_COMMANDS``) is imported when ``anamnesis bench`` runs, and
``tests/test_cli.py`` checks that nothing else (``--help`` included) loads it.

No module imports itself in a circle, even within a layer.

A module past ``LONG_MODULE`` lines fails until someone reviews it: split it where a
reader would name the seam (two jobs, two concepts; STYLE.md), or keep it whole and
list it in ``REVIEWED_LONG`` with the reason. Length alone is not the fault, so the
line is high; it only makes sure a long module is looked at.
"""

from __future__ import annotations

import ast
from fnmatch import fnmatch
from pathlib import Path

import anamnesis

PACKAGE = Path(anamnesis.__file__).parent

#: The layers, lowest first, each a set of patterns matched against a module's first
#: name under ``anamnesis`` (``""`` is the package itself, ``anamnesis/__init__.py``).
#: A module may import from its own layer and the layers listed before it.
LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {"types", "errors", "config", "version", "tokens", "offline", "background"}),
    ("models", {"embed", "llm"}),
    # Pure functions over incoming text (normalise, time parsing, salience, the gate's
    # rules); the store parses times with it, and the facade persists what it admits.
    ("ingest", {"ingest"}),
    ("store", {"store"}),
    (
        "parts",
        {"retrieve", "facts", "consolidate", "decay", "usage", "portable", "indexer"},
    ),
    ("context", {"context"}),
    ("facade", {"memory"}),
    # Bring history in and plug into agent frameworks, through Memory's verbs only.
    ("adapters", {"importers", "integrations"}),
    ("server", {"server"}),
    ("package", {""}),
    ("cli", {"cli", "cli_errors", "demo", "__main__"}),
    ("bench", {"bench"}),
]

#: (importer, imported) pairs allowed to go up a layer, each with its reason. Empty:
#: every upward import found so far was fixed instead.
UPWARD_EXCEPTIONS: dict[tuple[str, str], str] = {}

#: Lines past which a module must be reviewed (see the module docstring).
LONG_MODULE = 1000
#: Modules reviewed past ``LONG_MODULE`` and kept whole: name -> why.
REVIEWED_LONG: dict[str, str] = {}


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


def _layer(module: str) -> int:
    """The index in ``LAYERS`` of the layer ``module`` belongs to."""
    first = module.split(".")[1] if "." in module else ""
    matches = [
        i for i, (_, patterns) in enumerate(LAYERS) if any(fnmatch(first, p) for p in patterns)
    ]
    assert len(matches) == 1, f"{module} must belong to exactly one layer of LAYERS: {matches}"
    return matches[0]


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


def test_every_module_belongs_to_one_layer() -> None:
    for module in _modules():
        _layer(module)


def test_no_module_imports_from_a_layer_above_it() -> None:
    upward = {
        (module, target): f"{LAYERS[_layer(module)][0]} -> {LAYERS[_layer(target)][0]}"
        for module, targets in _graph().items()
        for target in targets
        if _layer(target) > _layer(module)
    }
    assert {k: v for k, v in upward.items() if k not in UPWARD_EXCEPTIONS} == {}
    assert set(UPWARD_EXCEPTIONS) <= set(upward), "an exception no longer needed: remove it"


def test_the_runtime_never_imports_the_benchmarks() -> None:
    wrong = {
        (module, target)
        for module, targets in _graph().items()
        if not module.startswith("anamnesis.bench")
        for target in targets
        if target.startswith("anamnesis.bench")
    }
    assert wrong == set()


def test_the_layer_check_reads_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    source = tmp_path / "late.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..memory import Memory\n"
        "def run():\n    from ..bench.presets import BENCH_PRESETS\n"
        "    import anamnesis.cli\n"
    )
    modules = _modules()
    found = _imports("anamnesis.retrieve.late", source, modules)
    assert found == {"anamnesis.memory", "anamnesis.bench.presets", "anamnesis.cli"}


def test_a_module_past_the_review_line_has_been_reviewed() -> None:
    long = {
        name: length
        for name, path in _modules().items()
        if (length := len(path.read_text().splitlines())) > LONG_MODULE
        and name not in REVIEWED_LONG
    }
    assert long == {}, (
        f"past {LONG_MODULE} lines: split where a reader would name the seam, or list in "
        "REVIEWED_LONG with the reason to keep it whole"
    )
