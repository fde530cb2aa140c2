"""Metadata filters on PostgreSQL are served by a GIN index, with unchanged results.

A filter ``metadata={"k": v}`` keeps the episodes whose metadata contains ``{"k": v}``
(jsonb containment, key by key). The store keeps a GIN index on
``(user_id, (metadata::jsonb) jsonb_path_ops)``, so a filtered search of a large
tenant finds the rows holding the value in the index instead of testing every row of
the tenant; without btree_gin, an index on the metadata alone stands in for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    DIM,
    T0,
    fresh_schema_url,
    make_episode,
    postgres_schema_url_fixture,
    unit_vectors,
)

from anamnesis.store.base import Filters
from anamnesis.store.postgres import PostgresStore
from anamnesis.store.postgres import search as postgres_search
from anamnesis.store.postgres.sql import filters_sql, scope_sql
from anamnesis.types import Scope

SCOPED = "episodes_user_metadata"
UNSCOPED = "episodes_metadata"
ALICE = Scope("alice")
BOB = Scope("bob")
TYPED_SESSION = "typed"

#: The metadata of the episodes that filters look for: one value of each JSON type,
#: and values a loose comparison would confuse with them (1 and true and "1", "x" and
#: "X", null and a missing key).
TYPED_METADATA: list[dict[str, Any]] = [
    {"k": "x"},
    {"k": "X"},
    {"k": 1},
    {"k": 1.0},
    {"k": True},
    {"k": False},
    {"k": None},
    {},
    {"k": "1"},
    {"k": 0},
    {"k": {"a": 1, "b": "two"}},
    {"k": [1, 2, 3]},
    {"k": 2.5, "j": "x"},
    {"k": "é ü 東京"},
    {"j": {"k": "x"}},
]

#: Filters whose rows are few among the tenant's: each should be looked up in the index.
INDEXED_FILTERS: list[dict[str, Any]] = [
    {"k": "x"},
    {"k": 1},
    {"k": 1.0},
    {"k": True},
    {"k": False},
    {"k": None},
    {"k": "1"},
    {"k": 0},
    {"k": {"a": 1}},
    {"k": {"a": 1, "b": "two"}},
    {"k": [1, 2]},
    {"k": [3]},
    {"k": 2.5, "j": "x"},
    {"k": 2.5, "j": "y"},
    {"k": "é ü 東京"},
    {"k": "absent"},
]
#: Filters with no value to hash (jsonb_path_ops indexes paths to values only): the
#: planner does not use the index for them, and results are still exact.
UNHASHABLE_FILTERS: list[dict[str, Any]] = [{"k": {}}, {"k": []}]

#: Rows of the tenant that no filter matches, so that a filtered row is a rare one.
FILLER = 4000


def contains(stored: Any, wanted: Any) -> bool:
    """Whether JSON ``stored`` contains ``wanted`` as jsonb's ``@>`` says (below the
    top level): objects key by key, arrays element by element in any order, scalars
    equal and of the same type (``true`` is not ``1``; ``1`` is ``1.0``)."""
    if isinstance(wanted, dict):
        return isinstance(stored, dict) and all(
            key in stored and contains(stored[key], value) for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        return isinstance(stored, list) and all(
            any(contains(item, want) for item in stored) for want in wanted
        )
    if isinstance(wanted, bool) or isinstance(stored, bool):
        return isinstance(wanted, bool) and isinstance(stored, bool) and wanted == stored
    if wanted is None or stored is None:
        return wanted is None and stored is None
    if isinstance(wanted, (int, float)):
        return isinstance(stored, (int, float)) and stored == wanted
    return isinstance(stored, str) and stored == wanted


def passes(metadata: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether an episode of ``metadata`` passes the filter ``metadata=wanted``."""
    return all(contains(metadata, {key: value}) for key, value in wanted.items())


class Loaded:
    """A store with a large tenant (alice), the typed episodes in alice's and bob's
    scopes, and what each episode holds."""

    def __init__(self, store: PostgresStore, url: str) -> None:
        self.store, self.url = store, url
        episodes = [
            make_episode(
                f"filler {i}",
                scope=Scope("alice", None, f"filler-{i // 100}"),
                turn_index=i % 100,
                metadata={"filler": i, "k": "filler"},
            )
            for i in range(FILLER)
        ]
        for scope in (ALICE, BOB):
            episodes += [
                make_episode(
                    f"marker note {n}",
                    scope=Scope(scope.user_id, None, TYPED_SESSION),
                    turn_index=n,
                    metadata=metadata,
                )
                for n, metadata in enumerate(TYPED_METADATA)
            ]
        self.vectors = unit_vectors(len(episodes), seed=5)
        store.insert_episodes(episodes, self.vectors)
        store.analyze()
        self.metadata = {e.id: e.metadata for e in episodes}
        self.alice_typed = [
            e.id for e in episodes if e.user_id == "alice" and "marker" in e.content
        ]

    def kept(self, ids: list[str], wanted: dict[str, Any]) -> list[str]:
        """``ids`` that pass the filter, in their order."""
        return [i for i in ids if passes(self.metadata[i], wanted)]


@pytest.fixture(scope="module")
def loaded() -> Iterator[Loaded]:
    with fresh_schema_url() as url:
        store = PostgresStore(url, dim=DIM)
        try:
            yield Loaded(store, url)
        finally:
            store.close()


def _indexes(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        return dict(
            conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes "
                "WHERE schemaname = current_schema() AND tablename = 'episodes'"
            ).fetchall()
        )


def ids(candidates: Any) -> list[str]:
    return [c.episode_id for c in candidates]


def scored(candidates: Any) -> list[tuple[str, float]]:
    return [(c.episode_id, round(c.score, 9)) for c in candidates]


# -- the index is there -----------------------------------------------------------------


def test_a_new_store_holds_the_metadata_index_led_by_the_tenant(postgres_schema_url):
    PostgresStore(postgres_schema_url, dim=DIM).close()
    indexes = _indexes(postgres_schema_url)
    assert "USING gin (user_id, ((metadata)::jsonb) jsonb_path_ops)" in indexes[SCOPED]
    assert UNSCOPED not in indexes


def test_a_store_made_before_the_index_gets_it_on_open_and_filters_the_same(
    postgres_schema_url,
):
    store = PostgresStore(postgres_schema_url, dim=DIM)
    episodes = [make_episode(f"note {i}", metadata={"n": i % 3}) for i in range(30)]
    store.insert_episodes(episodes, unit_vectors(30))
    with psycopg.connect(postgres_schema_url) as conn:  # the store as earlier code left it
        conn.execute(f"DROP INDEX {SCOPED}")
    before = store.lexical_search(["note"], ALICE, Filters(metadata={"n": 1}), 50)
    store.close()
    assert SCOPED not in _indexes(postgres_schema_url)
    store = PostgresStore(postgres_schema_url, dim=DIM)
    try:
        assert SCOPED in _indexes(postgres_schema_url)
        with psycopg.connect(postgres_schema_url) as conn:  # the planner knows the values
            analyzed = conn.execute(
                "SELECT count(*) FROM pg_stats WHERE schemaname = current_schema() "
                "AND tablename = %s",
                (SCOPED,),
            ).fetchone()[0]  # type: ignore[index]
        assert analyzed == 1  # the indexed expression, metadata::jsonb
        after = store.lexical_search(["note"], ALICE, Filters(metadata={"n": 1}), 50)
        assert scored(after) == scored(before)
        assert set(ids(after)) == {e.id for e in episodes if e.metadata["n"] == 1}
    finally:
        store.close()


def test_without_btree_gin_an_index_on_metadata_alone_serves_until_the_extension_comes(
    postgres_schema_url, monkeypatch
):
    from anamnesis.store.postgres import schema

    episodes = [make_episode(f"note {i}", metadata={"n": i % 3}) for i in range(30)]
    episodes += [make_episode("note", scope=BOB, metadata={"n": 1})]
    monkeypatch.setattr(schema, "SCOPED_INDEX_EXTENSION", "btree_gin_not_installed")
    with pytest.warns(RuntimeWarning, match="metadata filters give the same results"):
        store = PostgresStore(postgres_schema_url, dim=DIM)
    try:
        indexes = _indexes(postgres_schema_url)
        assert "USING gin (((metadata)::jsonb) jsonb_path_ops)" in indexes[UNSCOPED]
        assert SCOPED not in indexes
        store.insert_episodes(episodes, unit_vectors(len(episodes)))
        before = store.lexical_search(["note"], ALICE, Filters(metadata={"n": 1}), 50)
        assert set(ids(before)) == {e.id for e in episodes[:30] if e.metadata["n"] == 1}
    finally:
        store.close()
    monkeypatch.undo()
    store = PostgresStore(postgres_schema_url, dim=DIM)  # the extension is there now
    try:
        indexes = _indexes(postgres_schema_url)
        assert SCOPED in indexes
        assert UNSCOPED not in indexes  # replaced, not kept beside
        after = store.lexical_search(["note"], ALICE, Filters(metadata={"n": 1}), 50)
        assert scored(after) == scored(before)
    finally:
        store.close()


# -- results are those of the unfiltered search, filtered ---------------------------------


@pytest.mark.parametrize("wanted", INDEXED_FILTERS + UNHASHABLE_FILTERS, ids=repr)
def test_every_channel_returns_its_unfiltered_results_that_contain_the_value(loaded, wanted):
    store, filters, everything = loaded.store, Filters(metadata=wanted), FILLER + 100

    lexical = store.lexical_search(["marker"], ALICE, Filters(), everything)
    assert set(ids(lexical)) == set(loaded.alice_typed)  # bob's copies never come in
    expected = [c for c in scored(lexical) if passes(loaded.metadata[c[0]], wanted)]
    assert scored(store.lexical_search(["marker"], ALICE, filters, everything)) == expected

    probe = loaded.vectors[FILLER + 3]
    dense = ids(store.dense_search(probe, ALICE, Filters(), everything))
    assert ids(store.dense_search(probe, ALICE, filters, everything)) == loaded.kept(dense, wanted)

    by_session = store.dense_search_sessions(probe, ALICE, [TYPED_SESSION], filters, 50)
    unfiltered = store.dense_search_sessions(probe, ALICE, [TYPED_SESSION], Filters(), 50)
    assert ids(by_session[TYPED_SESSION]) == loaded.kept(ids(unfiltered[TYPED_SESSION]), wanted)

    ranges = [(T0 - timedelta(days=1), T0 + timedelta(days=3650))]
    timed = ids(store.time_search(probe, ranges, ALICE, Filters(), everything))
    assert ids(store.time_search(probe, ranges, ALICE, filters, everything)) == loaded.kept(
        timed, wanted
    )

    around = loaded.alice_typed[7:8]
    turns = store.adjacent_turns(around, ALICE, Filters(), 20)
    filtered_turns = store.adjacent_turns(around, ALICE, filters, 20)
    assert filtered_turns.get(around[0], []) == [
        turn for turn in turns[around[0]] if passes(loaded.metadata[turn[0]], wanted)
    ]

    listed, total = store.list_episodes(ALICE, limit=everything, offset=0, filters=filters)
    every, _ = store.list_episodes(ALICE, limit=everything, offset=0)
    assert [e.id for e in listed] == loaded.kept([e.id for e in every], wanted)
    assert total == len(listed)


def test_the_reference_tells_the_types_apart():
    """The test's own model of containment, on the cases a loose comparison confuses."""
    assert passes({"k": 1.0}, {"k": 1}) and passes({"k": 1}, {"k": 1.0})
    assert not passes({"k": True}, {"k": 1}) and not passes({"k": 1}, {"k": True})
    assert not passes({"k": "1"}, {"k": 1}) and not passes({}, {"k": None})
    assert passes({"k": [1, 2, 3]}, {"k": [3, 1]}) and not passes({"k": [1]}, {"k": 1})
    assert passes({"k": {"a": 1, "b": 2}}, {"k": {"a": 1}})
    assert not passes({"j": {"k": "x"}}, {"k": "x"})


# -- the index serves the searches -------------------------------------------------------


class Recording:
    """A connection that keeps each statement it runs, with its parameters."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.statements: list[tuple[str, Any]] = []

    def execute(self, query: str, params: Any = None, **kwargs: Any) -> Any:
        self.statements.append((query, params))
        return self.conn.execute(query, params, **kwargs)


def _index_names(plan: Any) -> set[str]:
    """Every index that an EXPLAIN (FORMAT JSON) plan node reads."""
    if isinstance(plan, dict):
        found = {plan["Index Name"]} if "Index Name" in plan else set()
        return found.union(*(_index_names(value) for value in plan.values()))
    if isinstance(plan, list):
        return set().union(*(_index_names(value) for value in plan))
    return set()


def _filtered_plans(store: PostgresStore, search: Any) -> list[set[str]]:
    """The indexes read by each statement of ``search(conn)`` that filters on metadata
    (not counting the planner's estimates it asks for, which read nothing)."""
    with store._transaction() as conn:
        recording = Recording(conn)
        search(recording)
        return [
            _index_names(conn.execute(f"EXPLAIN (FORMAT JSON) {query}", params).fetchone()[0])  # type: ignore[index]
            for query, params in recording.statements
            if "metadata" in query and not query.startswith("EXPLAIN")
        ]


@pytest.mark.parametrize("wanted", INDEXED_FILTERS, ids=repr)
def test_the_filter_of_a_large_tenant_is_looked_up_in_the_index(loaded, wanted):
    where, params = scope_sql(ALICE)
    extra, extra_params = filters_sql(Filters(metadata=wanted))
    with loaded.store._transaction() as conn:
        plan = conn.execute(
            f"EXPLAIN (FORMAT JSON) SELECT e.id FROM episodes e WHERE {where} AND {extra}",
            [*params, *extra_params],
        ).fetchone()[0]  # type: ignore[index]
    assert SCOPED in _index_names(plan)


def test_lexical_and_dense_search_read_the_filtered_rows_from_the_index(loaded):
    filters = Filters(metadata={"k": True})
    probe = loaded.vectors[0]
    lexical = _filtered_plans(
        loaded.store,
        lambda conn: postgres_search.lexical_search(conn, ["marker"], ALICE, filters, 10),
    )
    dense = _filtered_plans(
        loaded.store,
        lambda conn: postgres_search.dense_search(conn, probe, ALICE, filters, 10),
    )
    # dense: the exact scan, which the planner's estimate chose without a count
    assert len(lexical) == 1 and len(dense) == 1
    for indexes in lexical + dense:
        assert SCOPED in indexes


def test_a_search_testing_metadata_is_planned_with_the_values_search_after_search(
    loaded, monkeypatch
):
    """The index serves a rare value well and a common one badly, and the planner
    tells them apart by the value. A plan cached for a prepared statement (psycopg
    prepares one after a few runs, then PostgreSQL may keep a generic plan) does not
    see it: it takes every value for a rare one, and reads all the rows holding a
    common value through the index, then scores or sorts them all, where lexical
    search would have read the matching rows and dense search walked the graph. So no
    statement testing metadata is prepared; the others still are."""
    monkeypatch.setattr(postgres_search, "EXACT_SCAN_MAX_ROWS", 100)
    common, rare = Filters(metadata={"k": "filler"}), Filters(metadata={"k": True})
    ranges = [(T0 - timedelta(days=1), T0 + timedelta(days=3650))]
    with loaded.store._transaction() as conn:
        runs = 3 * conn.prepare_threshold  # type: ignore[operator]
        for filters in (common, rare, Filters()):
            for n in range(runs):
                vector = loaded.vectors[n]
                assert postgres_search.dense_search(conn, vector, ALICE, filters, 10)
                postgres_search.lexical_search(conn, ["filler", "marker"], ALICE, filters, 10)
                postgres_search.time_search(conn, vector, ranges, ALICE, filters, 10)
        prepared = [
            row[0]
            for row in conn.execute(
                "SELECT statement FROM pg_prepared_statements "
                "WHERE statement NOT LIKE 'EXPLAIN%%'"  # the other tests' own
            )
        ]
    assert not [statement for statement in prepared if "metadata::jsonb" in statement]
    assert [statement for statement in prepared if "content_tsv @@" in statement]
    assert [statement for statement in prepared if "WITH hits" in statement]  # the walk
