"""MaxScore top-k against exhaustive BM25 in the in-memory lexical index, interleaved
query by query in one process, on a grown scale store (issue 34; study "A memory for a
lifetime"). Also checks that both return the same rankings.

    python docs/experiments/scripts/scale_lexical_ab.py STORE.db
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

from anamnesis.bench.scale import SCALE_USER, source_texts
from anamnesis.embed import get_embedder
from anamnesis.memory import Memory
from anamnesis.retrieve.query import search_terms
from anamnesis.store.base import Filters
from anamnesis.store.index.lexical import LexicalIndex
from anamnesis.types import Scope

_, questions = source_texts(Path("/work/shared/data/longmemeval_s_dev.json.gz"))
memory = Memory(path=sys.argv[1], embedder=get_embedder("edge"), warm=False)
memory.store.warm_up()
scope = Scope(SCALE_USER)
out = {}
for limit in (50, 200):
    times = {"maxscore": [], "exhaustive": []}
    same = 0
    for question in questions[:100]:
        terms = search_terms(question)
        results = {}
        for name, exhaustive in (("maxscore", False), ("exhaustive", True)):
            LexicalIndex.search.__defaults__ = (None, exhaustive)
            start = time.perf_counter()
            results[name] = memory.store.lexical_search(terms, scope, Filters(), limit)
            times[name].append((time.perf_counter() - start) * 1000)
        same += results["maxscore"] == results["exhaustive"]
    out[limit] = {k: round(float(np.percentile(v, 50)), 2) for k, v in times.items()}
    out[limit]["same_rankings"] = f"{same}/100"
print(json.dumps(out))
memory.close()
