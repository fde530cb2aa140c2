"""One search in flight: the analysed question, where to look, and what its stages share.

Channels (``channels.py``), fusion and the post-fusion stages all read a
``SearchRequest``; it imports none of them, so every stage can depend on it. The
channels a request can run are handed to it (``channels``) by the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from ..config import SearchConfig
from ..embed.base import Embedder
from ..store.base import Candidate, Filters, Store
from ..store.episode_times import EpisodeTimes
from ..types import Episode, Fact, Scope
from .analysis import QueryAnalysis
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
    #: The channels this search may run, by name (``channels.CHANNELS``).
    channels: Mapping[str, Channel] = field(default_factory=dict, repr=False)

    @property
    def query_vector(self) -> np.ndarray:
        """The embedding of ``dense_text``, computed on first use and shared by all
        stages."""
        if self._vector is None:
            text = self.dense_text
            self._vector = (
                self.question_vector
                if text == self.analysis.text
                else self.embedder.embed_query(text)
            )
        return self._vector

    @property
    def question_vector(self) -> np.ndarray:
        """The embedding of the question as asked, computed once per search."""
        if "question_vector" not in self.memo:
            self.memo["question_vector"] = self.embedder.embed_query(self.analysis.text)
        vector: np.ndarray = self.memo["question_vector"]
        return vector

    @property
    def dense_text(self) -> str:
        """The text the question is embedded as: the question itself, unless a query
        feature rewrote it (``memo["dense_text"]``, set by the pipeline)."""
        text: str = self.memo.get("dense_text", self.analysis.text)
        return text

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

    def known(self, kind: str, answers: Mapping[str, T]) -> None:
        """Record answers to ``lookup(kind, ...)`` read along with something else (the
        in-scope episodes' turn info that came with a store search), so that lookup
        skips them."""
        self.memo.setdefault(("lookup", kind), {}).update(answers)

    def episodes(self, episode_ids: Sequence[str]) -> dict[str, Episode]:
        """The in-scope episodes with these ids, fetched once per search and shared."""
        return self.lookup("episodes", episode_ids, self._get_episodes)

    def episode_times(self, episode_ids: Sequence[str]) -> dict[str, EpisodeTimes]:
        """Event time and time mentions of these episodes, fetched once per search."""
        return self.lookup("episode_times", episode_ids, self.store.episode_times)

    def stored_vectors(self, episode_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored embeddings of these in-scope episodes (those that have one), by id,
        fetched once per search and shared."""
        return self.lookup("vectors", episode_ids, self.store.episode_vectors)

    def _get_episodes(self, episode_ids: list[str], scope: Scope) -> dict[str, Episode]:
        return {e.id: e for e in self.store.get_episodes(episode_ids, scope)}

    def options(self, stage: str) -> dict[str, Any]:
        """The configured options of one post-fusion stage (empty when none are set)."""
        return dict(self.config.stage_options.get(stage, {}))

    def nearest(self, text: str, depth: int) -> list[Candidate]:
        """The ``depth`` episodes nearest to ``text`` (the question, its rewrite in
        ``dense_text`` or a sub-query) by embedding: one dense search per text and
        search, the deepest asked for kept and cut for shallower asks."""
        key = ("nearest", text)
        searched: tuple[int, list[Candidate]] | None = self.memo.get(key)
        if searched is None or searched[0] < depth:
            if text == self.analysis.text:
                vector = self.question_vector
            elif text == self.dense_text:
                vector = self.query_vector
            else:
                vector = self.vector_for(text)
            searched = (depth, self.store.dense_search(vector, self.scope, self.filters, depth))
            self.memo[key] = searched
        found = searched[1]
        return found[:depth]

    def vector_for(self, text: str) -> np.ndarray:
        """The embedding of ``text`` (the question itself or one of its sub-queries)."""
        if text == self.analysis.text:
            return self.query_vector
        key = ("vector", text)
        if key not in self.memo:
            self.memo[key] = self.embedder.embed_query(text)
        vector: np.ndarray = self.memo[key]
        return vector

    def channel(self, name: str, limit: int) -> list[Candidate]:
        """Channel ``name``'s candidates, computed once per search and shared."""
        key = ("channel", name, limit)
        if key not in self.memo:
            self.memo[key] = self.channels[name](self, limit)
        return self.memo[key]


#: A candidate channel: ``(request, limit) -> ranked candidates``.
Channel = Callable[[SearchRequest, int], list[Candidate]]
