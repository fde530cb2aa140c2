"""The ``summaries`` channel: episodes behind the session summaries and profiles that
match the question.

Derived items (``anamnesis.consolidate``) are matched by their text: cosine between
the question and each item's vector, and BM25 over the items' words (a scope holds a
few hundred items at most, so both run in numpy over the scope's items), fused by
reciprocal rank. The best ``TOP_ITEMS`` items then propose their provenance episodes
that pass the scope and filters (in SQL), each scored by the mean of its item's
cosine and its own cosine to the question. An item proposes at most
``ITEM_EPISODES`` of its episodes. In the default pipeline; ``consolidate`` builds the
items, and until it has the channel proposes nothing.
The constants are first guesses, not tuned (docs/experiments/2026-11-25-summaries-and-profiles.md).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ..store.base import Candidate, Store
from ..types import Scope
from .query import words
from .request import SearchRequest

#: Items (summaries and profiles together) whose episodes are proposed.
TOP_ITEMS = 4
#: An item's episodes proposed, the closest to the question first: a profile's facts
#: and an abstractive summary's turns can be many (an extractive summary keeps at most
#: ``consolidate.salience.MAX_LINES`` sentences, fewer than this: the cap never cuts one).
ITEM_EPISODES = 8
#: RRF constant fusing the dense and BM25 rankings of the items.
ITEM_RRF_K = 10.0
#: BM25 parameters (the usual Okapi defaults, as FTS5's).
BM25_K1, BM25_B = 1.2, 0.75


def _stem(word: str) -> str:
    base = word.split("'")[0]
    return base[:-1] if len(base) > 3 and base.endswith("s") else base


@lru_cache(maxsize=8192)
def _terms_of(text: str) -> tuple[Counter[str], int]:
    """An item's stemmed word counts and its length in words (cached: an item's text
    only changes when it is rebuilt, and every search of its scope reads it; the
    counts are read-only)."""
    raw = Counter(words(text))  # stem each distinct word once, not each occurrence
    counts: Counter[str] = Counter()
    for word, n in raw.items():
        counts[_stem(word)] += n
    return counts, sum(raw.values())


def bm25_scores(terms: Sequence[str], texts: Sequence[str]) -> list[float]:
    """Okapi BM25 of each text for ``terms`` (light plural stemming on both sides)."""
    parsed = [_terms_of(t) for t in texts]
    docs = [counts for counts, _ in parsed]
    if not docs:
        return []
    query = list(dict.fromkeys(_stem(t) for t in terms))
    idf = {}
    for term in query:
        df = sum(1 for d in docs if term in d)
        idf[term] = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
    average = sum(length for _, length in parsed) / len(docs) or 1.0
    scores = []
    for doc, length in parsed:
        score = 0.0
        for term in query:
            tf = doc.get(term, 0)
            if tf:
                norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * length / average)
                score += idf[term] * tf * (BM25_K1 + 1) / norm
        scores.append(score)
    return scores


def matching_items(
    store: Store,
    scope: Scope,
    terms: Sequence[str],
    vector: np.ndarray,
    kinds: Sequence[str] | None = None,
) -> list[tuple[str, float]]:
    """The ids of the scope's derived items (of ``kinds``, default every kind), best
    match first, each with its cosine to ``vector``."""
    one_kind = kinds[0] if kinds is not None and len(kinds) == 1 else None  # asked in SQL
    found = [
        (item_id, text, v)
        for item_id, kind, text, v in store.derived_texts(scope, one_kind)
        if kinds is None or kind in kinds
    ]
    if not found:
        return []
    cosines = np.stack([v for _, _, v in found]) @ np.asarray(vector, dtype=np.float32)
    lexical = bm25_scores(terms, [text for _, text, _ in found])
    fused = np.zeros(len(found))
    for rank, i in enumerate(np.argsort(-cosines, kind="stable"), start=1):
        fused[i] += 1.0 / (ITEM_RRF_K + rank)
    matched = [i for i in np.argsort(-np.asarray(lexical), kind="stable") if lexical[i] > 0]
    for rank, i in enumerate(matched, start=1):
        fused[i] += 1.0 / (ITEM_RRF_K + rank)
    order = np.argsort(-fused, kind="stable")
    return [(found[i][0], float(cosines[i])) for i in order]


def summaries(request: SearchRequest, limit: int) -> list[Candidate]:
    """Episodes behind the best-matching summaries and profiles (module docstring).

    ``stage_options["summaries"]["kinds"]`` limits it to some kinds of item (for
    example ``("summary",)``: the sessions' summaries without the profiles)."""
    kinds = request.options("summaries").get("kinds")
    ranked = matching_items(
        request.store, request.scope, request.analysis.terms, request.query_vector, kinds
    )[:TOP_ITEMS]
    if not ranked:
        return []
    sources = request.store.derived_episodes(
        [item_id for item_id, _ in ranked], request.scope, request.filters
    )
    vectors = request.stored_vectors([e for ids in sources.values() for e in ids])
    query = request.query_vector
    best: dict[str, float] = {}
    for item_id, item_cosine in ranked:
        scored = [
            (episode_id, float(vectors[episode_id] @ query) if episode_id in vectors else 0.0)
            for episode_id in sources.get(item_id, [])
        ]
        scored.sort(key=lambda pair: -pair[1])
        scored = scored[:ITEM_EPISODES]
        for episode_id, cosine in scored:
            score = 0.5 * item_cosine + 0.5 * cosine
            if score > best.get(episode_id, -math.inf):
                best[episode_id] = score
    ordered = sorted(best.items(), key=lambda pair: -pair[1])
    return [Candidate(episode_id, score) for episode_id, score in ordered[:limit]]
