"""Replays the default preset's in-memory BM25 calls (40 LongMemEval questions on a grown
scale store) through several implementations of ``LexicalIndex.search``, interleaved,
and checks they return the same rankings (issue 34; study "A memory for a lifetime").

    git show 921e1f1:anamnesis/store/index/lexical.py > lex_original.py
    git show d653b28:anamnesis/store/index/lexical.py > lex_matched.py
    git show c44a580:anamnesis/store/index/lexical.py > lex_maxscore.py
    python docs/experiments/scripts/scale_lexical_replay.py STORE.db lex_original.py lex_matched.py lex_maxscore.py
"""
import sys, time, json, importlib.util
from pathlib import Path
import numpy as np
from anamnesis.embed import get_embedder
from anamnesis.memory import Memory
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.bench.scale import source_texts
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.store.base import Filters
from anamnesis.store.index.lexical import LexicalIndex
from anamnesis.types import Scope
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path); mod = importlib.util.module_from_spec(spec); sys.modules[name] = mod; spec.loader.exec_module(mod); return mod
orig = load('lex_orig', sys.argv[2]); matched = load('lex_matched', sys.argv[3]); maxscore = load('lex_maxscore', sys.argv[4])
_, questions = source_texts(Path('/work/shared/data/longmemeval_s_dev.json.gz'))
emb = get_embedder('edge'); emb.embed_query('x')
m = Memory(path=sys.argv[1], embedder=emb, warm=False); m.store.warm_up()
calls = []
real = LexicalIndex.search
def rec(self, *a, **k):
    calls.append((self, a, k)); return real(self, *a, **k)
LexicalIndex.search = rec
r = Retriever(m.store, m.embedder, BENCH_PRESETS['default'])
for q in questions[:40]: r.search(q, Scope('scale'), Filters(), 10, False)
LexicalIndex.search = real
impls = {'original': orig.LexicalIndex.search, 'matched': matched.LexicalIndex.search,
         'maxscore': maxscore.LexicalIndex.search,
         'exhaustive': lambda s, *a, **k: maxscore.LexicalIndex.search(s, *a, exhaustive=True, **k)}
ts = {k: [] for k in impls}; same = 0
for self, a, k in calls:
    res = {}
    for name, fn in impls.items():
        t = time.perf_counter(); res[name] = fn(self, *a, **k); ts[name].append((time.perf_counter() - t) * 1000)
    same += len({json.dumps(v) for v in res.values()}) == 1
print(len(calls), 'same', same, {k: (round(float(np.median(v)), 2), round(float(np.sum(v)), 1)) for k, v in ts.items()})
m.close()
