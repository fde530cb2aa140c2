"""The REST server: every ``Memory`` verb as an HTTP endpoint, on FastAPI.

A thin shell over ``AsyncMemory``: an endpoint reads its arguments (typed by
``rest_models``), narrows their scope to what the caller's key may reach, and
awaits the verb. What the server adds is only what HTTP needs:

* **Keys.** Once the key file holds a key, every request but ``/health`` presents
  one (``Authorization: Bearer anm_...`` or ``X-API-Key``). A user key reaches its
  own user only (and its own agent, if it names one), whatever the request says;
  naming another user is 403, another user's episode id is 404 (it is not in the
  scope the query runs in). An admin key reaches every user.
* **Bounds** (``ServerLimits``). A request body over ``max_body_bytes`` is refused
  (413) before any of it is parsed, and one that is not whole within
  ``body_timeout`` gets 408; the request head's time and the connections served at
  once are bounded by the connection layer (``connections``). Every number a request
  carries is bounded in its model (``rest_models``), so the OpenAPI document shows
  the bounds; answers are bounded by the verbs' own limits (at most 1,000 hits or
  items a page).
* **Errors** are JSON ``{"error": {"type", "message"}}`` with the status of the
  ``AnamnesisError`` (``wire.STATUS``); a malformed request is 400
  ``InvalidInputError``, an unexpected failure 500 ``InternalError``.
* **Logs.** One JSON line per request on the ``anamnesis.server`` logger: method,
  path, status, milliseconds, key id. No query string, body or memory text.

No interactive docs page is served (it would load scripts from a CDN); the OpenAPI
document is at ``/openapi.json``.
"""

import asyncio
import json
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, RedirectResponse, StreamingResponse
from starlette.exceptions import HTTPException

from ..consolidate.types import Profile, SessionSummary
from ..errors import (
    AnamnesisError,
    AuthenticationError,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RequestTimeoutError,
)
from ..facts.types import ConsolidationReport
from ..ingest.normalise import as_text
from ..memory.async_memory import AsyncMemory
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
from ..version import __version__
from . import DEFAULT_LIMITS, ServerLimits
from .auth import Caller, KeyCheck, authenticate
from .rest_arguments import (
    AddArguments,
    AddManyArguments,
    ArchiveArguments,
    CheckArguments,
    ConsolidateArguments,
    ContextArguments,
    DecayArguments,
    DeleteAllArguments,
    DeleteArguments,
    ExportJsonlArguments,
    FactHistoryArguments,
    FactsArguments,
    ForgetArguments,
    GateDecisionsArguments,
    GetAllArguments,
    GetArguments,
    HistoryArguments,
    ImportJsonlArguments,
    ProfileArguments,
    ProfilesArguments,
    ReindexArguments,
    RestoreArguments,
    SearchArguments,
    StatsArguments,
    StrengthArguments,
    SummariesArguments,
    UpdateArguments,
    UsageArguments,
    WaitIndexedArguments,
)
from .rest_models import Health
from .ui.login import LocalLogin
from .ui.pages import build_ui
from .wire import HEALTH_PATH, INTERNAL_ERROR, ROUTES, error_body, status_of

log = logging.getLogger("anamnesis.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def build_app(
    memory: AsyncMemory,
    keys: KeyCheck | None = None,
    *,
    limits: ServerLimits = DEFAULT_LIMITS,
    cors_origins: tuple[str, ...] = (),
    login: LocalLogin | None = None,
) -> FastAPI:
    """The REST application serving ``memory``, with the memory inspector's pages
    under ``/ui``. ``keys`` None serves everyone as an admin (the CLI allows that on
    a loopback address only); with a key file, keys are required as soon as it holds
    one. ``login`` (``anamnesis serve --open``, passed as ``keys`` too) adds a
    one-time login link."""
    app = FastAPI(
        title="Anamnesis",
        version=__version__,
        description="Long-term memory for LLM agents: every Memory verb over HTTP.",
        docs_url=None,
        redoc_url=None,
    )
    _add_error_handlers(app)

    async def caller(request: Request) -> Caller:
        key = authenticate(keys, request.headers)
        if key is not None:
            request.state.key_id = key.id
        return Caller(key)

    Who = Annotated[Caller, Depends(caller)]

    @app.get(HEALTH_PATH, tags=["server"])
    async def health() -> Health:
        """The server answers; ``store_health`` is ``ok`` or the damage found."""
        store_health = memory.capabilities["store_health"]
        status = "ok" if store_health == "ok" else "degraded"
        return Health(status=status, version=__version__, store_health=store_health)

    @app.get(ROUTES["capabilities"].path, tags=["server"])
    async def capabilities(who: Who) -> dict[str, Any]:
        """What is active: backend, embedder, search channels and stages, store health."""
        return memory.capabilities

    @app.post(ROUTES["add"].path, status_code=201, tags=["episodes"])
    async def add(arguments: AddArguments, who: Who) -> list[Episode]:
        """Store a string, a message or a list of messages verbatim, all or none."""
        return await memory.add(**who.scoped(arguments.arguments()))

    @app.post(ROUTES["add_many"].path, status_code=201, tags=["episodes"])
    async def add_many(arguments: AddManyArguments, who: Who) -> list[Episode]:
        """Bulk-store messages (a conversation, an import)."""
        return await memory.add_many(**who.scoped(arguments.arguments()))

    @app.get(ROUTES["get_all"].path, tags=["episodes"])
    async def get_all(arguments: Annotated[GetAllArguments, Query()], who: Who) -> Page:
        """A page of the scope's episodes in event-time order; ``next_offset`` is the
        next page's ``offset`` (null on the last page)."""
        return await memory.get_all(**who.scoped(arguments.arguments()))

    @app.delete(ROUTES["delete_all"].path, tags=["episodes"])
    async def delete_all(
        arguments: Annotated[DeleteAllArguments, Query()], who: Who
    ) -> DeleteCounts:
        """Delete everything in a scope (``user_id`` must be named, or be the key's)."""
        return await memory.delete_all(**who.scoped(arguments.arguments()))

    @app.get(ROUTES["get"].path, tags=["episodes"])
    async def get(
        episode_id: str, arguments: Annotated[GetArguments, Query()], who: Who
    ) -> Episode:
        """One episode by id (404 when it is not in the scope)."""
        return await memory.get(episode_id, **who.scoped(arguments.arguments()))

    @app.patch(ROUTES["update"].path, tags=["episodes"])
    async def update(episode_id: str, arguments: UpdateArguments, who: Who) -> Episode:
        """Change an episode's content and/or metadata; the prior version is kept."""
        return await memory.update(episode_id, **who.scoped(arguments.arguments()))

    @app.delete(ROUTES["delete"].path, tags=["episodes"])
    async def delete(
        episode_id: str, arguments: Annotated[DeleteArguments, Query()], who: Who
    ) -> DeleteCounts:
        """Delete one episode with its index rows and prior versions."""
        return await memory.delete(episode_id, **who.scoped(arguments.arguments()))

    @app.get(ROUTES["history"].path, tags=["episodes"])
    async def history(
        episode_id: str, arguments: Annotated[HistoryArguments, Query()], who: Who
    ) -> list[EpisodeVersion]:
        """Every version of an episode, oldest first, ending with the current one; each
        with the time it was written (``recorded_at``) and replaced (``changed_at``)."""
        return await memory.history(episode_id, **who.scoped(arguments.arguments()))

    @app.post(ROUTES["search"].path, tags=["recall"])
    async def search(arguments: SearchArguments, who: Who) -> list[Hit]:
        """The episodes that best answer ``query``, with their neighbouring turns."""
        return await memory.search(**who.scoped(arguments.arguments()))

    @app.post(ROUTES["context"].path, tags=["recall"])
    async def context(arguments: ContextArguments, who: Who) -> Context:
        """A compact, dated, provenance-tagged context for a reader LLM, within a budget."""
        return await memory.context(**who.scoped(arguments.arguments()))

    @app.post(ROUTES["consolidate"].path, tags=["facts"])
    async def consolidate(arguments: ConsolidateArguments, who: Who) -> ConsolidationReport:
        """Extract facts from the scope's episodes that no consolidation has read yet."""
        return await memory.consolidate(**who.scoped(arguments.arguments()))

    @app.get(ROUTES["facts"].path, tags=["facts"])
    async def facts(arguments: Annotated[FactsArguments, Query()], who: Who) -> list[Fact]:
        """Facts of the scope, per slot the newest value first (``as_of``: then)."""
        return await memory.facts(**who.scoped(arguments.arguments()))

    @app.get(ROUTES["fact_history"].path, tags=["facts"])
    async def fact_history(
        arguments: Annotated[FactHistoryArguments, Query()], who: Who
    ) -> list[Fact]:
        """Every value a slot has held, oldest first."""
        return await memory.fact_history(**who.scoped(arguments.arguments()))

    @app.get(ROUTES["derived.summaries"].path, tags=["derived"])
    async def summaries(
        arguments: Annotated[SummariesArguments, Query()], who: Who
    ) -> list[SessionSummary]:
        """The scope's session summaries (``consolidate`` builds them), oldest first."""
        return await memory.derived.summaries(**who.scoped(arguments.arguments()))

    @app.get(ROUTES["derived.profiles"].path, tags=["derived"])
    async def profiles(arguments: Annotated[ProfilesArguments, Query()], who: Who) -> list[Profile]:
        """Every profile of the scope: the user's, and each named speaker's."""
        return await memory.derived.profiles(**who.scoped(arguments.arguments()))

    @app.get(ROUTES["derived.profile"].path, tags=["derived"])
    async def profile(arguments: Annotated[ProfileArguments, Query()], who: Who) -> Profile | None:
        """The profile of one person (``user`` or a speaker's name), or null."""
        return await memory.derived.profile(**who.scoped(arguments.arguments()))

    @app.get(ROUTES["stats"].path, tags=["server"])
    async def stats(arguments: Annotated[StatsArguments, Query()], who: Who) -> dict[str, Any]:
        """Counts for one user (a user key's own); with an admin key naming no user, the
        whole store's, with where it is and its size."""
        return await memory.stats(**who.scoped(arguments.arguments()))

    @app.get(
        ROUTES["export_jsonl"].path,
        tags=["portability"],
        response_class=StreamingResponse,
        responses={200: {"content": {"application/x-ndjson": {}}}},
    )
    async def export_jsonl(
        arguments: Annotated[ExportJsonlArguments, Query()], who: Who
    ) -> StreamingResponse:
        """The store (or one user's part; a user key's own) as JSONL that import restores."""
        scoped = who.scoped(arguments.arguments())
        return StreamingResponse(
            _export(memory, scoped["user_id"]), media_type="application/x-ndjson"
        )

    @app.post(
        ROUTES["import_jsonl"].path,
        tags=["portability"],
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
            }
        },
    )
    async def import_jsonl(
        request: Request, arguments: Annotated[ImportJsonlArguments, Query()], who: Who
    ) -> int:
        """Restore an export (checked whole before anything is written); a user key's
        import goes into its own scope, whatever the file names."""
        scoped = who.scoped(arguments.arguments())
        text = as_text(await request.body(), "the request body")
        return await memory.import_jsonl(text.splitlines(keepends=True), **scoped)

    @app.post(ROUTES["forget"].path, tags=["lifecycle"])
    async def forget(arguments: ForgetArguments, who: Who) -> ForgetReport:
        """Erase episodes completely (ids, session, event-time range, exact text; with
        no condition the whole scope); ``dry_run`` reports what would go."""
        return await memory.forget(**who.scoped(arguments.arguments()))

    @app.post(ROUTES["archive"].path, tags=["lifecycle"])
    async def archive(arguments: ArchiveArguments, who: Who) -> list[str]:
        """Move episodes out of the hot indexes into the archive; the ids moved."""
        return await memory.archive(**who.scoped(arguments.arguments()))

    @app.post(ROUTES["restore"].path, tags=["lifecycle"])
    async def restore(arguments: RestoreArguments, who: Who) -> list[str]:
        """Bring archived episodes back exactly; the ids restored."""
        return await memory.restore(**who.scoped(arguments.arguments()))

    @app.post(ROUTES["usage"].path, tags=["lifecycle"])
    async def usage(arguments: UsageArguments, who: Who) -> dict[str, Usage]:
        """How often each episode was retrieved by a search and read by id."""
        return await memory.usage(**who.scoped(arguments.arguments()))

    @app.post(ROUTES["gate_decisions"].path, tags=["lifecycle"])
    async def gate_decisions(
        arguments: GateDecisionsArguments, who: Who
    ) -> dict[str, GateDecision]:
        """What the encoding gate decided about each episode, with its signals."""
        return await memory.gate_decisions(**who.scoped(arguments.arguments()))

    @app.post(ROUTES["strength"].path, tags=["lifecycle"])
    async def strength(arguments: StrengthArguments, who: Who) -> dict[str, float]:
        """Each episode's strength on the forgetting curve at ``now``."""
        return await memory.strength(**who.scoped(arguments.arguments()))

    @app.post(ROUTES["decay"].path, tags=["lifecycle"])
    async def decay(arguments: DecayArguments, who: Who) -> list[str]:
        """Archive the scope's episodes that have faded below the threshold."""
        return await memory.decay(**who.scoped(arguments.arguments()))

    @app.post(ROUTES["check"].path, tags=["server"])
    async def check(arguments: Annotated[CheckArguments, Query()], who: Who) -> list[str]:
        """A full check of the store (admin): the problems found, empty when healthy."""
        who.require_admin("check")
        return await memory.check(**arguments.arguments())

    @app.post(ROUTES["reindex"].path, tags=["server"])
    async def reindex(arguments: Annotated[ReindexArguments, Query()], who: Who) -> int:
        """Re-embed every episode from its stored text (admin); the number re-embedded."""
        who.require_admin("reindex")
        return await memory.reindex(**arguments.arguments())

    @app.post(ROUTES["wait_indexed"].path, tags=["server"])
    async def wait_indexed(arguments: Annotated[WaitIndexedArguments, Query()], who: Who) -> bool:
        """Wait until no episode waits for its vector (background indexing), at most
        ``timeout`` seconds; false on timeout."""
        return await memory.wait_indexed(**arguments.arguments())

    @app.get("/ui", include_in_schema=False)
    async def inspector() -> RedirectResponse:
        return RedirectResponse("/ui/", 307)

    app.mount("/ui", build_ui(memory, keys, login=login))

    if cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type"],
        )
    app.add_middleware(Guard, limits=limits)  # outermost: added last
    return app


#: The error an HTTP status raised by the framework itself (no such route, a body that
#: is not JSON) is reported as; any other 4xx is bad input.
_FRAMEWORK_ERRORS: dict[int, type[AnamnesisError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    413: PayloadTooLargeError,
}


def _add_error_handlers(app: FastAPI) -> None:
    async def anamnesis_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, AnamnesisError)
        status = status_of(exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse(error_body(type(exc).__name__, str(exc)), status, headers=headers)

    async def malformed(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = [
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()[:5]
        ]
        return JSONResponse(error_body("InvalidInputError", "; ".join(problems)), 400)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        status = exc.status_code
        kind = _FRAMEWORK_ERRORS.get(status, InvalidInputError if status < 500 else None)
        message = str(exc.detail)
        if exc.__cause__ is not None and status == 400:  # a body that could not be parsed
            cause = exc.__cause__
            message = (
                f"the request body is not JSON this server can read "
                f"({type(cause).__name__}: {str(cause)[:200]}): send UTF-8 JSON"
            )
        name = kind.__name__ if kind is not None else INTERNAL_ERROR
        return JSONResponse(error_body(name, message), status, headers=exc.headers)

    async def internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse(error_body(INTERNAL_ERROR, "internal error: see the server log"), 500)

    app.add_exception_handler(AnamnesisError, anamnesis_error)
    app.add_exception_handler(RequestValidationError, malformed)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, internal)


async def _export(memory: AsyncMemory, user_id: str | None) -> AsyncIterator[str]:
    """The export's lines as the store yields them, with the export running on a
    reader thread; an export that fails midway ends with an ``error`` line (which an
    import refuses), and a client that goes away stops it."""
    lines: queue.Queue[str | None] = queue.Queue(maxsize=256)
    gone = threading.Event()

    def put(item: str | None) -> bool:
        """Queue ``item``, waiting while the queue is full; False once the client is gone."""
        while not gone.is_set():
            try:
                lines.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    class Lines:
        def write(self, text: str) -> int:
            if not put(text):
                raise InvalidInputError("the client went away before the export ended")
            return len(text)

    async def produce() -> None:
        try:
            await memory.export_jsonl(Lines(), user_id=user_id)  # type: ignore[arg-type]
        except AnamnesisError as exc:
            error = json.dumps({"type": "error", "error": type(exc).__name__, "message": str(exc)})
            await asyncio.to_thread(put, error + "\n")
        finally:
            await asyncio.to_thread(put, None)

    producer = asyncio.create_task(produce())
    try:
        while True:
            batch = [await asyncio.to_thread(lines.get)]
            while batch[-1] is not None:  # what is ready, without another thread hop
                try:
                    batch.append(lines.get_nowait())
                except queue.Empty:
                    break
            text = "".join(line for line in batch if line is not None)
            if text:
                yield text
            if batch[-1] is None:
                return
    finally:
        gone.set()
        await producer


class Guard:
    """ASGI middleware: reads the whole body before the app sees it, refusing one over
    the size limit (413) or not whole within the body timeout (408); writes one log
    line per request."""

    def __init__(self, app: Any, limits: ServerLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        state = scope.setdefault("state", {})
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            try:
                async with asyncio.timeout(self.limits.body_timeout):
                    body = await self._body(scope, receive)
            except TimeoutError:
                await _refuse(sending, RequestTimeoutError(self._late()))
                return
            except PayloadTooLargeError as exc:
                await _refuse(sending, exc)
                return
            if body is None:  # the client went away: nothing to answer, nothing to run
                status = 499
                return
            await self.app(scope, _replay(body, receive), sending)
        finally:
            record = {
                "method": scope["method"],
                "path": scope["path"],
                "status": status,
                "ms": round((time.perf_counter() - started) * 1000, 2),
                "key": state.get("key_id"),
            }
            log.info(json.dumps(record))

    async def _body(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole body; None when the client disconnects before its end;
        PayloadTooLargeError once it passes the limit."""
        declared = dict(scope["headers"]).get(b"content-length")
        if (
            declared is not None
            and declared.isdigit()
            and int(declared) > self.limits.max_body_bytes
        ):
            raise PayloadTooLargeError(self._too_large())
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limits.max_body_bytes:
                raise PayloadTooLargeError(self._too_large())
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _too_large(self) -> str:
        return (
            f"the request body is over this server's limit of {self.limits.max_body_bytes} "
            "bytes: send less at a time (add_many in batches); nothing was stored"
        )

    def _late(self) -> str:
        return (
            f"the request body did not arrive whole within this server's limit of "
            f"{self.limits.body_timeout:g} s: send it at once, or less at a time; "
            "nothing was stored"
        )


async def _refuse(send: Send, exc: AnamnesisError) -> None:
    """Answer ``exc`` before the body is read, closing the connection (the rest of
    the body may still be on its way)."""
    response = JSONResponse(
        error_body(type(exc).__name__, str(exc)), status_of(exc), headers={"Connection": "close"}
    )
    await response({"type": "http"}, _nothing, send)


async def _nothing() -> Message:
    return {"type": "http.disconnect"}


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
