"""A SQLite store places the rows its searches rank (episode id, user, agent, session,
turn index, speaker, role) from the columns its dense index keeps, with no SQL, while
that index is in step with the file; rows it does not hold (waiting for their vector,
added by another process, ids it does not keep) are read from the store. Either way the
scope is checked on every call, a forgotten row is never placed again, and searches
rank and place their hits exactly as when every row was read in SQL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from store_fixtures import DIM, make_episode, unit_vectors

from anamnesis.store.base import TURN_COLUMNS, Filters, Selection
from anamnesis.store.index.dense import AnnSettings
from anamnesis.store.sqlite import SQLiteStore
from anamnesis.types import Scope

NO_FILTERS = Filters()
NO_GRAPH = AnnSettings(threshold=10**9)
#: Rows of several users, agents and sessions, the same session name under two users.
SCOPES = (
    Scope("alice", "a1", "s1"),
    Scope("alice", "a1", "s2"),
    Scope("alice", None, "s1"),
    Scope("alice", "a2", None),
    Scope("alice", None, None),
    Scope("bob", "a1", "s1"),
)
#: Scopes searched: each of the above, wider ones, and a user with no rows.
SEARCHED = (*SCOPES, Scope("alice"), Scope("alice", "a1"), Scope("bob"), Scope("carol"))
PER_SCOPE = 12


@pytest.fixture
def store(tmp_path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "memory.db", dim=DIM, ann=NO_GRAPH)
    yield store
    store.close()


def _fill(store: SQLiteStore) -> None:
    """Rows in every scope of ``SCOPES``, with and without turn indexes, speakers and
    roles (one turn index past 32 bits), and an id in non-ASCII letters."""
    episodes = [
        make_episode(
            f"the harbour lantern, turn {i} of {scope}",
            scope=scope,
            id=f"ép_{n}_{i}_ünï" if i == 5 else None,
            turn_index=None if i % 4 == 3 else (2**40 + i if i == 6 else i),
            speaker="Ann" if i % 3 == 0 else None,
            role=(None, "user", "assistant")[i % 3],
        )
        for n, scope in enumerate(SCOPES)
        for i in range(PER_SCOPE)
    ]
    store.insert_episodes(episodes, unit_vectors(len(episodes), seed=1))


def _sql_places(store: SQLiteStore) -> dict[int, tuple]:
    """Every row's place as the store's table says: rowid -> (id, user, agent, turn)."""
    rows = store._conn.execute(
        f"SELECT e.rowid, e.id, e.user_id, e.agent_id, {TURN_COLUMNS} FROM episodes e"
    ).fetchall()
    return {row[0]: (row[1], row[2], row[3], tuple(row[4:8])) for row in rows}


def _in(scope: Scope, place: tuple) -> bool:
    return (
        place[1] == scope.user_id
        and scope.agent_id in (None, place[2])
        and scope.session_id in (None, place[3][0])
    )


@contextmanager
def _statements(store: SQLiteStore) -> Iterator[list[str]]:
    """The SQL statements the store runs inside the block."""
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        yield statements
    finally:
        store._conn.set_trace_callback(None)


def _episode_reads(statements: list[str]) -> list[str]:
    return [s for s in statements if "FROM episodes" in s]


def _ranked(found: list) -> list[tuple]:
    return [(c.episode_id, c.score, c.turn) for c in found]


def test_the_columns_hold_each_rows_place_as_the_store_does(store):
    _fill(store)
    store.warm_up()
    expected = _sql_places(store)
    assert store._dense.places(expected) == expected


def test_each_scope_gets_only_its_own_rows_with_no_sql(store):
    # Every row of the store proposed to every scope, as a ranking never does: the
    # scope check, not the ranking, keeps the others out.
    _fill(store)
    store.warm_up()
    every = _sql_places(store)
    for scope in SEARCHED:
        store._row_places = None  # each scope placed from cold
        with _statements(store) as statements:
            placed = store._in_scope(list(every), scope)
        assert placed == {
            rowid: (place[0], place[3]) for rowid, place in every.items() if _in(scope, place)
        }, scope
        assert not _episode_reads(statements)
    assert store._in_scope(list(every), Scope("alice"))  # the fixture has rows to find


def test_searches_rank_and_place_their_hits_as_when_read_in_sql(store):
    _fill(store)
    store.warm_up()
    queries = unit_vectors(4, seed=7)

    def searches() -> list:
        store._row_places = None
        return [
            _ranked(found)
            for scope in SEARCHED
            for found in (
                store.dense_search(queries[0], scope, NO_FILTERS, 9),
                store.lexical_search(["harbour", "turn"], scope, NO_FILTERS, 9),
                store.dense_search(queries[1], scope, Filters(role="assistant"), 5),
                *store.dense_search_sessions(
                    queries[2], scope, ["s1", "s2"], NO_FILTERS, 4
                ).values(),
            )
        ]

    with _statements(store) as statements:
        from_columns = searches()
    assert not [s for s in _episode_reads(statements) if "e.rowid IN" in s]
    store._dense_places = lambda rowids: {}  # type: ignore[method-assign]
    with _statements(store) as statements:
        from_sql = searches()
    assert [s for s in _episode_reads(statements) if "e.rowid IN" in s]
    assert from_columns == from_sql
    assert any(found for found in from_columns)


def test_a_row_forgotten_here_is_never_placed_again(store):
    _fill(store)
    store.warm_up()
    every = _sql_places(store)
    scope = SCOPES[0]
    gone = next(rowid for rowid, place in every.items() if _in(scope, place))
    assert gone in store._in_scope([gone], scope)
    store.forget(scope, Selection(episode_ids=(every[gone][0],)))
    assert store._in_scope([gone], scope) == {}  # the index has not taken it out yet
    store.dense_search(unit_vectors(1, seed=3)[0], scope, NO_FILTERS, 5)
    assert store._dense.removed == 1
    store._row_places = None
    assert store._in_scope(list(every), scope) == {
        rowid: (place[0], place[3])
        for rowid, place in every.items()
        if rowid != gone and _in(scope, place)
    }
    assert store.turn_info([every[gone][0]], scope) == {}


def test_a_row_another_process_forgot_is_never_placed_again(store, tmp_path):
    _fill(store)
    store.warm_up()
    every = _sql_places(store)
    scope = SCOPES[1]
    gone = next(rowid for rowid, place in every.items() if _in(scope, place))
    store._row_places = None
    other = SQLiteStore(tmp_path / "memory.db", dim=DIM, ann=NO_GRAPH)
    try:
        other.forget(scope, Selection(episode_ids=(every[gone][0],)))
    finally:
        other.close()
    # This process's index still holds the row: the file's epoch says it is stale.
    assert store._dense.places([gone])
    assert store._in_scope([gone], scope) == {}
    assert store._in_scope(list(every), scope) == {
        rowid: (place[0], place[3])
        for rowid, place in every.items()
        if rowid != gone and _in(scope, place)
    }


def test_rows_waiting_for_their_vector_are_placed_from_the_store(store):
    _fill(store)
    store.warm_up()
    scope = SCOPES[2]
    waiting = [
        make_episode(f"the glacier orchid, late turn {i}", scope=scope, turn_index=100 + i)
        for i in range(3)
    ]
    foreign = make_episode("the glacier orchid, bob's turn", scope=SCOPES[5], turn_index=7)
    store.insert_episodes([*waiting, foreign], None)  # stored before their vectors
    assert store.pending_count(None) == 4
    found = store.lexical_search(["glacier", "orchid"], scope, NO_FILTERS, 10)
    assert {c.episode_id: c.turn for c in found} == {
        e.id: ("s1", e.turn_index, None, "user") for e in waiting
    }
    every = _sql_places(store)
    for searched in (scope, SCOPES[5]):
        store._row_places = None
        assert store._in_scope(list(every), searched) == {
            rowid: (place[0], place[3]) for rowid, place in every.items() if _in(searched, place)
        }


def test_an_id_the_columns_do_not_keep_is_placed_from_the_store(store):
    long_id = "ep_" + "x" * 120
    nul_id = "ep_ends_in_nul\0"
    episodes = [
        make_episode("the cobalt tram", scope=SCOPES[0], id=episode_id, turn_index=i)
        for i, episode_id in enumerate((long_id, nul_id, "ep_short"))
    ]
    store.insert_episodes(episodes, unit_vectors(3, seed=2))
    store.warm_up()
    every = _sql_places(store)
    assert {place[0] for place in store._dense.places(every).values()} == {"ep_short"}
    placed = store._in_scope(list(every), SCOPES[0])
    assert sorted(episode_id for episode_id, _ in placed.values()) == sorted(
        [long_id, nul_id, "ep_short"]
    )


def test_places_survive_compaction_and_a_longer_id_without_changing(store):
    # The index's own bookkeeping: removed rows compacted away, the id column widened
    # by a longer id appended later; every other row keeps its place.
    _fill(store)
    store.warm_up()
    every = _sql_places(store)
    gone = list(every)[::5]
    store._dense.remove(gone)
    store._dense.compact()
    late = make_episode("late", scope=SCOPES[3], id="ep_" + "y" * 50, turn_index=3)
    store.insert_episodes([late], unit_vectors(1, seed=4))
    store.dense_search(unit_vectors(1, seed=4)[0], SCOPES[3], NO_FILTERS, 1)
    now = _sql_places(store)
    assert store._dense._episode_ids.dtype.itemsize > len(every[gone[1]][0].encode())
    assert store._dense.places(now) == {
        rowid: place for rowid, place in now.items() if rowid not in gone
    }
