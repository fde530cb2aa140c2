"""Bad input gets a typed error with a clear message, and nothing stored is lost."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from anamnesis import (
    CorruptStoreError,
    EmbedderMismatchError,
    InvalidInputError,
    Memory,
    SchemaVersionError,
    ScopeError,
    StoreLockedError,
)
from anamnesis.embed.minilm import MiniLMEmbedder
from anamnesis.ingest.normalise import MAX_CONTENT_CHARS
from anamnesis.store.sqlite import SQLiteStore
from anamnesis.store.sqlite.driver import sqlite3


@pytest.fixture
def seeded(memory: Memory) -> Memory:
    memory.add("an existing memory that must survive", user_id="ana")
    return memory


def _survivor_intact(memory: Memory) -> None:
    assert [e.content for e in memory.get_all(user_id="ana").items] == [
        "an existing memory that must survive"
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty"),
        ("   \n\t", "empty"),
        ("x" * (MAX_CONTENT_CHARS + 1), "limit"),
        (b"caf\xe9 latte", "UTF-8"),
        ("broken \udcff surrogate", "not valid Unicode"),
        (42, "must be a string"),
        (None, "must be a string"),
        ({"text": "wrong key"}, "unknown message field"),
        ({"role": "user"}, "needs a 'content'"),
        ([], "empty"),
    ],
)
def test_bad_content_is_rejected_and_nothing_is_lost(seeded: Memory, content, message) -> None:
    with pytest.raises(InvalidInputError, match=message):
        seeded.add(content, user_id="ana")
    _survivor_intact(seeded)


def test_one_bad_message_in_a_batch_stores_none_of_it(seeded: Memory) -> None:
    with pytest.raises(InvalidInputError):
        seeded.add(["fine", "", "also fine"], user_id="ana")
    _survivor_intact(seeded)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"user_id": ""},
        {"user_id": 7},
        {"user_id": "x" * 300},
        {"session_id": "tab\there"},
        {"agent_id": ["a"]},
    ],
)
def test_bad_scope_ids_are_scope_errors(seeded: Memory, kwargs) -> None:
    with pytest.raises(ScopeError):
        seeded.add("hello", **kwargs)
    with pytest.raises(ScopeError):
        seeded.search("hello", **kwargs)
    _survivor_intact(seeded)


def test_unknown_scope_keyword_is_a_type_error(seeded: Memory) -> None:
    with pytest.raises(TypeError):
        seeded.add("hello", usr_id="ana")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"event_time": "next tuesday-ish"}, "not a date"),
        ({"event_time": True}, "datetime"),
        ({"metadata": {"f": object()}}, "JSON"),
        ({"metadata": ["not", "a", "dict"]}, "must be a dict"),
        ({"modality": "smell"}, "modality"),
    ],
)
def test_bad_fields_are_rejected(seeded: Memory, kwargs, message) -> None:
    with pytest.raises(InvalidInputError, match=message):
        seeded.add("hello", user_id="ana", **kwargs)
    _survivor_intact(seeded)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": "10"}, "limit"),
        ({"filters": {"colour": "red"}}, "unknown filter"),
    ],
)
def test_bad_search_arguments(seeded: Memory, kwargs, message) -> None:
    with pytest.raises(InvalidInputError, match=message):
        seeded.search("existing", user_id="ana", **kwargs)
    with pytest.raises(InvalidInputError, match="empty"):
        seeded.search("  ", user_id="ana")


def test_corrupted_file_is_a_corrupt_store_error(tmp_path: Path, embedder) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not a database at all" * 200)
    with pytest.raises(CorruptStoreError, match="not a readable SQLite database"):
        Memory(path=path, embedder=embedder)
    assert path.read_bytes().startswith(b"this is not a database")


def test_foreign_sqlite_database_is_refused_untouched(tmp_path: Path, embedder) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER, total REAL)")
        conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
    with pytest.raises(CorruptStoreError, match="not an Anamnesis store"):
        Memory(path=path, embedder=embedder)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT * FROM invoices").fetchall() == [(1, 9.5)]
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["invoices"]


def test_store_from_a_newer_version_is_refused(db_path: Path, embedder) -> None:
    Memory(path=db_path, embedder=embedder).close()
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match="Upgrade Anamnesis"):
        Memory(path=db_path, embedder=embedder)


def test_other_embedder_is_refused_until_reindexed(db_path: Path, embedder) -> None:
    from anamnesis.embed.static import WordLlamaEmbedder

    with Memory(path=db_path, embedder=embedder) as mem:
        mem.add("I keep bees on the roof", user_id="ana")
    edge = WordLlamaEmbedder()
    with pytest.raises(EmbedderMismatchError, match="reindex"):
        Memory(path=db_path, embedder=edge)
    with Memory(path=db_path, embedder=edge, reindex=True) as mem:
        assert mem.capabilities["embedding_dim"] == edge.dim
        assert mem.search("bees", user_id="ana")[0].episode.content == "I keep bees on the roof"
    with Memory(path=db_path, embedder=edge) as mem:
        assert mem.stats()["episodes"] == 1


def test_a_locked_file_raises_store_locked_and_loses_nothing(db_path: Path, embedder) -> None:
    with Memory(path=db_path, embedder=embedder) as mem:
        mem.add("before the lock", user_id="ana")
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        store = SQLiteStore(db_path, dim=embedder.dim, busy_timeout=0.2)
        with pytest.raises(StoreLockedError, match="another process"):
            store.upsert_sessions([])
        store.close()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    with Memory(path=db_path, embedder=embedder) as mem:
        assert [e.content for e in mem.get_all(user_id="ana").items] == ["before the lock"]


def _writer(path: str, user: str, count: int) -> None:
    with Memory(path=path, embedder=MiniLMEmbedder(threads=1)) as mem:
        for i in range(count):
            mem.add(f"{user} note number {i}", user_id=user)


def test_two_processes_writing_at_once_lose_nothing(db_path: Path, embedder) -> None:
    Memory(path=db_path, embedder=embedder).close()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(str(db_path), u, 15)) for u in ("p1", "p2")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    with Memory(path=db_path, embedder=embedder) as mem:
        assert mem.stats()["episodes"] == 30
        assert mem.get_all(user_id="p1").total == 15
        # The dense index of a long-lived reader sees the other processes' writes.
        assert mem.search("p2 note number 7", user_id="p2", limit=1)[0].episode.user_id == "p2"
