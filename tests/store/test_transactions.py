"""Writes are all-or-nothing: episode, FTS row and vector together, or none."""

from __future__ import annotations

import numpy as np
import pytest

from anamnesis import InvalidInputError, Memory
from anamnesis.store.sqlite.driver import sqlite3


class ExplodingEmbedder:
    """Embeds normally until told to fail, then raises mid-batch."""

    def __init__(self, inner):
        self.inner, self.name, self.dim, self.fail = inner, inner.name, inner.dim, False

    def embed_documents(self, texts):
        if self.fail:
            raise RuntimeError("embedding backend crashed")
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def _counts(path) -> tuple[int, int, int]:
    with sqlite3.connect(path) as conn:
        return (
            conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0],
            conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0],
            conn.execute("SELECT COUNT(*) FROM episodes_fts").fetchone()[0],
        )


def test_failure_while_embedding_stores_nothing(db_path, embedder) -> None:
    exploding = ExplodingEmbedder(embedder)
    with Memory(path=db_path, embedder=exploding) as mem:
        mem.add("kept", user_id="u")
        exploding.fail = True
        with pytest.raises(RuntimeError):
            mem.add(["lost 1", "lost 2"], user_id="u")
    assert _counts(db_path) == (1, 1, 1)


def test_failure_inside_the_write_rolls_back_every_table(memory: Memory, db_path) -> None:
    memory.add("kept", user_id="u")
    (episode,) = memory.add("duplicate id source", user_id="u")
    vector = np.zeros((2, memory.embedder.dim), dtype=np.float32)
    fresh = episode.__class__(
        **{**{f: getattr(episode, f) for f in episode.__slots__}, "id": "ep_new"}
    )
    with pytest.raises(InvalidInputError, match="conflicts"):
        memory.store.insert_episodes([fresh, episode], vector)  # second row violates UNIQUE(id)
    assert _counts(db_path) == (2, 2, 2)
    assert memory.get_all(user_id="u").total == 2


def test_delete_all_is_one_transaction(memory: Memory, db_path) -> None:
    memory.add([f"turn {i}" for i in range(20)], user_id="u", session_id="s")
    memory.delete_all(user_id="u")
    assert _counts(db_path) == (0, 0, 0)
