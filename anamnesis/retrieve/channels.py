"""Candidate channels: each proposes a ranked list of episodes for one request.

A channel is a function ``(request, limit) -> list[Candidate]`` registered in
``CHANNELS`` under the name that ``SearchConfig.channels`` and fusion weights use.
Channels read the shared ``SearchRequest`` (analysis, scope, filters, store,
embedder); what they write is per-search: its caches (``memo``), and, for the
``facts`` channel, the supporting facts and the question's fact intent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from ..config import SearchConfig
from ..embed.base import Embedder
from ..facts.search import matching_facts, order_facts
from ..store.base import Candidate, Filters, Store
from ..store.episode_times import EpisodeTimes
from ..types import Episode, Fact, Scope
from .analysis import QueryAnalysis
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
from .resources import StageResources

T = TypeVar("T")


@dataclass(slots=True)
class SearchRequest:
    """One search in flight: the question's analysis and where to look."""

    analysis: QueryAnalysis
    scope: Scope
    filters: Filters
    store: Store
    embedder: Embedder
    config: SearchConfig
    #: How many hits the caller will keep (stages that reorder only the returned
    #: hits, such as ``chronological``, read it); None when unknown.
    limit: int | None = None
    #: Facts that support each proposed episode (filled by the ``facts`` channel).
    facts: dict[str, list[Fact]] = field(default_factory=dict)
    resources: StageResources = field(default_factory=StageResources)
    _vector: np.ndarray | None = field(default=None, repr=False)
    #: Results shared between channels and stages of this one search (e.g. a channel's
    #: list that a derived channel expands, episodes looked up by id), keyed by who
    #: computed them.
    memo: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def query_vector(self) -> np.ndarray:
        """The question's embedding, computed on first use and shared by all stages."""
        if self._vector is None:
            self._vector = self.embedder.embed_query(self.analysis.text)
        return self._vector

    def lookup(
        self,
        kind: str,
        episode_ids: Sequence[str],
        fetch: Callable[[list[str], Scope], Mapping[str, T]],
    ) -> dict[str, T]:
        """What ``fetch`` returns for the in-scope episodes among ``episode_ids``, by id.

        Each id is fetched once per search: the answers are kept under ``kind``, so
        channels and stages that ask again for the same episodes share one query.
        """
        cache: dict[str, T] = self.memo.setdefault(("lookup", kind), {})
        missing = [i for i in dict.fromkeys(episode_ids) if i not in cache]
        if missing:
            cache.update(fetch(missing, self.scope))
        return {i: cache[i] for i in episode_ids if i in cache}

    def episodes(self, episode_ids: Sequence[str]) -> dict[str, Episode]:
        """The in-scope episodes with these ids, fetched once per search and shared."""
        return self.lookup("episodes", episode_ids, self._get_episodes)

    def episode_times(self, episode_ids: Sequence[str]) -> dict[str, EpisodeTimes]:
        """Event time and time mentions of these episodes, fetched once per search."""
        return self.lookup("episode_times", episode_ids, self.store.episode_times)

    def stored_vectors(self, episode_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embeddings of these in-scope episodes (those that have one), by id,
        fetched once per search and shared."""
        return self.lookup("vectors", episode_ids, self._get_vectors)

    def _get_episodes(self, episode_ids: list[str], scope: Scope) -> dict[str, Episode]:
        return {e.id: e for e in self.store.get_episodes(episode_ids, scope)}

    def _get_vectors(self, episode_ids: list[str], scope: Scope) -> dict[str, np.ndarray]:
        episodes = self.episodes(episode_ids)
        by_hash = self.store.vectors_for_hashes(
            list({e.content_hash for e in episodes.values()}), scope
        )
        return {
            i: by_hash[e.content_hash] for i, e in episodes.items() if e.content_hash in by_hash
        }

    def options(self, stage: str) -> dict[str, object]:
        """The configured options of one post-fusion stage (empty when none are set)."""
        return dict(self.config.stage_options.get(stage, {}))

    def vector_for(self, text: str) -> np.ndarray:
        """The embedding of ``text`` (the question itself or one of its sub-queries)."""
        if text == self.analysis.text:
            return self.query_vector
        key = ("vector", text)
        if key not in self.memo:
            self.memo[key] = self.embedder.embed_query(text)
        return self.memo[key]

    def channel(self, name: str, limit: int) -> list[Candidate]:
        """Channel ``name``'s candidates, computed once per search and shared."""
        key = ("channel", name, limit)
        if key not in self.memo:
            self.memo[key] = CHANNELS[name](self, limit)
        return self.memo[key]


Channel = Callable[[SearchRequest, int], list[Candidate]]


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
    lists = [
        request.store.dense_search(request.vector_for(text), request.scope, request.filters, depth)
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
    intent = "history" if request.analysis.time.wants_history else "current"
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
    "dense_context": dense_context,
    **DERIVED_CHANNELS,
}
