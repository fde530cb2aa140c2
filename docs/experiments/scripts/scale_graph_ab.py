"""The dense graph against the exact scan, interleaved query by query in one process, on a
grown scale store (issue 34; study "A memory for a lifetime").

    python docs/experiments/scripts/scale_graph_ab.py STORE.db
"""
import sys, time, json
from pathlib import Path
import numpy as np
from anamnesis.embed import get_embedder
from anamnesis.memory import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.bench.scale import source_texts
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.store.base import Filters
from anamnesis.store.index.dense import AnnSettings
from anamnesis.types import Scope
db = sys.argv[1]
_, questions = source_texts(Path('/work/shared/data/longmemeval_s_dev.json.gz'))
emb = get_embedder('edge'); emb.embed_query('x')
m = Memory(path=db, embedder=emb, warm=False)
m.store.warm_up()
dense = m.store._dense; on = dense.ann_settings; off = AnnSettings(threshold=10**9)
scope = Scope('scale'); out = {}
for cfg in ['fast', 'default']:
    r = Retriever(m.store, m.embedder, BENCH_PRESETS[cfg]); r.search('warm up', scope, Filters(), 10, False)
    ts = {'graph': [], 'exact': []}
    for q in questions[:60]:
        for name, st in (('graph', on), ('exact', off)):
            dense.ann_settings = st
            t = time.perf_counter(); r.search(q, scope, Filters(), 10, False); ts[name].append((time.perf_counter()-t)*1000)
    out[cfg] = {k: round(float(np.percentile(v, 50)), 1) for k, v in ts.items()}
# dense-only at depth 200 and 100
v = [emb.embed_query(q) for q in questions[:60]]
for depth in (100, 200):
    for name, st in (('graph', on), ('exact', off)):
        dense.ann_settings = st
        t = time.perf_counter()
        for x in v: dense.search(x, user_id='scale', limit=depth)
        out[f'dense{depth}-{name}'] = round((time.perf_counter()-t)/len(v)*1000, 2)
print(json.dumps(out))
m.close()
