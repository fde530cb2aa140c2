"""AsyncMemory: the Memory verbs for asyncio programs, never blocking the event loop.

Every verb of ``Memory`` is here under the same name, with the same arguments, return
type and errors, as a coroutine. Writes go to one writer thread, in the order they
were awaited (SQLite takes one writer at a time anyway); reads run on a small pool of
reader threads, in parallel with each other and with the writer (the datasette
model). Both backends work the same way: PostgreSQL's connection pool is shared by
the threads.

    async with AsyncMemory(path="agent.db") as memory:
        await memory.add("I moved to Lisbon in May", user_id="ana")
        hits = await memory.search("where does Ana live?", user_id="ana")
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import IO, Any, TypeVar

from .async_derived import AsyncDerivedView
from .async_lifecycle import AsyncLifecycleVerbs
from .config import DEFAULT_USER, SearchConfig
from .embed import Embedder
from .errors import InvalidInputError
from .facts.types import ConsolidationReport
from .facts.worker import ConsolidationWorker
from .ingest.gate import GateConfig
from .ingest.normalise import check_int
from .llm import ChatClient
from .memory import Memory, ProgressCallback
from .retrieve.analysis import QueryAnalysis
from .store.base import Filters, Store
from .types import (
    Context,
    ContextFact,
    DeleteCounts,
    Episode,
    EpisodeVersion,
    Fact,
    Hit,
    Page,
)

T = TypeVar("T")
#: Reader threads when none is named: searches embed the question and rank on the CPU.
DEFAULT_READERS = 4
#: More reader threads than this would only contend for the same cores and connections.
MAX_READERS = 256


class AsyncMemory(AsyncLifecycleVerbs):
    """Long-term memory for asyncio agents: ``Memory``'s verbs as coroutines.

    Takes ``Memory``'s arguments (``path``, ``url``, ``embedder``, ``config``, ...),
    plus ``readers``, the number of reader threads. ``async with`` closes it; or
    ``await memory.close()``.
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
        readers: int = DEFAULT_READERS,
        durability: str | None = None,
    ) -> None:
        readers = check_int(readers, "readers", minimum=1, maximum=MAX_READERS)
        self._memory = Memory(
            path,
            url=url,
            embedder=embedder,
            config=config,
            user_id=user_id,
            reindex=reindex,
            warm=warm,
            llm=llm,
            create=create,
            gate=gate,
            durability=durability,
        )
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="anamnesis-writer")
        self._readers = ThreadPoolExecutor(readers, thread_name_prefix="anamnesis-reader")
        self._closed = False

    @property
    def memory(self) -> Memory:
        """The synchronous Memory underneath (for what has no coroutine: properties)."""
        return self._memory

    @property
    def capabilities(self) -> dict[str, Any]:
        """``Memory.capabilities``."""
        return self._memory.capabilities

    @property
    def store(self) -> Store:
        """``Memory.store``."""
        return self._memory.store

    @property
    def embedder(self) -> Embedder:
        """``Memory.embedder``."""
        return self._memory.embedder

    @property
    def derived(self) -> AsyncDerivedView:
        """``Memory.derived`` as coroutines: ``await memory.derived.summaries(...)``,
        ``.profiles()``, ``.profile("user")``."""
        return AsyncDerivedView(self._memory.derived, self._read)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Let the reads and writes already awaited finish, then close the Memory.
        Closing twice is harmless; no verb may be awaited after."""
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._readers.shutdown, True)
        await self._run(self._writer, self._memory.close)
        await asyncio.to_thread(self._writer.shutdown, True)

    async def _write(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self._check_open()
        return await self._run(self._writer, call, *args, **kwargs)

    async def _read(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self._check_open()
        return await self._run(self._readers, call, *args, **kwargs)

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidInputError("this AsyncMemory is closed: open a new one")

    @staticmethod
    async def _run(
        pool: ThreadPoolExecutor, call: Callable[..., T], *args: Any, **kwargs: Any
    ) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(pool, functools.partial(call, *args, **kwargs))

    async def add(
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
        """``Memory.add``, run on the writer thread."""
        return await self._write(
            self._memory.add,
            content,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            role=role,
            speaker=speaker,
            event_time=event_time,
            metadata=metadata,
            modality=modality,
        )

    async def add_many(
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
        """``Memory.add_many``, run on the writer thread."""
        return await self._write(
            self._memory.add_many,
            messages,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            role=role,
            speaker=speaker,
            event_time=event_time,
            metadata=metadata,
            modality=modality,
            atomic=atomic,
            progress=progress,
        )

    async def update(
        self,
        episode_id: str,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> Episode:
        """``Memory.update``, run on the writer thread."""
        return await self._write(
            self._memory.update,
            episode_id,
            content=content,
            metadata=metadata,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
        )

    async def delete(
        self,
        episode_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> DeleteCounts:
        """``Memory.delete``, run on the writer thread."""
        return await self._write(
            self._memory.delete,
            episode_id,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
        )

    async def delete_all(
        self, *, user_id: str, agent_id: str | None = None, session_id: str | None = None
    ) -> DeleteCounts:
        """``Memory.delete_all``, run on the writer thread."""
        return await self._write(
            self._memory.delete_all, user_id=user_id, agent_id=agent_id, session_id=session_id
        )

    async def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        limit: int = 10,
        filters: Filters | Mapping[str, Any] | None = None,
        explain: bool = False,
        now: datetime | str | float | None = None,
        as_of: datetime | str | float | None = None,
        include_archive: bool = False,
    ) -> list[Hit]:
        """``Memory.search``, run on a reader thread."""
        return await self._read(
            self._memory.search,
            query,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            limit=limit,
            filters=filters,
            explain=explain,
            now=now,
            as_of=as_of,
            include_archive=include_archive,
        )

    async def analyse(
        self, query: str, *, now: datetime | str | float | None = None
    ) -> QueryAnalysis:
        """``Memory.analyse``, run on a reader thread."""
        return await self._read(self._memory.analyse, query, now=now)

    async def context(
        self,
        query: str,
        *,
        budget_tokens: int = 2000,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        filters: Filters | Mapping[str, Any] | None = None,
        now: datetime | str | float | None = None,
        limit: int = 50,
        neighbour_hits: int = 5,
        facts: Sequence[ContextFact] | None = None,
        profile: bool = False,
    ) -> Context:
        """``Memory.context``, run on a reader thread."""
        return await self._read(
            self._memory.context,
            query,
            budget_tokens=budget_tokens,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            filters=filters,
            now=now,
            limit=limit,
            neighbour_hits=neighbour_hits,
            facts=facts,
            profile=profile,
        )

    async def get(
        self,
        episode_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> Episode:
        """``Memory.get``, run on a reader thread."""
        return await self._read(
            self._memory.get, episode_id, user_id=user_id, agent_id=agent_id, session_id=session_id
        )

    async def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
        filters: Filters | Mapping[str, Any] | None = None,
    ) -> Page:
        """``Memory.get_all``, run on a reader thread."""
        return await self._read(
            self._memory.get_all,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            limit=limit,
            offset=offset,
            filters=filters,
        )

    async def history(
        self,
        episode_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> list[EpisodeVersion]:
        """``Memory.history``, run on a reader thread."""
        return await self._read(
            self._memory.history,
            episode_id,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
        )

    async def consolidate(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
        extractor: str | None = None,
        summaries: str | None = None,
    ) -> ConsolidationReport:
        """``Memory.consolidate``, run on the writer thread."""
        return await self._write(
            self._memory.consolidate,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            limit=limit,
            extractor=extractor,
            summaries=summaries,
        )

    async def start_consolidation(
        self,
        *,
        interval: float = 60.0,
        extractor: str | None = None,
        summaries: str | None = None,
    ) -> ConsolidationWorker:
        """``Memory.start_consolidation``, run on the writer thread."""
        return await self._write(
            self._memory.start_consolidation,
            interval=interval,
            extractor=extractor,
            summaries=summaries,
        )

    async def facts(
        self,
        *,
        subject: str | None = None,
        predicate: str | None = None,
        as_of: datetime | str | float | None = None,
        include_superseded: bool = False,
        user_id: str | None = None,
        agent_id: str | None = None,
        limit: int = 100,
    ) -> list[Fact]:
        """``Memory.facts``, run on a reader thread."""
        return await self._read(
            self._memory.facts,
            subject=subject,
            predicate=predicate,
            as_of=as_of,
            include_superseded=include_superseded,
            user_id=user_id,
            agent_id=agent_id,
            limit=limit,
        )

    async def fact_history(
        self,
        *,
        subject: str = "user",
        predicate: str,
        as_of: datetime | str | float | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[Fact]:
        """``Memory.fact_history``, run on a reader thread."""
        return await self._read(
            self._memory.fact_history,
            subject=subject,
            predicate=predicate,
            as_of=as_of,
            user_id=user_id,
            agent_id=agent_id,
        )

    async def stats(self, *, user_id: str | None = None) -> dict[str, Any]:
        """``Memory.stats``, run on a reader thread."""
        return await self._read(self._memory.stats, user_id=user_id)

    async def check(self) -> list[str]:
        """``Memory.check``, run on the writer thread."""
        return await self._write(self._memory.check)

    async def reindex(self, *, progress: ProgressCallback | None = None) -> int:
        """``Memory.reindex``, run on the writer thread."""
        return await self._write(self._memory.reindex, progress=progress)

    async def export_jsonl(self, out: IO[str], *, user_id: str | None = None) -> int:
        """``Memory.export_jsonl``, run on a reader thread."""
        return await self._read(self._memory.export_jsonl, out, user_id=user_id)

    async def import_jsonl(
        self,
        lines: Iterable[str],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> int:
        """``Memory.import_jsonl``, run on the writer thread."""
        return await self._write(
            self._memory.import_jsonl, lines, user_id=user_id, agent_id=agent_id, progress=progress
        )
