"""One forget in a large store, as ``anamnesis bench scale`` times it, taken apart.

Opens a copy of a store made by the scale bench with a ``Memory`` (``edge`` embedder),
as an application would, waits for the Memory's own background warm-up, searches
twice, then repeats ``--cycles`` times: add ``--adds`` episodes and one with a word
of its own, forget that one (as the bench does; with ``--old``, an episode the
in-memory indexes already hold instead), search (the "next search") and search
again. Each step's wall milliseconds, the calling thread's CPU milliseconds and the
process's go to stdout as JSON lines, with the load average. ``--profile PREFIX``
writes a cProfile of each forget and each next search (PREFIX.forget.N,
PREFIX.next-search.N); ``--trace`` prints each SQL statement of the first forget
with the time since the one before; ``--settle`` waits for the background check and
builds before the first cycle.

``--in-memory`` reads the vectors from SQLite instead of mapping the saved matrix
(closer to the bench's own Memory, which grew the store), then saves them again.

    cp -a STORE_DIR/. COPY_DIR/ && sync
    python docs/experiments/scripts/forget_probe.py COPY_DIR/memory.db --cycles 8 --old
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anamnesis import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.embed import get_embedder

USER = "scale"
QUERY = "What did I say about the locker at the gym?"


def timed(step: str, action: Callable[[], Any], **extra: Any) -> Any:
    """Run ``action``; print its wall and CPU milliseconds and the load average."""
    wall, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
    out = action()
    print(
        json.dumps(
            {
                "step": step,
                "wall_ms": round((time.perf_counter() - wall) * 1000, 1),
                "cpu_ms": round((time.thread_time() - own) * 1000, 1),
                "process_cpu_ms": round((time.process_time() - cpu) * 1000, 1),
                "load": os.getloadavg()[0],
                **extra,
            }
        ),
        flush=True,
    )
    return out


def profiled(path: Path | None, name: str, action: Callable[[], Any]) -> None:
    """Run ``action``, under cProfile when ``path`` is given (written to PATH.NAME,
    its 12 costliest calls by cumulative time printed)."""
    if path is None:
        action()
        return
    profile = cProfile.Profile()
    profile.enable()
    action()
    profile.disable()
    profile.dump_stats(f"{path}.{name}")
    pstats.Stats(profile).sort_stats("cumulative").print_stats(12)


def one_cycle(memory: Memory, store: Any, args: argparse.Namespace, cycle: int) -> None:
    """Add ``args.adds`` episodes and one with a word of its own, forget it (or, with
    ``--old``, an episode the in-memory indexes already hold), search twice."""
    timed(
        "adds",
        lambda: [
            memory.add(f"Filler {cycle} {i} about the weather today", user_id=USER)
            for i in range(args.adds)
        ],
    )
    word = f"Zyqvorblentax{cycle}{time.time_ns()}"
    episode = memory.add(f"The locker code word is {word}, keep it private.", user_id=USER)[0]
    if args.old:
        episode = memory.get_all(user_id=USER, limit=1, offset=1000 + 7919 * cycle).items[0]
    traced = cycle == 0 and args.trace
    if traced:
        started: list[float] = []

        def trace(statement: str) -> None:
            now = time.perf_counter()
            if started:
                print(f"  {(now - started[0]) * 1000:8.1f} ms since previous", flush=True)
            started[:] = [now]
            print(f"SQL {' '.join(statement.split())[:150]}", flush=True)

        store._conn.set_trace_callback(trace)
    wal = args.db.with_name(args.db.name + "-wal")
    profiled(
        args.profile,
        f"forget.{cycle}",
        lambda: timed(
            "forget",
            lambda: memory.forget([episode.id], user_id=USER),
            cycle=cycle,
            wal_bytes=wal.stat().st_size if wal.exists() else 0,
        ),
    )
    if traced:
        store._conn.set_trace_callback(None)
    profiled(
        args.profile,
        f"next-search.{cycle}",
        lambda: timed(
            "next search", lambda: memory.search(QUERY, user_id=USER, limit=10), cycle=cycle
        ),
    )
    timed("search after", lambda: memory.search(QUERY, user_id=USER, limit=10), cycle=cycle)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db", type=Path)
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--adds", type=int, default=20)
    parser.add_argument("--config", default="default")
    parser.add_argument("--in-memory", action="store_true")
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--no-warm-up", action="store_true")
    parser.add_argument("--settle", action="store_true")
    parser.add_argument("--old", action="store_true")
    args = parser.parse_args()

    embedder = get_embedder("edge")
    embedder.embed_query("warm up")
    if args.in_memory:
        from anamnesis.store.sqlite.dense_file import DenseFile

        DenseFile.load = lambda self, dense, conn, epoch: False  # type: ignore[method-assign]
    memory = timed(
        "open", lambda: Memory(path=args.db, embedder=embedder, config=BENCH_PRESETS[args.config])
    )
    store: Any = memory.store
    if not args.no_warm_up and memory._warm_thread is not None:
        timed("warm-up (Memory's own, waited for)", memory._warm_thread.join)
    timed("first search", lambda: memory.search(QUERY, user_id=USER, limit=10))
    timed("second search", lambda: memory.search(QUERY, user_id=USER, limit=10))
    if args.settle:
        # Let the background check of the mapped matrix, and any index build, finish.
        for name in ("_dense_checker",):
            worker = getattr(store, name, None)
            if worker is not None:
                timed("settle " + name, worker.join)
        for owner in (store._ann, store._lexical):
            worker = owner._worker
            if worker is not None:
                timed("settle " + type(owner).__name__, worker.join)
    for cycle in range(args.cycles):
        one_cycle(memory, store, args, cycle)
    timed("close", memory.close)


if __name__ == "__main__":
    main()
