"""The Memory facade: validates input, owns scope, and calls the stages below it.

Write path: normalise → embed (reusing vectors of unchanged text) → persist.
Read path: retrieve (channels → fusion) → hits with their neighbouring turns.
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np

from . import offline
from .config import DEFAULT_PRESET, DEFAULT_USER, PRESETS, URL_ENV, SearchConfig, default_path
from .embed import Embedder, get_embedder
from .errors import AnamnesisError, EmbedderMismatchError, InvalidInputError, NotFoundError
from .facts.predicates import embedding_text as fact_embedding_text
from .ingest.gate import GateConfig, gate_config
from .ingest.normalise import (
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
from .llm import ChatClient
from .memory_derived import DerivedView
from .memory_facts import FactVerbs
from .memory_gate import GateVerbs
from .memory_lifecycle import LifecycleVerbs
from .memory_reads import ReadVerbs
from .retrieve.pipeline import Retriever
from .store.base import Store
from .tokens import TokenCounter
from .types import (
    DeleteCounts,
    Episode,
    Fact,
    Scope,
    Session,
)
from .usage import UsageLog

#: Messages embedded and written per transaction by ``add_many``.
WRITE_BATCH = 512

ProgressCallback = Callable[[int], None]
T = TypeVar("T")

#: Every Memory not yet closed, so that the process can close them before it exits.
_OPEN_MEMORIES: weakref.WeakSet[Memory] = weakref.WeakSet()


@atexit.register
def _close_open_memories() -> None:
    """Close what a program left open, before the interpreter shuts down.

    A background thread still inside native code (onnxruntime loading a model) when
    the interpreter finalises is torn down mid-call, and the C++ runtime aborts the
    process (exit 134) after the program's work is done. Closing joins those threads
    first, so the exit code is the program's own.
    """
    for memory in list(_OPEN_MEMORIES):
        memory.close()


def _open_store(
    path: str | os.PathLike[str] | None, url: str | None, dim: int, create: bool
) -> Store:
    url = url or os.environ.get(URL_ENV)
    if url:
        from .store import open_url

        return open_url(url, dim=dim)
    from .store.sqlite import SQLiteStore

    file = Path(path) if path is not None else default_path()
    if not create and not file.exists():
        raise NotFoundError(
            f"there is no store at {file}: add something first, or point --path "
            "(ANAMNESIS_PATH) at an existing store"
        )
    return SQLiteStore(file, dim=dim)


class Memory(ReadVerbs, FactVerbs, LifecycleVerbs, GateVerbs):
    """Long-term memory for an agent: verbatim episodes with hybrid recall.

    >>> with Memory(path="agent.db") as memory:                      # doctest: +SKIP
    ...     memory.add("I moved to Lisbon in May", user_id="ana")
    ...     memory.search("where does Ana live?", user_id="ana")

    ``path`` is the SQLite file (default: ``$ANAMNESIS_PATH`` or the OS data dir);
    ``url`` selects a database server instead (``postgresql://...``). ``embedder`` is a
    name (``"minilm"``, ``"edge"``, ``"openai:MODEL"``) or an Embedder. A store remembers
    its embedder: opening it with another raises EmbedderMismatchError unless
    ``reindex=True``, which re-embeds every episode from its stored text.
    ``config`` is the search pipeline: a ``SearchConfig``, e.g. one of ``PRESETS``
    (``"default"``, the best measured on data it was not tuned on; ``"fast"``, plain
    BM25 + dense fusion; ``"ranker"``, the default plus the learned ranker; ``"facts"``).
    ``warm=True`` loads the model and the vector index in a background thread at open,
    so the first search is fast; pass False for short-lived processes that only write.
    ``create=False`` raises NotFoundError instead of creating a missing SQLite store
    (for tools that only read).
    ``llm`` is an optional OpenAI-compatible client for fact extraction, ambiguous
    conflicts and session summaries (``"env"``: from ``ANAMNESIS_LLM_*``); None: no model.
    ``gate`` is the encoding gate: None or ``"off"`` (the default) stores every episode
    in the hot indexes; a preset name (``"lenient"``, ``"truememory"`` = ``"default"``,
    ``"strict"``; ``anamnesis.ingest.gate.GATE_PRESETS``) or a ``GateConfig`` judges
    each added episode, sends the rejected verbatim to the archive, and records every
    decision (``gate_decisions``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        embedder: str | Embedder | None = None,
        config: SearchConfig | None = None,
        user_id: str = DEFAULT_USER,
        reindex: bool = False,
        warm: bool = True,
        llm: ChatClient | str | None = None,
        create: bool = True,
        gate: str | GateConfig | None = None,
    ) -> None:
        self._gate = gate_config(gate)
        self.default_user = check_id(user_id, "user_id", required=True) or DEFAULT_USER
        offline.warn_if_telemetry_on()
        if isinstance(llm, str):
            if llm != "env":
                raise InvalidInputError("llm must be a ChatClient, 'env' or None")
            llm = ChatClient.from_env()
        self.llm = llm
        self._embedder = get_embedder(embedder)
        self._store = _open_store(path, url, self._embedder.dim, create)
        self.config = config or PRESETS[DEFAULT_PRESET]
        try:
            self._retriever = Retriever(self._store, self._embedder, self.config)
        except InvalidInputError:
            self._store.close()  # a bad configuration leaves no store open
            raise
        self._tokens: TokenCounter | None = None
        try:
            self._check_embedder(reindex)
        except AnamnesisError:
            self._store.close()
            raise
        self._usage = UsageLog(self._store)
        self._closed = False
        self._close_lock = threading.Lock()
        self._warm_thread: threading.Thread | None = None
        _OPEN_MEMORIES.add(self)
        if warm:
            self._warm_thread = threading.Thread(
                target=self._warm_up, name="anamnesis-warm-up", daemon=True
            )
            self._warm_thread.start()

    def _warm_up(self) -> None:
        """Load the embedding model, the dense index and the stages' models in the
        background.

        All are loaded lazily anyway; doing it at open means the first search does
        not pay for it. A failure here is not lost: the same load runs again, and
        raises, in the call that needs it.
        """
        try:
            self._embedder.embed_query("warm-up")
            self._store.warm_up()
            self._retriever.warm_up()
        except AnamnesisError:
            return

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Wait for the warm-up, stop background consolidation and close the store.

        The Memory cannot be used afterwards. Closing twice, or from several threads,
        is harmless; a Memory left open is closed when the process exits.
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._warm_thread is not None and self._warm_thread is not threading.current_thread():
            self._warm_thread.join()
        self._stop_consolidation()
        self._usage.close()
        self._retriever.resources.close()
        self._store.close()
        _OPEN_MEMORIES.discard(self)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def store(self) -> Store:
        """The storage backend (for advanced use and benchmarks)."""
        return self._store

    @property
    def embedder(self) -> Embedder:
        """The embedder in use."""
        return self._embedder

    @property
    def derived(self) -> DerivedView:
        """The session summaries and profiles ``consolidate`` builds:
        ``memory.derived.summaries(user_id=...)``, ``.profiles()``, ``.profile("user")``."""
        return DerivedView(self._store, self._scope)

    @property
    def capabilities(self) -> dict[str, Any]:
        """What is active: backend, embedder, search, LLM, summaries (``"extractive"``,
        ``"abstractive"``, or why they fell back), telemetry (``"off"``, or why not), store
        health (``"ok"``, or the damage: writes refused), usage counters (``"ok"``, or why
        not), the encoding gate (``"off"``, a preset name, or ``"custom"``)."""
        damage = self._store.damage
        return {
            "backend": self._store.backend,
            "embedder": self._embedder.name,
            "embedding_dim": self._embedder.dim,
            "vector_search": self._store.vector_backend,
            "lexical_search": self._store.lexical_backend,
            "search_channels": list(self.config.channels),
            "search_stages": list(self.config.stages),
            "llm": self.llm.model if self.llm is not None else None,
            "fact_extractor": "llm" if self.llm is not None else "rules",
            "summaries": self._summaries_state(),
            "consolidation": self._worker.state if self._worker is not None else "manual",
            "usage_counters": self._usage.state,
            "telemetry": offline.telemetry(),
            "store_health": "ok" if damage is None else f"damaged: {damage}",
            "encoding_gate": self._gate.name if self._gate is not None else "off",
        }

    def _check_embedder(self, reindex: bool) -> None:
        stored_name = self._store.get_meta("embedder_name")
        stored_dim = self._store.get_meta("embedder_dim")
        current = (self._embedder.name, str(self._embedder.dim))
        if stored_name is None:
            self._store.set_meta("embedder_name", current[0])
            self._store.set_meta("embedder_dim", current[1])
            return
        if (stored_name, stored_dim) == current:
            return
        if not reindex:
            raise EmbedderMismatchError(
                f"this store was built with embedder {stored_name} ({stored_dim}-d), not "
                f"{current[0]} ({current[1]}-d). Open it with the same embedder, or pass "
                "reindex=True (CLI: anamnesis reindex --embedder ...) to re-embed everything."
            )
        self.reindex()

    # -- scope ---------------------------------------------------------------------------------
    def _scope(self, user_id: str | None, agent_id: str | None, session_id: str | None) -> Scope:
        return Scope(
            user_id=check_id(user_id, "user_id") or self.default_user,
            agent_id=check_id(agent_id, "agent_id"),
            session_id=check_id(session_id, "session_id"),
        )

    # -- write path ----------------------------------------------------------------------------
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
        ``WRITE_BATCH``; with ``atomic=True`` everything is one transaction. Messages
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
        for start in range(0, len(episodes), batch or 1):
            chunk = episodes[start : start + batch]
            vectors = self._embed(chunk, scope)
            self._write_batch(chunk, vectors, sessions if start == 0 else ())
            written += len(chunk)
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

    def delete_all(
        self,
        *,
        user_id: str,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> DeleteCounts:
        """Delete everything in a scope (``user_id`` must be named), in one transaction:
        episodes, versions, index rows, sessions, and (for a user or agent scope) its
        facts. ``forget`` with no condition does the same."""
        scope = Scope(
            user_id=check_id(user_id, "user_id", required=True) or "",
            agent_id=check_id(agent_id, "agent_id"),
            session_id=check_id(session_id, "session_id"),
        )
        return self._store.delete_scope(scope)

    def reindex(self, *, progress: ProgressCallback | None = None) -> int:
        """Re-embed every episode (and fact) from its stored text with the current
        embedder; returns the number of episodes."""
        done = 0

        def episodes(batch: list[Episode]) -> None:
            nonlocal done
            texts = [embedding_text(e.content, e.speaker) for e in batch]
            vectors = self._embedder.embed_documents(texts)
            self._store.replace_vectors({e.id: v for e, v in zip(batch, vectors, strict=True)})
            done += len(batch)
            if progress is not None:
                progress(done)

        def facts(batch: list[Fact]) -> None:
            vectors = self._embedder.embed_documents([fact_embedding_text(f) for f in batch])
            self._store.replace_fact_vectors({f.id: v for f, v in zip(batch, vectors, strict=True)})

        _in_batches((e for e, _ in self._store.iter_episodes()), episodes)
        _in_batches((f for f, _ in self._store.iter_facts()), facts)
        self._store.set_meta("embedder_name", self._embedder.name)
        self._store.set_meta("embedder_dim", str(self._embedder.dim))
        return done

    def check(self) -> list[str]:
        """A full check of the store (it reads everything): the problems found, empty
        when it is healthy. A damaged SQLite store refuses writes until a check passes."""
        return self._store.check()

    def stats(self, *, user_id: str | None = None) -> dict[str, Any]:
        """Counts for one user; for the whole store (``user_id`` None) also where the
        store is and its size."""
        scope = (
            Scope(check_id(user_id, "user_id", required=True) or "")
            if user_id is not None
            else None
        )
        return {**self._store.stats(scope), "embedder": self._embedder.name}

    # -- portability ---------------------------------------------------------------------------
    def export_jsonl(self, out: IO[str], *, user_id: str | None = None) -> int:
        """Write the store (or one user's part) as JSONL that ``import_jsonl`` restores.
        Archived episodes are included (as episodes: an import brings them back hot)."""
        from .portable import export_jsonl

        return export_jsonl(self._store, self._embedder, out, user_id=user_id)

    def import_jsonl(
        self,
        lines: Iterable[str],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> int:
        """Restore an export, keeping ids and times; vectors are reused when compatible.

        The file is checked whole, as ``add`` checks messages, before anything is
        written: a bad line stores nothing. ``user_id`` (and ``agent_id``) move every
        record into that scope instead of the ones the file names.
        """
        from .portable import import_jsonl

        owner = None
        if user_id is not None or agent_id is not None:
            owner = self._scope(user_id, agent_id, None)
        return import_jsonl(self._store, self._embedder, lines, progress=progress, owner=owner)


def _in_batches(items: Iterable[T], handle: Callable[[list[T]], None]) -> None:
    """Hand ``items`` to ``handle`` ``WRITE_BATCH`` at a time, streaming (the stores'
    iterators release their read between batches, so ``handle`` may write)."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= WRITE_BATCH:
            handle(batch)
            batch = []
    if batch:
        handle(batch)
