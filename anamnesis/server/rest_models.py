"""The REST server's request models: each verb's arguments, named and typed as
``Memory``'s keywords are, so a request is a call (``memory.verb(**arguments)``).

The models check the JSON shape (a string where a string goes, no unknown field)
and bound every integer, so the OpenAPI document shows each number's range and no
number too large for the store reaches it; what a value means (an empty text, a
malformed time) is checked by ``Memory`` itself, so every surface refuses the same
input with the same error.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter

from ..context import DEFAULT_BUDGET_TOKENS, DEFAULT_NEIGHBOUR_HITS, MIN_BUDGET_TOKENS
from ..decay import DecayPolicy
from ..errors import InvalidInputError
from ..memory.reads import CONTEXT_HITS, MAX_LIMIT
from ..types import ContextFact


def _from_json(kind: Any) -> BeforeValidator:
    """Read a library dataclass from its JSON object (strict mode takes only an
    instance, which JSON cannot carry); a bad object is a validation error."""
    adapter: TypeAdapter[Any] = TypeAdapter(kind)
    return BeforeValidator(adapter.validate_python)


#: The largest count or offset taken where ``Memory`` sets no bound of its own: the
#: largest integer every JSON reader holds exactly (2**53 - 1), far below SQL's 64 bits.
MAX_COUNT = 2**53 - 1
#: Items or hits a page: the verbs' own bound.
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT)]
#: A count with no bound of its own (facts a page, episodes a consolidation reads).
Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Offset = Annotated[int, Field(ge=0, le=MAX_COUNT)]


def _json_object(text: str | None) -> dict[str, Any] | None:
    """A query parameter that carries a JSON object, read into one."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidInputError(f"must be a JSON object: {exc}") from exc
    if not isinstance(value, dict):
        raise InvalidInputError(f"must be a JSON object, not {type(value).__name__}")
    return value


Policy = Annotated[DecayPolicy | None, _from_json(DecayPolicy | None)]
Facts = Annotated[list[ContextFact] | None, _from_json(list[ContextFact] | None)]
#: A time as ``Memory`` takes it over the wire: ISO-8601 text or epoch seconds.
Time = str | float | None
Message = dict[str, Any] | str


class Arguments(BaseModel):
    """Arguments of one verb, from a JSON body: unknown fields are refused, and JSON
    types are not coerced (``"5"`` is not a limit)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    def arguments(self) -> dict[str, Any]:
        """The fields as keyword arguments, values as validated (not re-serialised)."""
        return dict(self)


class UserScope(Arguments):
    """Whose memory (a user key may name only its own user; an admin key any)."""

    user_id: str | None = None
    agent_id: str | None = None


class Scoped(UserScope):
    """A scope down to a session."""

    session_id: str | None = None


class MessageDefaults(Scoped):
    """Defaults each message may override."""

    role: str | None = None
    speaker: str | None = None
    event_time: Time = None
    metadata: dict[str, Any] | None = None
    modality: str | None = None


class AddArguments(MessageDefaults):
    """``Memory.add``: a string, a message object or a list of them, stored atomically."""

    content: Message | list[Message]


class AddManyArguments(MessageDefaults):
    """``Memory.add_many``: bulk messages, in transactions of 512 unless ``atomic``."""

    messages: list[Message]
    atomic: bool = False


class UpdateArguments(Scoped):
    """``Memory.update``: new content and/or metadata; the prior version is kept."""

    content: str | None = None
    metadata: dict[str, Any] | None = None


class SearchArguments(Scoped):
    """``Memory.search``."""

    query: str
    limit: Limit = 10
    filters: dict[str, Any] | None = None
    explain: bool = False
    now: Time = None
    as_of: Time = None
    include_archive: bool = False


class ContextArguments(Scoped):
    """``Memory.context``: a dated, provenance-tagged context within a token budget."""

    query: str
    budget_tokens: Annotated[int, Field(ge=MIN_BUDGET_TOKENS, le=MAX_COUNT)] = DEFAULT_BUDGET_TOKENS
    filters: dict[str, Any] | None = None
    now: Time = None
    limit: Limit = CONTEXT_HITS
    neighbour_hits: Annotated[int, Field(ge=0, le=MAX_LIMIT)] = DEFAULT_NEIGHBOUR_HITS
    facts: Facts = None
    profile: bool = False


class ConsolidateArguments(Scoped):
    """``Memory.consolidate``."""

    limit: Count | None = None
    extractor: str | None = None
    summaries: str | None = None


class Selected(Scoped):
    """Which episodes a lifecycle verb acts on: every condition given must hold."""

    episode_ids: list[str] | str | None = None
    event_after: Time = None
    event_before: Time = None
    containing: str | None = None


class ForgetArguments(Selected):
    """``Memory.forget``: complete erasure; ``dry_run`` reports and changes nothing."""

    dry_run: bool = False


class EpisodeIds(Scoped):
    """``Memory.usage`` and ``Memory.gate_decisions``: the episodes to read about."""

    episode_ids: list[str] | str


class StrengthArguments(EpisodeIds):
    """``Memory.strength``: where each episode stands on the forgetting curve."""

    now: Time = None
    policy: Policy = None


class DecayArguments(Scoped):
    """``Memory.decay``: archive what has faded below the policy's threshold."""

    now: Time = None
    policy: Policy = None
    dry_run: bool = False


class QueryArguments(Arguments):
    """Arguments from a query string, where every value arrives as text: numbers and
    flags are read from it. List it last among a model's bases: pydantic merges the
    bases' configurations in order."""

    model_config = ConfigDict(strict=False)


class ListArguments(Scoped, QueryArguments):
    """``Memory.get_all``; ``filters`` travels as JSON text and is read into the
    object ``Memory`` takes (the document shows it as the string it is on the wire)."""

    limit: Limit = Field(100, description="Items per page.")
    offset: Offset = Field(0, description="Where the page starts; the answer's next_offset.")
    filters: Annotated[str | None, AfterValidator(_json_object)] = Field(
        None,
        description="JSON object with keys among role, not_role, speaker, modality, "
        "event_after, event_before, metadata.",
    )


class FactsArguments(UserScope, QueryArguments):
    """``Memory.facts``."""

    subject: str | None = None
    predicate: str | None = None
    as_of: str | None = None
    include_superseded: bool = False
    limit: Count = 100


class FactHistoryArguments(UserScope, QueryArguments):
    """``Memory.fact_history``."""

    subject: str = "user"
    predicate: str
    as_of: str | None = None


class SummariesArguments(Scoped, QueryArguments):
    """``Memory.derived.summaries``: the session summaries of a scope."""


class ProfilesArguments(UserScope, QueryArguments):
    """``Memory.derived.profiles``: every profile of a scope."""


class ProfileArguments(UserScope, QueryArguments):
    """``Memory.derived.profile``: one person's profile (``user`` or a speaker's name)."""

    subject: str = "user"


class UserArguments(QueryArguments):
    """``stats`` and ``export_jsonl``: one user (a user key's own), or the whole store
    (an admin key, naming no user)."""

    user_id: str | None = None


class ImportArguments(UserScope, QueryArguments):
    """``import_jsonl``: the scope every record moves into (a user key's own)."""


class Health(BaseModel):
    """``GET /health``: the server answers, and whether its store is sound."""

    status: str
    version: str
    store_health: str


class EpisodeScope(Scoped, QueryArguments):
    """The scope of a verb on one episode (get, history, delete), or of delete_all."""
