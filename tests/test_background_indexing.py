"""Background indexing (``Memory(indexing="background")``): ``add`` returns once the
text is durable, and a thread writes the vectors after.

- an add returns before any vector exists, and the lexical channel finds the text at
  once; ``explain`` and ``capabilities`` state the gap;
- after ``wait_indexed`` the dense channel finds it, and the store checks clean;
- a forget, delete or update that lands while the indexer holds the episode leaves
  no vector of it (or of its old text);
- a close leaves the backlog in the file, and the next open, in either mode,
  indexes it; a process killed mid-backlog too, each episode exactly once;
- the default stays synchronous; the encoding gate refuses the option;
- PostgreSQL keeps the same promises (its own tests at the end).

Real SQLite files in ``tmp_path`` and scratch PostgreSQL schemas; the static edge
embedder, wrapped where a test must hold the indexer inside an embedding.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from store_fixtures import postgres_schema_url_fixture  # noqa: F401  (a fixture by name)

from anamnesis import InvalidInputError, Memory
from anamnesis.embed import get_embedder
from anamnesis.indexer import EMBED_CHUNK, INDEX_BATCH
from anamnesis.store.sqlite.driver import sqlite3
from anamnesis.types import Scope

EDGE = get_embedder("edge")
WAIT = 30.0


class HeldEmbedder:
    """The edge embedder, whose document embeddings on the indexer's thread wait until
    ``release``: the indexer can be held with a batch in hand while the test's own
    calls (searches, an update's embedding) run."""

    def __init__(self) -> None:
        self.name, self.dim = EDGE.name, EDGE.dim
        self.entered = threading.Event()
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if threading.current_thread().name == "anamnesis-index":
            self.entered.set()
            assert self._released.wait(WAIT), "the test never released the embedder"
        return EDGE.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return EDGE.embed_query(text)


def counts(path: Path) -> dict[str, int]:
    """Rows of the store's tables, read from the file by another connection."""
    conn = sqlite3.connect(path)  # the store's own SQLite library: one per process
    try:
        return {
            table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("episodes", "vectors", "pending_vectors")
        }
    finally:
        conn.close()


@pytest.fixture
def held() -> Iterator[HeldEmbedder]:
    embedder = HeldEmbedder()
    yield embedder
    embedder.release()


def test_add_returns_before_the_vector_and_the_lexical_channel_finds_the_text(
    tmp_path: Path, held: HeldEmbedder
) -> None:
    with Memory(tmp_path / "m.db", embedder=held, indexing="background") as memory:  # type: ignore[arg-type]
        [episode] = memory.add("Maren keeps the lighthouse at Skerryvore")
        assert held.entered.wait(WAIT)  # the indexer has it, and is held
        assert counts(tmp_path / "m.db") == {"episodes": 1, "vectors": 0, "pending_vectors": 1}
        assert memory.capabilities["indexing"] == "background"
        assert memory.capabilities["vector_backlog"] == 1

        [hit] = memory.search("lighthouse Skerryvore", explain=True)
        assert hit.episode.id == episode.id
        assert "lexical" in hit.channels and "dense" not in hit.channels
        assert hit.analysis["dense_index"] == (
            "1 episode of this scope is not in the dense index yet: found only by the "
            "channels that match words, not by those that compare vectors"
        )
        # Another scope has nothing pending, and its explain says nothing of it.
        memory.add("Maren keeps the lighthouse", user_id="other")  # queued behind
        assert memory.search("lighthouse", user_id="nobody", explain=True) == []

        held.release()
        assert memory.wait_indexed(timeout=WAIT) is True
        [hit] = memory.search("lighthouse Skerryvore", explain=True)
        assert "dense" in hit.channels
        assert "dense_index" not in hit.analysis
        assert memory.capabilities["vector_backlog"] == 0
        assert memory.check() == []
    assert counts(tmp_path / "m.db") == {"episodes": 2, "vectors": 2, "pending_vectors": 0}


def test_a_filtered_search_finds_an_episode_waiting_for_its_vector(
    tmp_path: Path, held: HeldEmbedder
) -> None:
    with Memory(tmp_path / "m.db", embedder=EDGE) as before:
        before.add("an indexed note about the harbour", role="user")
        before.search("harbour", filters={"role": "user"})
    with Memory(tmp_path / "m.db", embedder=held, indexing="background") as memory:  # type: ignore[arg-type]
        [episode] = memory.add("the harbour master retires in June", role="user")
        assert held.entered.wait(WAIT)
        for filters in ({"role": "user"}, {"event_after": "2000-01-01"}):
            hits = memory.search("harbour master", filters=filters)
            assert episode.id in {h.episode.id for h in hits}, filters
        assert memory.search("harbour master", filters={"role": "assistant"}) == []
        held.release()


def test_the_dense_channel_finds_by_meaning_only_after_the_wait(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder=EDGE, indexing="background") as memory:
        memory.add_many([f"note {i} on the weather in Porto" for i in range(INDEX_BATCH * 3)])
        memory.add("my sister adopted a small grey kitten")
        assert memory.wait_indexed(timeout=WAIT)
        hits = memory.search("feline pet", explain=True)
        assert hits[0].episode.content == "my sister adopted a small grey kitten"
        assert "dense" in hits[0].channels
        # Each episode has its own vector, equal to a synchronous add's.
        vectors = memory.store.episode_vectors([hits[0].episode.id], Scope(hits[0].episode.user_id))
    expected = EDGE.embed_documents(["my sister adopted a small grey kitten"])[0]
    np.testing.assert_allclose(vectors[hits[0].episode.id], expected, rtol=1e-6, atol=1e-6)


def test_the_default_writes_the_vector_in_the_add(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder=EDGE) as memory:
        memory.add("a synchronous add")
        assert counts(tmp_path / "m.db") == {"episodes": 1, "vectors": 1, "pending_vectors": 0}
        assert memory.capabilities["indexing"] == "sync"
        assert memory.capabilities["indexer"] == "off"
        assert memory.wait_indexed(timeout=0) is True


@pytest.mark.parametrize("how", ["forget", "delete", "delete_all"])
def test_forgetting_an_episode_the_indexer_holds_leaves_no_vector(
    tmp_path: Path, held: HeldEmbedder, how: str
) -> None:
    with Memory(tmp_path / "m.db", embedder=held, indexing="background") as memory:  # type: ignore[arg-type]
        [episode] = memory.add("the code to the safe is 4471", user_id="ana")
        assert held.entered.wait(WAIT)
        if how == "forget":
            memory.forget(episode_ids=[episode.id], user_id="ana")
        elif how == "delete":
            memory.delete(episode.id, user_id="ana")
        else:
            memory.delete_all(user_id="ana")
        assert counts(tmp_path / "m.db") == {"episodes": 0, "vectors": 0, "pending_vectors": 0}
        held.release()
        assert memory.wait_indexed(timeout=WAIT)
        assert memory.check() == []
        assert memory.capabilities["indexer"] == "running"
    assert counts(tmp_path / "m.db") == {"episodes": 0, "vectors": 0, "pending_vectors": 0}


def test_an_update_while_the_indexer_embeds_the_old_text_gets_the_new_texts_vector(
    tmp_path: Path, held: HeldEmbedder
) -> None:
    with Memory(tmp_path / "m.db", embedder=held, indexing="background") as memory:  # type: ignore[arg-type]
        [episode] = memory.add("I live in Lisbon")
        assert held.entered.wait(WAIT)  # the indexer embeds "Lisbon"
        memory.update(episode.id, content="I live in Oslo")
        held.release()
        assert memory.wait_indexed(timeout=WAIT)
        vector = memory.store.episode_vectors([episode.id], Scope(episode.user_id))[episode.id]
        assert memory.check() == []
    np.testing.assert_allclose(
        vector, EDGE.embed_documents(["I live in Oslo"])[0], rtol=1e-6, atol=1e-6
    )


def test_close_leaves_the_backlog_in_the_file_and_the_next_open_indexes_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    held = HeldEmbedder()
    memory = Memory(path, embedder=held, indexing="background", warm=False)  # type: ignore[arg-type]
    total = INDEX_BATCH * 2
    memory.add_many([f"message number {i}" for i in range(total)])
    assert held.entered.wait(WAIT)
    indexer = memory._indexer
    assert indexer is not None
    closing = threading.Thread(target=memory.close)
    closing.start()
    while not indexer._stopping.is_set():  # the close has told the indexer to stop
        time.sleep(0.01)
    held.release()  # the embedding in flight is written; the close waits for no more
    closing.join(WAIT)
    assert not closing.is_alive()
    assert counts(path) == {
        "episodes": total,
        "vectors": EMBED_CHUNK,
        "pending_vectors": total - EMBED_CHUNK,
    }

    with Memory(path, embedder=EDGE) as reopened:  # synchronous, yet it resumes
        assert reopened.capabilities["indexer"] == "running"
        assert reopened.wait_indexed(timeout=WAIT)
        assert reopened.check() == []
    assert counts(path) == {"episodes": total, "vectors": total, "pending_vectors": 0}


def test_vectors_written_below_anothers_are_seen_by_a_loaded_dense_index(
    tmp_path: Path, held: HeldEmbedder
) -> None:
    path = tmp_path / "m.db"
    synchronous = Memory(path, embedder=EDGE)  # opened with no backlog: no indexer
    with Memory(path, embedder=held, indexing="background") as background:  # type: ignore[arg-type]
        [late] = background.add("the ferry to Tromso leaves at dawn")
        assert held.entered.wait(WAIT)
        synchronous.add("an unrelated note about gardening")  # a vector above it
        synchronous.close()
        background.search("gardening")  # the dense matrix is read up to that row
        held.release()
        assert background.wait_indexed(timeout=WAIT)
        hits = background.search("boat departure early morning", explain=True)
        found = {h.episode.id: h for h in hits}
        assert late.id in found and "dense" in found[late.id].channels


def test_a_process_killed_with_a_backlog_is_indexed_at_the_next_open_exactly_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    child = textwrap.dedent(
        f"""
        import os, signal
        from anamnesis import Memory
        memory = Memory({str(path)!r}, embedder="edge", indexing="background", warm=False)
        memory.add_many([f"turn {{i}} of a long import" for i in range(2000)])
        print("stored", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert done.stdout.strip() == "stored"
    left = counts(path)
    assert left["episodes"] == 2000
    assert left["vectors"] + left["pending_vectors"] == 2000

    with Memory(path, embedder=EDGE, indexing="background") as memory:
        assert memory.wait_indexed(timeout=WAIT)
        assert memory.check() == []
        hits = memory.search("turn 1999 of a long import", explain=True)
        assert "dense" in hits[0].channels
    assert counts(path) == {"episodes": 2000, "vectors": 2000, "pending_vectors": 0}


def test_restoring_an_episode_archived_before_its_vector_queues_it_again(
    tmp_path: Path, held: HeldEmbedder
) -> None:
    with Memory(tmp_path / "m.db", embedder=held, indexing="background") as memory:  # type: ignore[arg-type]
        [episode] = memory.add("archived before it was indexed")
        assert held.entered.wait(WAIT)
        memory.archive(episode_ids=[episode.id])
        memory.restore(episode_ids=[episode.id])
        assert counts(tmp_path / "m.db")["pending_vectors"] == 1
        held.release()
        assert memory.wait_indexed(timeout=WAIT)
        assert memory.check() == []
    assert counts(tmp_path / "m.db") == {"episodes": 1, "vectors": 1, "pending_vectors": 0}


def test_the_encoding_gate_refuses_background_indexing(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="gate judges each episode by its vector"):
        Memory(tmp_path / "m.db", embedder=EDGE, gate="default", indexing="background")


def test_an_unknown_indexing_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="indexing must be one of sync, background"):
        Memory(tmp_path / "m.db", embedder=EDGE, indexing="later")


@pytest.mark.parametrize("timeout", [-1, float("nan"), "soon", True])
def test_wait_indexed_refuses_a_bad_timeout(tmp_path: Path, timeout: object) -> None:
    with Memory(tmp_path / "m.db", embedder=EDGE) as memory:
        with pytest.raises(InvalidInputError, match="timeout"):
            memory.wait_indexed(timeout=timeout)  # type: ignore[arg-type]


def test_postgresql_indexes_in_the_background_too(
    postgres_schema_url: str, held: HeldEmbedder
) -> None:
    url = postgres_schema_url
    with Memory(url=url, embedder=held, indexing="background", warm=False) as memory:  # type: ignore[arg-type]
        [kept, forgotten, changed] = memory.add(
            ["Maren keeps the lighthouse at Skerryvore", "the code is 4471", "I live in Lisbon"]
        )
        assert held.entered.wait(WAIT)  # the indexer holds all three
        assert memory.capabilities["vector_backlog"] == 3
        [hit] = memory.search("lighthouse Skerryvore", explain=True)
        assert hit.episode.id == kept.id and "dense" not in hit.channels
        assert hit.analysis["dense_index"].startswith("3 episodes of this scope are not")
        memory.delete(forgotten.id)
        memory.update(changed.id, content="I live in Oslo")  # writes its own vector
        assert memory.check() == []
        held.release()
        assert memory.wait_indexed(timeout=WAIT)
        assert memory.check() == []
        hit = memory.search("lighthouse Skerryvore", explain=True)[0]
        assert hit.episode.id == kept.id
        assert "dense" in hit.channels and "dense_index" not in hit.analysis
        vectors = memory.store.episode_vectors([kept.id, changed.id], Scope("default"))
    np.testing.assert_allclose(
        vectors[changed.id], EDGE.embed_documents(["I live in Oslo"])[0], rtol=1e-5, atol=1e-5
    )
    assert set(vectors) == {kept.id, changed.id}


def test_postgresql_keeps_the_backlog_across_a_close(postgres_schema_url: str) -> None:
    url = postgres_schema_url
    held = HeldEmbedder()
    memory = Memory(url=url, embedder=held, indexing="background", warm=False)  # type: ignore[arg-type]
    memory.add_many([f"message number {i}" for i in range(3 * EMBED_CHUNK)])
    assert held.entered.wait(WAIT)
    indexer = memory._indexer
    assert indexer is not None
    closing = threading.Thread(target=memory.close)
    closing.start()
    while not indexer._stopping.is_set():
        time.sleep(0.01)
    held.release()
    closing.join(WAIT)
    with Memory(url=url, embedder=EDGE, warm=False) as reopened:
        assert reopened.capabilities["indexer"] == "running"  # a backlog was left
        assert reopened.wait_indexed(timeout=WAIT)
        assert reopened.check() == []
        assert reopened.stats()["vectors"] == 3 * EMBED_CHUNK


def test_an_older_store_opened_read_only_searches_without_the_backlog_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anamnesis.store.sqlite import health

    path = tmp_path / "m.db"
    with Memory(path, embedder=EDGE) as memory:
        memory.add("the bees swarmed in May", role="user")
    conn = sqlite3.connect(path)  # as a store written before background indexing
    conn.execute("DROP TRIGGER pending_vectors_delete")
    conn.execute("DROP TABLE pending_vectors")
    conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    monkeypatch.setattr(health, "read_only_reason", lambda path: "read-only file")
    with Memory(path, embedder=EDGE, indexing="background") as memory:
        [hit] = memory.search("bees", filters={"role": "user"}, explain=True)
        assert "dense_index" not in hit.analysis
        assert memory.capabilities["vector_backlog"] == 0
        assert memory.wait_indexed(timeout=0) is True


def test_the_command_line_chooses_background_indexing_for_every_command(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from anamnesis.cli import main

    def run(*args: str) -> str:
        base = ["--path", str(tmp_path / "cli.db"), "--embedder", "edge"]
        result = CliRunner().invoke(main, [*base, *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    run("--background-indexing", "add", "I keep bees on the roof", "--user", "ana")
    stats = json.loads(run("--background-indexing", "stats", "--json"))
    assert stats["capabilities"]["indexing"] == "background"
    assert stats["episodes"] == 1
    assert json.loads(run("stats", "--json"))["capabilities"]["indexing"] == "sync"
    with Memory(tmp_path / "cli.db", embedder=EDGE) as memory:  # whatever the add left
        assert memory.wait_indexed(timeout=WAIT)
        assert memory.check() == []


def test_two_indexers_on_one_store_write_each_vector_once(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    first = Memory(path, embedder=EDGE, indexing="background", warm=False)
    second = Memory(path, embedder=EDGE, indexing="background", warm=False)
    try:
        for round_ in range(3):
            first.add_many([f"first {round_}.{i}: the tide" for i in range(400)])
            second.add_many([f"second {round_}.{i}: the moon" for i in range(400)])
        assert first.wait_indexed(timeout=WAIT) and second.wait_indexed(timeout=WAIT)
        assert first.check() == []
        assert first.capabilities["indexer"] == second.capabilities["indexer"] == "running"
    finally:
        first.close()
        second.close()
    assert counts(path) == {"episodes": 2400, "vectors": 2400, "pending_vectors": 0}


def test_two_indexers_on_one_postgresql_store_write_each_vector_once(
    postgres_schema_url: str,
) -> None:
    url = postgres_schema_url
    first = Memory(url=url, embedder=EDGE, indexing="background", warm=False)
    second = Memory(url=url, embedder=EDGE, indexing="background", warm=False)
    try:
        for round_ in range(3):
            first.add_many([f"first {round_}.{i}: the tide" for i in range(200)])
            second.add_many([f"second {round_}.{i}: the moon" for i in range(200)])
        assert first.wait_indexed(timeout=WAIT) and second.wait_indexed(timeout=WAIT)
        assert first.check() == []
        assert first.stats()["vectors"] == 1200
    finally:
        first.close()
        second.close()
