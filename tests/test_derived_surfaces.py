"""Summaries and profiles on every surface: a consolidated conversation's summaries and
profiles come back equal from Memory, AsyncMemory, and the REST clients against a real
uvicorn on 127.0.0.1, and the MCP tools (the SDK's client over stdio) show the same
items; another user's key, a wrong key or another user's MCP server sees none of them;
a bad subject is the same typed error everywhere, never a server error."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from rest_fixtures import EDGE, RestServer

from anamnesis import AsyncMemory, Memory
from anamnesis.errors import (
    AuthenticationError,
    InvalidInputError,
    PermissionDeniedError,
    ScopeError,
)
from anamnesis.server.async_client import AsyncRemoteMemory
from anamnesis.server.client import RemoteMemory
from anamnesis.server.keys import KeyStore

pytest.importorskip("mcp", reason="the MCP server needs the server extras")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

FIRST = [
    {"role": "user", "speaker": "Maya", "content": "I finally signed the lease on a flat in Porto"},
    {"role": "assistant", "content": "Congratulations! When do you move?"},
    {"role": "user", "speaker": "Maya", "content": "I work at Tencent as a designer"},
]
SECOND = [
    {"role": "user", "speaker": "Maya", "content": "Big news: I left Tencent and now work at Acme"},
    "I live in Porto",
]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """Maya's two consolidated sessions (a job change between them), and Bob's note."""
    path = tmp_path / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        memory.add(FIRST, user_id="maya", session_id="s1", event_time="2024-03-02T09:15:00Z")
        memory.add(SECOND, user_id="maya", session_id="s2", event_time="2024-09-01T10:00:00Z")
        memory.add("I work at Globex", user_id="bob", session_id="b1")
        report = memory.consolidate(user_id="maya")
    assert report.summaries == 2 and report.profiles >= 1
    return path


class Derived:
    """What Memory in process says about Maya: the answers every surface must give."""

    def __init__(self, store: Path) -> None:
        with Memory(path=store, embedder=EDGE, warm=False) as memory:
            self.summaries = memory.derived.summaries(user_id="maya")
            self.second = memory.derived.summaries(user_id="maya", session_id="s2")
            self.profiles = memory.derived.profiles(user_id="maya")
            self.user = memory.derived.profile("user", user_id="maya")
            self.by_name = memory.derived.profile("Maya", user_id="maya")
            self.context = memory.context("Where do I work now?", user_id="maya", profile=True)
        assert [s.session_id for s in self.summaries] == ["s1", "s2"]
        assert self.user is not None and "Porto" in self.user.text
        # Maya's turns are the user's: one person, one profile, reached by either name.
        assert [p.subject for p in self.profiles] == ["user"] and self.by_name == self.user

    def read(self, derived: Any) -> tuple[Any, ...]:
        return (
            derived.summaries(user_id="maya"),
            derived.summaries(user_id="maya", session_id="s2"),
            derived.profiles(user_id="maya"),
            derived.profile("user", user_id="maya"),
        )

    @property
    def expected(self) -> tuple[Any, ...]:
        return self.summaries, self.second, self.profiles, self.user


def test_every_python_surface_returns_the_same_summaries_and_profiles(store: Path) -> None:
    local = Derived(store)

    async def in_async_memory() -> tuple[Any, ...]:
        async with AsyncMemory(path=store, embedder=EDGE, warm=False) as memory:
            return tuple(await asyncio.gather(*local.read(memory.derived)))

    assert asyncio.run(in_async_memory()) == local.expected
    server = RestServer({"path": store})
    try:
        with RemoteMemory(server.url) as remote:
            assert local.read(remote.derived) == local.expected

        async def over_async_client() -> tuple[Any, ...]:
            async with AsyncRemoteMemory(server.url) as remote:
                return tuple(await asyncio.gather(*local.read(remote.derived)))

        assert asyncio.run(over_async_client()) == local.expected
    finally:
        server.stop()


@asynccontextmanager
async def _mcp(store: Path, *extra: str) -> AsyncIterator[ClientSession]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path.cwd()), env.get("PYTHONPATH")]))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "anamnesis.cli", "--path", str(store), "--embedder", "edge", *extra],
        env=env,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def _call(session: ClientSession, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await session.call_tool(tool, arguments)
    text = "\n".join(part.text for part in result.content if hasattr(part, "text"))
    return bool(result.is_error), text


def test_the_mcp_tools_show_the_same_summaries_and_profile(store: Path) -> None:
    local = Derived(store)
    assert local.user is not None

    async def scenario() -> dict[str, tuple[bool, str]]:
        answers = {}
        async with _mcp(store, "mcp", "--user", "maya") as session:
            answers["summaries"] = await _call(session, "summaries")
            answers["s2"] = await _call(session, "summaries", session_id="s2")
            answers["profile"] = await _call(session, "profile")
            answers["by name"] = await _call(session, "profile", subject="Maya")
            answers["nobody"] = await _call(session, "profile", subject="Zed")
            answers["context"] = await _call(
                session, "get_context", question="Where do I work now?", profile=True
            )
            answers["empty"] = await _call(session, "profile", subject="   ")
        async with _mcp(store, "mcp", "--user", "bob") as session:
            answers["bob summaries"] = await _call(session, "summaries")
            answers["bob profile"] = await _call(session, "profile")
        return answers

    answers = asyncio.run(scenario())
    assert answers["summaries"] == (
        False,
        "\n".join(f"- session {s.session_id}: {s.text}" for s in local.summaries),
    )
    assert answers["s2"] == (False, f"- session s2: {local.second[0].text}")
    failed, text = answers["profile"]
    assert not failed and text.splitlines()[0] == "Profile of user:"
    for entry in local.user.entries:
        assert f"- {entry.text}" in text and f"[{entry.fact_id}]" in text
    assert answers["by name"] == answers["profile"]
    assert answers["nobody"] == (
        False,
        f"no profile of 'Zed'; profiles known: {', '.join(p.subject for p in local.profiles)}",
    )
    assert answers["context"] == (False, local.context.text)
    assert local.context.text.startswith("Profile:")
    failed, text = answers["empty"]
    assert failed and text.endswith("InvalidInputError: subject is empty")
    assert "Traceback" not in text
    # Bob's server is Bob's memory: none of Maya's summaries or profiles reach it.
    assert answers["bob summaries"] == (False, "no session summaries yet")
    assert answers["bob profile"] == (False, "no profile of 'user'; profiles known: nobody yet")


def test_the_gate_decisions_tool_says_what_memory_says(tmp_path: Path) -> None:
    store = tmp_path / "m.db"
    with Memory(path=store, embedder=EDGE, gate="default", warm=False) as memory:
        added = memory.add(["I live in Porto", "ok", "I live in Porto"], user_id="maya")
        decisions = memory.gate_decisions([e.id for e in added], user_id="maya")
    with Memory(path=store, embedder=EDGE, warm=False) as memory:
        (bobs,) = memory.add("hi", user_id="bob")
    assert set(decisions) == {e.id for e in added}

    async def scenario() -> tuple[tuple[bool, str], ...]:
        async with _mcp(store, "mcp", "--user", "maya") as session:
            return (
                await _call(session, "gate_decisions", memory_ids=[e.id for e in added]),
                await _call(session, "gate_decisions", memory_ids=[bobs.id]),
            )

    mine, bobs_answer = asyncio.run(scenario())
    assert not mine[0]
    lines = mine[1].splitlines()
    assert len(lines) == len(decisions)
    for line, decision in zip(lines, decisions.values(), strict=True):
        verdict = "admitted" if decision.admitted else "archived"
        assert line.startswith(f"[{decision.episode_id}] {verdict} ({decision.reason}): ")
        assert f"score {decision.score:.3f}" in line
    assert bobs_answer == (
        False,
        "no gate decisions for those memories (stored without a gate, or not found)",
    )


def test_another_users_key_sees_nothing_of_them(store: Path, tmp_path: Path) -> None:
    local = Derived(store)
    keyfile = KeyStore(tmp_path / "keys.db")
    maya = keyfile.create("maya", user_id="maya")[1]
    bob = keyfile.create("bob", user_id="bob")[1]
    planner = keyfile.create("planner", user_id="maya", agent_id="planner")[1]
    keyfile.close()
    server = RestServer({"path": store}, tmp_path / "keys.db")
    try:
        with RemoteMemory(server.url, api_key=maya) as own:
            assert local.read(own.derived) == local.expected
        with RemoteMemory(server.url, api_key=bob) as other:
            assert other.derived.summaries() == []
            assert other.derived.profiles() == []
            assert other.derived.profile("user") is None
            assert other.derived.profile("Maya") is None
            for attempt in (
                lambda: other.derived.summaries(user_id="maya"),
                lambda: other.derived.profiles(user_id="maya"),
                lambda: other.derived.profile("user", user_id="maya"),
            ):
                with pytest.raises(PermissionDeniedError, match="user 'bob'"):
                    attempt()
        with RemoteMemory(server.url, api_key=planner) as agent:
            assert agent.derived.summaries() == [] and agent.derived.profiles() == []
        with RemoteMemory(server.url, api_key="anm_0_wrong") as wrong:
            for attempt in (
                lambda: wrong.derived.summaries(user_id="maya"),
                lambda: wrong.derived.profiles(user_id="maya"),
                lambda: wrong.derived.profile("user", user_id="maya"),
            ):
                with pytest.raises(AuthenticationError):
                    attempt()
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for path in ("summaries", "profiles", "profile"):
                refused = http.get(f"/v1/derived/{path}", params={"user_id": "maya"})
                assert refused.status_code == 401 and "Porto" not in refused.text
    finally:
        server.stop()


def test_a_bad_subject_is_a_typed_error_not_a_server_error(store: Path) -> None:
    with Memory(path=store, embedder=EDGE, warm=False) as memory:
        with pytest.raises(InvalidInputError, match="subject is empty"):
            memory.derived.profile("", user_id="maya")
    server = RestServer({"path": store})
    try:
        with RemoteMemory(server.url) as remote:
            for subject in ("", "   "):
                with pytest.raises(InvalidInputError, match="subject is empty"):
                    remote.derived.profile(subject, user_id="maya")
            assert remote.derived.profile("nobody by that name", user_id="maya") is None
            with pytest.raises(ScopeError):
                remote.derived.summaries(user_id="a\nb")

        async def over_async_client() -> None:
            async with AsyncRemoteMemory(server.url) as remote:
                with pytest.raises(InvalidInputError, match="subject is empty"):
                    await remote.derived.profile(" ", user_id="maya")

        asyncio.run(over_async_client())
        with httpx.Client(base_url=server.url, timeout=30) as http:
            answer = http.get("/v1/derived/profile", params={"subject": "", "user_id": "maya"})
            assert answer.status_code == 400
            assert answer.json()["error"]["type"] == "InvalidInputError"
            unknown = http.get("/v1/derived/summaries", params={"subject": "user"})
            assert unknown.status_code == 400  # an argument summaries does not take
    finally:
        server.stop()
