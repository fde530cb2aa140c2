"""Heavy objects that post-fusion stages load once and reuse across searches.

A ``Retriever`` owns one ``StageResources``; every ``SearchRequest`` it makes shares it.
Models (a cross-encoder, a second embedder) are built on first use by the stage that
needs them, never at import, and live as long as the retriever: no module-level
singletons.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources as package_files
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from ..embed.base import Embedder
from ..embed.vector_file import VectorFile
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
            return self._items[key]

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


class TextCache(Generic[T]):
    """Values computed from candidate texts at search time (a second embedder's
    vectors, token ids), kept for the searches after: the last ``capacity`` texts.

    Subclasses say how to compute the values of texts not kept (``_compute``). Safe to
    share between threads; computing runs outside the lock.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._values: OrderedDict[str, T] = OrderedDict()
        self._lock = threading.Lock()

    def _compute(self, texts: list[str]) -> dict[str, T]:
        """The values of ``texts`` (distinct, none kept)."""
        raise NotImplementedError

    def values(self, texts: Sequence[str]) -> list[T]:
        """The value of each of ``texts``, computing only those not kept from before."""
        with self._lock:
            known = {t: self._values[t] for t in texts if t in self._values}
        todo = [t for t in dict.fromkeys(texts) if t not in known]
        if todo:
            known.update(self._compute(todo))
        with self._lock:
            for text in dict.fromkeys(texts):
                self._values[text] = known[text]
                self._values.move_to_end(text)
            while len(self._values) > self.capacity:
                self._values.popitem(last=False)
        return [known[t] for t in texts]

    def __len__(self) -> int:
        """How many texts' values it keeps in memory."""
        with self._lock:
            return len(self._values)


class CandidateVectors(TextCache[np.ndarray]):
    """A second embedder's vectors of candidate texts, embedded at search time (the
    store keeps only the primary embedder's): the last ``capacity`` texts in memory
    and, with a ``disk`` file, every one on disk.

    The e5 ensemble builds one in ``StageResources``. ``computed`` counts the texts it
    had to embed.
    """

    def __init__(self, model: Embedder, capacity: int, disk: VectorFile | None = None) -> None:
        super().__init__(capacity)
        self.model = model
        self.disk = disk
        self.computed = 0

    def _compute(self, texts: list[str]) -> dict[str, np.ndarray]:
        found = self.disk.get(texts) if self.disk is not None else {}
        todo = [t for t in texts if t not in found]
        if todo:
            fresh = self.model.embed_documents(todo)
            self.computed += len(todo)
            if self.disk is not None:
                self.disk.put(todo, fresh)
            found.update(zip(todo, fresh, strict=True))
        return found

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of ``texts``, shape ``(len(texts), dim)``."""
        if not texts:
            return np.zeros((0, self.model.dim), dtype=np.float32)
        return np.stack(self.values(texts))

    def query(self, text: str) -> np.ndarray:
        """The second embedder's query vector (never kept)."""
        return self.model.embed_query(text)

    def close(self) -> None:
        """Close the disk file, if any."""
        if self.disk is not None:
            self.disk.close()


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
