"""Vectors of one embedder kept in a SQLite file, keyed by a hash of the text."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np


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
