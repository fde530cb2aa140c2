"""Candidate channels: each proposes a ranked list of episodes for one request.

A channel is a function ``(request, limit) -> list[Candidate]`` registered in
``CHANNELS`` under the name that ``SearchConfig.channels`` and fusion weights use.
Channels read the shared ``SearchRequest`` (analysis, scope, filters, store,
embedder) and never write.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..config import SearchConfig
from ..embed.base import Embedder
from ..store.base import Candidate, Filters, Store
from ..types import Episode, Scope
from .analysis import QueryAnalysis
from .resources import StageResources


@dataclass(slots=True)
class SearchRequest:
    """One search in flight: the question's analysis and where to look."""

    analysis: QueryAnalysis
    scope: Scope
    filters: Filters
    store: Store
    embedder: Embedder
    config: SearchConfig
    resources: StageResources = field(default_factory=StageResources)
    _vector: np.ndarray | None = field(default=None, repr=False)
    _episodes: dict[str, Episode] = field(default_factory=dict, repr=False)

    @property
    def query_vector(self) -> np.ndarray:
        """The question's embedding, computed on first use and shared by all stages."""
        if self._vector is None:
            self._vector = self.embedder.embed_query(self.analysis.text)
        return self._vector

    def episodes(self, episode_ids: Sequence[str]) -> dict[str, Episode]:
        """The in-scope episodes with these ids, fetched once per search and shared."""
        missing = [i for i in dict.fromkeys(episode_ids) if i not in self._episodes]
        if missing:
            for episode in self.store.get_episodes(missing, self.scope):
                self._episodes[episode.id] = episode
        return {i: self._episodes[i] for i in episode_ids if i in self._episodes}

    def options(self, stage: str) -> dict[str, object]:
        """The configured options of one post-fusion stage (empty when none are set)."""
        return dict(self.config.stage_options.get(stage, {}))


Channel = Callable[[SearchRequest, int], list[Candidate]]


def lexical(request: SearchRequest, limit: int) -> list[Candidate]:
    """BM25 over the verbatim text."""
    return request.store.lexical_search(
        request.analysis.terms, request.scope, request.filters, limit
    )


def dense(request: SearchRequest, limit: int) -> list[Candidate]:
    """Cosine similarity between the question and each episode's embedding."""
    return request.store.dense_search(request.query_vector, request.scope, request.filters, limit)


#: Every channel a configuration may name.
CHANNELS: dict[str, Channel] = {
    "lexical": lexical,
    "dense": dense,
}
