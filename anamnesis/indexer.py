"""Background indexing: vectors for episodes stored without one, on a thread of its own.

With ``Memory(indexing="background")``, ``add`` commits each episode with a mark in
``pending_vectors`` and returns; a ``VectorIndexer`` then takes the marked episodes in
the order they were stored, ``INDEX_BATCH`` at a time, reuses the scope's stored
vectors of identical text, embeds the rest, and writes the vectors and clears the
marks in one transaction (``Store.index_pending``). A kill loses at most the batch in
flight, which stays marked; the next open resumes it. A failure is never lost: the
indexer stops, warns once, and records the error (``Memory.capabilities``), which
``wait`` raises as ``IndexingError``.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections import defaultdict

import numpy as np

from .background import BackgroundThread
from .embed import Embedder
from .errors import IndexingError, StoreLockedError
from .ingest.normalise import embedding_text
from .store.base import PendingVector, Store
from .types import Scope

#: Pending episodes read, and their vectors written, per transaction (as ``add_many``'s
#: ``WRITE_BATCH``): sorted by length across this many texts, the embedder pads less.
INDEX_BATCH = 512
#: Texts per embedding call; a ``close`` waits for one call at most, then the batch's
#: vectors embedded so far are written and the rest stays pending.
EMBED_CHUNK = 64
#: Seconds to wait before trying again when another process holds the write lock.
LOCKED_RETRY = 0.5


class VectorIndexer(BackgroundThread):
    """Writes the vectors of the store's pending episodes, oldest first, until none is
    left; woken by ``notify`` when a write adds more."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self._store = store
        self._embedder = embedder
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._progress = threading.Condition(self._lock)
        #: Set while the indexer has nothing to do (the backlog it last read was empty).
        self._idle = False
        #: How many vectors this indexer has written.
        self.written = 0
        #: The error that stopped the indexer, if one did.
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="anamnesis-index", daemon=True)
        self._thread.start()

    def notify(self) -> None:
        """Note that episodes were stored without vectors (indexed at once)."""
        with self._lock:
            self._idle = False
        self._wake.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the store has no episode waiting for a vector; False on timeout.

        Raises ``IndexingError`` if the indexer has failed or was stopped.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        self.notify()
        while True:
            with self._lock:
                self._progress.wait_for(
                    lambda: self._idle or self.error is not None or not self._thread.is_alive(),
                    None if deadline is None else max(0.0, deadline - time.monotonic()),
                )
            self._raise_if_failed()
            if not self._thread.is_alive():
                raise IndexingError("the background indexer has stopped (the memory is closed)")
            # Idle means the last read found nothing; another process may add more.
            if self._store.pending_count(None) == 0:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            self.notify()

    def stop(self) -> None:
        """Stop once the batch in flight is written; what is still pending stays marked."""
        self._stopping.set()
        self._wake.set()
        self._thread.join()

    def _raise_if_failed(self) -> None:
        if self.error is not None:
            raise IndexingError(f"background indexing failed: {self.error}") from self.error

    def _loop(self) -> None:
        try:
            while not self._stopping.is_set():
                self._wake.clear()
                try:
                    done = self._index_batch()
                except StoreLockedError:
                    self._stopping.wait(LOCKED_RETRY)
                    continue
                if done:
                    continue
                with self._lock:
                    self._idle = True
                    self._progress.notify_all()
                self._wake.wait()
        except Exception as exc:  # noqa: BLE001 - recorded, warned, raised by wait()
            self.error = exc
            warnings.warn(f"background indexing stopped: {exc!r}", RuntimeWarning, stacklevel=1)
        finally:
            with self._lock:
                self._progress.notify_all()

    def _index_batch(self) -> int:
        """Index the oldest pending episodes; how many were read (0: none pending)."""
        batch = self._store.pending_vectors(INDEX_BATCH)
        if not batch:
            return 0
        vectors = self._vectors(batch)
        ready = [(p, v) for p, v in zip(batch, vectors, strict=True) if v is not None]
        self.written += self._store.index_pending(ready)
        return len(batch)

    def _vectors(self, batch: list[PendingVector]) -> list[np.ndarray | None]:
        """A vector for each pending episode: the user's stored vector of the same
        text if there is one, else embedded (each distinct text once, shortest first);
        None for those not embedded before a ``stop``."""
        by_user: dict[str, list[str]] = defaultdict(list)
        for pending in batch:
            by_user[pending.user_id].append(pending.content_hash)
        known: dict[tuple[str, str], np.ndarray] = {}
        for user_id, hashes in by_user.items():
            for content_hash, vector in self._store.vectors_for_hashes(
                hashes, Scope(user_id)
            ).items():
                known[(user_id, content_hash)] = vector
        todo: dict[str, str] = {}
        for pending in batch:
            if (pending.user_id, pending.content_hash) not in known:
                todo.setdefault(
                    pending.content_hash, embedding_text(pending.content, pending.speaker)
                )
        order = sorted(todo, key=lambda h: len(todo[h]))
        fresh: dict[str, np.ndarray] = {}
        for start in range(0, len(order), EMBED_CHUNK):
            if start and self._stopping.is_set():
                break
            chunk = order[start : start + EMBED_CHUNK]
            embedded = self._embedder.embed_documents([todo[h] for h in chunk])
            fresh.update(zip(chunk, embedded, strict=True))
        out: list[np.ndarray | None] = []
        for pending in batch:
            reused = known.get((pending.user_id, pending.content_hash))
            out.append(reused if reused is not None else fresh.get(pending.content_hash))
        return out
