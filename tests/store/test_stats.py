"""A scope's statistics count what it holds, whatever happened to it: episodes stored
with their vector or waiting for it, indexed, updated, deleted, forgotten, archived and
restored, on both backends. They are read from the scope's index entries: on SQLite
in a few passes over them, on PostgreSQL without reading the rows (each holds a vector)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from store_fixtures import (  # noqa: F401  (fixtures by name)
    T0,
    backend_fixture,
    make_episode,
    open_store_fixture,
    postgres_schema_url_fixture,
    sqlite_steps,
    store_fixture,
    store_url_fixture,
    unit_vectors,
)

from anamnesis import Memory
from anamnesis.embed import get_embedder
from anamnesis.store.base import Selection
from anamnesis.types import Scope

ALICE = Scope("alice")
SCOPES = [None, ALICE, Scope("alice", "helper"), Scope("alice", None, "s1"), Scope("bob")]


def in_scope(episode: Any, scope: Scope | None) -> bool:
    return scope is None or (
        episode.user_id == scope.user_id
        and scope.agent_id in (None, episode.agent_id)
        and scope.session_id in (None, episode.session_id)
    )


def counted(store: Any) -> dict[Scope | None, tuple[int, int, int]]:
    """Each scope's (episodes, vectors, versions) as ``stats`` reports them."""
    found = {}
    for scope in SCOPES:
        stats = store.stats(scope)
        found[scope] = (stats["episodes"], stats["vectors"], stats["versions"])
    return found


def truth(store: Any) -> dict[Scope | None, tuple[int, int, int]]:
    """The same, counted from every stored episode, its vector and its versions."""
    rows = list(store.iter_episodes())
    found = {}
    for scope in SCOPES:
        mine = [(e, v) for e, v in rows if in_scope(e, scope)]
        versions = sum(len(store.episode_versions(e.id, Scope(e.user_id))) for e, _ in mine)
        found[scope] = (len(mine), sum(v is not None for _, v in mine), versions)
    return found


def test_stats_count_vectors_and_versions_through_every_change(store) -> None:
    def episode(text: str, scope: Scope, minutes: int) -> Any:
        return make_episode(text, scope=scope, event_time=T0 + timedelta(minutes=minutes))

    indexed = [episode(f"indexed {i}", Scope("alice", "helper", "s1"), i) for i in range(4)]
    waiting = [episode(f"waiting {i}", Scope("alice", None, f"s{i % 2}"), 10 + i) for i in range(6)]
    bobs = [episode(f"bob's {i}", Scope("bob"), 20 + i) for i in range(3)]
    store.insert_episodes(indexed, unit_vectors(4, seed=1))
    store.insert_episodes(waiting, None)
    store.insert_episodes(bobs, None)
    assert counted(store)[None] == (13, 4, 0)
    assert counted(store)[ALICE] == (10, 4, 0)
    assert counted(store) == truth(store)

    # Half of the backlog gets its vectors.
    pending = store.pending_vectors(100)
    half = [p for p in pending if p.user_id == "alice"][:3]
    store.index_pending([(p, v) for p, v in zip(half, unit_vectors(3, seed=2), strict=True)])
    assert counted(store)[ALICE] == (10, 7, 0)
    assert counted(store) == truth(store)

    # An update with its new vector, another whose vector waits, one of bob's.
    [first, second, third] = store.get_episodes(
        [indexed[0].id, waiting[5].id, bobs[0].id], Scope("alice")
    ) + store.get_episodes([bobs[0].id], Scope("bob"))
    for changed, vector in ((first, unit_vectors(1, seed=3)[0]), (second, None)):
        store.update_episode(
            changed.id,
            ALICE,
            content=f"{changed.content}, changed",
            content_hash=f"{changed.content_hash}-2",
            metadata={},
            vector=vector,
            changed_at=T0,
        )
    store.update_episode(
        third.id,
        Scope("bob"),
        content="bob's, changed",
        content_hash="bob-2",
        metadata={},
        vector=unit_vectors(1, seed=4)[0],
        changed_at=T0,
    )
    assert counted(store)[ALICE][2] == 2 and counted(store)[Scope("bob")][2] == 1
    assert counted(store) == truth(store)

    # Deletes of an indexed and a waiting episode, a forget of a session, an archive
    # and a restore.
    store.delete_episode(indexed[1].id, ALICE)
    store.delete_episode(waiting[4].id, ALICE)
    assert counted(store) == truth(store)
    store.forget(ALICE, Selection(episode_ids=(waiting[0].id, waiting[1].id)))
    assert counted(store) == truth(store)
    store.archive(Scope("bob"), Selection(), T0)
    assert counted(store)[Scope("bob")] == (0, 0, 0)
    assert counted(store) == truth(store)
    store.restore(Scope("bob"), Selection())
    assert counted(store)[Scope("bob")][0] == 3
    assert counted(store) == truth(store)
    store.delete_scope(Scope("alice", "helper"))
    assert counted(store) == truth(store)
    assert store.check() == []


def test_a_scopes_first_and_last_event_are_its_own(store) -> None:
    times = [T0 + timedelta(days=d) for d in (5, 1, 9)]
    scopes = [Scope("alice", "helper"), Scope("alice"), Scope("bob")]
    for when, scope in zip(times, scopes, strict=True):
        store.insert_episodes([make_episode("x", scope=scope, event_time=when)], None)
    helper = store.stats(Scope("alice", "helper"))
    alice = store.stats(ALICE)
    assert (helper["first_event"], helper["last_event"]) == (times[0].isoformat(),) * 2
    assert (alice["first_event"], alice["last_event"]) == (
        times[1].isoformat(),
        times[0].isoformat(),
    )
    assert store.stats(None)["last_event"] == times[2].isoformat()
    assert store.stats(Scope("nobody"))["first_event"] is None


def steps_of_stats(memory: Memory, scope: Scope) -> int:
    """SQLite virtual-machine steps (in units of 100) one ``stats`` of ``scope`` spends."""
    count, _ = sqlite_steps(memory.store, lambda: memory.store.stats(scope))
    return count


def test_a_users_stats_cost_a_few_reads_of_its_index_entries(tmp_path) -> None:
    with Memory(path=tmp_path / "m.db", embedder=get_embedder("edge"), warm=False) as memory:
        for session in range(40):
            memory.add_many(
                [f"note {i} of session {session}" for i in range(100)],
                user_id="u",
                session_id=f"s{session}",
            )
        memory.add("a note of another user", user_id="v")
        counting, _ = sqlite_steps(
            memory.store,
            lambda: memory.store._read("SELECT COUNT(*) FROM episodes WHERE user_id = 'u'"),
        )
        cost = steps_of_stats(memory, Scope("u"))
        assert memory.stats(user_id="u")["vectors"] == 4000
    # Joining every episode to its vector and to its versions cost nine times a count.
    assert cost <= 4 * counting, (cost, counting)


def test_a_users_stats_on_postgresql_read_its_indexes_not_its_rows(
    postgres_schema_url: str,
) -> None:
    """A row holds the episode's vector: reading the rows to count a user's episodes,
    sessions and vectors read (and sorted) every vector."""
    import psycopg

    from anamnesis.store.postgres import PostgresStore

    dim, rows = 256, 3000
    store = PostgresStore(postgres_schema_url, dim=dim, min_connections=1, max_connections=1)
    try:
        with psycopg.connect(postgres_schema_url, autocommit=True) as conn:
            # The table's read counters are the server's, not this connection's: no
            # autovacuum worker may read it while they are watched.
            conn.execute("ALTER TABLE episodes SET (autovacuum_enabled = false)")
        episodes = [
            make_episode(f"note {i}", scope=Scope("u", None, f"s{i % 30}")) for i in range(rows)
        ]
        for start in range(0, rows, 1000):
            chunk = episodes[start : start + 1000]
            store.insert_episodes(chunk, unit_vectors(len(chunk), dim=dim, seed=start))
        with psycopg.connect(postgres_schema_url, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE) episodes")
            vacuuming = conn.info.backend_pid

        def row_pages_read() -> int:
            """Pages of the episodes' rows this store's one connection has read."""
            with store._transaction() as conn:
                conn.execute("SELECT pg_stat_force_next_flush()")
            with store._transaction() as conn:
                conn.execute("SELECT pg_stat_clear_snapshot()")
                row = conn.execute(
                    """SELECT heap_blks_read + heap_blks_hit FROM pg_statio_user_tables
                       WHERE relname = 'episodes' AND schemaname = current_schema()"""
                ).fetchone()
            assert row is not None
            return int(row[0])

        with store._transaction() as conn:
            pages = conn.execute("SELECT relpages FROM pg_class WHERE oid = 'episodes'::regclass")
            (row_pages,) = pages.fetchone() or (0,)
        # The vacuum's reads reach the counters when its server process exits.
        for _ in range(100):
            with store._transaction() as conn:
                gone = conn.execute(
                    "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)",
                    (vacuuming,),
                ).fetchone()
            if gone and gone[0]:
                break
            time.sleep(0.05)
        before = row_pages_read()
        while (settled := row_pages_read()) != before:
            before = settled
        stats = store.stats(Scope("u"))
        read = row_pages_read() - before
    finally:
        store.close()
    assert (stats["episodes"], stats["vectors"], stats["sessions"]) == (rows, rows, 30)
    # The planner may probe a few rows at an index's ends; reading them all reads every page.
    assert row_pages > 100 and read < row_pages // 20, (read, row_pages)


def test_a_reindex_cut_after_its_first_batch_leaves_the_rest_waiting_on_postgresql(
    postgres_schema_url: str,
) -> None:
    """Re-embedding with a model of another dimension drops every vector in its first
    batch's transaction; a kill after it must leave the others marked as waiting, not
    without vector or mark (which ``stats`` would count as vectors)."""
    from anamnesis.store.postgres import PostgresStore

    store = PostgresStore(postgres_schema_url, dim=16)
    try:
        episodes = [make_episode(f"note {i}") for i in range(10)]
        store.insert_episodes(episodes, unit_vectors(10))
        first_batch = {e.id: v for e, v in zip(episodes[:3], unit_vectors(3, dim=8), strict=True)}
        store.replace_vectors(first_batch)  # then the process is killed
        assert store.check() == []
        assert store.pending_count(None) == 7
        assert store.stats(None)["vectors"] == 3
        store.replace_vectors(
            {e.id: v for e, v in zip(episodes[3:], unit_vectors(7, dim=8), strict=True)}
        )
        assert store.pending_count(None) == 0 and store.stats(None)["vectors"] == 10
    finally:
        store.close()
