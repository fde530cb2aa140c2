"""How PostgreSQL dense search chooses between an exact scan and the HNSW walk.

At most ``EXACT_SCAN_MAX_ROWS`` rows in scope (after filters) are scored exactly; more
walk the graph. Without filters the scope's rows are counted up to the bound in the
covering scope index. With filters a count reads each row in the heap, so the
planner's estimate decides when it is at most the bound (the exact scan, right
whatever the true count) or ``ESTIMATE_MARGIN`` times more (the walk, which falls back
to exact when it comes back short of the limit); between, the rows are counted as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
import pytest
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    DIM,
    make_episode,
    postgres_schema_url_fixture,
    unit_vectors,
)

from anamnesis.store.base import Filters
from anamnesis.store.postgres import PostgresStore
from anamnesis.store.postgres import search as postgres_search
from anamnesis.types import Scope

ALICE = Scope("alice")
ROWS = 600
#: Half of alice's rows hold {"k": "a"}; bob holds rows too, so the scope filters.
HALF = Filters(metadata={"k": "a"})


class Recording:
    """A connection that keeps each statement it runs."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.statements: list[str] = []

    def execute(self, query: str, params: Any = None, **kwargs: Any) -> Any:
        self.statements.append(query)
        return self.conn.execute(query, params, **kwargs)


class Loaded:
    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.vectors = unit_vectors(ROWS, seed=21)
        self.episodes = [
            make_episode(
                f"row {i}",
                scope=ALICE if i % 4 else Scope("bob"),
                metadata={"k": "a" if i % 2 else "b"},
            )
            for i in range(ROWS)
        ]
        store.insert_episodes(self.episodes, self.vectors)
        store.analyze()

    def exact(self, query: np.ndarray, wanted: dict[str, Any], limit: int) -> list[str]:
        """alice's ``limit`` nearest rows holding ``wanted``, by numpy."""
        kept = [
            i
            for i, e in enumerate(self.episodes)
            if e.user_id == "alice" and all(e.metadata.get(k) == v for k, v in wanted.items())
        ]
        distances = 1.0 - self.vectors[kept] @ query
        return [self.episodes[kept[j]].id for j in np.argsort(distances, kind="stable")[:limit]]

    def search(
        self, query: np.ndarray, filters: Filters, limit: int
    ) -> tuple[list[str], list[str]]:
        """The ids found and the statements run."""
        with self.store._transaction() as conn:
            recording = Recording(conn)
            hits = postgres_search.dense_search(recording, query, ALICE, filters, limit)  # type: ignore[arg-type]
        return [h.episode_id for h in hits], recording.statements


@pytest.fixture
def loaded(postgres_schema_url):
    store = PostgresStore(postgres_schema_url, dim=DIM)
    yield Loaded(store)
    store.close()


def _counts(statements: list[str]) -> int:
    return sum("count(*)" in s for s in statements)


def _walks(statements: list[str]) -> int:
    return sum("WITH hits" in s for s in statements)


def test_a_filtered_scope_estimated_within_the_bound_is_scanned_exactly_uncounted(loaded):
    query = loaded.vectors[5]
    found, statements = loaded.search(query, HALF, 20)
    assert found == loaded.exact(query, {"k": "a"}, 20)
    assert _counts(statements) == 0 and _walks(statements) == 0


def test_a_filtered_scope_estimated_far_above_the_bound_walks_uncounted(loaded, monkeypatch):
    # alice holds 300 rows with "a": far above a bound of 20.
    monkeypatch.setattr(postgres_search, "EXACT_SCAN_MAX_ROWS", 20)
    query = loaded.vectors[5]
    found, statements = loaded.search(query, HALF, 10)
    assert _counts(statements) == 0 and _walks(statements) == 1
    assert len(found) == 10 and found[0] == loaded.episodes[5].id


def _stale(loaded: Loaded) -> list[str]:
    """Change all but 4 of alice's rows holding "a", leaving the statistics as they
    were (300 rows); the ids of the 4."""
    kept = [e.id for e in loaded.episodes if e.user_id == "alice" and e.metadata["k"] == "a"][:4]
    with psycopg.connect(loaded.store.url, autocommit=True) as conn:
        conn.execute("ALTER TABLE episodes SET (autovacuum_enabled = false)")
        conn.execute(
            """UPDATE episodes SET metadata = '{"k": "c"}'::json
               WHERE user_id = 'alice' AND NOT (id = ANY(%s))""",
            (kept,),
        )
    return kept


def test_a_filtered_scope_estimated_just_above_the_bound_is_counted(loaded, monkeypatch):
    monkeypatch.setattr(postgres_search, "EXACT_SCAN_MAX_ROWS", 200)  # 300 in scope
    query = loaded.vectors[5]
    found, statements = loaded.search(query, HALF, 10)
    assert _counts(statements) == 1 and _walks(statements) == 1
    assert len(found) == 10 and found[0] == loaded.episodes[5].id
    # The statistics still say 300; the count finds 4 and scans them exactly.
    kept = _stale(loaded)
    found, statements = loaded.search(query, HALF, 10)
    assert _counts(statements) == 1 and _walks(statements) == 0
    assert sorted(found) == sorted(kept)


def test_an_unfiltered_scope_is_counted_in_the_scope_index_as_before(loaded):
    query = loaded.vectors[5]
    found, statements = loaded.search(query, Filters(), 20)
    assert _counts(statements) == 1
    assert not [s for s in statements if s.startswith("EXPLAIN")]
    assert found == loaded.exact(query, {}, 20)


def test_a_walk_chosen_on_a_stale_estimate_falls_back_to_exact_when_short(loaded, monkeypatch):
    """The statistics say 300 of alice's rows hold "a"; 4 still do. The estimate sends
    the search to the walk; the walk, stopped early, comes back short of the limit, and
    the exact scan finds the 4."""
    kept = _stale(loaded)
    monkeypatch.setattr(postgres_search, "EXACT_SCAN_MAX_ROWS", 20)
    monkeypatch.setattr(postgres_search, "HNSW_MAX_SCAN_TUPLES", 1)
    query = loaded.vectors[5]
    found, statements = loaded.search(query, HALF, 10)
    assert _counts(statements) == 0 and _walks(statements) == 1
    assert sorted(found) == sorted(kept)
