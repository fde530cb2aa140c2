"""Candidate channels: each proposes a ranked list of episodes for one request.

A channel is a function ``(request, limit) -> list[Candidate]`` registered in
``CHANNELS`` under the name that ``SearchConfig.channels`` and fusion weights use.
Channels read the shared ``SearchRequest`` (analysis, scope, filters, store,
embedder) and never write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import SearchConfig
from ..embed.base import Embedder
from ..store.base import Candidate, Filters, Store
from ..types import Scope
from .analysis import QueryAnalysis


@dataclass(slots=True)
class SearchRequest:
    """One search in flight: the question's analysis and where to look."""

    analysis: QueryAnalysis
    scope: Scope
    filters: Filters
    store: Store
    embedder: Embedder
    config: SearchConfig
    _vector: np.ndarray | None = field(default=None, repr=False)
    #: Results shared between channels and stages of this one search (e.g. a channel's
    #: list that a derived channel expands), keyed by who computed them.
    memo: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def query_vector(self) -> np.ndarray:
        """The question's embedding, computed on first use and shared by all stages."""
        if self._vector is None:
            self._vector = self.embedder.embed_query(self.analysis.text)
        return self._vector

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
        request.store.lexical_search(terms, request.scope, request.filters, depth)
        for terms in understanding_terms(request)
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


#: Every channel a configuration may name.
CHANNELS: dict[str, Channel] = {
    "lexical": lexical,
    "dense": dense,
}

# The derived channels (speaker, entity, pseudo-relevance feedback, session, neighbours)
# read SearchRequest, so they are registered after it exists.
from .candidates import (  # noqa: E402
    DERIVED_CHANNELS,
    keep_pool,
    merge_lists,
    pool_depth,
    query_texts,
    understanding_terms,
)

CHANNELS.update(DERIVED_CHANNELS)
