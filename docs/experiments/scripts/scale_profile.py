"""cProfile of one preset's search on a grown scale store (issue 34; study "A memory for a lifetime").

    python docs/experiments/scripts/scale_profile.py STORE.db default
"""
import cProfile, pstats, sys, time, glob
from pathlib import Path
from anamnesis.embed import get_embedder
from anamnesis.memory import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.bench.scale import source_texts
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.store.base import Filters
from anamnesis.types import Scope
db = sys.argv[1]; cfg = sys.argv[2]
_, questions = source_texts(Path('/work/shared/data/longmemeval_s_dev.json.gz'))
emb = get_embedder('edge'); emb.embed_query('x')
m = Memory(path=db, embedder=emb, warm=False)
t=time.perf_counter(); m.store.warm_up(); print('warm_up', time.perf_counter()-t, getattr(getattr(m.store, '_ann', None), 'ready', None))
r = Retriever(m.store, m.embedder, BENCH_PRESETS[cfg]); scope = Scope('scale')
r.search('warm up', scope, Filters(), 10, False)
qs = questions[:40]
t=time.perf_counter()
for q in qs: r.search(q, scope, Filters(), 10, False)
print('mean ms', (time.perf_counter()-t)/len(qs)*1000)
pr = cProfile.Profile(); pr.enable()
for q in qs: r.search(q, scope, Filters(), 10, False)
pr.disable()
st = pstats.Stats(pr); st.sort_stats('cumulative').print_stats(45)
st.sort_stats('tottime').print_stats(25)
m.close()
