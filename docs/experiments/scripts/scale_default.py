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


def distinct_turns(data: str, size: int) -> list[dict]:
    """The first ``size`` distinct turns of the LongMemEval file ``data`` (a turn is
    kept once however many haystacks hold it)."""
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
    return messages[:size]


def main(size: int, queries: int, data: str, configs: tuple[str, ...] = CONFIGS) -> None:
    dataset = datasets.load("longmemeval", data)
    messages = distinct_turns(data, size)
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as folder:
        memory = Memory(path=Path(folder) / "memory.db", embedder=get_embedder("edge"))
        memory.add_many(messages[:size], user_id="u")
        memory.consolidate(user_id="u")
        scope = Scope("u")
        retrievers = {
            name: Retriever(memory.store, memory.embedder, BENCH_PRESETS[name]) for name in configs
        }
        for retriever in retrievers.values():
            retriever.search("warm up", scope, Filters(), 1, False)
        times: dict[str, list[float]] = {name: [] for name in configs}
        cpu: dict[str, list[float]] = {name: [] for name in configs}
        for case in dataset.cases[:queries]:
            for name, retriever in retrievers.items():
                start, start_cpu = time.perf_counter(), time.thread_time()
                retriever.search(case.questions[0].text, scope, Filters(), 50, True)
                times[name].append(time.perf_counter() - start)
                cpu[name].append(time.thread_time() - start_cpu)
        memory.close()
    p50 = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    cpu50 = {name: statistics.median(t) * 1e3 for name, t in cpu.items()}
    first = configs[0]
    print(
        f"{size} episodes, p50 ms wall (CPU), ÷ {first}: "
        + ", ".join(
            f"{name} {p50[name]:.1f} ({cpu50[name]:.1f}) {cpu50[name] / cpu50[first]:.2f}×"
            for name in configs
        )
    )


if __name__ == "__main__":
    names = tuple(sys.argv[4].split(",")) if len(sys.argv) > 4 else CONFIGS
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], names)
