"""The write verbs of Memory: add, add_many, update, delete, delete_all.

Write path: check the messages → embed (reusing the scope's vectors of unchanged
text) → persist, through the encoding gate when one is configured (``gate``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..ingest.normalise import (
    Message,
    check_episode_id,
    check_id,
    check_metadata,
    check_text,
    content_hash,
    embedding_text,
    new_id,
    to_message,
)
from ..types import DeleteCounts, Episode, Scope, Session
from .gate import GateVerbs
from .indexing import IndexingVerbs
from .state import ProgressCallback
from .verbs import maintains, writes

#: Messages embedded and written per transaction by ``add_many``.
WRITE_BATCH = 512


class WriteVerbs(GateVerbs, IndexingVerbs):
    """Storing, changing and deleting episodes (each batch through the encoding gate)."""

    @writes
    def add(
        self,
        content: str | Mapping[str, Any] | Sequence[Mapping[str, Any] | str],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        role: str | None = None,
        speaker: str | None = None,
        event_time: datetime | str | float | None = None,
        metadata: Mapping[str, Any] | None = None,
        modality: str | None = None,
    ) -> list[Episode]:
        """Store a string, a message dict, or a list of messages verbatim.

        Keyword values are defaults that each message may override. Returns the stored
        episodes. Either all of them are stored or, on error, none.
        """
        items: list[Any] = list(content) if isinstance(content, list | tuple) else [content]
        if not items:
            raise InvalidInputError("nothing to add: the message list is empty")
        return self.add_many(
            items,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            role=role,
            speaker=speaker,
            event_time=event_time,
            metadata=metadata,
            modality=modality,
            atomic=True,
        )

    @writes
    def add_many(
        self,
        messages: Iterable[Mapping[str, Any] | str],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        role: str | None = None,
        speaker: str | None = None,
        event_time: datetime | str | float | None = None,
        metadata: Mapping[str, Any] | None = None,
        modality: str | None = None,
        atomic: bool = False,
        progress: ProgressCallback | None = None,
    ) -> list[Episode]:
        """Bulk-store messages (a whole conversation or an import).

        Messages are validated first, then embedded and written in transactions of
        ``WRITE_BATCH``; with ``atomic=True`` everything is one transaction. With
        ``indexing="background"`` they are written unembedded, and embedded after. Messages
        without ``event_time`` get the time of the call, a microsecond apart so their
        order survives. ``progress`` is called with the number written so far.
        """
        scope = self._scope(user_id, agent_id, session_id)
        defaults = {
            "role": role,
            "speaker": speaker,
            "event_time": event_time,
            "metadata": metadata,
            "modality": modality,
            "session_id": scope.session_id,
        }
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
            raise InvalidInputError(
                f"add_many takes a list of messages, not {type(messages).__name__}"
            )
        validated = [to_message(item, defaults) for item in messages]
        now = datetime.now(UTC)
        episodes = self._episodes(validated, scope, now)
        sessions = self._sessions_for(episodes, scope)
        batch = len(episodes) if atomic else WRITE_BATCH
        written = 0
        background = self._indexing == "background"
        for start in range(0, len(episodes), batch or 1):
            chunk = episodes[start : start + batch]
            vectors = None if background else self._embed(chunk, scope)
            self._write_batch(chunk, vectors, sessions if start == 0 else ())
            written += len(chunk)
            if background:
                self._notify_indexer()
            if self._worker is not None:
                self._worker.notify(scope)
            if progress is not None:
                progress(written)
        return episodes

    def _episodes(self, messages: list[Message], scope: Scope, now: datetime) -> list[Episode]:
        next_turn: dict[str, int] = {}
        out = []
        for offset, message in enumerate(messages):
            session_id = message.session_id
            turn_index = None
            if session_id is not None:
                if session_id not in next_turn:
                    next_turn[session_id] = self._store.next_turn_index(scope.user_id, session_id)
                turn_index = next_turn[session_id]
                next_turn[session_id] += 1
            out.append(
                Episode(
                    id=new_id(),
                    user_id=scope.user_id,
                    agent_id=scope.agent_id,
                    session_id=session_id,
                    role=message.role,
                    speaker=message.speaker,
                    content=message.content,
                    modality=message.modality,
                    event_time=message.event_time or now + timedelta(microseconds=offset),
                    recorded_at=now,
                    metadata=message.metadata,
                    content_hash=content_hash(message.content, message.speaker),
                    turn_index=turn_index,
                )
            )
        return out

    @staticmethod
    def _sessions_for(episodes: Sequence[Episode], scope: Scope) -> list[Session]:
        first: dict[str, datetime] = {}
        for episode in episodes:
            if episode.session_id is not None:
                known = first.get(episode.session_id)
                if known is None or episode.event_time < known:
                    first[episode.session_id] = episode.event_time
        return [
            Session(id=sid, user_id=scope.user_id, agent_id=scope.agent_id, started_at=started)
            for sid, started in first.items()
        ]

    def _embed(self, episodes: Sequence[Episode], scope: Scope) -> np.ndarray:
        """Vectors for episodes, reusing the scope's stored vectors of identical text."""
        hashes = [e.content_hash for e in episodes]
        known = self._store.vectors_for_hashes(hashes, scope)
        todo: dict[str, str] = {}
        for episode in episodes:
            if episode.content_hash not in known:
                todo.setdefault(
                    episode.content_hash, embedding_text(episode.content, episode.speaker)
                )
        if todo:
            fresh = self._embedder.embed_documents(list(todo.values()))
            known.update(zip(todo, fresh, strict=True))
        if not episodes:
            return np.zeros((0, self._embedder.dim), dtype=np.float32)
        return np.stack([known[h] for h in hashes])

    @writes
    def update(
        self,
        episode_id: str,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> Episode:
        """Change an episode's content and/or metadata; the prior version is kept
        (``history`` shows it). To erase the old text, ``forget`` the episode."""
        scope = self._scope(user_id, agent_id, session_id)
        current = self._fetch(episode_id, scope)
        new_content = check_text(content) if content is not None else current.content
        new_metadata = check_metadata(metadata) if metadata is not None else current.metadata
        new_hash = content_hash(new_content, current.speaker)
        vector = None
        if new_hash != current.content_hash:
            vector = self._embedder.embed_documents([embedding_text(new_content, current.speaker)])[
                0
            ]
        return self._store.update_episode(
            episode_id,
            scope,
            content=new_content,
            content_hash=new_hash,
            metadata=new_metadata,
            vector=vector,
            changed_at=datetime.now(UTC),
        )

    @writes
    def delete(
        self,
        episode_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> DeleteCounts:
        """Delete one episode with its index rows, prior versions, resolved times, the
        facts only it supports, and its session if it was the last one there. Like
        ``forget``, it leaves none of the episode's text in the store."""
        return self._store.delete_episode(
            check_episode_id(episode_id), self._scope(user_id, agent_id, session_id)
        )

    @maintains
    def delete_all(
        self,
        *,
        user_id: str,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> DeleteCounts:
        """Delete everything in a scope (``user_id`` must be named): episodes, versions,
        index rows, sessions, and (for a user or agent scope) its facts. ``forget``
        with no condition does the same, in the same batches."""
        scope = Scope(
            user_id=check_id(user_id, "user_id", required=True) or "",
            agent_id=check_id(agent_id, "agent_id"),
            session_id=check_id(session_id, "session_id"),
        )
        return self._store.delete_scope(scope)
