"""The REST server's waits on a client are bounded: a request head that never ends,
a body that never ends, and more connections than the server serves at once each get
a bounded answer, while other clients are served. Real uvicorn on 127.0.0.1 with short
limits (tests/rest_fixtures.py); every loop here is bounded in count and time."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from rest_fixtures import RestServer

from anamnesis.cli import main
from anamnesis.server import DEFAULT_LIMITS, ServerLimits

#: Time the server is given beyond a limit before a test calls it late (loaded CI).
SLACK = 3.0
SLOW_CLIENTS = 100
PARTIAL_HEAD = b"GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestServer]:
    limits = ServerLimits(header_timeout=1.0, body_timeout=1.0, max_connections=SLOW_CLIENTS + 20)
    running = RestServer({"path": tmp_path / "m.db"}, limits=limits)
    yield running
    running.stop()


def _connect(server: RestServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return sock


def _closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before closing ``sock``, or None if it is still open after
    ``seconds``."""
    received = b""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return None
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk
    return None


def _error_of(raw: bytes) -> tuple[int, str]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)["error"]["type"]


def test_connections_that_never_finish_their_request_head_are_closed_in_time(
    server: RestServer,
) -> None:
    slow = [_connect(server) for _ in range(SLOW_CLIENTS)]
    silent = _connect(server)  # connects and sends nothing at all
    try:
        for sock in slow:
            sock.sendall(PARTIAL_HEAD)
        opened = time.monotonic()
        # Other clients are served meanwhile.
        response = httpx.get(f"{server.url}/v1/stats", timeout=5)
        assert response.status_code == 200
        limit = server.limits.header_timeout + SLACK
        for sock in [*slow, silent]:
            left = max(limit - (time.monotonic() - opened), 0.1)
            assert _closed_within(sock, left) is not None, "a slow client was held"
        assert time.monotonic() - opened < limit
    finally:
        for sock in [*slow, silent]:
            sock.close()


def test_a_head_sent_a_byte_at_a_time_is_closed_at_the_same_limit(server: RestServer) -> None:
    sock = _connect(server)
    try:
        started = time.monotonic()
        closed = False
        for byte in PARTIAL_HEAD * 4:  # bounded: at most this many bytes, 0.1 s apart
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if _closed_within(sock, 0.1) is not None:
                closed = True
                break
        assert closed, "a client sending its head slowly was held"
        assert time.monotonic() - started < server.limits.header_timeout + SLACK
    finally:
        sock.close()


def test_a_kept_alive_connection_gets_the_same_limit_for_its_next_head(
    server: RestServer,
) -> None:
    sock = _connect(server)
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        sock.settimeout(5)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.sendall(PARTIAL_HEAD)  # the next request, never finished
        limit = server.limits.header_timeout + SLACK
        assert _closed_within(sock, limit) is not None, "a kept-alive client was held"
    finally:
        sock.close()


def test_a_body_that_never_ends_is_408_and_stores_nothing(server: RestServer) -> None:
    sock = _connect(server)
    try:
        sock.sendall(
            b"POST /v1/episodes HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            b'{"content": "half'
        )
        answer = _closed_within(sock, server.limits.body_timeout + SLACK)
    finally:
        sock.close()
    assert answer, "the server held a client whose body never ended"
    assert _error_of(answer) == (408, "RequestTimeoutError")
    assert httpx.get(f"{server.url}/v1/stats", timeout=5).json()["episodes"] == 0


def test_a_body_cut_short_by_the_client_leaving_stores_nothing(server: RestServer) -> None:
    sock = _connect(server)
    try:  # a complete JSON object, but a tenth of the length the head declares
        sock.sendall(
            b"POST /v1/episodes HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
            b'{"content": "cut"}'
        )
        time.sleep(0.2)
    finally:
        sock.close()
    time.sleep(0.5)
    assert httpx.get(f"{server.url}/v1/stats", timeout=5).json()["episodes"] == 0


def test_beyond_the_connection_limit_a_request_gets_503_at_once(tmp_path: Path) -> None:
    limits = ServerLimits(header_timeout=3.0, max_connections=5)
    server = RestServer({"path": tmp_path / "m.db"}, limits=limits)
    held = [_connect(server) for _ in range(limits.max_connections)]
    try:
        for sock in held:
            sock.sendall(PARTIAL_HEAD)
        deadline = time.monotonic() + 2
        while server.open_connections() < limits.max_connections:  # until all are accepted
            assert time.monotonic() < deadline
            time.sleep(0.01)
        started = time.monotonic()
        refused = httpx.get(f"{server.url}/v1/stats", timeout=5)
        assert time.monotonic() - started < 2.0
        assert refused.status_code == 503
        assert refused.json()["error"]["type"] == "ServerBusyError"
        assert refused.headers["retry-after"] == "1"
        for sock in held:  # once the held connections time out, requests are served again
            assert _closed_within(sock, limits.header_timeout + SLACK) is not None
        assert httpx.get(f"{server.url}/v1/stats", timeout=5).status_code == 200
    finally:
        for sock in held:
            sock.close()
        server.stop()


def test_a_request_that_is_not_http_gets_a_typed_400(server: RestServer) -> None:
    for garbage in (b"\x00\x01\x02 not http\r\n\r\n", b"GET / HTTP/1.1\r\nX: " + b"a" * 20_000):
        sock = _connect(server)
        try:
            sock.sendall(garbage)
            answer = _closed_within(sock, 5)
        finally:
            sock.close()
        assert answer, garbage[:20]
        assert _error_of(answer) == (400, "InvalidInputError")


def test_serve_takes_every_limit_as_an_option() -> None:
    helped = CliRunner().invoke(main, ["serve", "--help"])
    said = " ".join(helped.output.split())
    for option, default in (
        ("--header-timeout", DEFAULT_LIMITS.header_timeout),
        ("--body-timeout", DEFAULT_LIMITS.body_timeout),
        ("--keep-alive-timeout", DEFAULT_LIMITS.keep_alive_timeout),
        ("--max-connections", DEFAULT_LIMITS.max_connections),
    ):
        assert option in said
        assert f"[default: {default}" in said.split(option, 1)[1], option
