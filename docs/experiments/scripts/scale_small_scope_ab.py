"""Searches inside small scopes of a grown scale store, two versions of the code
interleaved question by question in one process: the same hits, and the time ratio
within the run (issue 34; study "A small scope inside a large store").

The store is one of ``anamnesis bench scale --scope-size 1000 --keep-store``; its
episodes are in scopes of 1,000 (``scale-00000``, ...), and query i searches scope
``i * full // queries`` as the bench does (``search_users``). The older version is a
copy of the package renamed ``anamnesis_base`` (its absolute imports rewritten), on
``PYTHONPATH`` beside the worktree:

    git archive BASE anamnesis | tar -x -C DIR && mv DIR/anamnesis DIR/basepkg/anamnesis_base
    sed -i -E 's/\\bfrom anamnesis([. ])/from anamnesis_base\\1/g' ...  (every .py file)
    PYTHONPATH=$PWD:DIR/basepkg python docs/experiments/scripts/scale_small_scope_ab.py \\
        STORE.db EPISODES PRESET [QUERIES] [ROUNDS] [SCOPE_SIZE]

``SCOPE_SIZE`` 0 is a store of ``--scope-size`` unset: every search in its one scope.

Each version has a Memory of its own, opened and warmed up (``Store.warm_up``, one
search, one filtered search) before the clock starts. A round visits every query's
scope once in order (the bench's one pass); a second round finds each scope's rows
already read (its pages in memory). Per query the two versions alternate which goes
first, so neither always finds the other's pages in the OS cache. Each search's wall
time and its thread's CPU time (user and system) are recorded: on a loaded machine
the wall time is mostly waiting for a CPU, the CPU time is the search's own work. So
are the page faults of its thread (minor and major): each version maps the store's
files on its own, so a fault is a page of the files (or of memory) that version
touches for the first time, which a cold cache would have to read.
"""

import importlib
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

from anamnesis.bench.scale import search_users, source_texts

db, stored, preset = sys.argv[1], int(sys.argv[2]), sys.argv[3]
count = int(sys.argv[4]) if len(sys.argv) > 4 else 60
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 2
scope_size = int(sys.argv[6]) if len(sys.argv) > 6 else 1000
_, questions = source_texts(Path("../shared/data/longmemeval_s_dev.json.gz"))
questions = questions[:count]
users = search_users(stored, count, scope_size or None)


def open_one(package: str):
    memory = importlib.import_module(package + ".memory")
    embed = importlib.import_module(package + ".embed")
    presets = importlib.import_module(package + ".bench.presets").BENCH_PRESETS
    pipeline = importlib.import_module(package + ".retrieve.pipeline")
    base = importlib.import_module(package + ".store.base")
    types = importlib.import_module(package + ".types")
    emb = embed.get_embedder("edge")
    emb.embed_query("x")
    m = memory.Memory(path=db, embedder=emb, warm=False)
    m.store.warm_up()
    r = pipeline.Retriever(m.store, m.embedder, presets[preset])
    r.search("warm up", types.Scope(users[0]), base.Filters(), 10, False)
    # A filtered search loads the filter columns once (not part of the hot path).
    m.store.lexical_search(["warm"], types.Scope(users[0]), base.Filters(not_role="user"), 5)

    def search(q: str, user: str) -> list:
        hits = r.search(q, types.Scope(user), base.Filters(), 10, False)
        return [(h.episode.id, round(h.score, 12)) for h in hits]

    return m, search


versions = {"base": open_one("anamnesis_base"), "new": open_one("anamnesis")}
out: dict = {"store": db, "preset": preset, "queries": count, "rounds": []}
for _ in range(rounds):
    times: dict[str, list[float]] = {v: [] for v in versions}
    cpu: dict[str, list[float]] = {v: [] for v in versions}
    faults: dict[str, list[int]] = {v: [] for v in versions}
    same = 0
    for i, (q, user) in enumerate(zip(questions, users, strict=True)):
        order = list(versions) if i % 2 == 0 else list(reversed(versions))
        hits = {}
        for v in order:
            usage = resource.getrusage(resource.RUSAGE_THREAD)
            start, thread = time.perf_counter(), time.thread_time()
            hits[v] = versions[v][1](q, user)
            times[v].append((time.perf_counter() - start) * 1000)
            cpu[v].append((time.thread_time() - thread) * 1000)
            after = resource.getrusage(resource.RUSAGE_THREAD)
            faults[v].append(after.ru_minflt - usage.ru_minflt + after.ru_majflt - usage.ru_majflt)
        same += hits["base"] == hits["new"]
    stats = {
        v: {
            "p50": round(float(np.percentile(times[v], 50)), 1),
            "p95": round(float(np.percentile(times[v], 95)), 1),
            "cpu_p50": round(float(np.percentile(cpu[v], 50)), 1),
            "cpu_p95": round(float(np.percentile(cpu[v], 95)), 1),
            "page_faults_mean": round(float(np.mean(faults[v])), 1),
        }
        for v in versions
    }
    ratio = {k: round(stats["new"][k] / max(stats["base"][k], 1e-9), 2) for k in stats["new"]}
    out["rounds"].append({"ms": stats, "new/base": ratio, "identical_hits": same})
out["load_average"] = [round(x, 1) for x in __import__("os").getloadavg()]
print(json.dumps(out, indent=1))
for m, _ in versions.values():
    m.close()
