"""Decay of a whole large scope, and what a second process's writes see meanwhile
(study 2026-11-27-decay-at-scale).

    python docs/experiments/scripts/decay_at_scale.py STORE.db USER NOW [decay|restore|forget]

``decay`` (the default) runs ``decay(dry_run=True)``, then ``decay`` itself, on a
store it may change (a copy: every episode weaker than the threshold at NOW is
archived); ``restore`` then brings back every archived episode of USER; ``forget``
erases every episode of USER. Meanwhile a
second process adds one short note to another user every half second and records how
long each ``add`` waited; a write that fails is counted with its error. Prints one JSON
line: the episodes chosen, each step's wall and CPU seconds, and the writer's adds,
failures and p50 / max latency. The store's embedder is ``edge``.
"""

from __future__ import annotations

import json
import multiprocessing
import statistics
import sys
import time


def writer(path: str, embedder: str, stop, out) -> None:
    from anamnesis import Memory

    latencies, failures = [], []
    with Memory(path=path, embedder=embedder, warm=False) as memory:
        n = 0
        while not stop.is_set():
            start = time.perf_counter()
            try:
                memory.add(f"a note written during decay, number {n}", user_id="writer")
                latencies.append(time.perf_counter() - start)
            except Exception as exc:  # noqa: BLE001  (counted, not hidden)
                failures.append(type(exc).__name__)
            n += 1
            time.sleep(0.5)
    out.put((latencies, failures))


def main() -> None:
    path, user, now = sys.argv[1], sys.argv[2], sys.argv[3]
    step = sys.argv[4] if len(sys.argv) > 4 else "decay"
    embedder = "edge"
    from anamnesis import Memory

    memory = Memory(path=path, embedder=embedder, warm=False)
    wall, cpu = time.perf_counter(), time.process_time()
    chosen = memory.decay(user_id=user, now=now, dry_run=True) if step == "decay" else []
    dry = (time.perf_counter() - wall, time.process_time() - cpu)
    stop, out = multiprocessing.Event(), multiprocessing.Queue()
    other = multiprocessing.Process(target=writer, args=(path, embedder, stop, out))
    other.start()
    time.sleep(3)  # the writer has opened the store and written a few notes
    wall, cpu = time.perf_counter(), time.process_time()
    if step == "decay":
        moved = memory.decay(user_id=user, now=now)
    elif step == "restore":
        moved = memory.restore(user_id=user)
    else:
        moved = list(memory.forget(user_id=user).episode_ids)
    real = (time.perf_counter() - wall, time.process_time() - cpu)
    time.sleep(1)
    stop.set()
    latencies, failures = out.get()
    other.join()
    memory.close()
    ms = sorted(1000 * x for x in latencies)
    print(
        json.dumps(
            {
                "chosen": len(chosen),
                "moved": len(moved),
                "dry_run_s": [round(x, 1) for x in dry],
                "step": step,
                f"{step}_s": [round(x, 1) for x in real],
                "writer_adds": len(ms),
                "writer_failures": failures,
                "writer_p50_ms": round(statistics.median(ms), 1) if ms else None,
                "writer_max_ms": round(ms[-1], 1) if ms else None,
            }
        )
    )


if __name__ == "__main__":
    main()
