"""Where a search inside small scopes of a grown scale store spends its time: per store
method (thread CPU time, calls per search) over two passes of the bench's questions and
scopes, then cProfile of a third (issue 34; study "A small scope inside a large store").

    python docs/experiments/scripts/scale_small_scope_profile.py STORE.db EPISODES PRESET [profile]

The store is one of ``anamnesis bench scale --scope-size 1000 --keep-store``; query i
searches scope ``i * full // 60`` as the bench does (``search_users``).
"""

import collections
import cProfile
import functools
import pstats
import sys
import time
from pathlib import Path

import numpy as np

from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.bench.scale import search_users, source_texts
from anamnesis.embed import get_embedder
from anamnesis.memory import Memory
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.store.base import Filters
from anamnesis.types import Scope

db, stored, preset = sys.argv[1], int(sys.argv[2]), sys.argv[3]
profile = len(sys.argv) > 4
_, questions = source_texts(Path("../shared/data/longmemeval_s_dev.json.gz"))
questions = questions[:60]
users = search_users(stored, 60, 1000)
embedder = get_embedder("edge")
embedder.embed_query("x")
memory = Memory(path=db, embedder=embedder, warm=False)
start = time.perf_counter()
memory.store.warm_up()
print("warm_up s", round(time.perf_counter() - start, 1), flush=True)
store = memory.store
spent: dict[str, float] = collections.defaultdict(float)
calls: collections.Counter = collections.Counter()
METHODS = (
    "lexical_search", "dense_search", "dense_search_sessions", "time_search",
    "adjacent_turns", "neighbours", "get_episodes", "turn_info", "derived_texts",
    "derived_episodes", "episode_vectors", "episode_times", "get_meta",
    "_refresh_dense", "_in_scope", "_allowed_rowids",
)  # fmt: skip
for name in METHODS:
    method = getattr(store, name, None)
    if method is None:
        continue

    def timed(method=method, name=name):
        @functools.wraps(method)
        def run(*args, **kwargs):
            begin = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                spent[name] += time.thread_time() - begin
                calls[name] += 1

        return run

    setattr(store, name, timed())
retriever = Retriever(store, memory.embedder, BENCH_PRESETS[preset])
retriever.search("warm up", Scope(users[0]), Filters(), 10, False)
for round_number in (1, 2):
    spent.clear()
    calls.clear()
    wall, cpu = [], []
    for question, user in zip(questions, users, strict=True):
        begin, thread = time.perf_counter(), time.thread_time()
        retriever.search(question, Scope(user), Filters(), 10, False)
        wall.append((time.perf_counter() - begin) * 1000)
        cpu.append((time.thread_time() - thread) * 1000)
    print(
        f"{preset} round {round_number}: wall p50 {np.percentile(wall, 50):.1f} "
        f"p95 {np.percentile(wall, 95):.1f}, CPU p50 {np.percentile(cpu, 50):.1f} ms"
    )
    for name, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        print(
            f"   {name:24s} {seconds / len(questions) * 1000:7.2f} ms CPU/search  "
            f"calls/search {calls[name] / len(questions):.1f}"
        )
if profile:
    profiler = cProfile.Profile()
    profiler.enable()
    for question, user in zip(questions, users, strict=True):
        retriever.search(question, Scope(user), Filters(), 10, False)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(50)
    stats.sort_stats("tottime").print_stats(30)
memory.close()
