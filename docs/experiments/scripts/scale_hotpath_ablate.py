"""What each part of the default preset costs on a grown scale store: the default with
one part left out at a time, interleaved question by question in one process, as
ratios to the whole default (issue 34; study "A memory for a lifetime"). What one search
leaves in memory for the next (the lexical index's scores and contributions, the
store's rows) is dropped before each, so no variant profits from another's work.

    python docs/experiments/scripts/scale_hotpath_ablate.py STORE.db [40]
"""
import json, sys, time
from pathlib import Path
import numpy as np
from anamnesis.bench.presets import BENCH_PRESETS
from anamnesis.bench.scale import source_texts
from anamnesis.embed import get_embedder
from anamnesis.memory import Memory
from anamnesis.retrieve.pipeline import Retriever
from anamnesis.store.base import Filters
from anamnesis.types import Scope

db = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 40
_, questions = source_texts(Path("/work/shared/data/longmemeval_s_dev.json.gz"))
emb = get_embedder("edge"); emb.embed_query("x")
m = Memory(path=db, embedder=emb, warm=False)
m.store.warm_up()
scope = Scope("scale")
m.store.lexical_search(["warm"], scope, Filters(not_role="user"), 5)
default = BENCH_PRESETS["default"]


def without(*names):
    return default.with_(
        channels=tuple(c for c in default.channels if c not in names),
        seed_channels=tuple(c for c in default.seed_channels if c not in names),
        notes_channels=tuple(c for c in (default.notes_channels or ()) if c not in names),
    )


variants = {
    "default": default,
    "fast": BENCH_PRESETS["fast"],
    "no prf": without("prf"),
    "no session": without("session"),
    "no replies": without("replies"),
    "no role channels": without("role_lexical", "role_dense"),
    "no speaker channels": without("speaker_lexical", "speaker_dense"),
    "no summaries": without("summaries"),
    "no temporal": without("temporal"),
    "no stages": default.with_(stages=()),
    "no query features": default.with_(query=()),
}
retrievers = {k: Retriever(m.store, m.embedder, c) for k, c in variants.items()}
for r in retrievers.values():
    r.search("warm up", scope, Filters(), 10, False)
times = {k: [] for k in variants}


def forget():
    index = m.store._lexical._index
    for name in ("_scored", "_contribution_cache"):
        if hasattr(index, name):
            getattr(index, name).clear()
    if hasattr(index, "_contribution_values"):
        index._contribution_values = 0
    m.store._row_places = None



for i, q in enumerate(questions[:n]):
    names = list(variants) if i % 2 == 0 else list(reversed(variants))
    for k in names:
        forget()
        t = time.perf_counter()
        retrievers[k].search(q, scope, Filters(), 10, False)
        times[k].append((time.perf_counter() - t) * 1000)
p50 = {k: float(np.percentile(v, 50)) for k, v in times.items()}
print(json.dumps({k: {"p50_ms": round(v, 1), "of_default": round(v / p50["default"], 2)} for k, v in p50.items()}, indent=1))
m.close()
