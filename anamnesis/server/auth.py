"""How an HTTP surface knows who is asking: the API key a request presents, checked
against the key file (``keys.KeyStore``). Shared by the REST server and the MCP
server over HTTP (both run with the server extras)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from starlette.responses import JSONResponse

from ..errors import AuthenticationError
from .keys import ApiKey, KeyStore
from .wire import error_body

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def presented_key(headers: Mapping[str, str] | None) -> str | None:
    """The key in ``Authorization: Bearer ...`` or ``X-API-Key``, if any."""
    if not headers:
        return None
    scheme, _, token = (headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-api-key") or None


def authenticate(keys: KeyStore | None, headers: Mapping[str, str] | None) -> ApiKey | None:
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

    def __init__(self, app: Any, keys: KeyStore) -> None:
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
