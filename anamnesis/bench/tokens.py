"""Counting tokens of retrieved text, and an embedder wrapper that remembers vectors.

``TokenCounter`` lives in the core package (context assembly counts tokens too); it is
re-exported here for the harness.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..embed.base import Embedder
from ..embed.vector_file import VectorFile
from ..tokens import TOKENIZER_NAME, TokenCounter

__all__ = ["TOKENIZER_NAME", "CachingEmbedder", "TokenCounter"]


class CachingEmbedder:
    """An Embedder that reuses document vectors of text it has embedded before.

    Identical text always gets an identical vector, so results do not change; only
    ingest gets faster when cases share text (LongMemEval haystacks reuse sessions).
    With a ``disk`` file, vectors also persist across runs. Queries are never cached,
    so search latency stays honest. ``embedded``, ``reused`` and ``from_disk`` count
    texts for the report.
    """

    def __init__(self, inner: Embedder, disk: VectorFile | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.disk = disk
        self._vectors: dict[str, np.ndarray] = {}
        self.embedded = 0
        self.reused = 0
        self.from_disk = 0

    @classmethod
    def with_cache_dir(cls, inner: Embedder, cache_dir: Path | None) -> CachingEmbedder:
        """``inner`` with vectors cached in memory and, when ``cache_dir`` is given, on disk."""
        disk = VectorFile(cache_dir, inner.name, inner.dim) if cache_dir is not None else None
        return cls(inner, disk)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``, embedding only those not seen before."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        self.reused += len(texts) - len(todo)
        if todo and self.disk is not None:
            stored = self.disk.get(todo)
            self._vectors.update(stored)
            self.from_disk += len(stored)
            todo = [t for t in todo if t not in stored]
        if todo:
            fresh = self.inner.embed_documents(todo)
            self._vectors.update(zip(todo, fresh, strict=True))
            self.embedded += len(todo)
            if self.disk is not None:
                self.disk.put(todo, fresh)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        """The inner embedder's query vector (never cached)."""
        return self.inner.embed_query(text)
