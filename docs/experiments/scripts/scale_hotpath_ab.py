"""The default and `fast` presets of two versions of the code, interleaved question by
question in one process on a grown scale store: the same hits, and the time ratios
(issue 34; study "A memory for a lifetime").

The older version is a copy of the package renamed ``anamnesis_base`` (its absolute
imports rewritten), on ``PYTHONPATH`` beside the worktree:

    git archive BASE anamnesis | tar -x -C DIR && mv DIR/anamnesis DIR/basepkg/anamnesis_base
    sed -i -E 's/\\bfrom anamnesis([. ])/from anamnesis_base\\1/g' ...  (every .py file)
    PYTHONPATH=$PWD:DIR/basepkg python docs/experiments/scripts/scale_hotpath_ab.py STORE.db [60]
"""
import importlib, json, sys, time
from pathlib import Path
import numpy as np

db = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 60


def version(package):
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
    out = {}
    for cfg in ("fast", "default"):
        r = pipeline.Retriever(m.store, m.embedder, presets[cfg])
        out[cfg] = (lambda r: lambda q: [h.episode.id for h in r.search(q, scope, base.Filters(), 10, False)])(r)
        out[cfg]("warm up")
        # A filtered search loads the filter columns once (not part of the hot path).
        m.store.lexical_search(["warm"], scope, base.Filters(not_role="user"), 5)
    return m, out


from anamnesis.bench.scale import source_texts
_, questions = source_texts(Path("/work/shared/data/longmemeval_s_dev.json.gz"))
questions = questions[:n]
versions = {"base": version("anamnesis_base"), "new": version("anamnesis")}
times = {(v, c): [] for v in versions for c in ("fast", "default")}
same = {c: 0 for c in ("fast", "default")}
for i, q in enumerate(questions):
    order = ["base", "new"] if i % 2 == 0 else ["new", "base"]
    for cfg in ("fast", "default"):
        hits = {}
        for v in order:
            t = time.perf_counter()
            hits[v] = versions[v][1][cfg](q)
            times[(v, cfg)].append((time.perf_counter() - t) * 1000)
        same[cfg] += hits["base"] == hits["new"]
p50 = {f"{v} {c}": round(float(np.percentile(ts, 50)), 1) for (v, c), ts in times.items()}
ratio = {
    "default/fast base": round(p50["base default"] / p50["base fast"], 2),
    "default/fast new": round(p50["new default"] / p50["new fast"], 2),
    "new/base default": round(p50["new default"] / p50["base default"], 2),
    "new/base fast": round(p50["new fast"] / p50["base fast"], 2),
}
print(json.dumps({"questions": n, "p50_ms": p50, "ratios": ratio, "identical_top10": same}))
for m, _ in versions.values():
    m.close()
