"""The memory inspector's pages: server-rendered HTML under ``/ui`` over the verbs of
``AsyncMemory``, as thin as the REST endpoints (each page awaits verbs and hands
their answers to a template; ``views`` only shapes them for drawing).

Access is REST's: the key in the login cookie is checked on every request and
narrows every verb's scope (``auth.Caller``). Every change is a POST carrying a CSRF
token (``login``). Pages load no script at all, from anywhere; the
Content-Security-Policy says so to the browser, and Jinja escapes every value, so a
stored ``<script>`` is shown as text.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from ...errors import AnamnesisError, AuthenticationError, InvalidInputError, PermissionDeniedError
from ...memory.async_memory import AsyncMemory
from ...version import __version__
from ..auth import Caller, KeyCheck, authenticate
from ..keys import KeyStore
from ..wire import status_of
from . import views
from .login import (
    COOKIE_PATH,
    CSRF_FIELD,
    KEY_COOKIE,
    NONCE_COOKIE,
    Csrf,
    LocalLogin,
)

HERE = Path(__file__).parent

#: No script, style or image from anywhere but this server; no script at all.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}

#: Turns on one page of a session's timeline.
TURNS_PAGE = 50
#: Episodes read for one page of the scope view (grouped into sessions).
SCOPE_PAGE = 500
#: Hits a search shows.
SEARCH_HITS = 20
#: Summaries on one page.
SUMMARIES_PAGE = 20
#: Facts the facts page lists.
FACTS_LIMIT = 200
#: Episode ids a forget preview lists by name (it counts them all).
PREVIEW_IDS = 50


@dataclass(frozen=True)
class Visitor:
    """The browser asking: its key (checked), and its CSRF nonce and token."""

    caller: Caller
    key: str | None
    nonce: str
    fresh_nonce: bool
    csrf: str

    @property
    def fixed_user(self) -> str | None:
        """The one user a user key reaches (None for an admin)."""
        key = self.caller.key
        return key.user_id if key is not None else None

    @property
    def fixed_agent(self) -> str | None:
        """The one agent an agent key reaches."""
        key = self.caller.key
        return key.agent_id if key is not None else None

    @property
    def is_admin(self) -> bool:
        return self.caller.key is None or self.caller.key.is_admin


def build_ui(
    memory: AsyncMemory, keys: KeyCheck | None, *, login: LocalLogin | None = None
) -> ASGIApp:
    """The inspector's application, to mount at ``/ui``. ``keys`` as for REST; ``login``
    adds the one-time link of ``anamnesis serve --open``."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    csrf = Csrf()
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.globals.update(url=views.url, version=__version__, CSRF_FIELD=CSRF_FIELD)
    env.filters["when"] = views.when
    default_user = memory.memory.default_user
    channels = list(memory.capabilities["search_channels"])

    # -- who is asking ---------------------------------------------------------------

    def visitor(request: Request) -> Visitor:
        """The browser's key, checked as REST checks it (AuthenticationError: log in)."""
        key = request.cookies.get(KEY_COOKIE) or None
        found = authenticate(keys, {"authorization": f"Bearer {key}"} if key else None)
        if found is not None:
            request.state.key_id = found.id
        else:
            key = None
        nonce = request.cookies.get(NONCE_COOKIE)
        fresh = not nonce or len(nonce) > 64
        if fresh:
            nonce = csrf.new_nonce()
        assert nonce is not None
        return Visitor(Caller(found), key, nonce, fresh, csrf.token(nonce, key))

    async def posted(request: Request) -> tuple[Visitor, FormData]:
        """The visitor and form of a POST whose CSRF token is right."""
        who = visitor(request)
        form = await request.form()
        if who.fresh_nonce or not csrf.valid(who.nonce, who.key, form.get(CSRF_FIELD)):
            raise PermissionDeniedError(
                "this form's security token is missing or stale (it is tied to this "
                "browser and to the server's run): reload the page and submit again; "
                "nothing was changed"
            )
        return who, form

    def scope(
        who: Visitor, user: str | None, agent: str | None, session: str | None = None
    ) -> dict[str, Any]:
        """The verb arguments for a page's scope, narrowed to what the key reaches."""
        arguments: dict[str, Any] = {"user_id": user or who.fixed_user or default_user}
        arguments["agent_id"] = agent or None
        if session:
            arguments["session_id"] = session
        return who.caller.scoped(arguments)

    def render(
        request: Request, who: Visitor, template: str, status: int = 200, **values: Any
    ) -> HTMLResponse:
        here = values.pop("here", {})
        html = env.get_template(template).render(who=who, here=here, **values)
        response = HTMLResponse(html, status)
        if who.fresh_nonce:
            _set_cookie(request, response, NONCE_COOKIE, who.nonce)
        return response

    def here_of(arguments: dict[str, Any]) -> dict[str, Any]:
        """The scope a page is about, for its links and its header."""
        return {"user": arguments.get("user_id"), "agent": arguments.get("agent_id")}

    # -- login -----------------------------------------------------------------------

    @app.get("/login")
    async def login_page(request: Request, once: str | None = None) -> Response:
        if once is not None:
            secret = login.redeem(once) if login is not None else None
            if secret is None:
                who = visitor_without_key(request)
                message = "this login link was used already or is not valid: paste a key"
                return render(request, who, "login.html", 401, error=message)
            response = RedirectResponse("/ui/", 303)
            _set_cookie(request, response, KEY_COOKIE, secret)
            _set_cookie(request, response, NONCE_COOKIE, csrf.new_nonce())
            return response
        if keys is None or not keys.required():
            return RedirectResponse("/ui/", 303)  # this server needs no key
        who = visitor_without_key(request)
        return render(request, who, "login.html", error=None)

    def visitor_without_key(request: Request) -> Visitor:
        nonce = request.cookies.get(NONCE_COOKIE)
        fresh = not nonce or len(nonce) > 64
        nonce = csrf.new_nonce() if fresh else nonce
        assert nonce is not None
        return Visitor(Caller(None), None, nonce, fresh, csrf.token(nonce, None))

    @app.post("/login")
    async def log_in(request: Request) -> Response:
        who = visitor_without_key(request)
        form = await request.form()
        if who.fresh_nonce or not csrf.valid(who.nonce, None, form.get(CSRF_FIELD)):
            return render(request, who, "login.html", 403, error="the form was stale: try again")
        presented = str(form.get("key") or "").strip()
        if keys is None or not keys.required():
            return RedirectResponse("/ui/", 303)
        if not presented or keys.authenticate(presented) is None:
            error = "that key is not valid: unknown or revoked"
            return render(request, who, "login.html", 401, error=error)
        response = RedirectResponse("/ui/", 303)
        _set_cookie(request, response, KEY_COOKIE, presented)
        # A new session, a new nonce.
        _set_cookie(request, response, NONCE_COOKIE, csrf.new_nonce())
        return response

    @app.post("/logout")
    async def log_out(request: Request) -> Response:
        await posted(request)
        response = RedirectResponse("/ui/login", 303)
        response.delete_cookie(KEY_COOKIE, path=COOKIE_PATH)
        response.delete_cookie(NONCE_COOKIE, path=COOKIE_PATH)
        return response

    # -- views -----------------------------------------------------------------------

    @app.get("/")
    async def home(request: Request) -> Response:
        who = visitor(request)
        if not who.is_admin:
            return RedirectResponse("/ui/scope", 303)
        stats = await memory.stats()
        users = [default_user]
        if isinstance(keys, KeyStore | LocalLogin):
            users += [k.user_id for k in keys.list() if k.user_id and k.revoked_at is None]
        return render(request, who, "home.html", stats=stats, users=list(dict.fromkeys(users)))

    @app.get("/scope")
    async def scope_page(
        request: Request, user: str | None = None, agent: str | None = None, offset: int = 0
    ) -> Response:
        who = visitor(request)
        arguments = scope(who, user, agent)
        page = await memory.get_all(**arguments, limit=SCOPE_PAGE, offset=max(offset, 0))
        rows = views.sessions_of(page.items)

        async def total(row: views.SessionRow) -> None:
            if row.session_id is not None:
                narrowed = {**arguments, "agent_id": row.agent_id, "session_id": row.session_id}
                row.total = (await memory.get_all(**narrowed, limit=1)).total

        await asyncio.gather(*(total(row) for row in rows))
        agents = sorted({row.agent_id for row in rows if row.agent_id is not None})
        return render(
            request,
            who,
            "scope.html",
            here=here_of(arguments),
            page=page,
            offset=max(offset, 0),
            page_size=SCOPE_PAGE,
            rows=rows,
            agents=agents,
        )

    @app.get("/session")
    async def session_page(
        request: Request,
        user: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        offset: int = 0,
    ) -> Response:
        who = visitor(request)
        arguments = scope(who, user, agent, session)
        page = await memory.get_all(**arguments, limit=TURNS_PAGE, offset=max(offset, 0))
        ids = [episode.id for episode in page.items]
        gates, used, strengths = await asyncio.gather(
            memory.gate_decisions(ids, **arguments),
            memory.usage(ids, **arguments),
            memory.strength(ids, **arguments),
        )
        summaries = await memory.derived.summaries(**arguments) if session else []
        return render(
            request,
            who,
            "session.html",
            here=here_of(arguments),
            session=session,
            page=page,
            offset=max(offset, 0),
            page_size=TURNS_PAGE,
            days=views.by_day(page.items),
            gates=gates,
            used=used,
            strengths=strengths,
            summaries=summaries,
        )

    @app.get("/episode")
    async def episode_page(
        request: Request, id: str, user: str | None = None, agent: str | None = None
    ) -> Response:
        who = visitor(request)
        arguments = scope(who, user, agent)
        episode = await memory.get(id, **arguments)
        versions, gates, used, strengths = await asyncio.gather(
            memory.history(id, **arguments),
            memory.gate_decisions([id], **arguments),
            memory.usage([id], **arguments),
            memory.strength([id], **arguments),
        )
        return render(
            request,
            who,
            "episode.html",
            here=here_of(arguments),
            episode=episode,
            versions=versions,
            gate=gates.get(id),
            usage=used.get(id),
            strength=strengths.get(id),
        )

    @app.get("/search")
    async def search_page(
        request: Request,
        user: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        q: str = "",
        archive: bool = False,
    ) -> Response:
        who = visitor(request)
        arguments = scope(who, user, agent, session)
        hits = []
        if q.strip():
            hits = await memory.search(
                q, **arguments, limit=SEARCH_HITS, explain=True, include_archive=archive
            )
        return render(
            request,
            who,
            "search.html",
            here=here_of(arguments),
            session=session,
            q=q,
            archive=archive,
            hits=views.explained(hits, channels),
            analysis=hits[0].analysis if hits else None,
        )

    @app.get("/facts")
    async def facts_page(
        request: Request, user: str | None = None, agent: str | None = None, all: bool = False
    ) -> Response:
        who = visitor(request)
        arguments = scope(who, user, agent)
        found = await memory.facts(**arguments, include_superseded=all, limit=FACTS_LIMIT)
        return render(
            request,
            who,
            "facts.html",
            here=here_of(arguments),
            facts=found,
            all=all,
            limit=FACTS_LIMIT,
        )

    @app.get("/fact")
    async def fact_page(
        request: Request,
        predicate: str,
        subject: str = "user",
        user: str | None = None,
        agent: str | None = None,
    ) -> Response:
        who = visitor(request)
        arguments = scope(who, user, agent)
        history = await memory.fact_history(subject=subject, predicate=predicate, **arguments)
        now = max([f.recorded_at for f in history], default=None)
        axis = views.fact_axis(history, _now(now))
        return render(
            request,
            who,
            "fact.html",
            here=here_of(arguments),
            subject=subject,
            predicate=predicate,
            history=history,
            axis=axis,
            axis_width=views.AXIS_WIDTH,
        )

    @app.get("/derived")
    async def derived_page(
        request: Request, user: str | None = None, agent: str | None = None, offset: int = 0
    ) -> Response:
        who = visitor(request)
        arguments = scope(who, user, agent)
        summaries, profiles = await asyncio.gather(
            memory.derived.summaries(**arguments), memory.derived.profiles(**arguments)
        )
        offset = max(offset, 0)
        return render(
            request,
            who,
            "derived.html",
            here=here_of(arguments),
            summaries=summaries[offset : offset + SUMMARIES_PAGE],
            total=len(summaries),
            offset=offset,
            page_size=SUMMARIES_PAGE,
            profiles=profiles,
        )

    @app.get("/health")
    async def health_page(request: Request, user: str | None = None) -> Response:
        who = visitor(request)
        # The counts read the whole scope (slow on a large store): here, not on every page.
        if who.is_admin:
            stats: dict[str, Any] | None = await memory.stats(user_id=user or None)
        elif who.fixed_agent is None:
            stats = await memory.stats(user_id=who.fixed_user)
        else:
            stats = None
        counted = who.fixed_user or user or None
        return render(
            request,
            who,
            "health.html",
            capabilities=memory.capabilities,
            stats=stats,
            counted=counted,
        )

    # -- corrections -----------------------------------------------------------------

    @app.post("/episode/update")
    async def update_episode(request: Request) -> Response:
        who, form = await posted(request)
        arguments = scope(who, _field(form, "user"), _field(form, "agent"))
        episode_id = _required(form, "id")
        content = form.get("content")
        if not isinstance(content, str) or not content.strip():
            raise InvalidInputError("the new text is empty: write the corrected memory")
        await memory.update(episode_id, content=content.replace("\r\n", "\n"), **arguments)
        return _back("/ui/episode", id=episode_id, **here_of(arguments))

    async def move(request: Request, restored: bool) -> Response:
        """Archive (or restore) the posted session's episodes, or the posted ids."""
        who, form = await posted(request)
        arguments = scope(who, _field(form, "user"), _field(form, "agent"))
        verb = memory.restore if restored else memory.archive
        session = _field(form, "session")
        if session:
            ids = await verb(session_id=session, **arguments)
        else:
            ids = await verb(_ids(form), **arguments)
        return render(
            request, who, "archived.html", here=here_of(arguments), ids=ids, restored=restored
        )

    @app.post("/archive")
    async def archive(request: Request) -> Response:
        return await move(request, restored=False)

    @app.post("/restore")
    async def restore(request: Request) -> Response:
        return await move(request, restored=True)

    async def forgetting(request: Request, dry_run: bool) -> Response:
        """Forget what the posted form selects (only once it is confirmed), or with
        ``dry_run`` show what it would forget."""
        who, form = await posted(request)
        if not dry_run and form.get("confirm") != "yes":
            raise InvalidInputError(
                "tick 'I understand' to confirm: forgetting cannot be undone; nothing was erased"
            )
        selection = _forget_selection(form)
        arguments = scope(who, _field(form, "user"), _field(form, "agent"))
        report = await memory.forget(**selection, **arguments, dry_run=dry_run)
        return render(
            request,
            who,
            "forget.html",
            here=here_of(arguments),
            selection=selection,
            report=report,
            shown=report.episode_ids[:PREVIEW_IDS],
        )

    @app.post("/forget/preview")
    async def forget_preview(request: Request) -> Response:
        return await forgetting(request, dry_run=True)

    @app.post("/forget")
    async def forget(request: Request) -> Response:
        return await forgetting(request, dry_run=False)

    @app.post("/check")
    async def check(request: Request) -> Response:
        who, _ = await posted(request)
        who.caller.require_admin("check")
        problems = await memory.check()
        return render(
            request,
            who,
            "health.html",
            capabilities=memory.capabilities,
            stats=None,
            counted=None,
            problems=problems,
        )

    # -- plumbing --------------------------------------------------------------------

    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    async def refused(request: Request, exc: Exception) -> Response:
        if isinstance(exc, AuthenticationError):
            return RedirectResponse("/ui/login", 303)
        if isinstance(exc, AnamnesisError):
            status, kind, message = status_of(exc), type(exc).__name__, str(exc)
        elif isinstance(exc, HTTPException):
            status, kind, message = exc.status_code, "HTTPError", str(exc.detail)
        else:
            status, kind, message = 400, "InvalidInputError", "the request is malformed"
        who = visitor_without_key(request)
        return render(request, who, "error.html", status, kind=kind, message=message)

    for kind in (AnamnesisError, HTTPException, RequestValidationError):
        app.add_exception_handler(kind, refused)
    return _Secured(app)


class _Secured:
    """ASGI wrapper: the security headers on every response of the inspector."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.decode("latin-1").lower() not in SECURITY_HEADERS
                ]
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)


def _set_cookie(request: Request, response: Response, name: str, value: str) -> None:
    """A browser-session cookie no script can read, never sent on a request from
    another site (and only over TLS when the page came over TLS)."""
    response.set_cookie(
        name,
        value,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def _field(form: FormData, name: str) -> str | None:
    value = form.get(name)
    return value if isinstance(value, str) and value else None


def _required(form: FormData, name: str) -> str:
    value = _field(form, name)
    if value is None:
        raise InvalidInputError(f"the form has no {name!r}: reload the page and try again")
    return value


def _ids(form: FormData) -> list[str]:
    ids = [value for value in form.getlist("id") if isinstance(value, str) and value]
    if not ids:
        raise InvalidInputError("no episode chosen: reload the page and try again")
    return ids


def _forget_selection(form: FormData) -> dict[str, Any]:
    """What a forget form selects: episode ids, a session, or a text; never nothing
    (the page offers no way to erase a whole user)."""
    ids = [value for value in form.getlist("id") if isinstance(value, str) and value]
    selection = {
        "episode_ids": ids or None,
        "session_id": _field(form, "session"),
        "containing": _field(form, "containing"),
    }
    if not any(selection.values()):
        raise InvalidInputError("choose what to forget: episodes, a session, or a text")
    return selection


def _back(path: str, **params: Any) -> Response:
    return RedirectResponse(views.url(path, **params), 303)


def _now(latest: datetime | None) -> datetime:
    """The present, or the latest time a history names if that is later."""
    now = datetime.now(UTC)
    return now if latest is None or latest < now else latest
