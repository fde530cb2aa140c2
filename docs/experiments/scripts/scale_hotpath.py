"""Where the default preset's search time goes on a grown scale store, by channel and
stage (exclusive time: a channel's time without the channels it calls), with the SQL
statements each search runs (issue 34; study "A memory for a lifetime").

    python docs/experiments/scripts/scale_hotpath.py STORE.db [default] [40]
"""
import sys, time, re
from collections import Counter, defaultdict
from pathlib import Path
import numpy as np
from anamnesis.embed import get_embedder
from anamnesis.memory import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.bench.scale import source_texts
from anamnesis.retrieve import channels as channels_module, pipeline, stages as stages_module
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.store.base import Filters
from anamnesis.types import Scope

db = sys.argv[1]
cfg = sys.argv[2] if len(sys.argv) > 2 else "default"
n = int(sys.argv[3]) if len(sys.argv) > 3 else 40
_, questions = source_texts(Path("/work/shared/data/longmemeval_s_dev.json.gz"))
emb = get_embedder("edge"); emb.embed_query("x")
m = Memory(path=db, embedder=emb, warm=False)
m.store.warm_up()
scope = Scope("scale")
r = Retriever(m.store, m.embedder, BENCH_PRESETS[cfg])
r.search("warm up", scope, Filters(), 10, False)
# A filtered search loads the filter columns once (not part of the hot path).
m.store.lexical_search(["warm"], scope, Filters(not_role="user"), 5)

exclusive: dict[str, float] = defaultdict(float)
calls: Counter = Counter()
stack: list[list] = []


def timed(name, fn):
    def run(*args, **kwargs):
        stack.append([name, 0.0])
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent = time.perf_counter() - t
            _, inner = stack.pop()
            exclusive[name] += spent - inner
            calls[name] += 1
            if stack:
                stack[-1][1] += spent
    return run


for name, fn in list(channels_module.CHANNELS.items()):
    channels_module.CHANNELS[name] = timed("channel " + name, fn)
for name, fn in list(stages_module.STAGES.items()):
    stages_module.STAGES[name] = timed("stage " + name, fn)
store = m.store
for method in ("lexical_search", "dense_search", "dense_search_sessions", "time_search",
               "turn_info", "get_episodes", "episode_vectors", "adjacent_turns", "neighbours",
               "episode_times", "_in_scope", "_allowed_rowids", "_refresh_dense"):
    setattr(store, method, timed("store " + method, getattr(store, method)))
lex = store._lexical._index
lex.search = timed("index LexicalIndex.search", lex.search)
store._dense.search = timed("index DenseIndex.search", store._dense.search)
emb_q = m.embedder.embed_query
m.embedder.embed_query = timed("embed_query", emb_q)

statements: Counter = Counter()
store._conn.set_trace_callback(lambda s: statements.update([re.sub(r"\s+", " ", s)[:70]]))
times = []
t0 = time.perf_counter()
for q in questions[:n]:
    stack.append(["search", 0.0])
    t = time.perf_counter()
    r.search(q, scope, Filters(), 10, False)
    spent = time.perf_counter() - t
    _, inner = stack.pop()
    exclusive["search (rest: analysis, fusion, hits)"] += spent - inner
    times.append(spent * 1000)
store._conn.set_trace_callback(None)
total = sum(times)
print(f"{cfg}: {n} questions, p50 {np.percentile(times, 50):.1f} ms, mean {total / n:.1f} ms")
for name, spent in sorted(exclusive.items(), key=lambda kv: -kv[1]):
    print(f"  {spent * 1000 / n:7.2f} ms/search  {100 * spent * 1000 / total:5.1f}%  "
          f"{calls[name] / n:5.2f} calls/search  {name}")
print("SQL statements per search:")
for s, c in statements.most_common(25):
    print(f"  {c / n:6.2f}  {s}")
m.close()
