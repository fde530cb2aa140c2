"""Candidate channels: each proposes a ranked list of episodes for one request.

A channel is a function ``(request, limit) -> list[Candidate]`` registered in
``CHANNELS`` under the name that ``SearchConfig.channels`` and fusion weights use.
Channels read the shared ``SearchRequest`` (analysis, scope, filters, store,
embedder); what they write is per-search: its caches (``memo``), and, for the
``facts`` channel, the supporting facts and the question's fact intent.
"""

from __future__ import annotations

from typing import Literal

from ..facts.search import matching_facts, order_facts
from ..store.base import Candidate
from .candidates import (
    DERIVED_CHANNELS,
    keep_pool,
    merge_lists,
    pool_depth,
    query_terms,
    query_texts,
    question_lexical,
)
from .contextual import dense_context
from .request import Channel, SearchRequest
from .summaries import summaries


def lexical(request: SearchRequest, limit: int) -> list[Candidate]:
    """BM25 over the verbatim text (per sub-query when the question is decomposed)."""
    depth = pool_depth(request, limit)
    lists = [
        question_lexical(request, depth)
        if text == request.analysis.text
        else request.store.lexical_search(terms, request.scope, request.filters, depth)
        for text, terms in query_terms(request)
    ]
    return keep_pool(request, "lexical", merge_lists(lists, depth), limit)


def dense(request: SearchRequest, limit: int) -> list[Candidate]:
    """Cosine similarity between the question (or each sub-query) and each episode."""
    depth = pool_depth(request, limit)
    question = request.analysis.text
    lists = [
        request.nearest(request.dense_text if text == question else text, depth)
        for text in query_texts(request)
    ]
    return keep_pool(request, "dense", merge_lists(lists, depth), limit)


def temporal(request: SearchRequest, limit: int) -> list[Candidate]:
    """Episodes dated in, or mentioning, a time the question names, by similarity.

    "What did I do two weeks ago?" finds the episodes of that week (or that say
    "on the 3rd" of it) even when they share no word with the question. When the
    question names a calendar time ("on 4 December 2023"), episodes dated in that time
    itself, or mentioning a time inside it ("yesterday", said on 5 December), come
    first; then the rest of the search window (a day either side). Proposes nothing
    when the question names no time.
    """
    intent = request.analysis.time
    if not intent.ranges:
        return []
    vector, scope, filters = request.query_vector, request.scope, request.filters
    found = request.store.time_search(vector, intent.windows, scope, filters, limit)
    calendar = intent.calendar_times
    if not calendar:
        return found
    first = request.store.time_search(vector, calendar, scope, filters, limit)
    named = {c.episode_id for c in first}
    return (first + [c for c in found if c.episode_id not in named])[:limit]


def facts(request: SearchRequest, limit: int) -> list[Candidate]:
    """Episodes that state the facts matching the question.

    Facts are matched by their text as the memory held them at
    ``filters.recorded_before`` (the search's ``as_of``), ordered by the question's
    intent (current values first, or whole histories oldest first), and each yields
    its provenance episodes that pass the scope and filters. The facts are kept on
    the request, so hits can carry them.
    """
    as_of = request.filters.recorded_before
    intent: Literal["current", "history"] = (
        "history" if request.analysis.time.wants_history else "current"
    )
    request.analysis.features["fact_intent"] = intent
    ranked = matching_facts(
        request.store, request.scope, request.analysis.terms, request.query_vector, as_of
    )
    ordered = order_facts(request.store, request.scope, ranked, intent, as_of)
    sources = request.store.fact_episodes(
        [f.id for f, _ in ordered], request.scope, request.filters
    )
    out: list[Candidate] = []
    seen: set[str] = set()
    for fact, score in ordered:
        episodes = sources.get(fact.id, [])
        if intent == "current":
            episodes = episodes[::-1]  # the latest statement of a value first
        for episode_id in episodes:
            request.facts.setdefault(episode_id, []).append(fact)
            if episode_id not in seen:
                seen.add(episode_id)
                out.append(Candidate(episode_id, score))
    return out[:limit]


#: Every channel a configuration may name: the basic ones above and the derived ones
#: (speaker, role, entity, pseudo-relevance feedback, neighbours, session;
#: ``candidates``) and turns read in context (``contextual``).
CHANNELS: dict[str, Channel] = {
    "lexical": lexical,
    "dense": dense,
    "temporal": temporal,
    "facts": facts,
    "summaries": summaries,
    "dense_context": dense_context,
    **DERIVED_CHANNELS,
}
