"""Write the verbs of AsyncMemory, RemoteMemory and AsyncRemoteMemory from Memory's.

``Memory`` (``anamnesis/memory/``) is the one source of every verb's signature: its
name, parameters, defaults, annotations and return type. Each other surface is the
same verb over a transport:

- ``AsyncMemory``: a coroutine that runs the verb on the writer thread, the
  maintenance thread or a reader thread (``@writes`` / ``@maintains`` / ``@reads`` on
  the verb says which);
- ``RemoteMemory`` / ``AsyncRemoteMemory``: one HTTP request (``wire.ROUTES``);
- the REST server: one request model per verb (``anamnesis/server/rest_arguments.py``),
  each parameter in its wire type (``WIRE_TYPES`` below), so the server takes what the
  clients send.

This script copies each public verb's signature (and ``memory.derived``'s views) into
generated classes, ruff-formats them, and writes them beside the surfaces::

    python scripts/generate_verbs.py          # rewrite the generated modules
    python scripts/generate_verbs.py --check  # exit 1 if one is stale (CI, tests)

Verbs a surface cannot express as one call (a streamed export, progress reported once,
a worker that only runs beside the store) are written by hand in the surface class and
listed in ``HAND_WRITTEN`` with the reason; the parity test keeps their signatures
equal too (tests/test_surfaces.py).
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import inspect
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent

#: Verbs a surface writes by hand, and why.
HAND_WRITTEN: dict[str, dict[str, str]] = {
    "remote": {
        "analyse": "computed in the client: reading a question needs no store",
        "start_consolidation": "the worker runs where the store is, not over HTTP",
        "export_jsonl": "the export is streamed into a file",
        "import_jsonl": "the lines travel as one NDJSON body",
    },
}


@dataclass(frozen=True)
class Verb:
    """One public verb of Memory (or of its derived view), as written in its source."""

    name: str
    group: str  # the module that defines it, e.g. "reads"
    thread: str  # "read", "write" or "maintain"
    signature: str  # the text between "def name" and ":" (parameters and return)
    parameters: list[tuple[str, str]]  # (name, kind): kind is "positional" or "keyword"
    returns: str
    names: set[str]  # the names the annotations and defaults use
    module: ModuleType  # where those names resolve
    fields: list[tuple[str, str, str | None]]  # (name, annotation, default) but self
    default_names: set[str]  # the names the defaults use


@dataclass(frozen=True)
class Target:
    """A generated module: which verbs, and how each body calls the transport."""

    path: str
    docstring: str
    classes: list[tuple[str, str, str, Callable[[Verb], str]]]  # name, doc, kind, body


def _segment(source: str, node: ast.AST | None) -> str:
    text = ast.get_source_segment(source, node) if node is not None else None
    return " ".join((text or "").split())


def _names(nodes: list[ast.AST | None], annotations: bool) -> set[str]:
    found: set[str] = set()
    for node in nodes:
        if node is None:
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                found.add(sub.id)
            elif annotations and isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                # A string annotation ("Memory") names a class too.
                try:
                    found |= _names([ast.parse(sub.value, mode="eval")], annotations)
                except SyntaxError:
                    pass
    return found


def _verb(function: Callable[..., object], group: str, thread: str) -> Verb:
    module = sys.modules[function.__module__]
    source = inspect.getsource(module)
    tree = ast.parse(source)
    qualname = function.__qualname__.split(".")
    node: ast.AST = tree
    for part in qualname:
        node = next(
            child
            for child in ast.iter_child_nodes(node)
            if isinstance(child, ast.ClassDef | ast.FunctionDef) and child.name == part
        )
    assert isinstance(node, ast.FunctionDef), function.__qualname__
    args = node.args
    parts: list[str] = []
    parameters: list[tuple[str, str]] = []
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for arg, default in zip(positional, defaults, strict=True):
        parts.append(_param(source, arg, default))
        if arg.arg != "self":
            parameters.append((arg.arg, "positional"))
    if args.posonlyargs:
        parts.insert(len(args.posonlyargs), "/")
    if args.vararg is not None or args.kwarg is not None:
        raise SystemExit(f"{function.__qualname__}: *args and **kwargs are not generated")
    if args.kwonlyargs:
        parts.append("*")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        parts.append(_param(source, arg, default))
        parameters.append((arg.arg, "keyword"))
    returns = _segment(source, node.returns)
    annotations: list[ast.AST | None] = [a.annotation for a in positional + args.kwonlyargs]
    default_names = _names([*defaults, *args.kw_defaults], False)
    used = _names([*annotations, node.returns], True) | default_names
    fields = [
        (arg.arg, _segment(source, arg.annotation), _segment(source, default) or None)
        for arg, default in [
            *zip(positional, defaults, strict=True),
            *zip(args.kwonlyargs, args.kw_defaults, strict=True),
        ]
        if arg.arg != "self"
    ]
    return Verb(
        name=node.name,
        group=group,
        thread=thread,
        signature=f"({', '.join(parts)}) -> {returns}",
        parameters=parameters,
        returns=returns,
        names=used,
        module=module,
        fields=fields,
        default_names=default_names,
    )


def _param(source: str, arg: ast.arg, default: ast.AST | None) -> str:
    text = arg.arg
    if arg.annotation is not None:
        text += f": {_segment(source, arg.annotation)}"
    if default is not None:
        text += (
            f" = {_segment(source, default)}" if arg.annotation else f"={_segment(source, default)}"
        )
    return text


def memory_verbs() -> list[Verb]:
    """Memory's public verbs, group by group (``class Memory(WriteVerbs, ...)``)."""
    from anamnesis.memory import Memory
    from anamnesis.memory.state import MemoryState
    from anamnesis.memory.verbs import thread_of

    verbs: list[Verb] = []
    groups = [c for c in Memory.__mro__ if issubclass(c, MemoryState)]
    for cls in groups:
        if cls in (Memory, MemoryState):
            continue
        for name, member in vars(cls).items():
            if name.startswith("_") or not inspect.isfunction(member):
                continue
            group = cls.__module__.rsplit(".", 1)[-1]
            verbs.append(_verb(member, group, thread_of(member)))
    return verbs


def derived_verbs() -> list[Verb]:
    """``Memory.derived``'s views: every one is a read."""
    from anamnesis.memory.derived import DerivedView

    return [
        _verb(member, "derived", "read")
        for name, member in vars(DerivedView).items()
        if not name.startswith("_") and inspect.isfunction(member)
    ]


def _forward(verb: Verb) -> str:
    return ", ".join(
        name if kind == "positional" else f"{name}={name}" for name, kind in verb.parameters
    )


#: Each thread of ``AsyncMemory``: its name in the docstrings, and the method that runs
#: a call on it.
ASYNC_THREADS = {
    "write": ("the writer thread", "self._write"),
    "maintain": ("the maintenance thread", "self._maintain"),
    "read": ("a reader thread", "self._read"),
}


def _async_local(verb: Verb) -> str:
    pool, call = ASYNC_THREADS[verb.thread]
    args = _forward(verb)
    return (
        f'"""``Memory.{verb.name}``, run on {pool}."""\n'
        f"return await {call}(self._memory.{verb.name}{', ' + args if args else ''})"
    )


def _async_derived(verb: Verb) -> str:
    args = _forward(verb)
    return (
        f'"""``Memory.derived.{verb.name}``, run on a reader thread."""\n'
        f"found: {verb.returns} = await self._read(self._view.{verb.name}"
        f"{', ' + args if args else ''})\nreturn found"
    )


def _remote(verb: Verb, wait: str = "") -> str:
    """One request; a ``progress`` callback, which cannot travel, is called once when the
    answer is back, with its count (or the length of the list it is)."""
    call = f'{wait}self._call("{verb.name}", locals())'
    if not any(name == "progress" for name, _ in verb.parameters):
        return f'"""``Memory.{verb.name}``, over HTTP."""\nreturn {call}'
    count = "done" if verb.returns == "int" else "len(done)"
    return (
        f'"""``Memory.{verb.name}``, over HTTP: one request; ``progress`` is called once,\n'
        'when it is done."""\n'
        f"done: {verb.returns} = {call}\n"
        f"if progress is not None:\n    progress({count})\n"
        "return done"
    )


def _async_remote(verb: Verb) -> str:
    return _remote(verb, wait="await ")


def _remote_derived(verb: Verb) -> str:
    return (
        f'"""``Memory.derived.{verb.name}``, over HTTP."""\n'
        f'found: {verb.returns} = self._call("derived.{verb.name}", locals())\nreturn found'
    )


def _async_remote_derived(verb: Verb) -> str:
    return (
        f'"""``Memory.derived.{verb.name}``, over HTTP."""\n'
        f'found: {verb.returns} = await self._call("derived.{verb.name}", locals())\n'
        "return found"
    )


HEADER = '''"""{doc}

Generated by scripts/generate_verbs.py from ``Memory``'s verbs: do not edit by hand;
change the verb in anamnesis/memory/ and run the script (CI fails when this is stale).
"""


from __future__ import annotations

'''

#: What each generated class's host provides, declared once at the top of the class.
HOSTS = {
    "async": (
        "_memory: Memory\n\n"
        "async def _read(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:\n"
        "    raise NotImplementedError  # pragma: no cover - provided by AsyncMemory\n\n"
        "async def _write(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:\n"
        "    raise NotImplementedError  # pragma: no cover - provided by AsyncMemory\n\n"
        "async def _maintain(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:\n"
        "    raise NotImplementedError  # pragma: no cover - provided by AsyncMemory\n"
    ),
    "async-derived": (
        "def __init__(self, view: DerivedView, read: Read) -> None:\n"
        "    self._view = view\n"
        "    self._read = read\n"
    ),
    "remote": (
        "def _call(self, verb: str, arguments: dict[str, Any]) -> Any:\n"
        "    raise NotImplementedError  # pragma: no cover - provided by RemoteMemory\n"
    ),
    "async-remote": (
        "async def _call(self, verb: str, arguments: dict[str, Any]) -> Any:\n"
        "    raise NotImplementedError  # pragma: no cover - provided by AsyncRemoteMemory\n"
    ),
    "remote-derived": ("def __init__(self, call: Call) -> None:\n    self._call = call\n"),
    "async-remote-derived": (
        "def __init__(self, call: AsyncCall) -> None:\n    self._call = call\n"
    ),
}

#: Imports each kind of host needs beyond the verbs' own names.
HOST_IMPORTS = {
    "async": [
        "from collections.abc import Callable",
        "from typing import Any, TypeVar",
        "from anamnesis.memory.memory import Memory",
    ],
    "async-derived": [
        "from collections.abc import Awaitable, Callable",
        "from typing import Any",
        "from anamnesis.memory.derived import DerivedView",
    ],
    "remote": ["from typing import Any"],
    "async-remote": ["from typing import Any"],
    "remote-derived": ["from collections.abc import Awaitable, Callable", "from typing import Any"],
    "async-remote-derived": [
        "from collections.abc import Awaitable, Callable",
        "from typing import Any",
    ],
}

HOST_ALIASES = {
    "async": 'T = TypeVar("T")',
    "async-derived": (
        "#: ``AsyncMemory._read``: runs a call on a reader thread.\n"
        "Read = Callable[..., Awaitable[Any]]"
    ),
    "remote-derived": (
        "#: A client's ``_call``: sends one verb's arguments and decodes its answer.\n"
        "Call = Callable[[str, dict[str, Any]], Any]\n"
        "AsyncCall = Callable[[str, dict[str, Any]], Awaitable[Any]]"
    ),
}


#: How each annotation of a verb's parameter travels in a request: the type the REST
#: model declares (names from ``anamnesis/server/rest_models.py``), as one type, or as
#: (in a JSON body, in a query string). A parameter whose annotation is not here stops
#: the script: say how it travels first.
WIRE_TYPES: dict[str, str | tuple[str, str]] = {
    "str": "str",
    "str | None": "str | None",
    "bool": "bool",
    "float | None": "float | None",
    "datetime | str | float | None": "Time",
    "Mapping[str, Any] | None": "dict[str, Any] | None",
    "Filters | Mapping[str, Any] | None": ("BodyFilters", "QueryFilters"),
    "str | Mapping[str, Any] | Sequence[Mapping[str, Any] | str]": "Message | list[Message]",
    "Iterable[Mapping[str, Any] | str]": "list[Message]",
    "Sequence[str] | str": "list[str] | str",
    "Sequence[str] | str | None": "list[str] | str | None",
    "DecayPolicy | None": "Policy",
    "Sequence[ContextFact] | None": "Facts",
}
#: Integers travel bounded: each integer parameter's bounded type, by ``verb.parameter``
#: or by parameter name (the bounds ``Memory`` checks, at most 2**53 - 1 on the wire).
INTEGERS: dict[str, str] = {
    "limit": "Limit",
    "facts.limit": "Count",
    "consolidate.limit": "Count",
    "offset": "Offset",
    "budget_tokens": "Budget",
    "neighbour_hits": "Neighbours",
}
#: The scope travels as optional text: a user key supplies its own user, and ``Memory``
#: says when one is missing.
SCOPE = ("user_id", "agent_id", "session_id")
#: Parameters that are not request fields, and where they go instead.
NOT_FIELDS = {
    "progress": "a callback, called by the client once the answer is back",
    "out": "the export is the response body",
    "lines": "the import is the request body",
}


def _wire_type(verb: str, name: str, annotation: str, body: bool) -> str:
    """The type a request model declares for one parameter."""
    if name in SCOPE:
        return "str | None"
    bare = annotation.removesuffix(" | None")
    if bare == "int":
        bounded = INTEGERS.get(f"{verb}.{name}", INTEGERS.get(name))
        if bounded is None:
            raise SystemExit(f"{verb}({name}: int): give its bounds in INTEGERS")
        return bounded if bare == annotation else f"{bounded} | None"
    wire = WIRE_TYPES.get(annotation)
    if wire is None:
        raise SystemExit(f"{verb}({name}: {annotation}): say how it travels in WIRE_TYPES")
    if isinstance(wire, tuple):
        return wire[0] if body else wire[1]
    return wire


def _model(
    route_name: str, verb: Verb, body: bool, path_parameters: set[str]
) -> tuple[str, set[str]]:
    """One verb's request model (its parameters as fields, in their wire types, with
    the verb's own defaults), and the names of ``rest_models`` it uses."""
    name = "".join(part.title() for part in verb.name.split("_")) + "Arguments"
    base = "Arguments" if body else "QueryArguments"
    lines = [f"class {name}({base}):", f'    """``Memory.{route_name}``\'s arguments."""', ""]
    used = {base}
    for field, annotation, default in verb.fields:
        if field in NOT_FIELDS or field in path_parameters:
            continue
        wire = _wire_type(verb.name, field, annotation, body)
        if field in SCOPE:
            default = "None"
        lines.append(f"    {field}: {wire}" + (f" = {default}" if default is not None else ""))
        used |= _names([ast.parse(wire, mode="eval")], False) - {"Any", *dir(builtins)}
    return "\n".join(lines), used


def render_rest() -> str:
    """The REST server's request models, one per verb with a route."""
    from anamnesis.server.wire import ROUTES

    verbs = {v.name: v for v in memory_verbs()}
    verbs |= {f"derived.{v.name}": v for v in derived_verbs()}
    models: list[str] = []
    imports = {"from typing import Any"}
    for route_name, route in ROUTES.items():
        verb = verbs.get(route_name)
        if verb is None:  # a property (capabilities), not a verb
            continue
        path_parameters = {part.strip("{}") for part in route.path.split("/") if "{" in part}
        model, wire_names = _model(route_name, verb, route.body, path_parameters)
        models.append(model)
        imports |= {f"from anamnesis.server.rest_models import {n}" for n in wire_names}
        table = _import_table(verb.module)
        imports |= {
            f"from {table.get(n, verb.module.__name__)} import {n}" for n in verb.default_names
        }
    header = HEADER.format(
        doc="The REST server's request models: each verb's arguments, named and typed as\n"
        "``Memory``'s keywords are (their wire types in ``rest_models``), so a request is a\n"
        "call: ``memory.verb(**arguments)``."
    )
    text = header + "\n".join(sorted(imports))
    return text + "\n\n\n" + "\n\n\n".join(models) + "\n"


def _imports_for(verbs: list[Verb]) -> list[str]:
    """``from X import Y`` lines for every name the verbs' signatures use."""
    lines: set[str] = set()
    for verb in verbs:
        table = _import_table(verb.module)
        for name in sorted(verb.names):
            if hasattr(builtins, name):
                continue
            if name in table:
                lines.add(f"from {table[name]} import {name}")
            elif hasattr(verb.module, name):
                lines.add(f"from {verb.module.__name__} import {name}")
            else:
                raise SystemExit(f"{verb.name}: cannot tell where {name!r} comes from")
    return sorted(lines)


def _import_table(module: ModuleType) -> dict[str, str]:
    """Each imported name of a module, and the absolute module it comes from."""
    table: dict[str, str] = {}
    package = module.__name__.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join([*base, source] if source else base)
            for alias in node.names:
                table[alias.asname or alias.name] = source
    return table


def _class(name: str, doc: str, kind: str, verbs: list[Verb], body: Callable[[Verb], str]) -> str:
    out = [f"class {name}:", textwrap.indent(f'"""{doc}"""', "    "), ""]
    host = HOSTS[kind]
    out.append(textwrap.indent(host, "    "))
    is_async = kind.startswith("async")
    group = None
    for verb in verbs:
        if verb.group != group and not kind.endswith("derived"):
            group = verb.group
            out.append(f"    # {verb.group}: anamnesis/memory/{verb.group}.py\n")
        prefix = "async def" if is_async else "def"
        out.append(f"    {prefix} {verb.name}{verb.signature}:")
        out.append(textwrap.indent(body(verb), "        "))
        out.append("")
    return "\n".join(out)


def render() -> dict[Path, str]:
    """Every generated module's text, by path."""
    verbs = memory_verbs()
    views = derived_verbs()
    remote = [v for v in verbs if v.name not in HAND_WRITTEN["remote"]]
    modules = {
        "anamnesis/memory/async_verbs.py": (
            "The coroutine verbs of ``AsyncMemory``: each ``Memory`` verb on the writer thread,\n"
            "the maintenance thread or a reader thread (``anamnesis.memory.async_memory``\n"
            "explains the threads).",
            [
                ("AsyncVerbs", "``Memory``'s verbs as coroutines.", "async", verbs, _async_local),
                (
                    "AsyncDerivedView",
                    "Summaries and profiles of one ``AsyncMemory`` (``memory.derived``).",
                    "async-derived",
                    views,
                    _async_derived,
                ),
            ],
        ),
        "anamnesis/server/remote_verbs.py": (
            "The verbs of ``RemoteMemory`` and ``AsyncRemoteMemory``: each ``Memory`` verb as\n"
            "one HTTP request (``wire.ROUTES``); the few a request cannot express are written\n"
            "by hand in the clients.",
            [
                ("RemoteVerbs", "``Memory``'s verbs over HTTP.", "remote", remote, _remote),
                (
                    "AsyncRemoteVerbs",
                    "``Memory``'s verbs over HTTP, as coroutines.",
                    "async-remote",
                    remote,
                    _async_remote,
                ),
                (
                    "RemoteDerivedView",
                    "Summaries and profiles served by ``anamnesis serve`` (``remote.derived``).",
                    "remote-derived",
                    views,
                    _remote_derived,
                ),
                (
                    "AsyncRemoteDerivedView",
                    "Summaries and profiles served by ``anamnesis serve``, as coroutines.",
                    "async-remote-derived",
                    views,
                    _async_remote_derived,
                ),
            ],
        ),
    }
    out: dict[Path, str] = {}
    for path, (doc, classes) in modules.items():
        imports: set[str] = set()
        aliases: list[str] = []
        for _, _, kind, members, _ in classes:
            imports |= set(_imports_for(members)) | set(HOST_IMPORTS[kind])
            if kind in HOST_ALIASES and HOST_ALIASES[kind] not in aliases:
                aliases.append(HOST_ALIASES[kind])
        text = HEADER.format(doc=doc) + "\n".join(sorted(imports)) + "\n\n"
        text += "\n\n".join(aliases) + "\n\n\n" if aliases else ""
        text += "\n\n".join(_class(n, d, k, m, b) for n, d, k, m, b in classes)
        out[ROOT / path] = _format(text, ROOT / path)
    rest = ROOT / "anamnesis/server/rest_arguments.py"
    out[rest] = _format(render_rest(), rest)
    return out


def _format(text: str, path: Path) -> str:
    """The text as ruff would write it (imports sorted, then formatted)."""
    for command in (
        ["ruff", "check", "--select", "I,F401", "--fix-only", "--quiet", "--stdin-filename"],
        ["ruff", "format", "--quiet", "--stdin-filename"],
    ):
        done = subprocess.run(
            [*command, str(path), "-"],
            input=text,
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        if done.returncode not in (0, 1) or not done.stdout:
            raise SystemExit(f"ruff failed on {path}: {done.stderr}")
        text = done.stdout
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a file is stale")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    importlib.invalidate_caches()
    stale = []
    for path, text in render().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(path.relative_to(ROOT))
        if not args.check:
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        names = ", ".join(str(p) for p in stale)
        print(f"stale: {names}; run python scripts/generate_verbs.py", file=sys.stderr)
        return 1
    for path in stale:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
