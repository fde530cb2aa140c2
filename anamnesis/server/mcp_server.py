"""The MCP server: Anamnesis as tools inside an agent host (Claude Code, Claude Desktop,
Cursor, any MCP client), on the official ``mcp`` SDK.

A thin shell over ``AsyncMemory``: each tool is one verb, its text output formatted
for a model to read. The rules that hold for every tool:

* **Scope is the server's.** The user and agent come from the server's configuration
  or, over HTTP with a key file, from the API key the request presents (a user key
  reaches its own user; an admin key, the server's configured one); never from a tool
  argument, so no tool call can reach another user's memory.
* **Every argument has declared bounds.** Each tool's input schema (what the host's
  model reads) says them: ``minimum``/``maximum`` for numbers, ``maxLength`` for text,
  ``maxItems`` for lists, ``enum`` for roles. JSON types are taken as they are (``"5"``,
  ``5.0`` and ``true`` are not a limit), and a value outside the bounds is refused with
  a tool error that names the bounds and the value given, never clamped.
* **Every result is bounded.** ``recall`` returns compact previews (id, date, speaker,
  a snippet, score) and every answer, refusals included, stays within the server's
  token budget (``budget_tokens``, default 2,000; at least ``MIN_BUDGET_TOKENS``, which
  holds a digest's header and one line; at most ``MAX_BUDGET_TOKENS``, well under the
  25,000-token tool-output limit of common hosts). Text the caller gave comes back
  bounded too: at most ``ECHO_CHARS`` characters of it, or a whole id (at most
  ``MAX_ID_CHARS``). The full text comes from ``get_memory``.
* **Destructive tools are off** unless the server is started with ``forget_all=True``
  (``anamnesis mcp --allow-forget-all``).
* **Errors are tool errors** whose message says what to do, never a traceback.
"""

import asyncio
import json
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar, cast

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from ..consolidate.types import ProfileEntry, SessionSummary
from ..context import MIN_BUDGET_TOKENS
from ..errors import AnamnesisError
from ..ingest.normalise import MAX_CONTENT_CHARS, MAX_ID_CHARS
from ..memory.async_memory import AsyncMemory
from ..tokens import TokenCounter
from ..types import Episode, Fact, GateDecision
from . import DEFAULT_BUDGET_TOKENS, MAX_BUDGET_TOKENS
from .auth import authenticate
from .keys import KeyStore

#: Characters of a memory shown in a ``recall`` preview.
PREVIEW_CHARS = 160
#: Characters of the caller's own text an answer or a refusal repeats.
ECHO_CHARS = 80
#: Longest question ``recall`` and ``get_context`` take: a question, not a document
#: (search time grows with its length, and a longer one finds nothing more).
MAX_QUERY_CHARS = 8_000
#: The most previews one ``recall`` returns.
MAX_RECALL_HITS = 50
#: The most ids one ``gate_decisions`` call takes: the hits of one ``recall``.
MAX_IDS = MAX_RECALL_HITS

#: Text to store or search for: what ``Memory`` accepts as one episode.
Text = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS, strict=True)]
#: A question to search memory with.
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, strict=True)]
#: A memory or session id, as ``recall`` and ``remember`` give them.
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, strict=True)]
#: A short single-line string: a speaker, a person, a predicate, a time.
Name = Annotated[str, Field(max_length=MAX_ID_CHARS, strict=True)]
#: A person a profile is about: "user" or a name.
Person = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS, strict=True)]
#: The chat roles a memory may carry: the ones the engine reads (role filters pair
#: ``user`` with ``assistant``; fact extraction and salience skip the other three).
Role = Literal["user", "assistant", "system", "tool"]
Flag = Annotated[bool, Field(strict=True)]
Hits = Annotated[int, Field(ge=1, le=MAX_RECALL_HITS, strict=True)]
Ids = Annotated[list[Id], Field(min_length=1, max_length=MAX_IDS, strict=True)]

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
        """As many of ``lines`` as fit the budget, then ``more`` if some were left out
        (``more`` counted in the budget too)."""
        costs = self._tokens.count(lines)
        kept: list[str] = []
        used = 0
        for line, cost in zip(lines, costs, strict=True):
            if used + cost > self.budget:
                break
            kept.append(line)
            used += cost
        else:
            return "\n".join(kept)
        if not kept:
            return self.cut(lines[0])
        while True:
            note = more.format(left=len(lines) - len(kept))
            if not kept or used + self._tokens.count_once(note) <= self.budget:
                return self.cut("\n".join([*kept, note]))
            used -= costs[len(kept) - 1]
            kept.pop()

    def cut(self, text: str) -> str:
        """``text``, shortened to the budget when it is longer (saying so)."""
        (cost,) = self._tokens.count([text])
        if cost <= self.budget:
            return text
        note = f"\n[... cut at the {self.budget}-token limit of this server]"
        (room,) = self._tokens.count([note])
        if room >= self.budget:  # a budget too small to say so: the text alone
            note, room = "", 0
        room = self.budget - room
        keep = len(text)
        # Shrink by the ratio of room to cost until the kept text fits (WordPiece
        # tokens are not spread evenly over characters, so one guess may miss).
        while keep and cost > room:
            keep = min(keep - 1, int(keep * room / cost * 0.9))
            cost = self._tokens.count_once(text[:keep])
        return text[:keep] + note


def echo(text: str) -> str:
    """The caller's ``text`` as an answer repeats it: quoted, at most ``ECHO_CHARS``
    characters of it, with its length when it is longer."""
    if len(text) <= ECHO_CHARS:
        return repr(text)
    return f"{text[:ECHO_CHARS]!r}... ({len(text):,} characters)"


def _given(value: object) -> str:
    """A value as the caller sent it, bounded, for a refusal (JSON's spelling of
    ``true``, ``false`` and ``null``: the caller sent JSON)."""
    if isinstance(value, str):
        return echo(value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        if value.bit_length() > 200:  # too long to be worth printing (or to print at all)
            return f"an integer of {value.bit_length()} bits"
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    return f"a {type(value).__name__}"


def _expected(schema: dict[str, Any]) -> str:
    """What a JSON schema accepts, in words (its bounds included)."""
    options = schema.get("anyOf", [schema])
    said = " or ".join(_kind(option) for option in options if option.get("type") != "null")
    return said + (" (or null)" if len(options) > 1 and {"type": "null"} in options else "")


def _kind(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(value) for value in schema["enum"])
    kind = schema.get("type")
    if kind == "integer":
        return f"an integer from {schema['minimum']} to {schema['maximum']}"
    if kind == "string":
        return f"text of {_between(schema, 'Length')} characters"
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        return f"a list of {_between(schema, 'Items')} items, each {_kind(schema['items'])}"
    return str(kind)


def _between(schema: dict[str, Any], what: str) -> str:
    """``1 to 50`` or ``at most 50``, from a schema's ``min<what>``/``max<what>``."""
    least = schema.get(f"min{what}")
    most = schema[f"max{what}"]
    return f"at most {most}" if least is None else f"{least} to {most}"


def _refusal(tool: str, schema: dict[str, Any], error: ValidationError) -> str:
    """Why ``tool`` refused its arguments: for each argument out of bounds, the bounds
    its schema declares and the value given."""
    reasons: list[str] = []
    for problem in error.errors():
        name, *inner = problem["loc"]
        field = schema.get("properties", {}).get(str(name))
        if field is None:
            reasons.append(f"{name}: {problem['msg']}")
            continue
        for step in inner:  # into a list: the item's schema
            if isinstance(step, int):
                field = next(o for o in field.get("anyOf", [field]) if "items" in o)["items"]
                name = f"{name}[{step}]"
        if problem["type"] == "missing":
            reasons.append(f"{name} is required: {_expected(field)}")
        else:
            reasons.append(f"{name} must be {_expected(field)}; got {_given(problem['input'])}")
    return f"Error executing tool {tool}: " + "; ".join(dict.fromkeys(reasons))


class BoundedServer(MCPServer):
    """An ``MCPServer`` whose every answer and refusal fits the token budget, and
    whose refusals of out-of-bounds arguments name the bounds and the value given."""

    def __init__(self, answers: Answers, **settings: Any) -> None:
        super().__init__(**settings)
        self.answers = answers

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        """The tool's answer, cut to the budget; a refusal, said within it."""
        try:
            result = await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            cause = exc.__cause__
            text = str(exc)
            if isinstance(cause, ValidationError):
                schemas = {tool.name: tool.input_schema for tool in await self.list_tools()}
                text = _refusal(name, schemas[name], cause)
            raise ToolError(self.answers.cut(text)) from cause
        if isinstance(result, CallToolResult):
            for part in result.content:
                if isinstance(part, TextContent):
                    part.text = self.answers.cut(part.text)
            if result.structured_content and isinstance(
                result.structured_content.get("result"), str
            ):
                result.structured_content["result"] = self.answers.cut(
                    result.structured_content["result"]
                )
        return result


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
    if not MIN_BUDGET_TOKENS <= budget_tokens <= MAX_BUDGET_TOKENS:
        raise ValueError(
            f"budget_tokens must be from {MIN_BUDGET_TOKENS} to {MAX_BUDGET_TOKENS}, "
            f"got {budget_tokens}"
        )
    answers = Answers(budget_tokens)
    server = BoundedServer(answers, name="anamnesis", instructions=INSTRUCTIONS)
    configured: dict[str, Any] = {"user_id": scope.user_id, "agent_id": scope.agent_id}
    # A digest's budget: at least what holds a header and a line, at most the server's.
    Budget = Annotated[int, Field(ge=MIN_BUDGET_TOKENS, le=budget_tokens, strict=True)]  # noqa: N806

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
        content: Text,
        speaker: Name | None = None,
        role: Role | None = None,
        session_id: Id | None = None,
        event_time: Name | None = None,
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
    async def recall(ctx: Context, query: Query, limit: Hits = 10) -> str:
        """Search long-term memory. Returns up to `limit` (1-50) short previews, best
        first: id, date, speaker, snippet and score. Use `get_memory` with an id for
        the full text, or `get_context` for a dated digest of everything relevant."""
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
        ctx: Context, question: Query, budget_tokens: Budget = budget_tokens, profile: Flag = False
    ) -> str:
        """A dated, provenance-tagged digest of the memories relevant to `question`,
        ready to read before answering it, within `budget_tokens` (at most the
        server's limit, its default). `profile` starts it with what is known about the
        people the question is about."""
        context = await _tool(
            memory.context(question, budget_tokens=budget_tokens, profile=profile, **whose(ctx))
        )
        return context.text or "nothing relevant found in memory"

    @server.tool(annotations=read_only)
    async def get_memory(ctx: Context, memory_id: Id) -> str:
        """The full text of one memory, by the id `recall` or `remember` gave."""
        episode = await _tool(memory.get(memory_id, **whose(ctx)))
        head = f"[{episode.id}] {episode.event_time.isoformat()} {_who(episode)}"
        return answers.cut(f"{head}\n{episode.content}")

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def update_memory(ctx: Context, memory_id: Id, content: Text) -> str:
        """Replace a memory's text; the previous version is kept (see
        `memory_history`)."""
        episode = await _tool(memory.update(memory_id, content=content, **whose(ctx)))
        return f"updated [{episode.id}] to version {episode.version}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    async def forget_memory(ctx: Context, memory_id: Id) -> str:
        """Delete one memory, by id, with its versions and indexes."""
        counts = await _tool(memory.delete(memory_id, **whose(ctx)))
        return f"forgot [{memory_id}] ({counts.episodes} memory, {counts.versions} versions)"

    @server.tool(annotations=read_only)
    async def memory_history(ctx: Context, memory_id: Id) -> str:
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
        subject: Name | None = None,
        predicate: Name | None = None,
        as_of: Name | None = None,
        include_history: Flag = False,
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
    async def summaries(ctx: Context, session_id: Id | None = None) -> str:
        """Short summaries of past conversations, oldest first: each session's dates and
        most salient sentences (`session_id` for one session). Summaries come from
        `consolidate`, run by the memory's owner."""
        found = await _tool(memory.derived.summaries(session_id=session_id, **whose(ctx)))
        if not found:
            return "no session summaries yet"
        lines = [_summary_line(s) for s in found]
        return answers.fit(lines, "... {left} more sessions left out (token budget)")

    @server.tool(annotations=read_only)
    async def profile(ctx: Context, subject: Person = "user") -> str:
        """What is known about one person: `subject` is "user" or a name as the
        speakers go by. Current values first, then what they replaced and when, each
        with its fact id. Profiles come from `consolidate`, run by the memory's owner."""
        found = await _tool(memory.derived.profile(subject, **whose(ctx)))
        if found is None:
            known = await _tool(memory.derived.profiles(**whose(ctx)))
            names = ", ".join(p.subject for p in known) or "nobody yet"
            return answers.cut(f"no profile of {echo(subject)}; profiles known: {names}")
        lines = [f"Profile of {found.subject}:", *(_entry_line(e) for e in found.entries)]
        return answers.fit(lines, "... {left} more entries left out (token budget)")

    @server.tool(annotations=read_only)
    async def gate_decisions(ctx: Context, memory_ids: Ids) -> str:
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
        async def forget_all_memories(ctx: Context, confirm: Flag = False) -> str:
            """Delete every memory of this user. Pass confirm=true only when the user
            has asked for exactly that."""
            if not confirm:
                raise ToolError("nothing deleted: pass confirm=true to delete every memory")
            counts = await _tool(memory.delete_all(**whose(ctx)))
            return f"forgot every memory ({counts.episodes})"

    return server


def tool_names(*, forget_all: bool = False) -> list[str]:
    """The names of the tools a server offers, in the order it lists them (for the
    command's help). The tools reach the memory only when called, so none is opened."""
    server = build_server(cast(AsyncMemory, None), ServerScope("default"), forget_all=forget_all)
    return [tool.name for tool in asyncio.run(server.list_tools())]
