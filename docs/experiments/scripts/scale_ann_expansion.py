"""The graph's recall@100 against the exact scan, and its search time, for search
expansions of several times the candidates asked for (issue 34; study "Feedback over
the first stage's rankings"): the bench's own measurement (``bench.scale.ann_recall``,
200 LongMemEval questions) with ``ann.SEARCH_EXPANSION_FACTOR`` set to each value.

    python docs/experiments/scripts/scale_ann_expansion.py STORE.db 4,3,2
"""

import sys
from pathlib import Path

from anamnesis.bench.scale import ann_recall, source_texts
from anamnesis.embed import get_embedder
from anamnesis.memory import Memory
from anamnesis.store.index import ann

DATA = Path(__file__).parents[3] / ".." / "shared" / "data" / "longmemeval_s_dev.json.gz"

_, questions = source_texts(DATA)
memory = Memory(path=sys.argv[1], embedder=get_embedder("edge"), warm=False)
memory.store.warm_up()
for factor in (int(f) for f in sys.argv[2].split(",")):
    ann.SEARCH_EXPANSION_FACTOR = factor
    found = ann_recall(memory, questions[:200], ["scale"] * 200)
    print(
        f"expansion {factor}× asked: recall@100 {found['recall_at_100']:.4f}, "
        f"graph p50 {found['graph_ms']['p50']:.2f} ms"
    )
memory.close()
