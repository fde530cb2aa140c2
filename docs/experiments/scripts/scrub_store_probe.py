"""A forget in a large store, then close, and every file beside the store scanned for
the erased rows' vectors (float32 and half floats): the path an application takes.

Opens a copy of a scale-bench store with a ``Memory`` (``edge`` embedder), waits for
its warm-up, searches, forgets five episodes (rows 4321-4325 of the vectors table),
searches, closes (timed), and prints the graph's state and each file holding an
erased vector.

    cp -a STORE_DIR/. COPY_DIR/ && sync
    python docs/experiments/scripts/scrub_store_probe.py COPY_DIR/memory.db
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from anamnesis import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.embed import get_embedder

QUERY = "What did I say about the locker at the gym?"


def main() -> None:
    db = Path(sys.argv[1])
    embedder = get_embedder("edge")
    embedder.embed_query("warm up")
    memory = Memory(path=db, embedder=embedder, config=BENCH_PRESETS["default"])
    store = memory.store
    if memory._warm_thread is not None:
        memory._warm_thread.join()
    memory.search(QUERY, user_id="scale", limit=10)
    if store._ann._worker is not None:
        store._ann._worker.join()
    victims = [
        (episode_id, np.frombuffer(blob, dtype=np.float32))
        for episode_id, blob in store._read(
            """SELECT e.id, v.embedding FROM vectors v JOIN episodes e
               ON e.rowid = v.episode_rowid ORDER BY v.episode_rowid LIMIT 5 OFFSET 4321"""
        )
    ]
    graphs = [p for p in db.parent.glob(db.name + ".ann.*") if not p.name.endswith(".json")]
    before = b"".join(p.read_bytes() for p in graphs)
    print("in the graph before:", [v.astype(np.float16).tobytes() in before for _, v in victims])
    memory.forget([episode_id for episode_id, _ in victims], user_id="scale")
    memory.search(QUERY, user_id="scale", limit=10)
    started = time.perf_counter()
    memory.close()
    print("close s", round(time.perf_counter() - started, 3))
    print(json.loads(db.with_name(db.name + ".ann.json").read_text()))
    for path in sorted(db.parent.glob(db.name + "*")):
        if path.is_file():
            data = path.read_bytes()
            found = [
                (v.astype(np.float16).tobytes() in data, v.tobytes() in data) for _, v in victims
            ]
            if any(f16 or f32 for f16, f32 in found):
                print("found (f16, f32) in", path.name, found)
    print("scan done")


if __name__ == "__main__":
    main()
