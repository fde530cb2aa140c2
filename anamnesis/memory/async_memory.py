"""AsyncMemory: the Memory verbs for asyncio programs, never blocking the event loop.

Every verb of ``Memory`` is here under the same name, with the same arguments, return
type and errors, as a coroutine (``async_verbs``, generated from ``Memory``). Three
kinds of thread run them (``verbs`` marks each verb with its kind):

- **the writer thread** runs the writes (``add``, ``update``, ``delete``, ...), one at
  a time, in the order they were awaited (SQLite takes one writer at a time anyway);
- **the maintenance thread** runs the verbs that may take minutes over a large scope:
  ``forget``, ``delete_all``, ``archive``, ``restore``, ``decay`` and ``consolidate``,
  one at a time, in the order they were awaited;
- **reader threads**, a small pool, run the reads, in parallel with each other and
  with the two writing threads (the datasette model).

The order promised between the writer and the maintenance thread:

- a maintenance verb starts once every write awaited before it has been applied, so
  ``gather(add(...), forget(user_id=...))`` forgets what the ``add`` wrote, as before;
- a write awaited after a maintenance verb, before that verb has returned, does not
  wait for it to end: it is applied before the verb starts or between two of its
  transactions (a large archive, restore, decay or forget moves its episodes in
  batches, one transaction each). Whether the verb acts on what that write wrote is not promised:
  to be sure it does not, await the write once the verb has returned; to be sure it
  does, await the write before the verb (the point above);
- anything awaited after an awaited call has returned is applied after it, whatever
  the threads.

Both writing threads share the Memory and its store, as its background indexer and
consolidation worker do: on SQLite its one connection, whose lock each transaction
holds (a large move releases it between its batches), so the in-memory indexes
follow each change in place; on PostgreSQL its connection pool.

    async with AsyncMemory(path="agent.db") as memory:
        await memory.add("I moved to Lisbon in May", user_id="ana")
        hits = await memory.search("where does Ana live?", user_id="ana")
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ..config import DEFAULT_USER, SearchConfig
from ..embed import Embedder
from ..errors import InvalidInputError
from ..ingest.gate import GateConfig
from ..ingest.normalise import check_int
from ..llm import ChatClient
from ..store.base import Store
from .async_verbs import AsyncDerivedView, AsyncVerbs
from .memory import Memory

T = TypeVar("T")
#: Reader threads when none is named: searches embed the question and rank on the CPU.
DEFAULT_READERS = 4
#: More reader threads than this would only contend for the same cores and connections.
MAX_READERS = 256


class AsyncMemory(AsyncVerbs):
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
        indexing: str | None = None,
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
            indexing=indexing,
        )
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="anamnesis-writer")
        self._maintenance = ThreadPoolExecutor(1, thread_name_prefix="anamnesis-maintenance")
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
        """Let the reads, writes and maintenance verbs already awaited finish (a decay
        of a large scope may take minutes), then close the Memory. Closing twice is
        harmless; no verb may be awaited after."""
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._readers.shutdown, True)
        await asyncio.to_thread(self._maintenance.shutdown, True)
        await self._run(self._writer, self._memory.close)
        await asyncio.to_thread(self._writer.shutdown, True)

    async def _write(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self._check_open()
        return await self._run(self._writer, call, *args, **kwargs)

    async def _maintain(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self._check_open()
        # A turn in the writer's queue: done once the writes awaited before are applied.
        turn = self._writer.submit(_nothing)
        return await self._run(self._maintenance, _after, turn, call, *args, **kwargs)

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


def _nothing() -> None:
    """The writer's turn that a maintenance verb waits for."""


def _after(turn: Future[None], call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call``, once the writer has reached ``turn``."""
    turn.result()
    return call(*args, **kwargs)
