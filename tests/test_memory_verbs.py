"""The verb set: add, add_many, get, get_all, update, history, delete, delete_all, stats."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    backend_fixture,
    postgres_schema_url_fixture,
    store_url_fixture,
)

from anamnesis import EmbedderMismatchError, Memory, NotFoundError
from anamnesis.embed import get_embedder
from anamnesis.memory.writes import WRITE_BATCH
from anamnesis.store.sqlite.driver import sqlite3


def test_add_string_returns_one_stored_episode(memory: Memory) -> None:
    (episode,) = memory.add("I moved to Lisbon in May", user_id="ana")
    assert episode.content == "I moved to Lisbon in May"
    assert episode.user_id == "ana"
    assert episode.modality == "text"
    assert memory.get(episode.id, user_id="ana") == episode


def test_add_message_dict_and_list_keep_roles_and_order(memory: Memory) -> None:
    episodes = memory.add(
        [
            {"role": "user", "speaker": "Ana", "content": "Hi, I adopted a dog."},
            {"role": "assistant", "content": "What is the dog's name?"},
            {"speaker": "Ana", "content": "Rex", "metadata": {"lang": "en"}},
        ],
        user_id="ana",
        session_id="s1",
    )
    assert [e.role for e in episodes] == ["user", "assistant", None]
    assert [e.turn_index for e in episodes] == [0, 1, 2]
    assert episodes[2].metadata == {"lang": "en"}
    assert episodes[0].event_time < episodes[1].event_time < episodes[2].event_time
    (more,) = memory.add({"role": "user", "content": "He is two."}, user_id="ana", session_id="s1")
    assert more.turn_index == 3


def test_event_time_is_kept_apart_from_recorded_at(memory: Memory) -> None:
    (episode,) = memory.add(
        "The support group met", user_id="ana", event_time="2023-05-07T18:00:00Z"
    )
    assert episode.event_time == datetime(2023, 5, 7, 18, tzinfo=UTC)
    assert episode.recorded_at > episode.event_time


def test_event_time_accepts_written_dates(memory: Memory) -> None:
    (episode,) = memory.add("Session start", user_id="ana", event_time="1:56 pm on 8 May, 2023")
    assert episode.event_time == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def test_image_is_stored_as_its_derived_text(memory: Memory) -> None:
    (episode,) = memory.add(
        {"content": "a photo of a sunset over the sea", "modality": "image"}, user_id="ana"
    )
    assert episode.modality == "image"
    assert memory.search("sunset photo", user_id="ana")[0].episode.id == episode.id


def test_get_all_pages_through_the_scope_in_event_time_order(memory: Memory) -> None:
    memory.add_many(
        [
            {"content": f"note {i}", "event_time": f"2024-01-{i + 1:02d}T00:00:00Z"}
            for i in range(7)
        ],
        user_id="ana",
    )
    first = memory.get_all(user_id="ana", limit=3)
    assert [e.content for e in first.items] == ["note 0", "note 1", "note 2"]
    assert (first.total, first.next_offset) == (7, 3)
    last = memory.get_all(user_id="ana", limit=3, offset=6)
    assert [e.content for e in last.items] == ["note 6"] and last.next_offset is None


def test_update_keeps_the_prior_version_and_reembeds(memory: Memory) -> None:
    (episode,) = memory.add("I work at Acme", user_id="ana", metadata={"v": 1})
    updated = memory.update(episode.id, content="I work at Globex", user_id="ana")
    assert updated.content == "I work at Globex" and updated.version == 2
    assert updated.metadata == {"v": 1}
    history = memory.history(episode.id, user_id="ana")
    assert [(v.version, v.content) for v in history] == [
        (1, "I work at Acme"),
        (2, "I work at Globex"),
    ]
    assert memory.search("Globex", user_id="ana", limit=1)[0].episode.id == episode.id
    assert not [h for h in memory.search("Acme", user_id="ana") if "Acme" in h.episode.content]


def test_update_of_metadata_only_does_not_reembed(memory: Memory, monkeypatch) -> None:
    (episode,) = memory.add("I work at Acme", user_id="ana")

    def fail(texts):  # pragma: no cover - called only on a regression
        raise AssertionError("unchanged text must not be re-embedded")

    monkeypatch.setattr(memory.embedder, "embed_documents", fail)
    updated = memory.update(episode.id, metadata={"checked": True}, user_id="ana")
    assert updated.metadata == {"checked": True} and updated.content == "I work at Acme"


def _embedded_texts(memory: Memory, monkeypatch) -> list[list[str]]:
    """The batches of texts the embedder is asked to embed from now on."""
    calls: list[list[str]] = []
    original = memory.embedder.embed_documents
    monkeypatch.setattr(
        memory.embedder,
        "embed_documents",
        lambda texts: calls.append(list(texts)) or original(texts),
    )
    return calls


def test_identical_text_reuses_the_stored_vector(memory: Memory, monkeypatch) -> None:
    memory.add("Same words twice", user_id="ana")
    calls = _embedded_texts(memory, monkeypatch)
    memory.add(["Same words twice", "Something new"], user_id="ana")
    assert calls == [["Something new"]]


def test_another_users_vector_is_never_reused(memory: Memory, monkeypatch) -> None:
    """A tenant can neither plant the vector another tenant's text receives, nor learn
    from the speed of an add that another tenant stored the same text."""
    memory.add("Same words twice", user_id="ana")
    calls = _embedded_texts(memory, monkeypatch)
    memory.add("Same words twice", user_id="bob")
    assert calls == [["Same words twice"]]


def test_delete_removes_text_index_vector_and_versions(memory: Memory, db_path) -> None:
    (episode,) = memory.add("The secret word is pineapple", user_id="ana")
    memory.update(episode.id, content="The secret word is mango", user_id="ana")
    counts = memory.delete(episode.id, user_id="ana")
    assert (counts.episodes, counts.vectors, counts.versions) == (1, 1, 1)
    with pytest.raises(NotFoundError):
        memory.get(episode.id, user_id="ana")
    assert memory.search("secret word mango", user_id="ana") == []
    raw = sqlite3.connect(db_path)
    for table in ("episodes", "vectors", "episode_versions"):
        assert raw.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0
    assert (
        raw.execute(
            "SELECT COUNT(*) FROM episodes_fts WHERE episodes_fts MATCH 'mango OR pineapple'"
        ).fetchone()[0]
        == 0
    )


def test_delete_of_unknown_id_is_not_found(memory: Memory) -> None:
    with pytest.raises(NotFoundError):
        memory.delete("ep_missing", user_id="ana")


def test_delete_all_requires_a_user_and_counts_what_it_removed(memory: Memory) -> None:
    memory.add(["one", "two"], user_id="ana", session_id="s1")
    memory.add("three", user_id="ana", session_id="s2")
    memory.add("keep me", user_id="bob")
    with pytest.raises(TypeError):
        memory.delete_all()  # type: ignore[call-arg]
    counts = memory.delete_all(user_id="ana", session_id="s1")
    assert (counts.episodes, counts.vectors, counts.sessions) == (2, 2, 1)
    counts = memory.delete_all(user_id="ana")
    assert (counts.episodes, counts.sessions) == (1, 1)
    assert memory.stats()["episodes"] == 1
    assert memory.get_all(user_id="bob").items[0].content == "keep me"


def test_stats_and_capabilities_describe_the_store(memory: Memory) -> None:
    memory.add(["a b c", "d e f"], user_id="ana", session_id="s1")
    memory.add("g h i", user_id="bob")
    stats = memory.stats()
    assert (stats["episodes"], stats["users"], stats["vectors"]) == (3, 2, 3)
    assert memory.stats(user_id="bob")["episodes"] == 1
    caps = memory.capabilities
    assert caps["backend"] == "sqlite" and caps["llm"] is None
    assert caps["embedder"] == memory.embedder.name and caps["embedding_dim"] == 384


def test_reindex_re_embeds_from_stored_text(memory: Memory) -> None:
    memory.add(["alpha", "beta"], user_id="ana")
    assert memory.reindex() == 2
    assert memory.search("alpha", user_id="ana", limit=1)[0].episode.content == "alpha"


class HalfEdge:
    """The edge embedder's first 128 dimensions: a model of another dimension."""

    name, dim = "half-edge", 128

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        vectors = get_embedder("edge").embed_documents(texts)[:, :128]
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def test_a_reindex_killed_midway_must_be_finished_before_the_store_opens(
    backend: str, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch of a re-embedding commits alone: a kill after the first leaves vectors
    of two models (of two dimensions here), which the next open must not search."""
    where = {"url": store_url} if backend == "postgres" else {"path": store_url}
    edge = get_embedder("edge")
    with Memory(**where, embedder=edge, warm=False) as memory:  # type: ignore[arg-type]
        memory.add_many([f"note {i} about the harbour" for i in range(WRITE_BATCH + 10)])
    store_class = type(memory.store)
    replace = store_class.replace_vectors
    batches = 0

    def killed_after_one_batch(self: Any, vectors: dict[str, np.ndarray]) -> None:
        nonlocal batches
        batches += 1
        if batches > 1:
            raise KeyboardInterrupt("killed")
        replace(self, vectors)

    monkeypatch.setattr(store_class, "replace_vectors", killed_after_one_batch)
    with pytest.raises(KeyboardInterrupt):
        Memory(**where, embedder=HalfEdge(), warm=False, reindex=True)  # type: ignore[arg-type]
    monkeypatch.setattr(store_class, "replace_vectors", replace)
    for embedder, reindex in ((edge, False), (edge, True), (HalfEdge(), False)):
        with pytest.raises(EmbedderMismatchError, match="half-edge .* was cut short"):
            Memory(**where, embedder=embedder, warm=False, reindex=reindex)  # type: ignore[arg-type]
    with Memory(**where, embedder=HalfEdge(), warm=False, reindex=True) as memory:  # type: ignore[arg-type]
        assert memory.check() == []
        assert memory.stats()["vectors"] == WRITE_BATCH + 10
        assert memory.search("note 3 about the harbour")
    with Memory(**where, embedder=HalfEdge(), warm=False) as memory:  # type: ignore[arg-type]
        assert memory.search("note 3 about the harbour")


def test_store_survives_close_and_reopen(db_path, embedder) -> None:
    with Memory(path=db_path, embedder=embedder) as first:
        (episode,) = first.add("persisted across processes", user_id="ana")
    with Memory(path=db_path, embedder=embedder) as second:
        assert second.get(episode.id, user_id="ana").content == "persisted across processes"
        assert second.search("persisted", user_id="ana")[0].episode.id == episode.id


def test_default_path_comes_from_the_environment(tmp_path, monkeypatch, embedder) -> None:
    target = tmp_path / "env" / "mem.db"
    monkeypatch.setenv("ANAMNESIS_PATH", str(target))
    with Memory(embedder=embedder) as mem:
        mem.add("hello", user_id="ana")
    assert target.exists()


def test_default_path_is_the_os_data_dir_not_tmp(monkeypatch) -> None:
    from anamnesis.config import default_path

    monkeypatch.delenv("ANAMNESIS_PATH", raising=False)
    assert not str(default_path()).startswith("/tmp")
    assert default_path().name == "memory.db"


def test_history_gives_each_version_the_time_it_was_written_on_both_backends(
    backend: str, store_url: str
) -> None:
    from anamnesis.embed import get_embedder

    where = {"path": store_url} if backend == "sqlite" else {"url": store_url}
    with Memory(**where, embedder=get_embedder("edge"), warm=False) as memory:
        (episode,) = memory.add("I work at Acme", user_id="ana")
        memory.update(episode.id, content="I work at Initech", user_id="ana")
        memory.update(episode.id, content="I work at Globex", user_id="ana")
        first, second, current = memory.history(episode.id, user_id="ana")
    assert [v.content for v in (first, second, current)] == [
        "I work at Acme",
        "I work at Initech",
        "I work at Globex",
    ]
    # Version 1 was written when the episode was recorded, each later one by the
    # update that replaced the version before it; only the current one is unreplaced.
    assert first.recorded_at == episode.recorded_at
    assert second.recorded_at == first.changed_at and current.recorded_at == second.changed_at
    assert first.recorded_at < second.recorded_at < current.recorded_at
    assert current.changed_at is None and current.version == 3
