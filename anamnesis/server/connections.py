"""How the REST server holds its connections: uvicorn's HTTP/1.1 protocol (h11) with
the waits on a client bounded by ``ServerLimits``.

uvicorn times out an idle kept-alive connection, but not one that has sent part of a
request head: such a connection would be held until the client closes it. This
protocol closes a connection whose request line and headers have not arrived whole
within ``header_timeout`` (counted from the connection's opening, or from the first
byte of a later request on it). The body's time is bounded by ``rest.Guard``.

Connections served at once are bounded too: a request arriving while more than
``max_connections`` are open is answered at once with 503 ``ServerBusyError``. The
errors this layer answers itself (that, and a request that is not HTTP) carry the
same JSON error body as the application's.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar

import h11
import uvicorn
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..errors import AnamnesisError, InvalidInputError, ServerBusyError
from . import ServerLimits
from .wire import error_body, status_of


def server_config(app: Any, host: str, port: int, limits: ServerLimits) -> uvicorn.Config:
    """The uvicorn configuration that serves ``app`` on ``host:port`` within ``limits``
    (the request log is the application's own, so uvicorn's access log is off)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_for(limits),
        access_log=False,
        log_level="warning",
    )


def protocol_for(limits: ServerLimits) -> type[BoundedH11Protocol]:
    """The protocol class uvicorn instantiates per connection, bound to ``limits``."""

    class Protocol(BoundedH11Protocol):
        LIMITS = limits

    return Protocol


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head timeout, a connection limit answered
    with a typed 503, and a typed 400 for a request that is not HTTP."""

    LIMITS: ClassVar[ServerLimits] = ServerLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeout_keep_alive = self.LIMITS.keep_alive_timeout  # type: ignore[assignment]
        self.limit_concurrency = None  # checked by _admit, which answers with a typed body
        self._application = self.app
        self.app = self._admit
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head_timer()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self.conn.their_state is h11.IDLE:
            self._start_head_timer()  # the first byte of a request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._stop_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def _start_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.LIMITS.header_timeout, self._head_late)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        """Close the connection if its request head is still incomplete."""
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    async def _admit(self, scope: Any, receive: Any, send: Any) -> None:
        """Run the application, or answer 503 when over the connection limit (this
        connection and this request's task are already counted)."""
        limit = self.LIMITS.max_connections
        if len(self.connections) > limit or len(self.tasks) > limit:
            busy = ServerBusyError(
                f"this server is serving its limit of {limit} connections: retry shortly"
            )
            await _answer(send, busy, [(b"retry-after", b"1")])
            return
        await self._application(scope, receive, send)

    def send_400_response(self, msg: str) -> None:
        """A request that is not HTTP/1.1 (or whose head is too large), answered as
        every error is, then the connection closed."""
        exc = InvalidInputError(
            "the request is not valid HTTP/1.1, or its request line and headers are over "
            f"{DEFAULT_MAX_INCOMPLETE_EVENT_SIZE} bytes"
        )
        body = json.dumps(error_body(type(exc).__name__, str(exc))).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()


async def _answer(send: Any, exc: AnamnesisError, headers: list[tuple[bytes, bytes]]) -> None:
    """Send ``exc`` as the JSON error response of its status, closing the connection."""
    body = json.dumps(error_body(type(exc).__name__, str(exc))).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status_of(exc),
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})
