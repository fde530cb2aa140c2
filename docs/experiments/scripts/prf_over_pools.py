"""An experiment, not adopted: pseudo-relevance feedback over the question's lexical and
dense pools only (the rows the default already holds) instead of the whole scope, run
through a benchmark command in this process (issue 34; study "A memory for a lifetime").

    python docs/experiments/scripts/prf_over_pools.py locomo --data ../shared/data/locomo10.json.gz --config default --limit 3 --embedder edge --out DIR

Its ranking equals a BM25 search of the same terms among those rows (the index's
filtered search with the pools' rowids), which is what a cheap implementation would
compute; here it is computed that way, so only its recall is measured, not its speed.
"""
import sys

from anamnesis.retrieve import candidates
from anamnesis.retrieve.channels import CHANNELS
from anamnesis.retrieve.expansion import feedback_terms
from anamnesis.retrieve.query import words
from anamnesis.store.sqlite.sql import scope_terms


def prf_over_pools(request, limit):
    config = request.config
    terms = candidates._terms(request, request.analysis.text)
    if not terms:
        return []
    seeds = request.channel("lexical", limit)[: config.prf_docs]
    if not seeds:
        return []
    episodes = request.episodes([c.episode_id for c in seeds])
    speaker_words = [w for s in candidates.speakers_named(request) for w in words(s)]
    extra = feedback_terms(
        terms, [e.content for e in episodes.values()], config.prf_terms, exclude=speaker_words
    )
    ids = list(dict.fromkeys(
        c.episode_id for c in [*candidates._pool(request, "lexical"), *candidates.dense_pool(request)]
    ))
    store = request.store
    with store._lock:
        marks = ",".join("?" * len(ids))
        rowids = [r[0] for r in store._conn.execute(f"SELECT rowid FROM episodes WHERE id IN ({marks})", ids)]
        scope = request.scope
        tokens = scope_terms(scope.user_id, scope.agent_id, scope.session_id).split()
        import numpy as np
        allowed = np.array(sorted(rowids), dtype=np.int64)
        ranked = store._lexical.search(store._conn, [*terms, *extra], tokens, lambda: allowed, limit)
        if ranked is None:  # the index is not ready: FTS5 over the whole scope
            return store.lexical_search([*terms, *extra], scope, request.filters, limit)
        return store._candidates(ranked, scope)


CHANNELS["prf"] = prf_over_pools

from anamnesis.bench.cli import bench  # noqa: E402

bench(sys.argv[1:])
