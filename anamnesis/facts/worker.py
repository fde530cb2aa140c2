"""Background consolidation: extract facts on a thread of its own, off the hot path.

``Memory.start_consolidation`` starts a ``ConsolidationWorker``. Every write tells
the worker which fact scope (user and agent) received episodes; every ``interval``
seconds the worker consolidates the scopes it was told about, so a burst of writes
costs one consolidation per scope. A failure is never lost: the worker stops, warns
once, records the error (``error``, ``Memory.capabilities["consolidation"]``) and
``stop()`` raises it as ``ConsolidationError``.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable

from ..background import BackgroundThread
from ..errors import ConsolidationError
from ..store.base import fact_scope
from ..types import Scope


class ConsolidationWorker(BackgroundThread):
    """Consolidates the scopes that receive episodes, every ``interval`` seconds."""

    def __init__(
        self,
        consolidate: Callable[[Scope], object],
        *,
        interval: float,
        scopes: Iterable[Scope] = (),
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self._consolidate = consolidate
        self._interval = interval
        self._pending: set[Scope] = {fact_scope(s) for s in scopes}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._idle = threading.Condition(self._lock)
        self._busy = False
        #: The error that stopped the worker, if one did.
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._loop, name="anamnesis-consolidate", daemon=True
        )
        self._thread.start()

    def notify(self, scope: Scope) -> None:
        """Note that ``scope`` received episodes (consolidated at the next cycle)."""
        with self._lock:
            self._pending.add(fact_scope(scope))

    def drain(self, timeout: float | None = None) -> bool:
        """Consolidate every noted scope now and wait until done; False on timeout.

        Raises ``ConsolidationError`` if the worker has failed.
        """
        with self._lock:
            self._wake.set()
            done = self._idle.wait_for(
                lambda: (
                    (not self._pending and not self._busy)
                    or self.error is not None
                    or not self._thread.is_alive()
                ),
                timeout,
            )
        self._raise_if_failed()
        return done

    def stop(self, timeout: float | None = None, *, raise_error: bool = True) -> None:
        """Finish the current run and stop the thread; raise its error if it failed
        (unless ``raise_error=False``: ``Memory.close``, which already warned)."""
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout)
        if raise_error:
            self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self.error is not None:
            raise ConsolidationError(f"background consolidation failed: {self.error}") from (
                self.error
            )

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            with self._lock:
                scopes, self._pending = sorted(self._pending, key=repr), set()
                self._busy = True
            try:
                for scope in scopes:
                    self._consolidate(scope)
            except Exception as exc:  # noqa: BLE001 - recorded, warned, raised by stop()/drain()
                self.error = exc
                warnings.warn(
                    f"background consolidation stopped: {exc!r}", RuntimeWarning, stacklevel=1
                )
                return
            finally:
                with self._lock:
                    self._busy = False
                    self._idle.notify_all()
