"""The default against ``hybrid`` on one large, consolidated scope.

Fills one user's store with the first SIZE distinct LongMemEval S turns (``edge``
embedder), runs ``consolidate`` (a summary per session, the user's profile), then
searches QUERIES LongMemEval questions once with each configuration (``hybrid`` first,
each after one warm-up search, as the benchmark harness does) and prints each p50 and
their ratio (DATA: ``longmemeval_s_dev.json.gz``):

    python docs/experiments/scripts/scale_default.py 10000 100 DATA
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from anamnesis import Memory
from anamnesis.bench import datasets
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.embed import get_embedder
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.store.base import Filters
from anamnesis.types import Scope

CONFIGS = ("hybrid", "default")


def main(size: int, queries: int, data: str) -> None:
    dataset = datasets.load("longmemeval", data)
    seen: set[tuple[str, str]] = set()
    messages = []
    for case in dataset.cases:
        for message in case.messages:
            key = (message["session_id"], message["metadata"]["turn_id"])
            if key not in seen:
                seen.add(key)
                messages.append(message)
        if len(messages) >= size:
            break
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as folder:
        memory = Memory(path=Path(folder) / "memory.db", embedder=get_embedder("edge"))
        memory.add_many(messages[:size], user_id="u")
        memory.consolidate(user_id="u")
        scope = Scope("u")
        retrievers = {
            name: Retriever(memory.store, memory.embedder, BENCH_PRESETS[name]) for name in CONFIGS
        }
        for retriever in retrievers.values():
            retriever.search("warm up", scope, Filters(), 1, False)
        times: dict[str, list[float]] = {name: [] for name in CONFIGS}
        for case in dataset.cases[:queries]:
            for name, retriever in retrievers.items():
                start = time.perf_counter()
                retriever.search(case.questions[0].text, scope, Filters(), 50, True)
                times[name].append(time.perf_counter() - start)
        memory.close()
    p50 = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    print(
        f"{size} episodes: "
        + ", ".join(f"{name} {ms:.1f} ms" for name, ms in p50.items())
        + f"; ratio {p50['default'] / p50['hybrid']:.2f}"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
