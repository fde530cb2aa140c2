"""Background indexing on Memory: the indexer's lifecycle and ``wait_indexed``.

With ``Memory(indexing="background")`` the write verbs store episodes without their
vectors and notify the ``VectorIndexer`` (``anamnesis.indexer``), which writes
them afterwards. Whatever the mode, a Memory that opens a store with episodes still
waiting (a process killed or closed before its indexer caught up) starts an indexer
to finish them, so no episode stays out of the dense index unnoticed.
"""

from __future__ import annotations

import math
import threading

from ..errors import InvalidInputError, StoreError
from ..indexer import VectorIndexer
from .state import MemoryState
from .verbs import reads


class IndexingVerbs(MemoryState):
    """``wait_indexed``, and the indexer the write verbs notify."""

    _indexer_lock: threading.Lock

    @reads
    def wait_indexed(self, *, timeout: float | None = None) -> bool:
        """Wait until no episode of the store waits for its vector (``indexing=
        "background"``), at most ``timeout`` seconds (None: as long as it takes).
        True when none is left, False on timeout; ``IndexingError`` if the indexer
        failed. Returns at once when nothing is pending."""
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout < 0
        ):
            raise InvalidInputError("timeout must be a number of seconds >= 0, or None")
        if self._indexer is None:
            if not self._has_backlog():
                return True
            self._start_indexer()
        assert self._indexer is not None
        return self._indexer.wait(timeout)

    def _has_backlog(self) -> bool:
        """Whether episodes wait for vectors and this process may write them."""
        if getattr(self._store, "read_only", None) is not None or self._store.damage is not None:
            return False
        return bool(self._store.pending_vectors(1))

    def _start_indexer(self) -> None:
        with self._indexer_lock:
            if self._indexer is None:
                self._indexer = VectorIndexer(self._store, self._embedder)

    def _stop_indexer(self) -> None:
        """Stop the indexer after its batch in flight; the rest stays pending, durably."""
        with self._indexer_lock:
            indexer, self._indexer = self._indexer, None
        if indexer is not None:
            indexer.stop()

    def _notify_indexer(self) -> None:
        if self._indexer is not None:
            self._indexer.notify()

    def _vector_backlog(self) -> int | str:
        """How many episodes wait for their vector, or why that cannot be read."""
        try:
            return self._store.pending_count(None)
        except StoreError as exc:
            return f"unreadable: {exc}"
