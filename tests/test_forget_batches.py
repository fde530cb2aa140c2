"""A forget of many episodes goes in batches, each its own transaction with its own
erasure: it removes and counts exactly what one transaction would, other writers get
in between its batches, and a forget killed between two batches leaves each finished
batch wholly erased and the rest intact, and is finished by running it again.

Real stores of both backends (SQLite files in ``tmp_path``, a PostgreSQL schema), the
static edge embedder and the rule extractor; ``EPISODE_BATCH`` is made small so that a
few episodes make several batches.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import warnings
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from erasure_checks import spelled_separators
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    backend_fixture,
    postgres_schema_url_fixture,
    store_url_fixture,
)

from anamnesis import Memory
from anamnesis.embed import get_embedder
from anamnesis.store.shared import forget as forget_sql
from anamnesis.store.shared.facts import FactSQL
from anamnesis.store.sqlite import driver, erasure
from anamnesis.store.sqlite.driver import sqlite3
from anamnesis.types import Scope

EDGE = get_embedder("edge")
SESSIONS = {
    "s1": ["I live in Porto now.", "I work at Acme as a tester.", "My sister is called Rita."],
    "s2": ["I live in Porto, by the sea.", "My dog is called Rex.", "I like green tea."],
    "s3": ["We went hiking on Sunday.", "The weather was rainy.", "I moved to Lisbon."],
}


def open_memory(backend: str, store_url: str) -> Memory:
    where: dict[str, Any] = {"url": store_url} if backend == "postgres" else {"path": store_url}
    return Memory(**where, embedder=EDGE, warm=False)


def fill(memory: Memory) -> None:
    """ana's episodes in three sessions and under an agent, with a prior version, facts
    (one drawn from two sessions), summaries and a profile, an archived session and
    usage counts; and bob's, which must stay."""
    for session, texts in SESSIONS.items():
        memory.add(texts, user_id="ana", session_id=session)
    helper = ["I live in Porto, says the helper.", "Rita called", "Rex needs a walk"]
    memory.add(helper, user_id="ana", agent_id="helper", session_id="h1")
    first = memory.get_all(user_id="ana", session_id="s1").items[0]
    memory.update(first.id, content="I live in Porto now, yes.", user_id="ana")
    memory.consolidate(user_id="ana")
    memory.add("I live in Berlin.", user_id="bob", session_id="s1")
    memory.consolidate(user_id="bob")
    memory.archive(user_id="ana", session_id="s3")
    memory.get(first.id, user_id="ana")
    memory.search("where does ana live?", user_id="ana")
    memory._usage.flush()  # type: ignore[attr-defined]
    assert memory.usage([first.id], user_id="ana")


def everything_of(memory: Memory, user_id: str) -> tuple:
    """What the store holds for one user, through the public reads."""
    episodes = memory.get_all(user_id=user_id, limit=1000).items
    return (
        sorted(e.id for e in episodes),
        sorted(f.id for f in memory.facts(user_id=user_id, include_superseded=True)),
        sorted(item.id for item, _ in memory.store.find_derived(Scope(user_id))),
        sorted((s.user_id, s.id) for s in memory.store.iter_sessions() if s.user_id == user_id),
    )


SELECTIONS = {
    "whole user": {"user_id": "ana"},
    "agent": {"user_id": "ana", "agent_id": "helper"},
    "session": {"user_id": "ana", "session_id": "s2"},
    "containing": {"user_id": "ana", "containing": "Porto"},
    "time range": {"user_id": "ana", "event_after": "2000-01-01"},
}


@pytest.mark.parametrize("selection", SELECTIONS, ids=str)
def test_a_forget_in_batches_removes_and_counts_what_one_transaction_does(
    backend: str, store_url: str, monkeypatch: pytest.MonkeyPatch, selection: str
) -> None:
    arguments = SELECTIONS[selection]
    with open_memory(backend, store_url) as memory:
        fill(memory)
        bobs = everything_of(memory, "bob")
        # A dry run is one transaction, rolled back: what a forget in one removes.
        preview = memory.forget(**arguments, dry_run=True)
        assert len(preview.episode_ids) > 2
        monkeypatch.setattr(forget_sql, "EPISODE_BATCH", 2)
        store_class = type(memory.store)
        one_batch = store_class._forget_batch
        transactions = []

        def counted(self: Any, *args: Any) -> Any:
            transactions.append(args)
            return one_batch(self, *args)

        monkeypatch.setattr(store_class, "_forget_batch", counted)
        done = memory.forget(**arguments)
        assert len(transactions) >= len(preview.episode_ids) // 2 + 1
        assert (done.episode_ids, done.counts) == (preview.episode_ids, preview.counts)
        assert not set(done.episode_ids) & set(everything_of(memory, "ana")[0])
        assert memory.forget(**arguments).episode_ids == ()
        assert everything_of(memory, "bob") == bobs
        if selection == "whole user":
            assert everything_of(memory, "ana") == ([], [], [], [])
        gone = set(done.episode_ids)
        for fact in memory.facts(user_id="ana", include_superseded=True):
            assert fact.provenance and not set(fact.provenance) & gone
        for item, _ in memory.store.find_derived(Scope("ana")):
            assert not set(item.provenance) & gone
        assert memory.check() == []


def test_delete_all_goes_in_batches_too(
    backend: str, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_memory(backend, store_url) as memory:
        fill(memory)
        preview = memory.forget(user_id="ana", dry_run=True)
        monkeypatch.setattr(forget_sql, "EPISODE_BATCH", 2)
        assert memory.delete_all(user_id="ana") == preview.counts
        assert everything_of(memory, "ana") == ([], [], [], [])


def test_another_sqlite_connection_writes_between_the_batches_of_a_large_forget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite has one write lock for the whole file: while a transaction of the forget
    runs, a writer on another connection waits in its busy handler, and gets the lock
    in the pause between two batches, not only once the whole forget is done."""
    path = tmp_path / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        memory.add_many([f"note {i} about the harbour" for i in range(24)], user_id="ana")
    monkeypatch.setattr(forget_sql, "EPISODE_BATCH", 3)
    events: list[str] = []
    ready, wanted = threading.Event(), threading.Event()

    def write_once() -> None:  # another connection to the same file
        with Memory(path=path, embedder=EDGE, warm=False) as other:
            ready.set()
            wanted.wait(30)
            other.add("bob's note, written during the forget", user_id="bob")
            events.append("bob wrote")

    writer = threading.Thread(target=write_once)
    writer.start()
    assert ready.wait(30)
    forget_episodes = FactSQL.forget_episodes

    def inside_a_transaction_of_the_forget(self: Any, *args: Any, **kwargs: Any) -> Any:
        events.append("forget writing")
        wanted.set()
        return forget_episodes(self, *args, **kwargs)

    monkeypatch.setattr(FactSQL, "forget_episodes", inside_a_transaction_of_the_forget)
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        assert len(memory.forget(user_id="ana").episode_ids) == 24
    writer.join(30)
    assert "bob wrote" in events
    assert "forget writing" in events[events.index("bob wrote") :], events


def test_a_postgres_forget_locks_only_the_rows_of_its_batch(
    postgres_schema_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one batch of the forget runs, the rows of a later batch are free for
    another transaction to lock (and to change)."""
    import psycopg

    with Memory(url=postgres_schema_url, embedder=EDGE, warm=False) as memory:
        added = memory.add_many([f"note {i} about the harbour" for i in range(9)], user_id="ana")
        monkeypatch.setattr(forget_sql, "EPISODE_BATCH", 3)
        last = added[-1].id
        locked: list[bool] = []
        forget_episodes = FactSQL.forget_episodes

        def inside_a_transaction_of_the_forget(self: Any, conn: Any, *args: Any) -> Any:
            if not locked:
                with psycopg.connect(postgres_schema_url) as other:
                    try:
                        other.execute("SET lock_timeout = '2s'")
                        other.execute("SELECT id FROM episodes WHERE id = %s FOR UPDATE", [last])
                        locked.append(True)
                    except psycopg.errors.LockNotAvailable:
                        locked.append(False)
            return forget_episodes(self, conn, *args)

        monkeypatch.setattr(FactSQL, "forget_episodes", inside_a_transaction_of_the_forget)
        assert len(memory.forget(user_id="ana").episode_ids) == 9
        assert locked == [True]
        assert memory.get_all(user_id="ana").total == 0


# -- a forget killed between two batches ----------------------------------------------------
NEEDLE_LETTERS = "bcdfghjklmnpqrstvwz"
KILLED_FORGET = """
import os, signal, sys
from anamnesis import Memory
from anamnesis.store.shared import forget as forget_sql
from anamnesis.store.sqlite import driver, erasure

forget_sql.EPISODE_BATCH = {batch}
finish, calls = erasure.finish, []

def finish_then_die(*args, **kwargs):
    calls.append(1)
    if len(calls) == {killed_in}:  # this batch's deletes are done, its commit is not
        os.kill(os.getpid(), signal.SIGKILL)
    return finish(*args, **kwargs)

erasure.finish = finish_then_die
erasure._separator_left = lambda *_: {separator_found}
memory = Memory(path=sys.argv[1], embedder="edge", warm=False)
memory.forget(user_id="ana")
"""


def needles(directory: Path, words: list[str]) -> dict[str, int]:
    """How often each word occurs in the bytes of the store's files (UTF-8, as typed and
    lower-cased: FTS5 keeps its terms lower-cased)."""
    data = [file.read_bytes() for file in directory.rglob("*") if file.is_file()]
    return {
        word: sum(blob.count(form.encode()) for blob in data for form in {word, word.lower()})
        for word in words
    }


def due_merges(path: Path) -> list[str]:
    """The full-text indexes that a forget has left owing a whole merge."""
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT key FROM meta WHERE key LIKE 'erasure_rewrite_due:%'")
        return [key.split(":", 1)[1] for (key,) in rows]


@pytest.mark.parametrize("in_place", [True, False], ids=["secure-delete", "old-sqlite"])
def test_a_forget_in_batches_leaves_no_byte_of_the_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_place: bool
) -> None:
    """With FTS5's secure-delete, and on an older SQLite without it (where the deletes
    are tombstones until the index is merged)."""
    if not in_place:
        monkeypatch.setattr(driver, "SECURE_DELETE", False)
        monkeypatch.setattr(driver, "_warned", False)
    directory = tmp_path / "store"
    rng = random.Random(3)
    secrets = ["".join(rng.choice(NEEDLE_LETTERS) for _ in range(12)) for _ in range(10)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the older SQLite's warning, tested in test_forget
        memory = Memory(path=directory / "m.db", embedder=EDGE, warm=False)
    with memory:
        memory.add_many([f"my secret word is {s}" for s in secrets], user_id="ana")
        memory.add("I love hiking in the mountains.", user_id="bob")
        memory.search(secrets[0], user_id="ana")
        monkeypatch.setattr(forget_sql, "EPISODE_BATCH", 3)
        assert len(memory.forget(user_id="ana").episode_ids) == len(secrets)
        assert sum(needles(directory, secrets).values()) == 0, needles(directory, secrets)
        assert due_merges(directory / "m.db") == []
    assert sum(needles(directory, secrets).values()) == 0, needles(directory, secrets)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Memory(path=directory / "m.db", embedder=EDGE, warm=False) as reopened:
            assert reopened.check() == []
            assert [e.content for e in reopened.get_all(user_id="bob").items] == [
                "I love hiking in the mountains."
            ]


def _forget_in_small_batches(
    path: Path, monkeypatch: pytest.MonkeyPatch, *, separator_found: bool | None
) -> tuple[list[str], list[str]]:
    """Forget a scope of 40 notes 8 per transaction from a store with small index pages
    (many words start a page); ``separator_found``, when given, is what every batch's
    separator check answers. Returns the indexes merged whole and the erased words."""
    rng = random.Random(5)

    def word() -> str:
        return "".join(rng.choice(NEEDLE_LETTERS) for _ in range(12))

    erased = [f"{word()} {word()}" for _ in range(40)]
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        with closing(sqlite3.connect(path)) as conn:  # small pages: many words start a page
            conn.execute("INSERT INTO episodes_fts (episodes_fts, rank) VALUES ('pgsz', 64)")
        memory.add_many([f"{word()} {word()}" for _ in range(60)], user_id="bob")
        memory.add_many(erased, user_id="ana")
        monkeypatch.setattr(forget_sql, "EPISODE_BATCH", 8)
        if separator_found is not None:
            monkeypatch.setattr(erasure, "_separator_left", lambda *_: separator_found)
        rewrite, merged = erasure.rewrite, []

        def counted(conn: Any, index: str, column: str) -> None:
            merged.append(index)
            rewrite(conn, index, column)

        monkeypatch.setattr(erasure, "rewrite", counted)
        assert len(memory.forget(user_id="ana").episode_ids) == len(erased)
        assert due_merges(path) == []
    return merged, [w for text in erased for w in text.split()]


def test_a_forget_in_batches_whose_checks_find_no_separator_merges_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch erases its words in place and checks the separators for them, as a
    single forget does: where none spells an erased word, no index is merged."""
    merged, words = _forget_in_small_batches(tmp_path / "m.db", monkeypatch, separator_found=None)
    assert merged == []
    assert spelled_separators(tmp_path / "m.db", words) == []


def test_a_forget_in_batches_merges_the_index_twice_at_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the batches' checks find separators to rewrite, the index is merged by the
    first batch that finds one (leaving it in one segment) and by the forget's last
    transaction, not once per batch; no separator spells an erased word after."""
    merged, words = _forget_in_small_batches(tmp_path / "m.db", monkeypatch, separator_found=True)
    assert merged == ["episodes_fts", "episodes_fts"]
    assert spelled_separators(tmp_path / "m.db", words) == []


def test_a_merge_owed_by_a_running_forget_is_left_to_it(tmp_path: Path) -> None:
    """A store opened while another process's forget is between two batches leaves
    that forget's merge to it; one owed by a process that is gone is done at open."""
    path = tmp_path / "m.db"
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        memory.add("a note", user_id="ana")
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    for pid, left in ((os.getpid(), ["episodes_fts"]), (int(gone.stdout), [])):
        with closing(sqlite3.connect(path)) as conn, conn:
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                ("erasure_rewrite_due:episodes_fts", str(pid)),
            )
        Memory(path=path, embedder=EDGE, warm=False).close()
        assert due_merges(path) == left


@pytest.mark.parametrize("separator_found", [True, False])
def test_a_forget_killed_between_batches_leaves_whole_batches_and_is_finished_again(
    tmp_path: Path, separator_found: bool
) -> None:
    """Killed in its third batch: the first two are gone whole, the rest is as it was.
    A merge owed by a batch that found a separator to rewrite is done at the next open;
    with none found, none is owed."""
    directory = tmp_path / "store"
    path = directory / "m.db"
    rng = random.Random(11)
    secrets = ["".join(rng.choice(NEEDLE_LETTERS) for _ in range(12)) for _ in range(10)]
    batch, killed_in = 3, 3
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        added = memory.add_many([f"my secret word is {s}" for s in secrets], user_id="ana")
        memory.add("I love hiking in the mountains.", user_id="bob")
        memory.search(secrets[0], user_id="ana")  # the in-memory indexes hold the words
    script = KILLED_FORGET.format(batch=batch, killed_in=killed_in, separator_found=separator_found)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], env=env, capture_output=True, timeout=120
    )
    assert done.returncode == -9, done.stderr.decode()
    # The merge of the whole index, left to the forget's last transaction, is owed
    # when a batch found a separator to rewrite.
    assert due_merges(path) == (["episodes_fts"] if separator_found else [])

    # The first two batches are gone whole; the third was rolled back with the rest.
    # Opening the store does the merge the killed forget owed.
    erased, kept = secrets[: batch * (killed_in - 1)], secrets[batch * (killed_in - 1) :]
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        assert due_merges(path) == []
        assert memory.check() == []
        left = memory.get_all(user_id="ana", limit=100).items
        assert [e.id for e in left] == [e.id for e in added[len(erased) :]]
        for secret in erased:
            hits = memory.search(secret, user_id="ana", limit=3)
            assert all(secret not in hit.episode.content for hit in hits)
        for secret, episode in zip(kept, added[len(erased) :], strict=True):
            assert memory.search(secret, user_id="ana", limit=1)[0].episode.id == episode.id
    found = needles(directory, secrets)
    assert [found[s] for s in erased] == [0] * len(erased), found
    assert all(found[s] > 0 for s in kept), found

    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        again = memory.forget(user_id="ana")
        assert sorted(again.episode_ids) == sorted(e.id for e in added[len(erased) :])
        assert again.counts.episodes == len(kept)
        assert [e.content for e in memory.get_all(user_id="bob").items] == [
            "I love hiking in the mountains."
        ]
        assert sum(needles(directory, secrets).values()) == 0, needles(directory, secrets)
    assert sum(needles(directory, secrets).values()) == 0
    assert spelled_separators(path, secrets) == []


def test_the_loaded_vectors_lose_every_batch_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a forget in several batches, the next search of the same process takes all
    their rows out of its in-memory vectors at once rather than reading every row from
    the store again; what is left ranks exactly as in a fresh process."""
    path = tmp_path / "m.db"
    texts = [f"note {i}: stones by the river" for i in range(12)]
    with Memory(path=path, embedder=EDGE, warm=False) as memory:
        added = memory.add_many(texts, user_id="ana")
        memory.add_many(["stones again", "more stones"], user_id="bob")
        memory.search("river", user_id="ana")  # the vectors are loaded
        monkeypatch.setattr(forget_sql, "EPISODE_BATCH", 5)
        assert len(memory.forget(user_id="ana").episode_ids) == len(added)
        store = memory.store
        store._dense_file.load = None  # type: ignore[attr-defined]  (reading every row fails)
        kept = [(h.episode.id, h.score) for h in memory.search("stones", user_id="bob")]
        assert store._dense.size == 2  # type: ignore[attr-defined]
    with Memory(path=path, embedder=EDGE, warm=False) as fresh:
        assert [(h.episode.id, h.score) for h in fresh.search("stones", user_id="bob")] == kept
