"""The MCP server: Anamnesis as tools inside an agent host (Claude Code, Claude Desktop,
Cursor, any MCP client), on the official ``mcp`` SDK.

A thin shell over ``AsyncMemory``: each tool is one verb, its text output formatted
for a model to read. The rules that hold for every tool:

* **Scope is the server's.** The user and agent come from the server's configuration
  or, over HTTP with a key file, from the API key the request presents (a user key
  reaches its own user; an admin key, the server's configured one); never from a tool
  argument, so no tool call can reach another user's memory.
* **Every result is bounded.** ``recall`` returns compact previews (id, date, speaker,
  a snippet, score) and every tool's text stays within the server's token budget
  (``budget_tokens``, default 2,000; at most ``MAX_BUDGET_TOKENS``, well under the
  25,000-token tool-output limit of common hosts). The full text comes from
  ``get_memory``.
* **Destructive tools are off** unless the server is started with ``forget_all=True``
  (``anamnesis mcp --allow-forget-all``).
* **Errors are tool errors** whose message says what to do, never a traceback.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from ..async_memory import AsyncMemory
from ..consolidate.types import ProfileEntry, SessionSummary
from ..errors import AnamnesisError
from ..tokens import TokenCounter
from ..types import Episode, Fact, GateDecision
from . import DEFAULT_BUDGET_TOKENS, MAX_BUDGET_TOKENS
from .auth import authenticate
from .keys import KeyStore

#: Characters of a memory shown in a ``recall`` preview.
PREVIEW_CHARS = 160

T = TypeVar("T")

INSTRUCTIONS = """Long-term memory of past conversations and notes, kept verbatim.
Use `recall` to find what was said before (it returns short previews with ids), then
`get_memory` for the full text of a hit, or `get_context` for a ready-to-read,
dated summary of everything relevant to a question. Use `remember` to store
something worth keeping (a preference, a decision, a fact about the user). `facts`
lists what is currently known about the user, with `as_of` for the past; `profile`
gathers it for one person, and `summaries` recounts past conversations briefly."""


@dataclass(frozen=True, slots=True)
class ServerScope:
    """Whose memory the server serves (fixed when it starts)."""

    user_id: str
    agent_id: str | None = None


class Answers:
    """Formats results as text within a token budget."""

    def __init__(self, budget_tokens: int) -> None:
        self.budget = budget_tokens
        self._tokens = TokenCounter()

    def fit(self, lines: list[str], more: str) -> str:
        """As many of ``lines`` as fit the budget, then ``more`` if some were left out."""
        kept: list[str] = []
        used = 0
        for line, cost in zip(lines, self._tokens.count(lines), strict=True):
            if used + cost > self.budget and kept:
                kept.append(more.format(left=len(lines) - len(kept)))
                break
            if used + cost > self.budget:
                kept.append(self.cut(line))
                break
            kept.append(line)
            used += cost
        return "\n".join(kept)

    def cut(self, text: str) -> str:
        """``text``, shortened to the budget when it is longer (saying so)."""
        (cost,) = self._tokens.count([text])
        if cost <= self.budget:
            return text
        keep = max(1, int(len(text) * self.budget / cost * 0.9))
        return text[:keep] + f"\n[... cut at the {self.budget}-token limit of this server]"


def _date(episode: Episode) -> str:
    return episode.event_time.date().isoformat()


def _who(episode: Episode) -> str:
    return episode.speaker or episode.role or "note"


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


def _fact_line(fact: Fact) -> str:
    return f"- {fact.subject} {fact.predicate} {fact.object}{_span(fact)} [{fact.id}]"


def _span(fact: Fact | ProfileEntry) -> str:
    since = f" since {fact.valid_from.date().isoformat()}" if fact.valid_from else ""
    until = f" until {fact.valid_to.date().isoformat()}" if fact.valid_to else ""
    return since + until


def _entry_line(entry: ProfileEntry) -> str:
    return f"- {entry.text}{_span(entry)} [{entry.fact_id}]"


def _summary_line(summary: SessionSummary) -> str:
    return f"- session {summary.session_id}: {summary.text}"


def _decision_line(decision: GateDecision) -> str:
    verdict = "admitted" if decision.admitted else "archived"
    return (
        f"[{decision.episode_id}] {verdict} ({decision.reason}): score {decision.score:.3f}, "
        f"threshold {decision.threshold:.3f}; novelty {decision.novelty:.3f}, salience "
        f"{decision.salience:.3f} ({decision.category}), prediction error "
        f"{decision.prediction_error:.3f}"
    )


async def _tool(call: Awaitable[T]) -> T:
    """The verb's result, or a tool error a model can act on."""
    try:
        return await call
    except AnamnesisError as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from exc


def build_server(
    memory: AsyncMemory,
    scope: ServerScope,
    *,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    forget_all: bool = False,
    keys: KeyStore | None = None,
) -> MCPServer:
    """An MCP server whose tools read and write ``memory`` in ``scope`` only, or, with
    ``keys`` (over HTTP), in the scope of the API key each request presents."""
    if not 1 <= budget_tokens <= MAX_BUDGET_TOKENS:
        raise ValueError(f"budget_tokens must be from 1 to {MAX_BUDGET_TOKENS}")
    server = MCPServer(name="anamnesis", instructions=INSTRUCTIONS)
    answers = Answers(budget_tokens)
    configured: dict[str, Any] = {"user_id": scope.user_id, "agent_id": scope.agent_id}

    def whose(ctx: Context) -> dict[str, Any]:
        """The scope of this call: the server's, or the key's over HTTP with keys."""
        if keys is None:
            return configured
        try:
            key = authenticate(keys, ctx.headers)
        except AnamnesisError as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from exc
        if key is None or key.is_admin:
            return configured
        return {"user_id": key.user_id, "agent_id": key.agent_id}

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def remember(
        ctx: Context,
        content: str,
        speaker: str | None = None,
        role: str | None = None,
        session_id: str | None = None,
        event_time: str | None = None,
    ) -> str:
        """Store something verbatim in long-term memory: a fact about the user, a
        preference, a decision, what happened. `event_time` (ISO-8601) is when it
        happened, if not now; `session_id` groups the turns of one conversation.
        Returns the new memory's id."""
        (episode,) = await _tool(
            memory.add(
                content,
                speaker=speaker,
                role=role,
                session_id=session_id,
                event_time=event_time,
                **whose(ctx),
            )
        )
        return f"remembered [{episode.id}] dated {_date(episode)}"

    @server.tool(annotations=read_only)
    async def recall(ctx: Context, query: str, limit: int = 10) -> str:
        """Search long-term memory. Returns up to `limit` (1-50) short previews, best
        first: id, date, speaker, snippet and score. Use `get_memory` with an id for
        the full text, or `get_context` for a dated digest of everything relevant."""
        limit = max(1, min(limit, 50))
        hits = await _tool(memory.search(query, limit=limit, **whose(ctx)))
        if not hits:
            return "nothing found in memory for that query"
        lines = [
            f"{rank}. [{hit.episode.id}] {_date(hit.episode)} {_who(hit.episode)}: "
            f"{_preview(hit.episode.content)} (score {hit.score:.3f})"
            for rank, hit in enumerate(hits, start=1)
        ]
        return answers.fit(lines, "... {left} more hits left out (token budget)")

    @server.tool(annotations=read_only)
    async def get_context(
        ctx: Context, question: str, budget_tokens: int | None = None, profile: bool = False
    ) -> str:
        """A dated, provenance-tagged digest of the memories relevant to `question`,
        ready to read before answering it, within `budget_tokens` (at most the
        server's limit). `profile` starts it with what is known about the people the
        question is about."""
        budget = min(budget_tokens or answers.budget, answers.budget)
        context = await _tool(
            memory.context(question, budget_tokens=max(budget, 1), profile=profile, **whose(ctx))
        )
        return context.text or "nothing relevant found in memory"

    @server.tool(annotations=read_only)
    async def get_memory(ctx: Context, memory_id: str) -> str:
        """The full text of one memory, by the id `recall` or `remember` gave."""
        episode = await _tool(memory.get(memory_id, **whose(ctx)))
        head = f"[{episode.id}] {episode.event_time.isoformat()} {_who(episode)}"
        return answers.cut(f"{head}\n{episode.content}")

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def update_memory(ctx: Context, memory_id: str, content: str) -> str:
        """Replace a memory's text; the previous version is kept (see
        `memory_history`)."""
        episode = await _tool(memory.update(memory_id, content=content, **whose(ctx)))
        return f"updated [{episode.id}] to version {episode.version}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    async def forget_memory(ctx: Context, memory_id: str) -> str:
        """Delete one memory, by id, with its versions and indexes."""
        counts = await _tool(memory.delete(memory_id, **whose(ctx)))
        return f"forgot [{memory_id}] ({counts.episodes} memory, {counts.versions} versions)"

    @server.tool(annotations=read_only)
    async def memory_history(ctx: Context, memory_id: str) -> str:
        """Every version of a memory, oldest first, the current one last, each with the
        time it was written."""
        versions = await _tool(memory.history(memory_id, **whose(ctx)))
        lines = [
            f"version {v.version}{' (current)' if v.changed_at is None else ''}, recorded "
            f"{v.recorded_at.isoformat() if v.recorded_at else 'at an unknown time'}: "
            f"{_preview(v.content)}"
            for v in versions
        ]
        return answers.fit(lines, "... {left} more versions left out (token budget)")

    @server.tool(annotations=read_only)
    async def facts(
        ctx: Context,
        subject: str | None = None,
        predicate: str | None = None,
        as_of: str | None = None,
        include_history: bool = False,
    ) -> str:
        """What is known about the user (or `subject`): current facts, newest first;
        `as_of` (ISO date) for what was known then; `include_history` for the values
        they replaced too. Facts come from `consolidate`, run by the memory's owner."""
        found = await _tool(
            memory.facts(
                subject=subject,
                predicate=predicate,
                as_of=as_of,
                include_superseded=include_history,
                **whose(ctx),
            )
        )
        if not found:
            return "no facts known yet"
        return answers.fit([_fact_line(f) for f in found], "... {left} more facts left out")

    @server.tool(annotations=read_only)
    async def summaries(ctx: Context, session_id: str | None = None) -> str:
        """Short summaries of past conversations, oldest first: each session's dates and
        most salient sentences (`session_id` for one session). Summaries come from
        `consolidate`, run by the memory's owner."""
        found = await _tool(memory.derived.summaries(session_id=session_id, **whose(ctx)))
        if not found:
            return "no session summaries yet"
        lines = [_summary_line(s) for s in found]
        return answers.fit(lines, "... {left} more sessions left out (token budget)")

    @server.tool(annotations=read_only)
    async def profile(ctx: Context, subject: str = "user") -> str:
        """What is known about one person: `subject` is "user" or a name as the
        speakers go by. Current values first, then what they replaced and when, each
        with its fact id. Profiles come from `consolidate`, run by the memory's owner."""
        found = await _tool(memory.derived.profile(subject, **whose(ctx)))
        if found is None:
            known = await _tool(memory.derived.profiles(**whose(ctx)))
            names = ", ".join(p.subject for p in known) or "nobody yet"
            return f"no profile of {subject!r}; profiles known: {names}"
        lines = [f"Profile of {found.subject}:", *(_entry_line(e) for e in found.entries)]
        return answers.fit(lines, "... {left} more entries left out (token budget)")

    @server.tool(annotations=read_only)
    async def gate_decisions(ctx: Context, memory_ids: list[str]) -> str:
        """Why each memory went where it did when it was stored: admitted to search or
        archived by the encoding gate, with its score, threshold and signals. Memories
        stored without a gate are left out."""
        found = await _tool(memory.gate_decisions(memory_ids, **whose(ctx)))
        if not found:
            return "no gate decisions for those memories (stored without a gate, or not found)"
        lines = [_decision_line(d) for d in found.values()]
        return answers.fit(lines, "... {left} more decisions left out (token budget)")

    if forget_all:

        @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
        async def forget_all_memories(ctx: Context, confirm: bool = False) -> str:
            """Delete every memory of this user. Pass confirm=true only when the user
            has asked for exactly that."""
            if not confirm:
                raise ToolError("nothing deleted: pass confirm=true to delete every memory")
            counts = await _tool(memory.delete_all(**whose(ctx)))
            return f"forgot every memory ({counts.episodes})"

    return server
