"""How PostgreSQL dense search chooses between an exact scan and the HNSW walk.

At most ``EXACT_SCAN_MAX_ROWS`` rows in scope (after filters) are scored exactly; more
walk the graph. Without filters the scope's rows are counted up to the bound in the
covering scope index. With filters a count reads each row in the heap; when the
planner estimates the scope within the bound, the rows are scored as they are
counted, in one pass stopped past the bound, and a scope that holds more is walked.
Whatever the estimate, a scope within the bound gets the exact result.
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

    def exact_among(self, query: np.ndarray, rows: list[int], limit: int) -> list[str]:
        """The ``limit`` nearest of ``rows`` (indexes), by numpy."""
        distances = 1.0 - self.vectors[rows] @ query
        return [self.episodes[rows[j]].id for j in np.argsort(distances, kind="stable")[:limit]]

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
    """The statements that only count the rows in scope."""
    return sum("AS bounded" in s and "distance" not in s for s in statements)


def _walks(statements: list[str]) -> int:
    return sum("WITH hits" in s for s in statements)


def _stale(loaded: Loaded, holding: list[str]) -> None:
    """Give "a" to alice's rows ``holding`` and "c" to her others, leaving the
    statistics as they were."""
    with psycopg.connect(loaded.store.url, autocommit=True) as conn:
        conn.execute("ALTER TABLE episodes SET (autovacuum_enabled = false)")
        conn.execute(
            """UPDATE episodes SET metadata = CASE WHEN id = ANY(%s)
                   THEN '{"k": "a"}'::json ELSE '{"k": "c"}'::json END
               WHERE user_id = 'alice'""",
            (holding,),
        )


def _alice(loaded: Loaded) -> list[int]:
    return [i for i, e in enumerate(loaded.episodes) if e.user_id == "alice"]


def test_a_filtered_scope_estimated_within_the_bound_is_scored_as_it_is_counted(loaded):
    query = loaded.vectors[5]
    found, statements = loaded.search(query, HALF, 20)
    assert found == loaded.exact(query, {"k": "a"}, 20)
    assert _counts(statements) == 0 and _walks(statements) == 0
    assert len([s for s in statements if not s.startswith("EXPLAIN")]) == 1


def test_a_scope_larger_than_its_estimate_is_walked(loaded, monkeypatch):
    """20 of alice's rows hold "a", and the statistics say so: within a bound of
    100, they are scored exactly in one pass. Then 150 do, the statistics unchanged:
    the pass finds more than the bound, and the search walks the graph."""
    monkeypatch.setattr(postgres_search, "EXACT_SCAN_MAX_ROWS", 100)
    alice = _alice(loaded)
    query = loaded.vectors[alice[0]]
    _stale(loaded, [loaded.episodes[i].id for i in alice[:20]])
    loaded.store.analyze()
    found, statements = loaded.search(query, HALF, 10)
    assert _counts(statements) == 0 and _walks(statements) == 0
    assert found == loaded.exact_among(query, alice[:20], 10)
    _stale(loaded, [loaded.episodes[i].id for i in alice[:150]])
    found, statements = loaded.search(query, HALF, 10)
    assert _counts(statements) == 0 and _walks(statements) == 1
    assert len(found) == 10 and found[0] == loaded.episodes[alice[0]].id


def test_a_filtered_scope_estimated_beyond_the_bound_is_counted(loaded, monkeypatch):
    monkeypatch.setattr(postgres_search, "EXACT_SCAN_MAX_ROWS", 200)  # 300 in scope
    query = loaded.vectors[5]
    found, statements = loaded.search(query, HALF, 10)
    assert _counts(statements) == 1 and _walks(statements) == 1
    assert len(found) == 10 and found[0] == loaded.episodes[5].id
    # The statistics still say 300; the count finds 4 and scans them exactly.
    alice = _alice(loaded)
    _stale(loaded, [loaded.episodes[i].id for i in alice[:4]])
    found, statements = loaded.search(query, HALF, 10)
    assert _counts(statements) == 1 and _walks(statements) == 0
    assert found == loaded.exact_among(query, alice[:4], 10)


def test_an_unfiltered_scope_is_counted_in_the_scope_index_as_before(loaded):
    query = loaded.vectors[5]
    found, statements = loaded.search(query, Filters(), 20)
    assert _counts(statements) == 1
    assert not [s for s in statements if s.startswith("EXPLAIN")]
    assert found == loaded.exact(query, {}, 20)
