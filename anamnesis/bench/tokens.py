"""Counting tokens of retrieved text, and an embedder wrapper that remembers vectors.

Token counts use the MiniLM WordPiece vocabulary bundled with Anamnesis
(bert-base-uncased, no special tokens, no truncation). It is offline and
deterministic; on English chat it lands within ~10% of GPT-style BPE counts, which is
all a context-budget metric needs.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..embed.base import Embedder

_VOCAB = Path(__file__).resolve().parent.parent / "data" / "bert-base-uncased-vocab.txt"

#: What reports say about how tokens were counted.
TOKENIZER_NAME = "bert-base-uncased WordPiece (MiniLM vocabulary), no special tokens"


class TokenCounter:
    """Counts WordPiece tokens, caching by text."""

    def __init__(self) -> None:
        from tokenizers import BertWordPieceTokenizer

        self._tokenizer = BertWordPieceTokenizer(str(_VOCAB), lowercase=True)
        self._cache: dict[str, int] = {}

    def count(self, texts: Sequence[str]) -> list[int]:
        """Token counts of ``texts``, in order."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            encodings = self._tokenizer.encode_batch(todo, add_special_tokens=False)
            self._cache.update(zip(todo, (len(e.ids) for e in encodings), strict=True))
        return [self._cache[t] for t in texts]

    def clear(self) -> None:
        """Forget cached counts (between cases, to bound memory)."""
        self._cache.clear()


class VectorFile:
    """Document vectors of one embedder kept in a SQLite file, keyed by text hash.

    Used by benchmark runs that repeat over the same data (ablations, sweeps): the
    vectors are exactly what the embedder returned, so results do not change.
    """

    def __init__(self, directory: Path, embedder_name: str, dim: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", embedder_name)
        self.path = directory / f"{safe}-{dim}.sqlite"
        self.dim = dim
        # Several benchmark processes may share one cache directory.
        self._db = sqlite3.connect(self.path, timeout=120)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (hash TEXT PRIMARY KEY, vector BLOB NOT NULL)"
        )

    @staticmethod
    def key(text: str) -> str:
        """The cache key of ``text``."""
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of whichever ``texts`` are present."""
        keys = {self.key(t): t for t in texts}
        found: dict[str, np.ndarray] = {}
        items = list(keys)
        for start in range(0, len(items), 500):
            chunk = items[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT hash, vector FROM vectors WHERE hash IN ({marks})", chunk
            )
            for digest, blob in rows:
                found[keys[digest]] = np.frombuffer(blob, dtype=np.float32).copy()
        return found

    def put(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Store the vectors of ``texts``."""
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                [
                    (self.key(t), np.asarray(v, dtype=np.float32).tobytes())
                    for t, v in zip(texts, vectors, strict=True)
                ],
            )

    def close(self) -> None:
        """Close the file."""
        self._db.close()


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
