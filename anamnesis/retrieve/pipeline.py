"""The read path: query → candidate channels → fusion → hits with their neighbours."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import SearchConfig
from ..embed.base import Embedder
from ..errors import InvalidInputError
from ..store.base import Candidate, Filters, Store
from ..types import Hit, Scope
from .fusion import weighted_rrf
from .query import search_terms

CHANNELS = ("lexical", "dense")


@dataclass(slots=True)
class Retriever:
    """Runs one configured search pipeline against a store."""

    store: Store
    embedder: Embedder
    config: SearchConfig

    def __post_init__(self) -> None:
        unknown = set(self.config.channels) - set(CHANNELS)
        if unknown:
            raise InvalidInputError(
                f"unknown search channel(s) {sorted(unknown)}; choose from {list(CHANNELS)}"
            )

    def candidates(self, query: str, scope: Scope, filters: Filters) -> dict[str, list[Candidate]]:
        """Each enabled channel's ranked candidates."""
        limit = self.config.candidates
        out: dict[str, list[Candidate]] = {}
        if "lexical" in self.config.channels:
            out["lexical"] = self.store.lexical_search(search_terms(query), scope, filters, limit)
        if "dense" in self.config.channels:
            vector = self.embedder.embed_query(query)
            out["dense"] = self.store.dense_search(vector, scope, filters, limit)
        return out

    def search(
        self, query: str, scope: Scope, filters: Filters, limit: int, explain: bool
    ) -> list[Hit]:
        """The ``limit`` best episodes for ``query`` inside ``scope``."""
        channels = self.candidates(query, scope, filters)
        fused = weighted_rrf(channels, self.config.weights, self.config.rrf_k)[:limit]
        episodes = self.store.get_episodes([f.episode_id for f in fused], scope)
        by_id = {e.id: e for e in episodes}
        context = self.store.neighbours(episodes, self.config.neighbour_window)
        return [
            Hit(
                episode=by_id[f.episode_id],
                score=f.score,
                context=context.get(f.episode_id, ()),
                channels=f.channels if explain else {},
            )
            for f in fused
            if f.episode_id in by_id
        ]
