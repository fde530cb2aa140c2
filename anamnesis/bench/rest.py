"""What the REST surface costs and carries: search and add latency and throughput at
1, 8 and 32 concurrent clients against ``anamnesis serve`` on 127.0.0.1, beside the
same verbs in process.

The store holds ``episodes`` LoCoMo turns (``surfaces.build_store``); the queries are
LoCoMo's questions. The server is a process of its own (``anamnesis serve`` with an
API key, as deployed); the clients are ``AsyncRemoteMemory`` coroutines in this
process, each sending its requests one after another, so ``clients`` requests are in
flight at once. A request's latency is the client's (sent to decoded); throughput is
requests over the wall time of the level. Adds go to a user of their own, so the
searched user's store does not change under the searches.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from ..errors import AnamnesisError
from ..memory import Memory
from .metrics import percentile
from .surfaces import USER

#: The user the adds write to.
ADD_USER = "rest-bench-adds"
#: Concurrent clients of each level.
LEVELS = (1, 8, 32)


@dataclass(frozen=True, slots=True)
class Load:
    """One verb at one level of concurrency."""

    verb: str
    clients: int
    requests: int
    errors: int
    seconds: float
    p50: float
    p99: float

    @property
    def throughput(self) -> float:
        """Requests answered per second."""
        return (self.requests - self.errors) / self.seconds if self.seconds else 0.0


def _stats(verb: str, clients: int, samples: list[float], errors: int, seconds: float) -> Load:
    return Load(
        verb,
        clients,
        len(samples) + errors,
        errors,
        seconds,
        percentile(samples, 50),
        percentile(samples, 99),
    )


def in_process(store: Path, embedder: str, queries: list[str], adds: int) -> list[Load]:
    """``Memory.search`` and ``Memory.add`` one after another, in this process."""
    loads = []
    with Memory(path=store, embedder=embedder) as memory:
        memory.search("warm up", user_id=USER)
        for verb, calls in (
            ("search", [lambda q=q: memory.search(q, user_id=USER, limit=10) for q in queries]),
            ("add", [lambda n=n: memory.add(_note(n), user_id=ADD_USER) for n in range(adds)]),
        ):
            samples = []
            started = time.perf_counter()
            for call in calls:
                begun = time.perf_counter()
                call()
                samples.append((time.perf_counter() - begun) * 1000)
            loads.append(_stats(verb, 1, samples, 0, time.perf_counter() - started))
    return loads


def _note(n: int) -> str:
    return f"benchmark note {n}: the harbour was busy with fishing boats this morning"


@contextmanager
def served(store: Path, embedder: str, root: Path) -> Iterator[tuple[str, str]]:
    """``anamnesis serve`` on a free loopback port with a fresh user key; yields the
    URL and the key, and stops the server (SIGTERM) afterwards."""
    from ..server.keys import KeyStore

    keys = KeyStore(root / "bench-keys.db")
    key = keys.create("rest benchmark", user_id=None)[1]
    keys.close()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "anamnesis.cli", "--path", str(store)]
    command += ["--embedder", embedder, "serve", "--port", str(port)]
    command += ["--keys", str(root / "bench-keys.db")]
    log = (root / "rest-server.log").open("w")
    process = subprocess.Popen(command, stderr=log, env=dict(os.environ))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            try:
                httpx.get(f"{url}/health", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        else:
            raise RuntimeError(f"anamnesis serve did not start: see {log.name}")
        yield url, key
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        log.close()


def over_http(
    url: str, key: str, queries: list[str], adds: int, levels: tuple[int, ...] = LEVELS
) -> list[Load]:
    """Searches and adds at each level of concurrency through the REST server."""
    return asyncio.run(_over_http(url, key, queries, adds, levels))


async def _over_http(
    url: str, key: str, queries: list[str], adds: int, levels: tuple[int, ...]
) -> list[Load]:
    from ..server.async_client import AsyncRemoteMemory

    loads = []
    async with AsyncRemoteMemory(url, api_key=key) as memory:
        for _ in range(3):
            await memory.search("warm up", user_id=USER)
        for clients in levels:
            searches = [lambda q=q: memory.search(q, user_id=USER, limit=10) for q in queries]
            loads.append(await _run("search", clients, searches))
            writes = [lambda n=n: memory.add(_note(n), user_id=ADD_USER) for n in range(adds)]
            loads.append(await _run("add", clients, writes))
    return loads


async def _run(verb: str, clients: int, calls: Sequence[Callable[[], Awaitable[object]]]) -> Load:
    samples: list[float] = []
    errors = 0
    pending = iter(calls)

    async def client() -> None:
        nonlocal errors
        for call in pending:
            begun = time.perf_counter()
            try:
                await call()
            except AnamnesisError:
                errors += 1
                continue
            samples.append((time.perf_counter() - begun) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return _stats(verb, clients, samples, errors, time.perf_counter() - started)
