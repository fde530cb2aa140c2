"""Checks on what a forget leaves in the full-text index, shared by the forget tests."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from anamnesis.store.sqlite.driver import sqlite3


def spelled_separators(path: Path, erased: list[str]) -> list[tuple[bytes, str]]:
    """The separators of the episodes index (one per leaf page: a prefix of the page's
    first word) that spell the start of an erased word and of no word left."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, episodes_fts, row)")
        words = [row[0] for row in conn.execute("SELECT term FROM v")]
        separators = [
            bytes(row[0])[1:] for row in conn.execute("SELECT term FROM episodes_fts_idx")
        ]
    assert not set(erased) & set(words)
    return [
        (separator, word)
        for separator in separators
        for word in erased
        if len(separator) > 1
        and word.encode().startswith(separator)
        and not any(live.encode().startswith(separator) for live in words)
    ]
