"""Heavy objects that post-fusion stages load once and reuse across searches.

A ``Retriever`` owns one ``StageResources``; every ``SearchRequest`` it makes shares it.
Models (a cross-encoder, a second embedder) are built on first use by the stage that
needs them, never at import, and live as long as the retriever: no module-level
singletons.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources as package_files
from pathlib import Path
from typing import Any, TypeVar

from ..errors import InvalidInputError

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

    def __contains__(self, key: object) -> bool:
        """Whether the object under ``key`` has been built."""
        with self._lock:
            return key in self._items

    def close(self) -> None:
        """Release what was built (objects with a ``close`` method are closed)."""
        with self._lock:
            for item in self._items.values():
                closer = getattr(item, "close", None)
                if callable(closer):
                    closer()
            self._items.clear()


def load_model_file(name: str, what: str, build: Callable[[Any], T]) -> T:
    """``build`` applied to a JSON model file: ``name`` as a path, else the file of that
    name in ``anamnesis/data``. A file that is missing or malformed, or that ``build``
    rejects, raises ``InvalidInputError`` naming ``what``."""
    path = Path(name)
    try:
        if path.is_file():
            text = path.read_text(encoding="utf-8")
        else:
            text = package_files.files("anamnesis.data").joinpath(name).read_text(encoding="utf-8")
        return build(json.loads(text))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"cannot load {what} {name!r}: {exc}") from exc
