"""What only the PostgreSQL store does: migrations under concurrency, the HNSW path of
dense search, connection handling, and the limits of what Postgres can store."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import psycopg
import pytest
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    DIM,
    T0,
    make_episode,
    postgres_schema_url_fixture,
    unit_vectors,
)

from anamnesis.errors import (
    BackendUnavailableError,
    CorruptStoreError,
    InvalidInputError,
    SchemaVersionError,
)
from anamnesis.store import open_url
from anamnesis.store.base import Filters
from anamnesis.store.postgres import PostgresStore
from anamnesis.store.postgres import search as postgres_search
from anamnesis.store.postgres import store as pg_module
from anamnesis.types import Scope

ALICE = Scope("alice")


@pytest.fixture
def pg(postgres_schema_url):
    store = PostgresStore(postgres_schema_url, dim=DIM)
    yield store
    store.close()


def test_open_url_routes_postgres_urls(postgres_schema_url):
    store = open_url(postgres_schema_url, dim=DIM)
    try:
        assert isinstance(store, PostgresStore)
        assert store.stats(None)["backend"] == "postgres"
    finally:
        store.close()


def test_workers_starting_together_migrate_exactly_once(postgres_schema_url):
    barrier = threading.Barrier(8)

    def start() -> PostgresStore:
        barrier.wait()
        return PostgresStore(postgres_schema_url, dim=DIM)

    with ThreadPoolExecutor(max_workers=8) as pool:
        stores = list(pool.map(lambda _: start(), range(8)))
    try:
        assert {s.get_meta("schema_version") for s in stores} == {str(pg_module.LATEST)}
        stores[0].insert_episodes([make_episode("x")], unit_vectors(1))
        assert all(s.stats(None)["episodes"] == 1 for s in stores)
    finally:
        for s in stores:
            s.close()


def test_a_newer_schema_is_refused(pg, postgres_schema_url):
    pg.set_meta("schema_version", "99")
    with pytest.raises(SchemaVersionError, match="Upgrade Anamnesis"):
        PostgresStore(postgres_schema_url, dim=DIM)


def test_foreign_tables_are_not_mistaken_for_a_store(postgres_schema_url):
    with psycopg.connect(postgres_schema_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE episodes (id int)")
    with pytest.raises(CorruptStoreError, match="no meta table"):
        PostgresStore(postgres_schema_url, dim=DIM)


def test_unreachable_server_says_so_without_the_password():
    with pytest.raises(BackendUnavailableError) as info:
        PostgresStore("postgresql://me:hunter2@127.0.0.1:1/db", dim=DIM, timeout=2)
    assert "hunter2" not in str(info.value)
    assert "127.0.0.1:1" in str(info.value)


def test_nul_characters_are_refused_before_anything_is_written(pg):
    with pytest.raises(InvalidInputError, match="NUL"):
        pg.insert_episodes([make_episode("fine"), make_episode("bad\x00text")], unit_vectors(2))
    with pytest.raises(InvalidInputError, match="NUL"):
        pg.insert_episodes([make_episode("x", metadata={"k": "a\x00b"})], unit_vectors(1))
    assert pg.stats(None)["episodes"] == 0


def test_wrong_vector_dimension_is_invalid_input(pg):
    with pytest.raises(InvalidInputError):
        pg.insert_episodes([make_episode("x")], unit_vectors(1, dim=DIM + 1))
    assert pg.stats(None)["episodes"] == 0


def test_hnsw_path_is_scoped_ranked_and_falls_back_when_short(pg, monkeypatch):
    monkeypatch.setattr(postgres_search, "EXACT_SCAN_MAX_ROWS", 10)
    episodes = [
        make_episode(
            f"e{i}", scope=ALICE if i % 3 else Scope("bob"), role="rare" if i % 97 == 1 else "user"
        )
        for i in range(600)
    ]
    vectors = unit_vectors(600, seed=3)
    pg.insert_episodes(episodes, vectors)
    pg.analyze()
    alice = [i for i, e in enumerate(episodes) if e.user_id == "alice"]
    for probe in alice[:10]:
        hits = pg.dense_search(vectors[probe], ALICE, Filters(), 20)
        assert len(hits) == 20
        assert hits[0].episode_id == episodes[probe].id
        assert all(h.episode_id in {episodes[i].id for i in alice} for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    rare = {e.id for e in episodes if e.role == "rare" and e.user_id == "alice"}
    hits = pg.dense_search(vectors[0], ALICE, Filters(role="rare"), 50)
    assert {h.episode_id for h in hits} == rare


def test_hnsw_recall_against_exact_search(pg, monkeypatch):
    vectors = unit_vectors(2000, seed=11)
    episodes = [make_episode(f"e{i}") for i in range(2000)]
    pg.insert_episodes(episodes, vectors)
    queries = unit_vectors(20, seed=12)
    monkeypatch.setattr(postgres_search, "EXACT_SCAN_MAX_ROWS", 10**9)
    exact = [{h.episode_id for h in pg.dense_search(q, ALICE, Filters(), 10)} for q in queries]
    monkeypatch.setattr(postgres_search, "EXACT_SCAN_MAX_ROWS", 10)
    approx = [{h.episode_id for h in pg.dense_search(q, ALICE, Filters(), 10)} for q in queries]
    recall = sum(len(a & e) for a, e in zip(approx, exact, strict=True)) / 200
    assert recall >= 0.9


def test_the_exact_query_does_not_use_the_hnsw_index(pg):
    pg.insert_episodes([make_episode(f"e{i}") for i in range(50)], unit_vectors(50))
    with psycopg.connect(pg.url) as conn:
        pg_module.register_vector(conn)
        conn.execute("SET enable_seqscan = off")
        q = unit_vectors(1)[0]
        exact = conn.execute(
            "EXPLAIN SELECT e.id FROM episodes e ORDER BY (e.embedding <=> %s) + 0 LIMIT 5",
            (q,),
        ).fetchall()
        approx = conn.execute(
            "EXPLAIN SELECT e.id FROM episodes e ORDER BY e.embedding <=> %s LIMIT 5",
            (q,),
        ).fetchall()
    assert "episodes_embedding" not in str(exact)
    assert "episodes_embedding" in str(approx)


def test_bulk_load_rebuilds_the_index_and_search_works_meanwhile(pg):
    vectors = unit_vectors(100, seed=4)
    episodes = [make_episode(f"e{i}") for i in range(100)]
    with pg.bulk_load():
        pg.insert_episodes(episodes, vectors)
        assert pg.dense_search(vectors[5], ALICE, Filters(), 1)[0].episode_id == episodes[5].id
    with psycopg.connect(pg.url) as conn:
        names = {
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'episodes' "
                "AND schemaname = current_schema()"
            )
        }
    assert "episodes_embedding" in names


def _index_definition(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'episodes_embedding' "
            "AND schemaname = current_schema()"
        ).fetchone()
    assert row is not None
    return row[0]


def test_the_vector_index_is_built_with_ef_construction_128_and_bulk_load_upgrades_it(pg):
    assert "ef_construction='128'" in _index_definition(pg.url)
    # A store whose index was built with pgvector's default (64), as before.
    with psycopg.connect(pg.url) as conn:
        conn.execute("DROP INDEX episodes_embedding")
        conn.execute(
            "CREATE INDEX episodes_embedding ON episodes USING hnsw "
            "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
    assert "ef_construction='64'" in _index_definition(pg.url)
    with pg.bulk_load():
        pass
    assert "ef_construction='128'" in _index_definition(pg.url)


def test_reembedding_with_another_dimension_switches_the_column(pg, postgres_schema_url):
    episodes = [make_episode(f"e{i}") for i in range(5)]
    pg.insert_episodes(episodes, unit_vectors(5))
    wider = unit_vectors(5, dim=DIM * 2, seed=8)
    pg.replace_vectors({e.id: v for e, v in zip(episodes, wider, strict=True)})
    assert pg.get_meta("vector_dim") == str(DIM * 2)
    assert pg.dense_search(wider[3], ALICE, Filters(), 1)[0].episode_id == episodes[3].id
    reopened = PostgresStore(postgres_schema_url, dim=DIM * 2)
    try:
        got = dict((e.id, v) for e, v in reopened.iter_episodes())
        np.testing.assert_array_equal(got[episodes[0].id], wider[0])
    finally:
        reopened.close()


def test_many_threads_share_a_small_pool(postgres_schema_url):
    store = PostgresStore(postgres_schema_url, dim=DIM, max_connections=2)
    try:

        def work(n: int) -> int:
            store.insert_episodes(
                [make_episode(f"t{n}", scope=Scope(f"u{n}"))], unit_vectors(1, seed=n)
            )
            return len(store.lexical_search([f"t{n}"], Scope(f"u{n}"), Filters(), 5))

        with ThreadPoolExecutor(max_workers=16) as pool:
            assert sum(pool.map(work, range(64))) == 64
    finally:
        store.close()


def test_closed_store_refuses_calls(pg):
    pg.close()
    pg.close()
    with pytest.raises(Exception, match="closed"):
        pg.get_meta("x")


def test_stats_redact_the_password(pg):
    pg.url = "postgresql://me:hunter2@db.example/x"
    assert "hunter2" not in pg.stats(None)["url"]
    assert T0  # the fixtures module is shared with the contract suite


def test_a_read_only_connection_serves_every_read(pg, postgres_schema_url):
    """What a hot-standby replica allows: the read path works in read-only transactions."""
    episodes = [
        make_episode(f"replica word {i}", scope=Scope("alice", None, "s1"), turn_index=i)
        for i in range(3)
    ]
    vectors = unit_vectors(3)
    pg.insert_episodes(episodes, vectors)
    read_only = postgres_schema_url + "%20-cdefault_transaction_read_only%3Don"
    replica = PostgresStore(read_only, dim=DIM)
    try:
        assert ids_of(replica.lexical_search(["replica"], ALICE, Filters(), 5)) == {
            e.id for e in episodes
        }
        assert replica.dense_search(vectors[1], ALICE, Filters(), 1)[0].episode_id == episodes[1].id
        assert (
            len(
                replica.neighbours(replica.get_episodes([episodes[1].id], ALICE), 1)[episodes[1].id]
            )
            == 2
        )
        assert replica.list_episodes(ALICE, limit=5, offset=0)[1] == 3
        assert replica.stats(ALICE)["episodes"] == 3
        with pytest.raises(Exception, match="read-only"):
            replica.set_meta("k", "v")
    finally:
        replica.close()


def ids_of(candidates) -> set[str]:
    return {c.episode_id for c in candidates}
