"""Memory(url=postgresql://...) end to end, and snapshots moving SQLite <-> PostgreSQL.

Uses the real MiniLM embedder (the session-scoped ``embedder`` fixture of conftest).
"""

from __future__ import annotations

import io

import pytest
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    DIM,
    make_episode,
    postgres_schema_url_fixture,
    unit_vectors,
)

from anamnesis import Memory, NotFoundError, portable
from anamnesis.ingest.normalise import content_hash
from anamnesis.portable import export_jsonl
from anamnesis.store.base import Filters
from anamnesis.store.postgres import PostgresStore
from anamnesis.store.sqlite import SQLiteStore
from anamnesis.types import Scope


def _export(memory: Memory, **kwargs) -> str:
    buffer = io.StringIO()
    memory.export_jsonl(buffer, **kwargs)
    return buffer.getvalue()


def _populate(memory: Memory) -> None:
    memory.add(
        [
            {
                "role": "user",
                "speaker": "Ana",
                "content": "Olá! I moved to Porto last spring 🏠",
                "event_time": "2024-03-02T09:15:00.123456Z",
                "metadata": {"lang": "pt", "tags": ["move", "city"], "score": 0.5, "z": 1, "a": 2},
            },
            {
                "role": "assistant",
                "content": "Welcome to Porto! How is the new flat?",
                "event_time": "2024-03-02T09:16:00Z",
            },
            {"role": "user", "content": "It is small but it has a view of the river Douro"},
        ],
        user_id="ana",
        agent_id="helper",
        session_id="s1",
    )
    memory.add("I adopted a cat called Miso", user_id="ana", session_id="s2")
    (photo,) = memory.add({"content": "photo of a bridge", "modality": "image"}, user_id="bob")
    memory.update(
        photo.id, content="photo of the Dom Luís bridge", metadata={"v": 2}, user_id="bob"
    )


def test_postgres_memory_end_to_end_then_into_sqlite(postgres_schema_url, tmp_path, embedder):
    with Memory(url=postgres_schema_url, embedder=embedder) as pg:
        assert pg.capabilities["backend"] == "postgres"
        assert pg.capabilities["vector_search"] == "pgvector-hnsw"
        _populate(pg)
        hits = pg.search("where did Ana move to?", user_id="ana")
        assert "Porto" in hits[0].episode.content
        assert pg.search("pet", user_id="ana")[0].episode.content == "I adopted a cat called Miso"
        assert pg.search("Porto", user_id="bob")[0].episode.user_id == "bob"
        flat = pg.search(
            "the new flat",
            user_id="ana",
            session_id="s1",
            explain=True,
            filters={"role": "assistant"},
        )[0]
        assert {"lexical", "dense"} <= set(flat.channels) <= set(pg.config.channels)
        assert [e.turn_index for e in flat.context] == [0, 2]
        page = pg.get_all(user_id="ana", filters={"metadata": {"lang": "pt"}})
        assert [e.speaker for e in page.items] == ["Ana"]
        bob = pg.get_all(user_id="bob").items[0]
        assert [v.content for v in pg.history(bob.id, user_id="bob")] == [
            "photo of a bridge",
            "photo of the Dom Luís bridge",
        ]
        with pytest.raises(NotFoundError):
            pg.get(bob.id, user_id="ana")
        dump = _export(pg)
        top = [h.episode.id for h in pg.search("river view", user_id="ana")]

    with Memory(path=tmp_path / "copy.db", embedder=embedder) as lite:
        assert lite.import_jsonl(dump.splitlines()) == 5
        assert _export(lite) == dump
        assert [h.episode.id for h in lite.search("river view", user_id="ana")] == top
        assert lite.history(bob.id, user_id="bob")[0].content == "photo of a bridge"


def test_sqlite_memory_moves_into_postgres_losslessly(postgres_schema_url, tmp_path, embedder):
    with Memory(path=tmp_path / "source.db", embedder=embedder) as lite:
        _populate(lite)
        dump = _export(lite)
        top = [h.episode.id for h in lite.search("where did Ana move to?", user_id="ana")]
        ana_only = _export(lite, user_id="ana")

    with Memory(url=postgres_schema_url, embedder=embedder) as pg:
        assert pg.import_jsonl(dump.splitlines()) == 5
        assert _export(pg) == dump
        assert _export(pg, user_id="ana") == ana_only
        assert [h.episode.id for h in pg.search("where did Ana move to?", user_id="ana")] == top
        assert pg.import_jsonl(dump.splitlines()) == 0  # ids already stored are skipped
        assert pg.stats()["episodes"] == 5
        counts = pg.delete_all(user_id="ana")
        assert (counts.episodes, counts.sessions) == (4, 2)
        assert pg.search("Porto", user_id="ana") == []
        assert pg.stats()["episodes"] == 1


def test_database_url_environment_variable_selects_postgres(
    postgres_schema_url, monkeypatch, embedder
):
    monkeypatch.setenv("ANAMNESIS_DATABASE_URL", postgres_schema_url)
    with Memory(embedder=embedder) as memory:
        memory.add("stored on the server", user_id="ana")
        assert memory.stats()["backend"] == "postgres"
    with Memory(url=postgres_schema_url, embedder=embedder) as again:
        assert again.get_all(user_id="ana").items[0].content == "stored on the server"


class _VectorsOnly:
    """An embedder for imports that reuse every stored vector: it must never be called."""

    name = "test-vectors"
    dim = DIM

    def embed_documents(self, texts):
        raise AssertionError("an import with vectors must not re-embed")

    def embed_query(self, text):
        raise AssertionError("not used")


def _episodes(n: int) -> list:
    words = "river stone cloud music dance light garden winter coffee train".split()
    texts = [f"{words[i % 10]} {words[(i * 7) % 10]} note {i}" for i in range(n)]
    return [
        make_episode(text, scope=Scope(f"user{i % 10}"), content_hash=content_hash(text))
        for i, text in enumerate(texts)
    ]


def _snapshot(episodes: list, tmp_path, name: str) -> list[str]:
    """An export of ``episodes``, made from a SQLite store."""
    store = SQLiteStore(tmp_path / f"{name}.db", dim=DIM)
    try:
        store.insert_episodes(episodes, unit_vectors(len(episodes)))
        buffer = io.StringIO()
        export_jsonl(store, _VectorsOnly(), buffer)
    finally:
        store.close()
    return buffer.getvalue().splitlines()


@pytest.fixture
def bulk_spy(monkeypatch):
    """Records each bulk_load() a PostgresStore enters."""
    entered: list[int] = []
    original = PostgresStore.bulk_load

    def spy(self, **kwargs):
        entered.append(self.stats(None)["episodes"])
        return original(self, **kwargs)

    monkeypatch.setattr(PostgresStore, "bulk_load", spy)
    return entered


def _hnsw_index_exists(store: PostgresStore) -> bool:
    with store._transaction() as conn:
        return bool(
            conn.execute(
                "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() "
                "AND indexname = 'episodes_embedding'"
            ).fetchone()
        )


def test_a_large_import_switches_to_bulk_load(postgres_schema_url, tmp_path, monkeypatch, bulk_spy):
    monkeypatch.setattr(portable, "BULK_IMPORT_MIN_EPISODES", 1000)
    lines = _snapshot(_episodes(3000), tmp_path, "big")
    store = PostgresStore(postgres_schema_url, dim=DIM)
    try:
        assert portable.import_jsonl(store, _VectorsOnly(), lines) == 3000
        # Entered once, when the first 1000 were in (batches of 512: after 1024).
        assert bulk_spy == [1024]
        assert _hnsw_index_exists(store)
        assert store.stats(None)["episodes"] == 3000
        hits = store.lexical_search(["winter"], Scope("user7"), Filters(), 5)
        found = store.get_episodes([h.episode_id for h in hits], Scope("user7"))
        assert len(found) == 5 and all("winter" in e.content for e in found)
        buffer = io.StringIO()
        portable.export_jsonl(store, _VectorsOnly(), buffer)
        assert buffer.getvalue().splitlines() == lines
    finally:
        store.close()


def test_a_small_import_into_a_big_store_keeps_the_live_index(
    postgres_schema_url, tmp_path, monkeypatch, bulk_spy
):
    monkeypatch.setattr(portable, "BULK_IMPORT_MIN_EPISODES", 500)
    store = PostgresStore(postgres_schema_url, dim=DIM)
    try:
        episodes = _episodes(3600)
        base = _snapshot(episodes[:3000], tmp_path, "base")
        assert portable.import_jsonl(store, _VectorsOnly(), base, bulk=False) == 3000
        assert bulk_spy == []
        # 600 new rows into a store of 3000: a rebuild would cost more than it saves.
        more = _snapshot(episodes, tmp_path, "more")
        assert portable.import_jsonl(store, _VectorsOnly(), more) == 600
        assert bulk_spy == []
        assert portable.import_jsonl(store, _VectorsOnly(), more, bulk=True) == 0
        assert bulk_spy == [3600]
        assert _hnsw_index_exists(store)
    finally:
        store.close()


def test_sqlite_bulk_import_refreshes_planner_statistics(tmp_path):
    target = SQLiteStore(tmp_path / "target.db", dim=DIM)
    try:
        lines = _snapshot(_episodes(50), tmp_path, "small")
        assert portable.import_jsonl(target, _VectorsOnly(), lines, bulk=True) == 50
        assert target._read("SELECT COUNT(*) FROM sqlite_stat1")[0][0] > 0
    finally:
        target.close()
