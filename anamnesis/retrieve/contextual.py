"""The ``dense_context`` channel: cosine against each turn read in its context.

A short reply ("It happened at yoga in the park.") shares little with the question
that it answers ("Where did Deborah meet Anna?"); the turn before it ("Where did you
meet her?") shares much. Each candidate turn is scored against its *context vector*:
its own embedding plus ``CONTEXT_WEIGHT`` times each adjacent turn's, renormalised.
Nothing extra is embedded or stored: the vectors are the stored ones.

Candidates are the dense pool (the question's nearest turns) and the turns next to
them, so a reply is found through the turn it answers. Adjacency is by turn position
within a session and respects the search's filters (an ``as_of`` search never reads
a later turn's vector).
"""

from __future__ import annotations

import numpy as np

from ..store.base import Candidate
from .candidates import dense_pool
from .request import SearchRequest

#: Weight of each adjacent turn's vector in a turn's context vector. Chosen from
#: {0.3, 0.5, 1.0} by dense-only recall on LoCoMo (study "Chat roles"): at 0.3 a
#: turn's own meaning still dominates, and at the highest weight recall fell below the
#: plain vectors'.
CONTEXT_WEIGHT = 0.3
#: How many of the nearest turns (and their neighbours) are rescored.
CONTEXT_POOL = 100


def dense_context(request: SearchRequest, limit: int) -> list[Candidate]:
    """Turns ranked by the cosine of their context vector with the question's."""
    pool = [c.episode_id for c in dense_pool(request)[:CONTEXT_POOL]]
    if not pool:
        return []
    around = request.store.adjacent_turns(pool, request.scope, request.filters, 2)
    # (turn, previous turn, next turn) for the pool and for the turns beside it.
    triples: dict[str, tuple[str | None, str | None]] = {}
    for anchor in pool:
        at = {offset: other for other, offset in around.get(anchor, [])}
        at[0] = anchor
        for offset in (-1, 0, 1):
            if offset in at and at[offset] not in triples:
                triples[at[offset]] = (at.get(offset - 1), at.get(offset + 1))
    ids = {i for turn, sides in triples.items() for i in (turn, *sides) if i is not None}
    vector = request.stored_vectors(list(ids))
    turns, rows = [], []
    for turn, sides in triples.items():
        own = vector.get(turn)
        if own is None:
            continue
        context = own.astype(np.float32, copy=True)
        for side in sides:
            beside = vector.get(side) if side is not None else None
            if beside is not None:
                context += CONTEXT_WEIGHT * beside
        turns.append(turn)
        rows.append(context)
    if not rows:
        return []
    matrix = np.vstack(rows)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    scores = matrix @ np.asarray(request.query_vector, dtype=np.float32)
    order = np.argsort(-scores, kind="stable")[:limit]
    return [Candidate(turns[i], float(scores[i])) for i in order]
