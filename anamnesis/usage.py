"""Usage counters, kept off the search path: counted in memory, written in batches.

A search or a ``get`` only adds to an in-memory tally (a dict update under a lock
held for microseconds). A background thread writes the tally to the store every
``FLUSH_SECONDS``, or sooner once ``FLUSH_EPISODES`` episodes are pending, in one
transaction; the SQLite store writes it through a connection of its own, so no
search ever waits for it. Closing the Memory writes what is pending. A process that
is killed loses at most the last interval's counts: they are advisory, not records.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from .errors import AnamnesisError, StoreLockedError
from .store.base import Store

#: The longest a count waits in memory before it is written (seconds).
FLUSH_SECONDS = 2.0
#: Pending episodes that trigger a write before the interval is up.
FLUSH_EPISODES = 5000


@dataclass(slots=True)
class UsageDelta:
    """Counts of one episode not yet written."""

    episode_id: str
    user_id: str
    retrieved: int = 0
    last_retrieved_at: datetime | None = None
    read: int = 0
    last_read_at: datetime | None = None


class UsageLog:
    """The pending usage counts of one Memory, and the thread that writes them."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._pending: dict[str, UsageDelta] = {}
        self._wake = threading.Event()
        self._closed = False
        self._warned = False
        #: Why the last background write failed, until one succeeds again.
        self.failure: str | None = None
        self._thread: threading.Thread | None = None

    @property
    def state(self) -> str:
        """``"ok"``, or why counts are not being written (``Memory.capabilities``)."""
        if self._store.damage is not None:
            return "off: the store is damaged and refuses writes"
        return "ok" if self.failure is None else f"failing: {self.failure}"

    def retrieved(self, user_id: str, episode_ids: Iterable[str], at: datetime) -> None:
        """Count one retrieval by a search of each of ``episode_ids``."""
        with self._lock:
            for episode_id in episode_ids:
                delta = self._delta(episode_id, user_id)
                delta.retrieved += 1
                delta.last_retrieved_at = at
            self._started()

    def read(self, user_id: str, episode_id: str, at: datetime) -> None:
        """Count one explicit read (``get``) of an episode."""
        with self._lock:
            delta = self._delta(episode_id, user_id)
            delta.read += 1
            delta.last_read_at = at
            self._started()

    def _delta(self, episode_id: str, user_id: str) -> UsageDelta:
        delta = self._pending.get(episode_id)
        if delta is None:
            delta = self._pending[episode_id] = UsageDelta(episode_id, user_id)
        return delta

    def _started(self) -> None:
        """Start the writer on first use; wake it early when much is pending."""
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name="anamnesis-usage", daemon=True)
            self._thread.start()
        if len(self._pending) >= FLUSH_EPISODES:
            self._wake.set()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(FLUSH_SECONDS)
            self._wake.clear()
            if not self._closed:
                self.flush(background=True)

    def flush(self, *, background: bool = False) -> None:
        """Write the pending counts now. In the background a locked store is retried
        at the next interval, and other errors warn once and show in ``state`` until a
        write succeeds; in the caller's thread they raise."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return
        try:
            self._store.record_usage(list(pending.values()))
            self.failure = None
        except StoreLockedError:
            if not background:
                raise
            self._restore(pending)
        except AnamnesisError as exc:
            if not background:
                raise
            self.failure = str(exc)
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"usage counters could not be written ({exc}); searches are unaffected",
                    RuntimeWarning,
                    stacklevel=2,
                )

    def _restore(self, pending: dict[str, UsageDelta]) -> None:
        """Put counts that could not be written back in front of newer ones."""
        with self._lock:
            for episode_id, old in pending.items():
                new = self._pending.get(episode_id)
                if new is not None:
                    old.retrieved += new.retrieved
                    old.read += new.read
                    old.last_retrieved_at = new.last_retrieved_at or old.last_retrieved_at
                    old.last_read_at = new.last_read_at or old.last_read_at
                self._pending[episode_id] = old

    def close(self) -> None:
        """Stop the writer and write what is pending (errors warn: closing goes on)."""
        self._closed = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self.flush(background=True)
