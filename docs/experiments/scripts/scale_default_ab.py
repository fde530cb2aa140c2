"""Presets on a grown scale store, interleaved question by question, each question asked
once: p50 and mean of this thread's CPU time per search, and the wall-clock p50 (issue
34; study "Feedback over the first stage's rankings").

    python docs/experiments/scripts/scale_default_ab.py STORE.db default,default-prf-scope,fast 100
    python docs/experiments/scripts/scale_default_ab.py STORE.db PRESETS 100 SCOPE_SIZE EPISODES

Each preset has a ``Memory`` of its own, warmed up with five questions that are not
measured. The questions are LongMemEval S dev's from the 101st on. With SCOPE_SIZE and
EPISODES (a store grown with ``--scope-size``), question i searches the scope the
bench's ``search_users`` gives it; otherwise every search is in the one scope. The last
preset is the reference of the ratio column.
"""

import statistics
import sys
import time
from pathlib import Path

from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.bench.scale import search_users, source_texts
from anamnesis.embed import get_embedder
from anamnesis.memory import Memory
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.store.base import Filters
from anamnesis.types import Scope

DATA = Path(__file__).parents[3] / ".." / "shared" / "data" / "longmemeval_s_dev.json.gz"

db, presets = sys.argv[1], sys.argv[2].split(",")
count = int(sys.argv[3]) if len(sys.argv) > 3 else 100
scope_size = int(sys.argv[4]) if len(sys.argv) > 4 else 0
episodes = int(sys.argv[5]) if len(sys.argv) > 5 else 0
users = search_users(episodes, count, scope_size or None)
_, questions = source_texts(DATA)
embedder = get_embedder("edge")
embedder.embed_query("warm up")
retrievers = {}
for name in presets:
    memory = Memory(path=db, embedder=embedder, warm=False)
    memory.store.warm_up()
    retrievers[name] = Retriever(memory.store, memory.embedder, BENCH_PRESETS[name])
    for question in questions[:5]:
        retrievers[name].search(question, Scope(users[0]), Filters(), 10, False)
cpu: dict[str, list[float]] = {name: [] for name in presets}
wall: dict[str, list[float]] = {name: [] for name in presets}
for i, question in enumerate(questions[100 : 100 + count]):
    for name in presets:
        start, start_cpu = time.perf_counter(), time.thread_time()
        retrievers[name].search(question, Scope(users[i]), Filters(), 10, False)
        cpu[name].append((time.thread_time() - start_cpu) * 1000)
        wall[name].append((time.perf_counter() - start) * 1000)
reference = statistics.median(cpu[presets[-1]])
for name in presets:
    print(
        f"{Path(db).parent.name} {name}: CPU p50 {statistics.median(cpu[name]):.2f} "
        f"mean {statistics.mean(cpu[name]):.2f} ms, wall p50 {statistics.median(wall[name]):.2f} "
        f"ms, CPU ÷ {presets[-1]} {statistics.median(cpu[name]) / reference:.2f}"
    )
