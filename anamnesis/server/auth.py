"""How an HTTP surface knows who is asking: the API key a request presents, checked
against the key file (``keys.KeyStore``). Shared by the REST server and the MCP
server over HTTP (both run with the server extras)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.responses import JSONResponse

from ..errors import AuthenticationError, PermissionDeniedError
from .keys import ApiKey
from .wire import error_body

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class KeyCheck(Protocol):
    """What checks a presented key: the key file (``keys.KeyStore``), or the key file
    with the process's own admin key of ``anamnesis serve --open`` (``ui.login``)."""

    def required(self) -> bool:
        """True when every request must present a valid key."""
        ...

    def authenticate(self, presented: str) -> ApiKey | None:
        """The live key ``presented`` is, or None."""
        ...


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the key presented, or None when the server has no keys."""

    key: ApiKey | None

    def scoped(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``arguments`` with their user (and agent) narrowed to what the key reaches;
        PermissionDeniedError when they name something else."""
        key = self.key
        if key is None or key.is_admin:
            return arguments
        user = arguments.get("user_id")
        if user is not None and user != key.user_id:
            raise PermissionDeniedError(
                f"this API key is for user {key.user_id!r}: it cannot reach user {user!r}"
            )
        scoped = {**arguments, "user_id": key.user_id}
        if key.agent_id is not None:
            if "agent_id" not in arguments:
                raise PermissionDeniedError(
                    f"this API key is for agent {key.agent_id!r} only, and this verb "
                    "covers every agent of the user: use a user key"
                )
            agent = arguments["agent_id"]
            if agent is not None and agent != key.agent_id:
                raise PermissionDeniedError(
                    f"this API key is for agent {key.agent_id!r}: it cannot reach agent {agent!r}"
                )
            scoped["agent_id"] = key.agent_id
        return scoped

    def require_admin(self, what: str) -> None:
        """PermissionDeniedError unless the key reaches every user."""
        if self.key is not None and not self.key.is_admin:
            raise PermissionDeniedError(f"{what} covers the whole store: it needs an admin key")


def presented_key(headers: Mapping[str, str] | None) -> str | None:
    """The key in ``Authorization: Bearer ...`` or ``X-API-Key``, if any."""
    if not headers:
        return None
    scheme, _, token = (headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-api-key") or None


def authenticate(keys: KeyCheck | None, headers: Mapping[str, str] | None) -> ApiKey | None:
    """The key a request presents; None when no key is needed (no key file, or one
    that holds no key yet). AuthenticationError when one is needed and missing,
    unknown or revoked."""
    if keys is None or not keys.required():
        return None
    presented = presented_key(headers)
    if presented is None:
        raise AuthenticationError(
            "this server needs an API key: send 'Authorization: Bearer anm_...' "
            "(create one with `anamnesis keys create`)"
        )
    key = keys.authenticate(presented)
    if key is None:
        raise AuthenticationError("the API key is not valid: unknown or revoked")
    return key


class KeyGate:
    """ASGI middleware: a request without a valid key (once keys are required) gets
    401 before it reaches the application."""

    def __init__(self, app: Any, keys: KeyCheck) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            try:
                authenticate(self.keys, headers)
            except AuthenticationError as exc:
                refusal = JSONResponse(
                    error_body(type(exc).__name__, str(exc)),
                    401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)
