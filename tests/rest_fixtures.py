"""A real REST server for tests: uvicorn on a free 127.0.0.1 port, configured as
``anamnesis serve`` configures it, in a thread of the test process, serving an
AsyncMemory over a real store (the static ``edge`` embedder, so stores build fast)."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi", reason="the REST server needs the server extras")
import uvicorn  # noqa: E402

from anamnesis import AsyncMemory  # noqa: E402
from anamnesis.embed import get_embedder  # noqa: E402
from anamnesis.server import DEFAULT_LIMITS, ServerLimits  # noqa: E402
from anamnesis.server.connections import server_config  # noqa: E402
from anamnesis.server.keys import KeyStore  # noqa: E402
from anamnesis.server.rest import build_app  # noqa: E402

EDGE = get_embedder("edge")
GUIDE = Path(__file__).parent.parent / "docs" / "guide.md"


def documented_errors() -> set[str]:
    """The error types the guide's table of errors documents."""
    return set(re.findall(r"^\| `(\w+)` \(", GUIDE.read_text(), flags=re.MULTILINE))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RestServer:
    """``anamnesis serve`` as a thread: ``url``; ``stop()`` shuts it down and closes
    the memory. ``where`` is Memory's ``path=`` or ``url=``; ``keys`` a key file."""

    def __init__(
        self,
        where: dict[str, Any],
        keys: Path | None = None,
        limits: ServerLimits = DEFAULT_LIMITS,
        **options: Any,
    ) -> None:
        self.where = where
        self.keys = KeyStore(keys) if keys is not None else None
        self.limits = limits
        self.options = options
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: uvicorn.Server | None = None
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="rest-server", daemon=True)
        self._thread.start()
        self._wait_until_up()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # noqa: BLE001  (reported to the test by _wait_until_up)
            self._failure = exc

    async def _serve(self) -> None:
        async with AsyncMemory(**self.where, embedder=EDGE, warm=False) as memory:
            app = build_app(memory, self.keys, limits=self.limits, **self.options)
            config = server_config(app, "127.0.0.1", self.port, self.limits)
            self._server = uvicorn.Server(config)
            await self._server.serve()

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._failure is not None:
                raise RuntimeError(f"the test server failed to start: {self._failure!r}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("the test server did not answer /health within 30 s")

    def open_connections(self) -> int:
        """The connections the server holds now."""
        return len(self._server.server_state.connections) if self._server is not None else 0

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        self._thread.join(timeout=30)
        if self.keys is not None:
            self.keys.close()
