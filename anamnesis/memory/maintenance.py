"""Memory's maintenance verbs: reindex, check, stats, export_jsonl, import_jsonl."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import IO, Any, TypeVar

from ..errors import CorruptStoreError
from ..facts.predicates import embedding_text as fact_embedding_text
from ..ingest.normalise import check_id, embedding_text
from ..types import STAT_COUNTS, Episode, Fact, Scope
from .state import MemoryState, ProgressCallback
from .verbs import reads, writes
from .writes import WRITE_BATCH

T = TypeVar("T")

#: Meta key naming the embedder (``name<TAB>dim``) a re-embedding with another one is
#: moving the store to; empty once it has finished.
REINDEX_MARK = "reindexing_to"


class MaintenanceVerbs(MemoryState):
    """The store as a whole: re-embedding, checks, counts, export and import."""

    @writes
    def reindex(self, *, progress: ProgressCallback | None = None) -> int:
        """Re-embed every episode (and fact) from its stored text with the current
        embedder; returns the number of episodes."""
        done = 0
        stored = (self._store.get_meta("embedder_name"), self._store.get_meta("embedder_dim"))
        target = (self._embedder.name, str(self._embedder.dim))
        if stored != target:
            # Until the last batch, the store holds vectors of two embedders: an open
            # after a kill must finish the work, not search among them.
            self._store.set_meta(REINDEX_MARK, "\t".join(target))

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
        if stored != target:
            self._store.set_meta(REINDEX_MARK, "")
        return done

    @writes
    def check(self) -> list[str]:
        """A full check of the store (it reads everything): the problems found, empty
        when it is healthy. A damaged SQLite store refuses writes until a check passes."""
        return self._store.check()

    @reads
    def stats(self, *, user_id: str | None = None) -> dict[str, Any]:
        """Counts for one user; for the whole store (``user_id`` None) also where the
        store is and its size.

        A damaged store still answers, as its reads do: the counts it could not read
        are None, and ``unreadable`` says why (``capabilities["store_health"]`` too).
        """
        scope = (
            Scope(check_id(user_id, "user_id", required=True) or "")
            if user_id is not None
            else None
        )
        try:
            counts = self._store.stats(scope)
        except CorruptStoreError as exc:
            counts = {"backend": self._store.backend, **dict.fromkeys(STAT_COUNTS)}
            counts["unreadable"] = str(exc)
        return {**counts, "embedder": self._embedder.name}

    @reads
    def export_jsonl(self, out: IO[str], *, user_id: str | None = None) -> int:
        """Write the store (or one user's part) as JSONL that ``import_jsonl`` restores.
        Archived episodes are included (as episodes: an import brings them back hot)."""
        from ..portable import export_jsonl

        return export_jsonl(self._store, self._embedder, out, user_id=user_id)

    @writes
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
        from ..portable import import_jsonl

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
