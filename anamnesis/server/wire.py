"""What the REST server and its clients agree on: the route of each verb, how errors
travel, and how arguments and results are written as JSON.

Both sides import this module, so a path or a status cannot drift between them. It
needs no server extras (the clients import it with only ``httpx`` and ``pydantic``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, is_dataclass
from datetime import date, datetime
from typing import Any
from urllib.parse import quote

from pydantic import TypeAdapter

from .. import errors
from ..consolidate.types import Profile, SessionSummary
from ..errors import AnamnesisError
from ..facts.types import ConsolidationReport
from ..ingest.normalise import check_episode_id
from ..store.base import Filters
from ..types import (
    Context,
    DeleteCounts,
    Episode,
    EpisodeVersion,
    Fact,
    ForgetReport,
    GateDecision,
    Hit,
    Page,
    Usage,
)

#: Version prefix of every route but the health check.
PREFIX = "/v1"


@dataclass(frozen=True, slots=True)
class Route:
    """Where a verb lives: its HTTP method and path, and whether its arguments travel
    as a JSON body (else in the query string; ``{episode_id}`` in the path)."""

    method: str
    path: str
    body: bool = False


#: Each verb's route; ``derived.*`` are ``Memory.derived``'s views.
ROUTES: dict[str, Route] = {
    "add": Route("POST", f"{PREFIX}/episodes", body=True),
    "add_many": Route("POST", f"{PREFIX}/episodes/batch", body=True),
    "get_all": Route("GET", f"{PREFIX}/episodes"),
    "delete_all": Route("DELETE", f"{PREFIX}/episodes"),
    "get": Route("GET", f"{PREFIX}/episodes/{{episode_id}}"),
    "update": Route("PATCH", f"{PREFIX}/episodes/{{episode_id}}", body=True),
    "delete": Route("DELETE", f"{PREFIX}/episodes/{{episode_id}}"),
    "history": Route("GET", f"{PREFIX}/episodes/{{episode_id}}/history"),
    "search": Route("POST", f"{PREFIX}/search", body=True),
    "context": Route("POST", f"{PREFIX}/context", body=True),
    "consolidate": Route("POST", f"{PREFIX}/consolidate", body=True),
    "facts": Route("GET", f"{PREFIX}/facts"),
    "fact_history": Route("GET", f"{PREFIX}/facts/history"),
    "stats": Route("GET", f"{PREFIX}/stats"),
    "capabilities": Route("GET", f"{PREFIX}/capabilities"),
    "export_jsonl": Route("GET", f"{PREFIX}/export"),
    "import_jsonl": Route("POST", f"{PREFIX}/import"),
    "forget": Route("POST", f"{PREFIX}/forget", body=True),
    "archive": Route("POST", f"{PREFIX}/archive", body=True),
    "restore": Route("POST", f"{PREFIX}/restore", body=True),
    "usage": Route("POST", f"{PREFIX}/usage", body=True),
    "gate_decisions": Route("POST", f"{PREFIX}/gate-decisions", body=True),
    "strength": Route("POST", f"{PREFIX}/strength", body=True),
    "decay": Route("POST", f"{PREFIX}/decay", body=True),
    "check": Route("POST", f"{PREFIX}/check"),
    "reindex": Route("POST", f"{PREFIX}/reindex"),
    "wait_indexed": Route("POST", f"{PREFIX}/wait-indexed"),
    "derived.summaries": Route("GET", f"{PREFIX}/derived/summaries"),
    "derived.profiles": Route("GET", f"{PREFIX}/derived/profiles"),
    "derived.profile": Route("GET", f"{PREFIX}/derived/profile"),
}
HEALTH_PATH = "/health"

#: HTTP status of each error, most specific first (a subclass before its base).
STATUS: tuple[tuple[type[AnamnesisError], int], ...] = (
    (errors.AuthenticationError, 401),
    (errors.PermissionDeniedError, 403),
    (errors.NotFoundError, 404),
    (errors.PayloadTooLargeError, 413),
    (errors.RequestTimeoutError, 408),
    (errors.InvalidInputError, 400),
    (errors.EmbedderMismatchError, 409),
    (errors.SchemaVersionError, 409),
    (errors.ConsolidationError, 409),
    (errors.IndexingError, 409),
    (errors.StoreLockedError, 423),
    (errors.StoreFullError, 507),
    (errors.ReadOnlyStoreError, 503),
    (errors.CorruptStoreError, 503),
    (errors.BackendUnavailableError, 503),
    (errors.EmbedderUnavailableError, 503),
    (errors.StoreError, 503),
)
#: The type an error body names when the server failed in a way it did not expect (500):
#: a bug, with the traceback in the server's log. Every other error body names an
#: ``AnamnesisError`` class.
INTERNAL_ERROR = "InternalError"


def status_of(exc: AnamnesisError) -> int:
    """The HTTP status that carries ``exc`` (500 for an error no row names)."""
    for kind, status in STATUS:
        if isinstance(exc, kind):
            return status
    return 500


def error_body(kind: str, message: str) -> dict[str, Any]:
    """The JSON body of every error response."""
    return {"error": {"type": kind, "message": message}}


def raise_error(status: int, body: object) -> None:
    """Raise the ``AnamnesisError`` an error response carries, as the server raised it
    (its class by name, its message); an answer that is not ours becomes a
    ``BackendUnavailableError`` that says what came back."""
    detail = body.get("error") if isinstance(body, dict) else None
    if isinstance(detail, dict) and isinstance(detail.get("message"), str):
        kind = getattr(errors, str(detail.get("type")), None)
        if not (isinstance(kind, type) and issubclass(kind, AnamnesisError)):
            kind = AnamnesisError
        raise kind(detail["message"])
    raise errors.BackendUnavailableError(
        f"the server answered {status} without an Anamnesis error: {str(body)[:200]}"
    )


def jsonable(value: Any) -> Any:
    """``value`` as JSON can carry it: times as ISO-8601 text, dataclasses (a
    ``ContextFact``, a ``DecayPolicy``) and mappings as objects, sequences as arrays;
    anything else as it is (the server checks it)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value))
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def query_value(value: Any) -> Any:
    """A query-string parameter: objects as JSON text, flags as ``true``/``false``."""
    value = jsonable(value)
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def path_of(route: Route, arguments: dict[str, Any]) -> str:
    """The route's path with its ``{episode_id}`` filled in (and taken out of
    ``arguments``)."""
    if "{episode_id}" not in route.path:
        return route.path
    episode_id = check_episode_id(arguments.pop("episode_id"))
    return route.path.replace("{episode_id}", quote(episode_id, safe=""))


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One verb's call as HTTP: method, path, and its query string or JSON body."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None


#: What each verb answers, as the client reads it back into the library's own types.
RESULTS: dict[str, Any] = {
    "add": list[Episode],
    "add_many": list[Episode],
    "get_all": Page,
    "delete_all": DeleteCounts,
    "get": Episode,
    "update": Episode,
    "delete": DeleteCounts,
    "history": list[EpisodeVersion],
    "search": list[Hit],
    "context": Context,
    "consolidate": ConsolidationReport,
    "facts": list[Fact],
    "fact_history": list[Fact],
    "stats": dict[str, Any],
    "capabilities": dict[str, Any],
    "forget": ForgetReport,
    "archive": list[str],
    "restore": list[str],
    "usage": dict[str, Usage],
    "gate_decisions": dict[str, GateDecision],
    "strength": dict[str, float],
    "decay": list[str],
    "check": list[str],
    "reindex": int,
    "wait_indexed": bool,
    "import_jsonl": int,
    "derived.summaries": list[SessionSummary],
    "derived.profiles": list[Profile],
    "derived.profile": Profile | None,
}
_ADAPTERS: dict[str, TypeAdapter[Any]] = {}
#: Arguments that stay with the caller: the method's own object, progress callbacks.
_LOCAL = frozenset({"self", "progress"})


def request_for(verb: str, arguments: Mapping[str, Any]) -> WireRequest:
    """The HTTP request that calls ``verb`` with ``arguments`` (a method's ``locals()``:
    ``self`` and unset values are left out, the server applies the same defaults)."""
    route = ROUTES[verb]
    sent = {k: v for k, v in arguments.items() if k not in _LOCAL and v is not None}
    path = path_of(route, sent)
    if isinstance(sent.get("filters"), Filters):
        sent["filters"] = _filters_dict(sent["filters"])
    if "messages" in sent and not isinstance(sent["messages"], str | bytes | Mapping):
        sent["messages"] = list(sent["messages"])
    if route.body:
        return WireRequest(route.method, path, json=jsonable(sent))
    return WireRequest(route.method, path, params={k: query_value(v) for k, v in sent.items()})


def decode(verb: str, payload: Any) -> Any:
    """A verb's JSON answer as the types ``Memory`` returns."""
    adapter = _ADAPTERS.get(verb)
    if adapter is None:
        adapter = _ADAPTERS[verb] = TypeAdapter(RESULTS[verb])
    return adapter.validate_python(payload)


def _filters_dict(filters: Filters) -> dict[str, Any]:
    if filters.recorded_before is not None:
        raise errors.InvalidInputError("recorded_before is not a filter over HTTP: pass as_of")
    return {k: v for k, v in asdict(filters).items() if v is not None and v != {}}


def export_count(line: str) -> int:
    """1 for an episode line of an export, 0 for another; raises the error an export
    that failed midway ended with."""
    record = json.loads(line)
    if record.get("type") == "error":
        kind = getattr(errors, str(record.get("error")), AnamnesisError)
        raise kind(f"the export stopped midway: {record.get('message')}")
    return 1 if record.get("type") == "episode" else 0


def import_body(lines: Iterable[str]) -> bytes:
    """The lines of an export as one JSONL request body."""
    encoded = (
        line if isinstance(line, bytes) else str(line).encode("utf-8", "surrogatepass")
        for line in lines
    )
    return b"".join(line.rstrip(b"\n") + b"\n" for line in encoded)
