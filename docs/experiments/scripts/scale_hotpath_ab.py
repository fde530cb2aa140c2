"""The default and `fast` presets of two versions of the code on one or more grown
scale stores, interleaved question by question in one process: the same hits, and
time ratios within the run (issue 34; study "A memory for a lifetime").

The older version is a copy of the package renamed ``anamnesis_base`` (its absolute
imports rewritten), on ``PYTHONPATH`` beside the worktree:

    git archive BASE anamnesis | tar -x -C DIR && mv DIR/anamnesis DIR/basepkg/anamnesis_base
    sed -i -E 's/\\bfrom anamnesis([. ])/from anamnesis_base\\1/g' ...  (every .py file)
    PYTHONPATH=$PWD:DIR/basepkg python docs/experiments/scripts/scale_hotpath_ab.py 60 STORE.db [STORE2.db]

Each (store, version, preset) has a Memory of its own, so no search profits from
what another version's or preset's searches left in memory.
"""
import importlib, json, sys, time
from pathlib import Path
import numpy as np

n = int(sys.argv[1])
stores = sys.argv[2:]


def open_one(db, package, cfg):
    memory = importlib.import_module(package + ".memory")
    embed = importlib.import_module(package + ".embed")
    presets = importlib.import_module(package + ".bench.presets").BENCH_PRESETS
    pipeline = importlib.import_module(package + ".retrieve.pipeline")
    base = importlib.import_module(package + ".store.base")
    types = importlib.import_module(package + ".types")
    emb = embed.get_embedder("edge"); emb.embed_query("x")
    m = memory.Memory(path=db, embedder=emb, warm=False)
    m.store.warm_up()
    scope = types.Scope("scale")
    r = pipeline.Retriever(m.store, m.embedder, presets[cfg])
    r.search("warm up", scope, base.Filters(), 10, False)
    # A filtered search loads the filter columns once (not part of the hot path).
    m.store.lexical_search(["warm"], scope, base.Filters(not_role="user"), 5)
    return m, lambda q: [h.episode.id for h in r.search(q, scope, base.Filters(), 10, False)]


from anamnesis.bench.scale import source_texts
_, questions = source_texts(Path("/work/shared/data/longmemeval_s_dev.json.gz"))
questions = questions[:n]
versions = (("base", "anamnesis_base"), ("new", "anamnesis"))
opened = {
    (s, v, cfg): open_one(db, package, cfg)
    for s, db in enumerate(stores)
    for v, package in versions
    for cfg in ("fast", "default")
}
times = {key: [] for key in opened}
same = {(s, cfg): 0 for s in range(len(stores)) for cfg in ("fast", "default")}
for i, q in enumerate(questions):
    keys = list(opened) if i % 2 == 0 else list(reversed(opened))
    hits = {}
    for key in keys:
        t = time.perf_counter()
        hits[key] = opened[key][1](q)
        times[key].append((time.perf_counter() - t) * 1000)
    for s, cfg in same:
        same[(s, cfg)] += hits[(s, "base", cfg)] == hits[(s, "new", cfg)]
p50 = {key: float(np.percentile(ts, 50)) for key, ts in times.items()}
out = {"questions": n, "stores": stores, "p50_ms": {f"{s} {v} {c}": round(x, 1) for (s, v, c), x in p50.items()}}
ratios = {}
for s in range(len(stores)):
    for v, _ in versions:
        ratios[f"{s} {v} default/fast"] = round(p50[(s, v, "default")] / p50[(s, v, "fast")], 2)
    for cfg in ("fast", "default"):
        ratios[f"{s} new/base {cfg}"] = round(p50[(s, "new", cfg)] / p50[(s, "base", cfg)], 2)
for s in range(1, len(stores)):
    for v, _ in versions:
        for cfg in ("fast", "default"):
            ratios[f"{s}/0 {v} {cfg}"] = round(p50[(s, v, cfg)] / p50[(0, v, cfg)], 2)
out["ratios"] = ratios
out["identical_top10"] = {f"{s} {c}": k for (s, c), k in same.items()}
print(json.dumps(out, indent=1))
for m, _ in opened.values():
    m.close()
