"""What a surface costs on top of the in-process call: the MCP ``recall`` round trip.

A store of ``episodes`` LoCoMo turns (repeated across sessions to reach the size; a
text repeated in one user's store is embedded once) is searched with LoCoMo's
questions twice: in process (``Memory.search``) and through ``anamnesis mcp`` over
stdio with the ``mcp`` SDK's client, as an agent host calls it. Both use the same
store, configuration and queries; the difference is the surface's own cost (JSON-RPC
over a pipe, the tool's text formatting and token budget).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..memory import Memory
from .datasets import load_locomo
from .metrics import percentile

USER = "surface-bench"


@dataclass(frozen=True, slots=True)
class SurfaceTimes:
    """Latency percentiles (ms) of one way of searching."""

    p50: float
    p95: float
    calls: int


def _times(samples: list[float]) -> SurfaceTimes:
    return SurfaceTimes(percentile(samples, 50), percentile(samples, 95), len(samples))


def build_store(data: Path, store: Path, episodes: int, embedder: str) -> list[str]:
    """Fill ``store`` with ``episodes`` LoCoMo turns; return LoCoMo's questions."""
    dataset = load_locomo(data)
    turns = [m for case in dataset.cases for m in case.messages]
    questions = [q.text for case in dataset.cases for q in case.questions]
    with Memory(path=store, embedder=embedder, warm=False) as memory:
        have = memory.stats(user_id=USER)["episodes"] if store.exists() else 0
        batch: list[dict[str, Any]] = []
        for n in range(have, episodes):
            turn = turns[n % len(turns)]
            batch.append(
                {
                    "content": turn["content"],
                    "speaker": turn.get("speaker"),
                    "session_id": f"round{n // len(turns)}",
                }
            )
        if batch:
            memory.add_many(batch, user_id=USER)
    return questions


def in_process(store: Path, embedder: str, queries: list[str]) -> SurfaceTimes:
    """``Memory.search`` latency on the store (after one warm-up search)."""
    samples = []
    with Memory(path=store, embedder=embedder) as memory:
        memory.search("warm up", user_id=USER)
        for query in queries:
            start = time.perf_counter()
            memory.search(query, user_id=USER, limit=10)
            samples.append((time.perf_counter() - start) * 1000)
    return _times(samples)


def mcp_recall(store: Path, embedder: str, queries: list[str]) -> SurfaceTimes:
    """The ``recall`` tool's round trip through ``anamnesis mcp`` over stdio."""
    return asyncio.run(_mcp_recall(store, embedder, queries))


async def _mcp_recall(store: Path, embedder: str, queries: list[str]) -> SurfaceTimes:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    args = ["-m", "anamnesis.cli", "--path", str(store), "--embedder", embedder]
    params = StdioServerParameters(
        command=sys.executable, args=[*args, "mcp", "--user", USER], env=dict(os.environ)
    )
    samples = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.call_tool("recall", {"query": "warm up"})
        for query in queries:
            start = time.perf_counter()
            result = await session.call_tool("recall", {"query": query, "limit": 10})
            samples.append((time.perf_counter() - start) * 1000)
            if result.is_error:
                raise RuntimeError(f"recall failed: {result.content}")
    return _times(samples)
