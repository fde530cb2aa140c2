"""How long a served memory's adds wait while it decays a large scope
(study 2026-11-27-served-maintenance).

    python docs/experiments/scripts/served_maintenance.py STORE.db USER NOW [decay|restore|forget]

Opens the store in one ``AsyncMemory`` (the ``edge`` embedder), as ``anamnesis serve``
does, writes one note and runs one search so the embedder and the in-memory indexes are
loaded. Then ``decay`` (the default: every episode of USER weaker than the threshold at
NOW is archived; run it on a copy), ``restore`` (every archived episode of USER comes
back) or ``forget`` (every episode of USER is erased) runs as a task, while the same
event loop awaits one ``add`` of a short note to USER every fifth of a second until the
verb has returned. Prints one JSON line: the episodes moved, the verb's wall seconds,
and the adds' count and p50 / p90 / max latency, with how many of them completed before
the verb did.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from typing import Any


async def run(path: str, user: str, now: str, step: str) -> dict[str, object]:
    from anamnesis import AsyncMemory

    async with AsyncMemory(path=path, embedder="edge", warm=False) as memory:
        await memory.add("a note written before the maintenance", user_id=user)
        await memory.search("harbour crane", user_id=user)
        started = time.perf_counter()
        if step == "decay":
            verb = asyncio.create_task(memory.decay(user_id=user, now=now))
        elif step == "restore":
            verb = asyncio.create_task(memory.restore(user_id=user))
        else:
            verb = asyncio.create_task(forget(memory, user))
        await asyncio.sleep(0.5)  # the verb is under way
        latencies: list[float] = []
        before_the_end = 0
        n = 0
        while not verb.done():
            start = time.perf_counter()
            await memory.add(f"a note written during the {step}, number {n}", user_id=user)
            latencies.append(time.perf_counter() - start)
            before_the_end += not verb.done()
            n += 1
            await asyncio.sleep(0.2)
        moved = await verb
        wall = time.perf_counter() - started
    ms = sorted(1000 * x for x in latencies)
    return {
        "step": step,
        "moved": len(moved),
        f"{step}_wall_s": round(wall, 1),
        "adds": len(ms),
        "adds_done_before_the_end": before_the_end,
        "add_p50_ms": round(statistics.median(ms), 1) if ms else None,
        "add_p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 1) if ms else None,
        "add_max_ms": round(ms[-1], 1) if ms else None,
    }


async def forget(memory: Any, user: str) -> list[str]:
    """The ids a forget of the whole scope erased."""
    return list((await memory.forget(user_id=user)).episode_ids)


def main() -> None:
    path, user, now = sys.argv[1], sys.argv[2], sys.argv[3]
    step = sys.argv[4] if len(sys.argv) > 4 else "decay"
    print(json.dumps(asyncio.run(run(path, user, now, step))))


if __name__ == "__main__":
    main()
