"""The one narrow interface every storage backend implements.

The Memory facade validates input and owns scope; a Store persists and retrieves.
Every method that reads or writes episodes takes the caller's Scope and enforces it
in the backend's query language, so no path can cross tenants.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from ..types import DeleteCounts, Episode, EpisodeVersion, Scope, Session

#: The schema version this code writes. Migrations move older stores forward.
SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Filters:
    """Narrowing conditions beyond scope, applied in the backend on every channel."""

    role: str | None = None
    speaker: str | None = None
    modality: str | None = None
    event_after: datetime | None = None
    event_before: datetime | None = None
    recorded_before: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def is_empty(self) -> bool:
        """True when nothing beyond scope restricts the search."""
        return not (
            self.role
            or self.speaker
            or self.modality
            or self.event_after
            or self.event_before
            or self.recorded_before
            or self.metadata
        )


def scope_clauses(
    scope: Scope, alias: str, placeholder: str, *, prefix: str = ""
) -> tuple[str, list[Any]]:
    """``user_id = ? AND ...`` for the levels ``scope`` sets, in either SQL dialect.

    ``placeholder`` is the driver's parameter mark (``?`` or ``%s``); ``prefix`` goes
    before each column (SQLite's ``+`` keeps the planner off the scope index).
    """
    clauses = [f"{prefix}{alias}.user_id = {placeholder}"]
    params: list[Any] = [scope.user_id]
    for column in ("agent_id", "session_id"):
        value = getattr(scope, column)
        if value is not None:
            clauses.append(f"{prefix}{alias}.{column} = {placeholder}")
            params.append(value)
    return " AND ".join(clauses), params


@dataclass(frozen=True, slots=True)
class Candidate:
    """An episode id proposed by one channel, with that channel's raw score."""

    episode_id: str
    score: float


class Store(Protocol):
    """Persistence for episodes, sessions and their lexical and dense indexes."""

    #: Names reported by ``Memory.capabilities``.
    backend: str
    vector_backend: str
    lexical_backend: str

    # -- identity and lifecycle -------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A value from the store's metadata table, or None."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Set a value in the store's metadata table."""
        ...

    def close(self) -> None:
        """Release connections and caches. Idempotent."""
        ...

    def bulk_load(self) -> AbstractContextManager[None]:
        """A context in which many rows are written faster (indexes finished at the end)."""
        ...

    def warm_up(self) -> None:
        """Load whatever the first search would otherwise load (may do nothing)."""
        ...

    # -- writes -------------------------------------------------------------------------
    def upsert_sessions(self, sessions: Sequence[Session]) -> None:
        """Create sessions, or fill in a start time that was unknown."""
        ...

    def insert_episodes(
        self,
        episodes: Sequence[Episode],
        vectors: np.ndarray,
        sessions: Sequence[Session] = (),
        versions: Sequence[EpisodeVersion] = (),
    ) -> None:
        """Store episodes with their index rows, sessions and prior versions, all or nothing."""
        ...

    def existing_ids(self, episode_ids: Sequence[str]) -> set[str]:
        """Which of these ids are already stored (in any scope)."""
        ...

    def next_turn_index(self, user_id: str, session_id: str) -> int:
        """The position the next turn of a session takes."""
        ...

    def vectors_for_hashes(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors of episodes whose content hash is in ``hashes``."""
        ...

    def update_episode(
        self,
        episode_id: str,
        scope: Scope,
        *,
        content: str,
        content_hash: str,
        metadata: dict[str, Any],
        vector: np.ndarray | None,
        changed_at: datetime,
    ) -> Episode:
        """Replace content/metadata, keeping the prior state as a version."""
        ...

    def delete_episode(self, episode_id: str, scope: Scope) -> DeleteCounts:
        """Delete one episode and every row derived from it."""
        ...

    def delete_scope(self, scope: Scope) -> DeleteCounts:
        """Delete everything inside a scope, all or nothing."""
        ...

    def replace_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        """Overwrite the dense vectors of the given episodes (re-indexing)."""
        ...

    # -- reads --------------------------------------------------------------------------
    def get_episodes(self, episode_ids: Sequence[str], scope: Scope) -> list[Episode]:
        """Episodes by id, in the order asked, skipping ids outside the scope."""
        ...

    def list_episodes(
        self, scope: Scope, *, limit: int, offset: int, filters: Filters | None = None
    ) -> tuple[list[Episode], int]:
        """A page of episodes in event-time order, and the total in scope."""
        ...

    def episode_versions(self, episode_id: str, scope: Scope) -> list[EpisodeVersion]:
        """Prior versions of an episode, oldest first."""
        ...

    def neighbours(
        self, episodes: Sequence[Episode], window: int
    ) -> dict[str, tuple[Episode, ...]]:
        """For each episode, the turns within ``window`` positions of it in its session."""
        ...

    def turn_info(
        self, episode_ids: Sequence[str], scope: Scope
    ) -> dict[str, tuple[str | None, int | None, str | None]]:
        """``(session_id, turn_index, speaker)`` of each episode in ``scope`` (others are
        left out): a light lookup for channels that reason about positions and speakers."""
        ...

    def adjacent_turns(
        self, episode_ids: Sequence[str], scope: Scope, filters: Filters, window: int
    ) -> dict[str, list[tuple[str, int]]]:
        """For each episode, the ids of the turns within ``window`` positions of it in its
        session that satisfy ``filters``, with their signed offset (``-1`` = the turn
        before), nearest first. Only ids inside ``scope`` appear, on both sides."""
        ...

    def lexical_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, limit: int
    ) -> list[Candidate]:
        """BM25-style ranking of episodes matching any of ``terms``, best first."""
        ...

    def dense_search(
        self, vector: np.ndarray, scope: Scope, filters: Filters, limit: int
    ) -> list[Candidate]:
        """Episodes by cosine similarity to ``vector``, best first."""
        ...

    def iter_episodes(self, batch_size: int = 1000) -> Iterator[tuple[Episode, np.ndarray | None]]:
        """Every episode in the store with its vector, for export and re-indexing."""
        ...

    def iter_sessions(self) -> Iterator[Session]:
        """Every session in the store."""
        ...

    def stats(self, scope: Scope | None) -> dict[str, Any]:
        """Counts and sizes, for one scope or for the whole store."""
        ...
