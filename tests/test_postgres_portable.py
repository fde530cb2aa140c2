"""Memory(url=postgresql://...) end to end, and snapshots moving SQLite <-> PostgreSQL.

Uses the real MiniLM embedder (the session-scoped ``embedder`` fixture of conftest).
"""

from __future__ import annotations

import io

import pytest
from store_fixtures import postgres_schema_url_fixture  # noqa: F401  (fixture)

from anamnesis import Memory, NotFoundError


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
        flat = pg.search("the new flat", user_id="ana", session_id="s1", explain=True)[0]
        assert set(flat.channels) == {"lexical", "dense"}
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
