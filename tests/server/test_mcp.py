"""The MCP server, driven by the official SDK's client spawning ``anamnesis mcp`` over
stdio, as an agent host would: same answers as Memory, bounded results, the scope
fixed by the server, destructive tools off by default, errors as tool errors."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from anamnesis import Memory
from anamnesis.embed import get_embedder

mcp = pytest.importorskip("mcp", reason="the MCP server needs the server extras")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

TOOLS = {
    "remember",
    "recall",
    "get_context",
    "get_memory",
    "update_memory",
    "forget_memory",
    "memory_history",
    "facts",
    "summaries",
    "profile",
    "gate_decisions",
}


@asynccontextmanager
async def _session(store: Path, *extra: str) -> AsyncIterator[ClientSession]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()), env.get("PYTHONPATH")]))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "anamnesis.cli", "--path", str(store), "--embedder", "edge", "mcp", *extra],
        env=env,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def _call(session: ClientSession, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await session.call_tool(tool, arguments)
    text = "\n".join(part.text for part in result.content if hasattr(part, "text"))
    return bool(result.is_error), text


def _run(scenario: Any) -> Any:
    return asyncio.run(scenario)


def test_the_tools_remember_recall_and_forget_in_the_servers_scope(tmp_path: Path) -> None:
    store = tmp_path / "m.db"
    with Memory(path=store, embedder=get_embedder("edge"), warm=False) as memory:
        (other,) = memory.add("Bob's locker code is 9902", user_id="bob")

    async def scenario() -> None:
        async with _session(store, "--user", "maya") as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert names == TOOLS
            failed, text = await _call(
                session, "remember", content="I signed the lease on a flat in Porto"
            )
            assert not failed
            (memory_id,) = re.findall(r"\[(ep_\w+)\]", text)
            await _call(session, "remember", content="My sister Inês is allergic to cats")
            failed, text = await _call(session, "recall", query="flat in Porto lease")
            assert not failed and memory_id in text.splitlines()[0]
            failed, text = await _call(session, "get_memory", memory_id=memory_id)
            assert "lease on a flat in Porto" in text
            failed, text = await _call(session, "get_context", question="where does Maya live?")
            assert "Porto" in text
            await _call(session, "update_memory", memory_id=memory_id, content="I moved to Lisbon")
            failed, text = await _call(session, "memory_history", memory_id=memory_id)
            first, current = text.splitlines()
            assert first.startswith("version 1, recorded ") and "Porto" in first
            assert current.startswith("version 2 (current), recorded ") and "Lisbon" in current
            # Each version shows when it was written: the first, when it was remembered.
            assert first.split(": ")[0].split()[-1] < current.split(": ")[0].split()[-1]
            # Another user's memory is out of reach, whatever the arguments say.
            failed, text = await _call(session, "get_memory", memory_id=other.id)
            assert failed and "NotFoundError" in text and "Traceback" not in text
            failed, text = await _call(session, "recall", query="locker code", user_id="bob")
            assert "9902" not in text
            failed, text = await _call(session, "forget_memory", memory_id=memory_id)
            assert not failed
            failed, text = await _call(session, "get_memory", memory_id=memory_id)
            assert failed and "NotFoundError" in text

    _run(scenario())
    with Memory(path=store, embedder=get_embedder("edge"), warm=False) as memory:
        assert memory.stats(user_id="bob")["episodes"] == 1
        assert memory.stats(user_id="maya")["episodes"] == 1


def test_results_stay_within_the_token_budget(tmp_path: Path) -> None:
    from anamnesis.tokens import TokenCounter

    tokens = TokenCounter()
    store = tmp_path / "m.db"
    with Memory(path=store, embedder=get_embedder("edge"), warm=False) as memory:
        memory.add_many(
            [f"note {i}: the harbour was busy with boats " + "and gulls " * 40 for i in range(60)],
            user_id="maya",
        )
        (long,) = memory.add("harbour " * 20_000, user_id="maya")

    async def scenario() -> None:
        async with _session(store, "--user", "maya", "--budget-tokens", "300") as session:
            _, text = await _call(session, "recall", query="harbour boats", limit=50)
            assert "left out" in text and tokens.count([text])[0] <= 300
            _, text = await _call(session, "get_memory", memory_id=long.id)
            assert "cut at the 300-token limit" in text and tokens.count([text])[0] <= 300
            _, text = await _call(session, "get_context", question="the harbour", budget_tokens=300)
            assert tokens.count([text])[0] <= 300

    _run(scenario())


def test_forgetting_everything_is_offered_only_when_allowed(tmp_path: Path) -> None:
    store = tmp_path / "m.db"

    async def scenario() -> None:
        async with _session(store, "--user", "maya") as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert "forget_all_memories" not in names
        async with _session(store, "--user", "maya", "--allow-forget-all") as session:
            await _call(session, "remember", content="a note")
            failed, text = await _call(session, "forget_all_memories")
            assert failed and "confirm" in text
            failed, text = await _call(session, "forget_all_memories", confirm=True)
            assert not failed and "1" in text

    _run(scenario())


def test_bad_input_is_a_tool_error_a_model_can_act_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _session(tmp_path / "m.db", "--user", "maya") as session:
            failed, text = await _call(session, "remember", content="   ")
            assert failed and "InvalidInputError" in text and "empty" in text
            failed, text = await _call(session, "remember", content="x", event_time="not a time")
            assert failed and "event_time" in text and "Traceback" not in text

    _run(scenario())


def test_http_refuses_a_non_loopback_address_until_a_key_exists(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from anamnesis.cli import main

    keys = ["--keys", str(tmp_path / "keys.db")]
    result = CliRunner().invoke(
        main, ["--path", str(tmp_path / "m.db"), "mcp", "--http", "--host", "0.0.0.0", *keys]
    )
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "not a loopback address" in said and "holds no key" in said


def test_the_round_trip_benchmark_runs_on_a_slice(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from anamnesis.bench.cli import bench

    one = Path(__file__).parent.parent / "fixtures" / "locomo_conv26_sessions1-4.json"
    slice_file = tmp_path / "locomo.json"
    slice_file.write_text(f"[{one.read_text()}]")  # the data set is a list of conversations
    result = CliRunner().invoke(
        bench,
        ["mcp", "--data", str(slice_file), "--store", str(tmp_path / "m.db")]
        + ["--episodes", "120", "--queries", "3", "--embedder", "edge"],
    )
    assert result.exit_code == 0, result.output
    assert "MCP recall (stdio) p50" in result.output


def test_the_server_speaks_streamable_http_on_loopback(tmp_path: Path) -> None:
    import socket
    import subprocess
    import time

    from mcp.client.streamable_http import streamable_http_client

    from anamnesis.server import DEFAULT_LIMITS

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()), env.get("PYTHONPATH")]))
    args = ["--path", str(tmp_path / "m.db"), "--embedder", "edge", "mcp", "--user", "maya"]
    args += ["--keys", str(tmp_path / "keys.db")]
    server = subprocess.Popen(
        [sys.executable, "-m", "anamnesis.cli", *args, "--http", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )

    async def scenario() -> None:
        url = f"http://127.0.0.1:{port}/mcp"
        async with streamable_http_client(url) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                assert {t.name for t in (await session.list_tools()).tools} == TOOLS
                failed, _ = await _call(session, "remember", content="I keep bees on the roof")
                assert not failed
                failed, text = await _call(session, "recall", query="bees")
                assert not failed and "bees" in text

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
                assert time.monotonic() < deadline, "the server did not start listening"
                time.sleep(0.2)
        _run(scenario())
        # A request head that never completes is closed within the REST server's
        # header timeout, as there (RELIABILITY.md, 4b).
        with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
            slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            started = time.monotonic()
            assert slow.recv(1024) == b""
            assert time.monotonic() - started < DEFAULT_LIMITS.header_timeout + 5
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_recall_and_get_context_answer_as_memory_does(tmp_path: Path) -> None:
    store = tmp_path / "m.db"
    turns = [
        "I finally signed the lease on a flat in Porto",
        "My sister Inês is allergic to cats",
        "We adopted a grey kitten called Miso last spring",
        "The flat has a balcony over the river",
        "I work at Acme as a designer since March",
        "Bob's locker code is 9902",
    ]
    questions = ["where does she live?", "any pets?", "what is her job?"]
    with Memory(path=store, embedder=get_embedder("edge"), warm=False) as memory:
        memory.add(turns, user_id="maya", session_id="s1", event_time="2024-03-02T09:15:00Z")
        expected = [
            [hit.episode.id for hit in memory.search(q, user_id="maya", limit=4)] for q in questions
        ]
        context = memory.context(questions[0], user_id="maya").text

    async def scenario() -> tuple[list[list[str]], str]:
        async with _session(store, "--user", "maya") as session:
            answers = []
            for question in questions:
                failed, text = await _call(session, "recall", query=question, limit=4)
                assert not failed
                answers.append(re.findall(r"^\d+\. \[(ep_\w+)\]", text, flags=re.MULTILINE))
            _, digest = await _call(session, "get_context", question=questions[0])
        return answers, digest

    answers, digest = _run(scenario())
    assert answers == expected
    assert digest == context


def test_over_http_with_keys_each_key_reaches_its_own_user(tmp_path: Path) -> None:
    import subprocess
    import time

    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from anamnesis.server.keys import KeyStore

    store = KeyStore(tmp_path / "keys.db")
    maya, bob = (store.create(name, user_id=name)[1] for name in ("maya", "bob"))
    store.close()
    port = _free_port()
    args = ["--path", str(tmp_path / "m.db"), "--embedder", "edge", "mcp", "--http"]
    args += ["--port", str(port), "--keys", str(tmp_path / "keys.db")]
    server = subprocess.Popen(
        [sys.executable, "-m", "anamnesis.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/mcp"

    async def as_user(key: str | None, tool: str, **arguments: Any) -> tuple[bool, str]:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with httpx2.AsyncClient(headers=headers) as client:
            async with streamable_http_client(url, http_client=client) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await _call(session, tool, **arguments)

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status = httpx2.post(url, json={}).status_code
                break
            except httpx2.TransportError:
                assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
                assert time.monotonic() < deadline, "the server did not start listening"
                time.sleep(0.2)
        assert status == 401  # no key: refused before the MCP session starts
        failed, _ = _run(as_user(maya, "remember", content="my locker code is 4471"))
        assert not failed
        failed, text = _run(as_user(maya, "recall", query="locker code"))
        assert "4471" in text
        failed, text = _run(as_user(bob, "recall", query="locker code", user_id="maya"))
        assert "4471" not in text
        with pytest.raises(Exception):  # noqa: B017  (the SDK's client fails on 401)
            _run(as_user("anm_0_wrong", "recall", query="locker code"))
    finally:
        server.terminate()
        server.wait(timeout=30)
    with Memory(path=tmp_path / "m.db", embedder=get_embedder("edge"), warm=False) as memory:
        assert memory.stats(user_id="maya")["episodes"] == 1
        assert memory.stats(user_id="default")["episodes"] == 0


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


TEXT = {"type": "string", "minLength": 1, "maxLength": 200_000}
QUERY = {"type": "string", "minLength": 1, "maxLength": 8_000}
ID = {"type": "string", "minLength": 1, "maxLength": 256}
NAME = {"type": "string", "maxLength": 256}
FLAG = {"type": "boolean"}
ROLE = {"type": "string", "enum": ["user", "assistant", "system", "tool"]}
BUDGET = 300  # the server's --budget-tokens in the tests below
#: What each tool's input schema declares of each argument: what the host's model reads.
BOUNDS: dict[str, dict[str, dict[str, Any]]] = {
    "remember": {
        "content": TEXT,
        "speaker": NAME,
        "role": ROLE,
        "session_id": ID,
        "event_time": NAME,
    },
    "recall": {"query": QUERY, "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
    "get_context": {
        "question": QUERY,
        "budget_tokens": {"type": "integer", "minimum": 32, "maximum": BUDGET},
        "profile": FLAG,
    },
    "get_memory": {"memory_id": ID},
    "update_memory": {"memory_id": ID, "content": TEXT},
    "forget_memory": {"memory_id": ID},
    "memory_history": {"memory_id": ID},
    "facts": {"subject": NAME, "predicate": NAME, "as_of": NAME, "include_history": FLAG},
    "summaries": {"session_id": ID},
    "profile": {"subject": ID},
    "gate_decisions": {
        "memory_ids": {"type": "array", "minItems": 1, "maxItems": 50, "items": ID},
    },
    "forget_all_memories": {"confirm": FLAG},
}
_BOUND_KEYS = ("type", "minimum", "maximum", "minLength", "maxLength", "enum", "minItems")
_BOUND_KEYS += ("maxItems", "items")


def _declared(schema: dict[str, Any]) -> dict[str, Any]:
    """The bounds a property's schema declares (of its non-null option when nullable)."""
    (option,) = [o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"]
    bounds = {key: option[key] for key in _BOUND_KEYS if key in option}
    if "items" in bounds:
        bounds["items"] = _declared(bounds["items"])
    return bounds


def _out_of_bounds(bounds: dict[str, Any]) -> list[tuple[Any, str, list[str]]]:
    """Values an argument with ``bounds`` must be refused, each with how the refusal
    shows the value given and what it says of the bounds: beyond each end, of the
    wrong JSON type, coercible ones."""
    said = _range(bounds)
    if "enum" in bounds:
        return [("boss", "'boss'", said), ("User", "'User'", said), (1, "1", said)]
    kind = bounds["type"]
    if kind == "integer":
        low, high = bounds["minimum"], bounds["maximum"]
        values = [low - 1, high + 1, -1, 2**70, True, str(low), float(low)]
        shown = [str(low - 1), str(high + 1), "-1", str(2**70), "true", f"'{low}'"]
        return [(v, s, said) for v, s in zip(values, [*shown, str(float(low))], strict=True)]
    if kind == "string":
        over = bounds["maxLength"] + 1
        too_long = ("x" * over, f"({over:,} characters)", said)
        empty = [("", "''", said)] if bounds.get("minLength") else []
        return [too_long, (7, "7", said), (True, "true", said), *empty]
    if kind == "boolean":
        return [("true", "'true'", said), (1, "1", said), (0, "0", said)]
    over = bounds["maxItems"] + 1
    return [
        (["ep_x"] * over, f"a list of {over} items", said),
        ([], "a list of 0 items", said),
        ("ep_x", "'ep_x'", said),
        (["x" * 257], "(257 characters)", _range(bounds["items"])),  # an item out of bounds
    ]


def _range(bounds: dict[str, Any]) -> list[str]:
    """What a refusal says of the bounds."""
    if "enum" in bounds:
        return [f'"{value}"' for value in bounds["enum"]]  # as the schema spells them
    kind = bounds["type"]
    if kind == "integer":
        return [f"from {bounds['minimum']} to {bounds['maximum']}"]
    if kind == "string":
        return [f"{bounds['maxLength']} characters"]
    if kind == "boolean":
        return ["true or false"]
    return [f"{bounds['maxItems']} items"]


def test_every_tool_declares_the_bounds_of_its_arguments(tmp_path: Path) -> None:
    async def scenario() -> None:
        args = ("--user", "maya", "--budget-tokens", str(BUDGET), "--allow-forget-all")
        async with _session(tmp_path / "m.db", *args) as session:
            tools = (await session.list_tools()).tools
            assert {tool.name for tool in tools} == set(BOUNDS)
            for tool in tools:
                declared = {
                    name: _declared(schema)
                    for name, schema in tool.input_schema["properties"].items()
                }
                assert declared == BOUNDS[tool.name], tool.name

    _run(scenario())


def test_every_tool_refuses_what_is_out_of_bounds_and_answers_within_the_budget(
    tmp_path: Path,
) -> None:
    from anamnesis.tokens import TokenCounter

    store = tmp_path / "m.db"
    with Memory(path=store, embedder=get_embedder("edge"), warm=False) as memory:
        (kept,) = memory.add("the harbour was busy with boats", user_id="maya")
    valid: dict[str, dict[str, Any]] = {
        "remember": {"content": "a note"},
        "recall": {"query": "harbour"},
        "get_context": {"question": "harbour"},
        "get_memory": {"memory_id": kept.id},
        "update_memory": {"memory_id": kept.id, "content": "the harbour was quiet"},
        "forget_memory": {"memory_id": kept.id},
        "memory_history": {"memory_id": kept.id},
        "facts": {},
        "summaries": {},
        "profile": {},
        "gate_decisions": {"memory_ids": [kept.id]},
        "forget_all_memories": {},
    }
    person = "".join(chr(ord("a") + i % 26) + str(i // 26) for i in range(100))[:256]
    # At the bounds: answered (or, for ids nobody holds, refused as not found), never
    # refused as out of bounds.
    at_the_bounds: list[tuple[str, dict[str, Any]]] = [
        ("recall", {"query": "harbour " * 1_000, "limit": 50}),
        ("recall", {"query": "h", "limit": 1}),
        ("get_context", {"question": "harbour", "budget_tokens": 32}),
        ("get_context", {"question": "harbour " * 1_000, "budget_tokens": BUDGET}),
        (
            "remember",
            {
                "content": "harbour " * 25_000,
                "speaker": "s" * 256,
                "role": "assistant",
                "session_id": "s" * 256,
                "event_time": "2024-05-08T13:56:00Z",
            },
        ),
        ("get_memory", {"memory_id": "e" * 256}),
        ("memory_history", {"memory_id": "e" * 256}),
        ("facts", {"subject": "s" * 256, "predicate": "p" * 256, "as_of": "2024-05-08"}),
        ("summaries", {"session_id": "s" * 256}),
        ("profile", {"subject": person}),
        ("gate_decisions", {"memory_ids": [kept.id] * 50}),
    ]
    tokens = TokenCounter()

    async def scenario() -> None:
        args = ("--user", "maya", "--budget-tokens", str(BUDGET), "--allow-forget-all")
        async with _session(store, *args) as session:
            for tool, arguments in BOUNDS.items():
                for argument, bounds in arguments.items():
                    for value, shown, bounds_said in _out_of_bounds(bounds):
                        failed, text = await _call(
                            session, tool, **{**valid[tool], argument: value}
                        )
                        call = f"{tool}({argument}={shown})"
                        assert failed, (call, text)
                        assert argument in text and shown in text, (call, text)
                        for said in bounds_said:
                            assert said in text, (call, text)
                        assert tokens.count([text])[0] <= BUDGET, call
            for tool, arguments in at_the_bounds:
                failed, text = await _call(session, tool, **arguments)
                assert "must be" not in text and "Traceback" not in text, (tool, text)
                assert not failed or "NotFoundError" in text, (tool, text)
                assert tokens.count([text])[0] <= BUDGET, (tool, text[:200])
            # The caller's text comes back at most 80 characters long.
            _, text = await _call(session, "profile", subject=person)
            assert person[:80] in text and person[:81] not in text

    _run(scenario())
    with Memory(path=store, embedder=get_embedder("edge"), warm=False) as memory:
        assert memory.get(kept.id, user_id="maya").content == kept.content  # nothing refused ran


def test_the_help_lists_the_tools_the_server_offers(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from anamnesis.cli import main

    said = " ".join(CliRunner().invoke(main, ["mcp", "--help"]).output.split())
    listing = said.partition("Tools: ")[2].partition(".")[0]
    offered, _, extra = listing.partition("; with --allow-forget-all, also ")

    async def listed(*flags: str) -> list[str]:
        async with _session(tmp_path / "m.db", "--user", "maya", *flags) as session:
            return [tool.name for tool in (await session.list_tools()).tools]

    assert offered.split(", ") == _run(listed())
    assert offered.split(", ") + extra.split(", ") == _run(listed("--allow-forget-all"))


def test_the_top_level_help_imports_nothing_of_mcp() -> None:
    import subprocess

    script = (
        "import sys; from click.testing import CliRunner; from anamnesis.cli import main; "
        "CliRunner().invoke(main, ['--help']); print('mcp' in sys.modules)"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()), env.get("PYTHONPATH")]))
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert ran.stdout.strip() == "False", ran.stderr
