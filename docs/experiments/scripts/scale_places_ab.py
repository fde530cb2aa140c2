"""Rows placed from the dense index's columns against rows placed in SQL, on a grown
scale store, interleaved question by question in one process (issue 34; study "Places
from the dense index's columns").

    python docs/experiments/scripts/scale_places_ab.py STORE.db default,fast 100

Each (preset, way) has a ``Memory`` of its own, warmed up with five questions that are
not measured; the SQL way is the same code with the store's ``_dense_places`` answering
nothing, so every row is placed as before. Prints, per preset and way, the p50 and mean
of this thread's CPU time per search and of ``_in_scope``'s share of it, and checks
that both ways return the same hits (ids, scores, order, context) for every question.
"""

import statistics
import sys
import time
from pathlib import Path

from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.bench.scale import source_texts
from anamnesis.embed import get_embedder
from anamnesis.memory import Memory
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.store.base import Filters
from anamnesis.store.sqlite import reads
from anamnesis.types import Scope

DATA = Path(__file__).parents[3] / ".." / "shared" / "data" / "longmemeval_s_dev.json.gz"
WAYS = ("columns", "sql")

db, presets = sys.argv[1], sys.argv[2].split(",")
count = int(sys.argv[3]) if len(sys.argv) > 3 else 100
_, questions = source_texts(DATA)
embedder = get_embedder("edge")
embedder.embed_query("warm up")

placing = [0.0]
in_scope = reads.SQLiteReads._in_scope


def timed_in_scope(self, rowids, scope):  # type: ignore[no-untyped-def]
    start = time.thread_time()
    try:
        return in_scope(self, rowids, scope)
    finally:
        placing[0] += time.thread_time() - start


reads.SQLiteReads._in_scope = timed_in_scope  # type: ignore[method-assign]
retrievers = {}
for name in presets:
    for way in WAYS:
        memory = Memory(path=db, embedder=embedder, warm=False)
        memory.store.warm_up()
        if way == "sql":
            memory.store._dense_places = lambda rowids: {}
        retrievers[name, way] = Retriever(memory.store, memory.embedder, BENCH_PRESETS[name])
        for question in questions[:5]:
            retrievers[name, way].search(question, Scope("scale"), Filters(), 10, False)
cpu = {key: [] for key in retrievers}
share = {key: [] for key in retrievers}
differ = {name: 0 for name in presets}
for question in questions[100 : 100 + count]:
    for name in presets:
        found = {}
        for way in WAYS:
            placing[0] = 0.0
            start = time.thread_time()
            hits = retrievers[name, way].search(question, Scope("scale"), Filters(), 10, False)
            cpu[name, way].append((time.thread_time() - start) * 1000)
            share[name, way].append(placing[0] * 1000)
            found[way] = [(h.episode.id, h.score, [e.id for e in h.context]) for h in hits]
        differ[name] += found["columns"] != found["sql"]
for (name, way), times in cpu.items():
    print(
        f"{Path(db).parent.name} {name} {way}: CPU p50 {statistics.median(times):.2f} "
        f"mean {statistics.mean(times):.2f} ms; _in_scope p50 "
        f"{statistics.median(share[name, way]):.2f} mean {statistics.mean(share[name, way]):.2f} ms"
    )
for name in presets:
    print(f"{name}: questions whose hits differ between the two ways: {differ[name]} of {count}")
