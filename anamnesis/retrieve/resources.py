"""Heavy objects that post-fusion stages load once and reuse across searches.

A ``Retriever`` owns one ``StageResources``; every ``SearchRequest`` it makes shares it.
Models (a cross-encoder, a second embedder) are built on first use by the stage that
needs them, never at import, and live as long as the retriever: no module-level
singletons.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(slots=True)
class StageResources:
    """Lazily built, shared stage state, keyed by what built it.

    ``vector_cache_dir``, when set, is where stages that embed candidate text at query
    time keep those vectors on disk (the benchmark harness points it at its cache).
    """

    vector_cache_dir: Path | None = None
    _items: dict[Any, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def get(self, key: Any, build: Callable[[], T]) -> T:
        """The object stored under ``key``, built by ``build()`` the first time."""
        with self._lock:
            if key not in self._items:
                self._items[key] = build()
            return self._items[key]  # type: ignore[no-any-return]

    def close(self) -> None:
        """Release what was built (objects with a ``close`` method are closed)."""
        with self._lock:
            for item in self._items.values():
                closer = getattr(item, "close", None)
                if callable(closer):
                    closer()
            self._items.clear()
