"""Search cost of each preset on a 10k-episode store with named speakers.

    python scripts/recall_latency.py --data ../shared/data/locomo10.json.gz \\
        --embedding-cache-dir ../vector-cache --episodes 10000 \\
        --config hybrid,hybrid-speakers,hybrid-prf,hybrid-neighbours,full,full-learned

All LoCoMo conversations are stored in ONE user's scope, repeated (as new sessions)
until ``--episodes`` turns, so the speaker, session and neighbour channels work on
real turns at the target size. Each LoCoMo question is searched once per preset after
a warm-up; reported are wall-clock p50/p95 and CPU time (``time.process_time``, less
sensitive to other processes on a shared machine) per search, query embedding
included (sub-queries of decomposed questions are embedded too).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from anamnesis import Memory
from anamnesis.bench import datasets
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.bench.tokens import CachingEmbedder
from anamnesis.embed import get_embedder
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.store.base import Filters
from anamnesis.types import Scope


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--embedding-cache-dir", type=Path)
    parser.add_argument("--episodes", type=int, default=10000)
    parser.add_argument("--config", default="hybrid,full")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    dataset = datasets.load("locomo", args.data)
    embedder = get_embedder("minilm")
    caching = CachingEmbedder.with_cache_dir(embedder, args.embedding_cache_dir)
    questions = [q.text for c in dataset.cases for q in c.questions][: args.queries]
    with (
        tempfile.TemporaryDirectory() as tmp,
        Memory(path=Path(tmp) / "m.db", embedder=caching) as memory,
    ):
        stored, copy = 0, 0
        while stored < args.episodes:
            for case in dataset.cases:
                batch = [
                    {**m, "session_id": f"{case.id}/{copy}/{m['session_id']}", "metadata": {}}
                    for m in case.messages
                ][: args.episodes - stored]
                if not batch:
                    break
                memory.add_many(batch, user_id="u")
                stored += len(batch)
            copy += 1
        scope = Scope("u")
        print(f"{stored} episodes, {len(questions)} queries")
        print("| config | wall p50 ms | wall p95 ms | CPU mean ms |")
        print("|---|---|---|---|")
        for name in args.config.split(","):
            retriever = Retriever(memory.store, memory.embedder, BENCH_PRESETS[name])
            retriever.search("warm up", scope, Filters(), 50, False)
            walls, cpu = [], 0.0
            for q in questions:
                c0, w0 = time.process_time(), time.perf_counter()
                retriever.search(q, scope, Filters(), 50, False)
                walls.append(1000 * (time.perf_counter() - w0))
                cpu += time.process_time() - c0
            walls.sort()
            p95 = walls[int(0.95 * (len(walls) - 1))]
            print(
                f"| {name} | {statistics.median(walls):.1f} | {p95:.1f} | "
                f"{1000 * cpu / len(questions):.1f} |"
            )


if __name__ == "__main__":
    main()
