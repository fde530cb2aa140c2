"""The OpenAI Agents SDK's session memory (the ``Session`` protocol) over Anamnesis.

    from agents import Agent, Runner
    from anamnesis import AsyncMemory
    from anamnesis.integrations.openai_agents import AnamnesisSession

    memory = AsyncMemory("agent.db")
    session = AnamnesisSession("chat-42", memory, user_id="ana")
    await Runner.run(agent, "I moved to Porto", session=session)

Each conversation item is one episode of the session ``session_id`` in the user's
(and, with ``agent_id``, the agent's) scope, the item kept verbatim in its metadata
(``item``) and returned as it was given. The episode's text is what the item says (a
message's text, a tool call's name and arguments, a tool's output), so the agent's
history is also long-term memory: ``memory.search(...)`` finds it from any later
session. With an ``AsyncMemory`` the calls are its coroutines; with a ``Memory`` they
run on a worker thread, so the event loop never waits on the store.

Needs ``pip install "anamnesis[agents]"``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidInputError
from ..memory import Memory
from ..memory.async_memory import AsyncMemory
from ..types import Episode

SOURCE = "openai-agents"
#: Episodes read per page when the whole history is asked for.
PAGE = 1000


class AnamnesisSession:
    """An Agents SDK session whose items are episodes of an Anamnesis memory."""

    session_settings: Any = None

    def __init__(
        self,
        session_id: str,
        memory: Memory | AsyncMemory,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.memory = memory
        self.scope = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id}

    async def _call(self, verb: str, *args: Any, **kwargs: Any) -> Any:
        """A Memory verb: AsyncMemory's coroutine, or Memory's on a worker thread."""
        if isinstance(self.memory, AsyncMemory):
            return await getattr(self.memory, verb)(*args, **kwargs)
        return await asyncio.to_thread(getattr(self.memory, verb), *args, **kwargs)

    async def _page(self, offset: int, limit: int) -> tuple[list[Episode], int]:
        page = await self._call(
            "get_all",
            **self.scope,
            filters={"metadata": {"source": SOURCE}},
            limit=limit,
            offset=offset,
        )
        return page.items, page.total

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The session's items, oldest first; with ``limit``, the latest ``limit``."""
        if limit is not None and limit <= 0:
            return []
        _, total = await self._page(0, 1)
        start = 0 if limit is None else max(0, total - limit)
        episodes: list[Episode] = []
        while start < total:
            items, _ = await self._page(start, PAGE)
            if not items:
                break
            episodes += items
            start += len(items)
        return [e.metadata["item"] for e in episodes]

    async def add_items(self, items: list[Any]) -> None:
        """Store the items, in order, in one transaction."""
        if not items:
            return
        messages = [
            {
                "content": _text(item),
                "role": _role(item),
                "metadata": {"source": SOURCE, "item": _plain(item)},
            }
            for item in items
        ]
        await self._call("add_many", messages, **self.scope, atomic=True)

    async def pop_item(self) -> Any | None:
        """Remove the latest item and return it (None when the session is empty)."""
        _, total = await self._page(0, 1)
        if total == 0:
            return None
        (last,), _ = await self._page(total - 1, 1)
        await self._call("delete", last.id, **self.scope)
        return last.metadata["item"]

    async def clear_session(self) -> None:
        """Delete the session's items (and nothing else of the scope)."""
        while True:
            items, _ = await self._page(0, PAGE)
            if not items:
                return
            for episode in items:
                await self._call("delete", episode.id, **self.scope)


def _plain(item: Any) -> dict[str, Any]:
    """The item as JSON-ready data (the SDK's items are dicts; a model is dumped)."""
    if hasattr(item, "model_dump"):
        item = item.model_dump(exclude_unset=True)
    if not isinstance(item, Mapping):
        raise InvalidInputError(f"a session item must be a dict, not {type(item).__name__}")
    return json.loads(json.dumps(item, ensure_ascii=False, default=str))


def _role(item: Any) -> str | None:
    data = _plain(item)
    if isinstance(data.get("role"), str):
        return str(data["role"])
    kind = data.get("type")
    return "tool" if isinstance(kind, str) and kind.endswith(("call", "call_output")) else None


def _text(item: Any) -> str:
    """What an item says: a message's text, a call's name and arguments, an output."""
    data = _plain(item)
    content = data.get("content")
    if isinstance(content, str) and content.strip():
        return content
    if isinstance(content, list):
        parts = [
            str(part.get("text") or part.get("refusal") or "")
            for part in content
            if isinstance(part, Mapping)
        ]
        if any(p.strip() for p in parts):
            return "\n".join(p for p in parts if p.strip())
    if data.get("type") == "function_call":
        return f"{data.get('name')}({data.get('arguments') or ''})"
    output = data.get("output")
    if isinstance(output, str) and output.strip():
        return output
    summary = data.get("summary")
    if isinstance(summary, list):  # a reasoning item
        texts = [str(s.get("text") or "") for s in summary if isinstance(s, Mapping)]
        if any(t.strip() for t in texts):
            return "\n".join(t for t in texts if t.strip())
    # Anything else is kept verbatim; its JSON is the text it is found by.
    return json.dumps(data, ensure_ascii=False)
