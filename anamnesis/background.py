"""What the memory's background threads (the vector indexer, the consolidation worker)
share: how they report their state."""

from __future__ import annotations

import threading


class BackgroundThread:
    """A daemon thread's owner: ``state`` from the thread and the error that stopped it.

    Subclasses set ``_thread`` and ``error``."""

    _thread: threading.Thread
    #: The error that stopped the thread, if one did.
    error: BaseException | None = None

    @property
    def state(self) -> str:
        """``running``, ``stopped`` or ``failed: <error>``."""
        if self.error is not None:
            return f"failed: {self.error}"
        return "running" if self._thread.is_alive() else "stopped"
