"""Usage counters: a search counts a retrieval, a get counts a read, nothing else moves
them; they are written later, in batches; they follow the episode into the archive and
out of the store with forget.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    backend_fixture,
    make_episode,
    open_store_fixture,
    postgres_schema_url_fixture,
    store_fixture,
    store_url_fixture,
    unit_vectors,
)

from anamnesis import Memory
from anamnesis.embed import get_embedder
from anamnesis.store.sqlite.driver import sqlite3
from anamnesis.types import Scope
from anamnesis.usage import UsageDelta

EDGE = get_embedder("edge")


@pytest.fixture
def memory(tmp_path):
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        yield memory


def counts(memory: Memory, episode_id: str, user_id: str = "ana") -> tuple[int, int]:
    found = memory.usage([episode_id], user_id=user_id).get(episode_id)
    return (0, 0) if found is None else (found.retrieved, found.read)


def test_counters_move_only_on_the_right_verb(memory) -> None:
    cat, bike = memory.add(
        ["We adopted a grey cat called Miso", "I bought a new bicycle"],
        user_id="ana",
        session_id="s",
    )
    memory.consolidate(user_id="ana")
    memory.get_all(user_id="ana")
    memory.history(cat.id, user_id="ana")
    memory.update(bike.id, metadata={"k": 1}, user_id="ana")
    memory.facts(user_id="ana")
    assert memory.usage([cat.id, bike.id], user_id="ana") == {}

    hits = memory.search("cat", user_id="ana", limit=1)
    assert [h.episode.id for h in hits] == [cat.id]
    assert counts(memory, cat.id) == (1, 0) and counts(memory, bike.id) == (0, 0)
    memory.get(cat.id, user_id="ana")
    memory.get(cat.id, user_id="ana")
    assert counts(memory, cat.id) == (1, 2)
    memory.context("the cat", user_id="ana", limit=1)
    (used,) = memory.usage([cat.id], user_id="ana").values()
    assert (used.retrieved, used.read) == (2, 2)
    assert used.last_retrieved_at is not None and used.last_read_at is not None
    assert used.last_retrieved_at <= datetime.now(UTC)
    assert memory.usage([cat.id], user_id="bob") == {}  # another user sees nothing


def test_counts_are_deferred_then_written_in_one_batch(memory, tmp_path) -> None:
    (episode,) = memory.add("the lighthouse keeper waved", user_id="ana")
    for _ in range(5):
        memory.search("lighthouse", user_id="ana")
    with sqlite3.connect(tmp_path / "m.db") as raw:
        assert raw.execute("SELECT COUNT(*) FROM episode_usage").fetchone() == (0,)
    memory._usage.flush()
    with sqlite3.connect(tmp_path / "m.db") as raw:
        assert raw.execute("SELECT retrieved FROM episode_usage").fetchall() == [(5,)]


def test_counts_survive_close_follow_the_archive_and_go_with_forget(tmp_path) -> None:
    path = tmp_path / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        (episode,) = memory.add("the lighthouse keeper waved", user_id="ana")
        memory.search("lighthouse", user_id="ana")
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        assert counts(memory, episode.id) == (1, 0)
        memory.archive([episode.id], user_id="ana")
        assert counts(memory, episode.id) == (1, 0)
        memory.search("lighthouse", user_id="ana", include_archive=True)
        assert counts(memory, episode.id) == (2, 0)
        assert memory.forget([episode.id], user_id="ana").counts.usage == 1
        assert memory.usage([episode.id], user_id="ana") == {}


def test_counts_of_a_forgotten_episode_are_dropped(memory) -> None:
    (episode,) = memory.add("a note", user_id="ana")
    memory.store.record_usage([UsageDelta(episode.id, "bob", retrieved=3)])  # wrong user
    memory.store.record_usage([UsageDelta("ep_never_stored", "ana", retrieved=3)])
    assert memory.store.usage([episode.id, "ep_never_stored"], Scope("ana")) == {}


def test_both_backends_add_counts(store) -> None:
    episode = make_episode("hello")
    store.insert_episodes([episode], unit_vectors(1))
    at = datetime(2024, 5, 1, tzinfo=UTC)
    store.record_usage([UsageDelta(episode.id, episode.user_id, retrieved=2, last_retrieved_at=at)])
    store.record_usage([UsageDelta(episode.id, episode.user_id, read=1, last_read_at=at)])
    (used,) = store.usage([episode.id], Scope(episode.user_id)).values()
    assert (used.retrieved, used.last_retrieved_at, used.read, used.last_read_at) == (2, at, 1, at)


def test_counts_that_cannot_be_written_show_in_capabilities(memory, monkeypatch) -> None:
    from anamnesis.errors import StoreError

    (episode,) = memory.add("I keep bees on the roof", user_id="ana")
    real = memory.store.record_usage

    def broken(deltas):
        raise StoreError("disk quota exceeded")

    monkeypatch.setattr(memory.store, "record_usage", broken)
    memory.search("bees", user_id="ana")
    with pytest.warns(RuntimeWarning, match="usage counters"):
        memory._usage.flush(background=True)
    assert memory.capabilities["usage_counters"] == "failing: disk quota exceeded"
    assert memory.search("bees", user_id="ana")[0].episode.id == episode.id  # searches go on
    monkeypatch.setattr(memory.store, "record_usage", real)
    memory._usage.flush(background=True)
    assert memory.capabilities["usage_counters"] == "ok"
