"""A search inside one small scope of a store that holds many scopes does work that
follows the scope's size, not the store's: the lexical index scores the scope's own
rows and the dense index finds them without a pass over every row, and the results
are the same, score for score, as a search that scores the whole index and masks it."""

from __future__ import annotations

import numpy as np
import pytest
from store_fixtures import DIM, make_episode, unit_vectors

from anamnesis.store.base import Filters
from anamnesis.store.index import dense as dense_index
from anamnesis.store.index import lexical as lexical_index
from anamnesis.store.index.dense import AnnSettings, DenseIndex
from anamnesis.store.index.lexical import SCOPE_KEY, LexicalIndex, Postings
from anamnesis.store.sqlite import SQLiteStore, dense_file
from anamnesis.types import Scope

NO_FILTERS = Filters()
#: Scopes of ``SCOPE_ROWS`` rows each: one scope is far below 1/16 of the rows.
SCOPES = 40
SCOPE_ROWS = 60


def _docs(seed: int, first_rowid: int, count: int) -> dict[int, list[str]]:
    """Rows of Zipf-drawn words (a few words in most rows, most words in few)."""
    rng = np.random.default_rng(seed)
    return {
        first_rowid + i: [f"w{min(int(w), 200)}" for w in rng.zipf(1.3, rng.integers(3, 30))]
        for i in range(count)
    }


def _postings(docs: dict[int, list[str]], scopes: dict[int, list[str]]) -> Postings:
    """Postings of ``docs`` (rowid -> words), each row holding its ``scopes`` tokens."""
    instances: dict[str, list[int]] = {}
    for rowid in sorted(docs):
        for token in [*docs[rowid], *(SCOPE_KEY + s for s in scopes[rowid])]:
            instances.setdefault(token, []).append(rowid)
    ordered = sorted(docs)
    return Postings(
        keys=list(instances),
        counts=np.array([len(rows) for rows in instances.values()], dtype=np.int64),
        rowids=np.array([r for rows in instances.values() for r in rows], dtype=np.int64),
        length_rowids=np.array(ordered, dtype=np.int64),
        lengths=np.array([len(docs[r]) + len(scopes[r]) for r in ordered], dtype=np.int64),
    )


def _scope_tokens(rowid: int) -> list[str]:
    """Rows in blocks of ``SCOPE_ROWS`` per user; each user's rows split in two sessions."""
    user = (rowid - 1) // SCOPE_ROWS
    return [f"u{user}", f"s{user}-{rowid % 2}"]


def _many_scopes() -> tuple[LexicalIndex, dict[int, list[str]]]:
    """An index of ``SCOPES`` users, added in several batches (several segments), with
    rows removed and some re-added with new words (new slots, dead old ones)."""
    index = LexicalIndex()
    docs: dict[int, list[str]] = {}
    total = SCOPES * SCOPE_ROWS
    for batch, start in enumerate(range(1, total + 1, 700)):
        part = _docs(batch, start, min(700, total + 1 - start))
        index.add(_postings(part, {r: _scope_tokens(r) for r in part}))
        docs.update(part)
    removed = list(range(5, total, 37))
    index.remove(removed)
    changed = {r: ["w1", "w3", "w3", "w150"] for r in removed[::2]}
    index.add(_postings(changed, {r: _scope_tokens(r) for r in changed}))
    docs = {r: words for r, words in docs.items() if r not in removed} | changed
    return index, docs


def _queries(seed: int, count: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [[f"w{int(w)}" for w in rng.integers(1, 160, rng.integers(1, 8))] for _ in range(count)]


def _searched(
    index: LexicalIndex,
    monkeypatch,
    scoped_share: int,
    terms: list[str],
    scope: list[str],
    allowed: np.ndarray | None,
) -> list[tuple[int, float]]:
    with monkeypatch.context() as patch:
        patch.setattr(lexical_index, "SCOPED_SHARE", scoped_share)
        index._forget_scores()
        key = None if allowed is None else "filtered"
        return index.search(terms, scope, 15, allowed, key)


@pytest.mark.parametrize("filtered", [False, True])
def test_a_small_scope_ranks_exactly_as_the_whole_index_masked(monkeypatch, filtered):
    """Scored over the scope's own rows or over every row and masked, each hit has the
    same floating-point score and the hits the same order, across segments, dead rows
    and re-added rows, in a user's scope and in one of its sessions, with filters."""
    index, docs = _many_scopes()
    rng = np.random.default_rng(5)
    compared = 0
    for terms in _queries(seed=6, count=40):
        user = int(rng.integers(0, SCOPES))
        for scope in ([f"u{user}"], [f"u{user}", f"s{user}-1"]):
            allowed = np.array([r for r in docs if r % 3], dtype=np.int64) if filtered else None
            whole = _searched(index, monkeypatch, 10**9, terms, scope, allowed)
            small = _searched(index, monkeypatch, 16, terms, scope, allowed)
            assert small == whole
            assert all((r - 1) // SCOPE_ROWS == user for r, _ in small)
            compared += bool(whole)
    assert compared > 50


def test_a_small_scope_is_scored_over_its_own_rows(monkeypatch):
    """BM25 is computed for the scope's rows only, and no mask over every row is made;
    N and each term's n(t) still count every scope, as FTS5 counts them."""
    index, docs = _many_scopes()
    scored: list[int] = []
    original = LexicalIndex._bm25

    def spy(self, slots, tf, n=None):
        scored.append(slots.size)
        return original(self, slots, tf, n)

    def refuse(self, scope_tokens):
        raise AssertionError("a mask over every row was made")

    monkeypatch.setattr(LexicalIndex, "_bm25", spy)
    monkeypatch.setattr(LexicalIndex, "in_scope", refuse)
    found = index.search(["w1", "w2", "w3"], ["u7"], 10)
    assert found and all((r - 1) // SCOPE_ROWS == 7 for r, _ in found)
    assert scored and max(scored) <= SCOPE_ROWS
    rows = [r for r in docs if (r - 1) // SCOPE_ROWS == 7]
    assert sum(scored) <= 3 * len(rows)


def _dense_rows(users: int, per_user: int, seed: int, first_rowid: int = 1) -> list[tuple]:
    vectors = unit_vectors(users * per_user, seed=seed)
    return [
        (first_rowid + i, f"user{i % users}", None, f"s{i % 3}", vectors[i].tobytes())
        for i in range(users * per_user)
    ]


def _exact(rows: list[tuple], query: np.ndarray, user: str, limit: int) -> list[int]:
    mine = [r for r in rows if r[1] == user]
    scores = [float(np.frombuffer(r[4], dtype=np.float32) @ query) for r in mine]
    return [mine[i][0] for i in np.argsort(-np.array(scores), kind="stable")[:limit]]


class _Untouchable:
    """Stands for the per-row user codes: any read of them fails the test."""

    def __getitem__(self, key):
        raise AssertionError("the users of every row were read")


def test_a_users_rows_are_found_without_a_pass_over_every_row():
    index = DenseIndex(DIM, AnnSettings(threshold=10**9))
    rows = _dense_rows(users=30, per_user=20, seed=1)
    index.append(rows)
    query = unit_vectors(1, seed=2)[0]
    index._users = _Untouchable()  # type: ignore[assignment]
    for user in ("user0", "user17", "user29"):
        found = [rowid for rowid, _ in index.search(query, user_id=user, limit=5)]
        assert found == _exact(rows, query, user, 5)
    assert index.search(query, user_id="nobody", limit=5) == []


@pytest.mark.parametrize("saved_grouping", [True, False])
def test_a_users_rows_survive_a_file_round_trip_appends_and_removals(saved_grouping):
    """Rows attached from a file (with the users' grouping saved, or from a file saved
    before it was, which is grouped when first needed), rows appended since and rows
    left by a removal are each user's, in order."""
    index = DenseIndex(DIM, AnnSettings(threshold=10**9))
    rows = _dense_rows(users=12, per_user=25, seed=3)
    index.append(rows)
    matrix, columns, tables = index.export()
    if not saved_grouping:
        columns = {k: v for k, v in columns.items() if not k.startswith("user_")}
    reopened = DenseIndex(DIM, AnnSettings(threshold=10**9))
    reopened.attach(np.array(matrix), columns, tables)
    late = _dense_rows(users=14, per_user=2, seed=4, first_rowid=1_000)
    reopened.append(late)
    every = rows + late
    query = unit_vectors(1, seed=5)[0]
    for user in ("user0", "user5", "user13"):
        found = [rowid for rowid, _ in reopened.search(query, user_id=user, limit=8)]
        assert found == _exact(every, query, user, 8)
    gone = {row[0] for row in every[::7]}
    reopened.remove(sorted(gone))
    kept = [row for row in every if row[0] not in gone]
    for user in ("user0", "user5", "user13"):
        found = [rowid for rowid, _ in reopened.search(query, user_id=user, limit=8)]
        assert found == _exact(kept, query, user, 8)


@pytest.fixture
def store(tmp_path):
    store = SQLiteStore(tmp_path / "memory.db", dim=DIM, ann=AnnSettings(threshold=10**9))
    yield store
    store.close()


def test_a_small_scope_of_a_store_ranks_as_fts5_does(store):
    """Through the store: a lexical search in one user's scope among many, with and
    without filters, gives FTS5's own bm25() ranking; the dense search, the scope's
    own rows."""
    words = ["harbour", "violin", "pepper", "glacier", "lantern", "orchid", "tram"]
    for user in range(SCOPES):
        scope = Scope(f"user{user}", session_id=f"s{user % 3}")
        episodes = [
            make_episode(
                f"{words[(user + i) % 7]} and {words[(user * i) % 7]} turn {i}",
                scope=scope,
                role="user" if i % 2 else "assistant",
            )
            for i in range(SCOPE_ROWS)
        ]
        store.insert_episodes(episodes, unit_vectors(SCOPE_ROWS, seed=user))
    store.warm_up()
    assert store._lexical.ready
    query = unit_vectors(1, seed=99)[0]
    for user in (0, 13, 39):
        scope = Scope(f"user{user}")
        for filters in (NO_FILTERS, Filters(role="user")):
            for terms in (["harbour"], ["violin", "tram", "turn"], ["orchid", "pepper"]):
                got = store.lexical_search(terms, scope, filters, 10)
                expected = store.fts5_lexical_search(terms, scope, filters, 10)
                assert [c.score for c in got] == pytest.approx([c.score for c in expected])
                assert {c.episode_id for c in got} == {c.episode_id for c in expected}
            ids = {e.id for e in store.list_episodes(scope, limit=1000, offset=0)[0]}
            dense = store.dense_search(query, scope, filters, 10)
            assert len(dense) == 10 and {c.episode_id for c in dense} <= ids


def test_the_users_grouping_is_saved_beside_the_store(tmp_path, monkeypatch):
    """A store reopened from its saved matrix finds each user's rows without sorting
    every row again."""
    monkeypatch.setattr(dense_file, "MIN_ROWS", 100)
    path = tmp_path / "memory.db"
    store = SQLiteStore(path, dim=DIM, ann=AnnSettings(threshold=10**9))
    for user in range(12):
        episodes = [make_episode(f"turn {i}", scope=Scope(f"user{user}")) for i in range(20)]
        store.insert_episodes(episodes, unit_vectors(20, seed=user))
    store.warm_up()
    query = unit_vectors(1, seed=7)[0]
    before = [store.dense_search(query, Scope(f"user{u}"), NO_FILTERS, 5) for u in (0, 11)]
    store.close()
    sorted_rows: list[int] = []
    original = dense_index._Groups.of

    def spy(codes, count):
        sorted_rows.append(codes.size)
        return original(codes, count)

    monkeypatch.setattr(dense_index._Groups, "of", spy)
    reopened = SQLiteStore(path, dim=DIM, ann=AnnSettings(threshold=10**9))
    try:
        after = [reopened.dense_search(query, Scope(f"user{u}"), NO_FILTERS, 5) for u in (0, 11)]
        assert reopened._dense.mapped
        assert after == before
        assert sorted_rows == []
    finally:
        reopened.close()


def _agent_rows(count: int, seed: int, first_rowid: int = 1) -> list[tuple]:
    """Rows of 4 users, each with agents "a", "b" or none, in 3 sessions."""
    vectors = unit_vectors(count, seed=seed)
    agents = ("a", "b", None)
    return [
        (first_rowid + i, f"user{i % 4}", agents[i % 3], f"s{i % 5 % 3}", vectors[i].tobytes())
        for i in range(count)
    ]


def test_a_scopes_positions_follow_removals_and_appends_without_being_taken_again(
    monkeypatch,
):
    """Once a scope's row positions are known, a removal takes its rows out of them and
    an append adds its own, with no pass over every row's codes: the positions equal
    those taken afresh, and the searches rank as an index that never held the removed
    rows."""
    index = DenseIndex(DIM, AnnSettings(threshold=10**9))
    rows = _agent_rows(600, seed=11)
    index.append(rows)
    scopes = [("user1", None, None), ("user2", "a", None), ("user3", None, "s1")]
    scopes += [("user0", "b", "s2"), ("user1", "new-agent", None), ("new-user", None, None)]
    query = unit_vectors(1, seed=12)[0]
    for user, agent, session in scopes:
        index.search(query, user_id=user, agent_id=agent, session_id=session, limit=5)

    def taken_again(*args):
        raise AssertionError("a scope's positions were taken again from every row")

    monkeypatch.setattr(dense_index, "_positions", taken_again)
    gone = {row[0] for row in rows[::9]}
    index.remove(sorted(gone))
    late = _agent_rows(40, seed=13, first_rowid=1_000)
    late += [(1_100, "user1", "new-agent", "s0", late[0][4])]
    late += [(1_101, "new-user", None, "s9", late[1][4])]
    index.append(late)
    gone |= {1_003, 1_017}
    index.remove([1_003, 1_017])
    found = {
        scope: index.search(
            query, user_id=scope[0], agent_id=scope[1], session_id=scope[2], limit=8
        )
        for scope in scopes
    }
    kept_positions = {scope: index._rows_in_scope(*scope).copy() for scope in scopes}
    monkeypatch.undo()
    index._scope_rows.clear()
    fresh = DenseIndex(DIM, AnnSettings(threshold=10**9))
    fresh.append([row for row in rows + late if row[0] not in gone])
    for scope in scopes:
        assert np.array_equal(kept_positions[scope], index._rows_in_scope(*scope)), scope
        expected = fresh.search(
            query, user_id=scope[0], agent_id=scope[1], session_id=scope[2], limit=8
        )
        assert [r for r, _ in found[scope]] == [r for r, _ in expected], scope
        assert [s for _, s in found[scope]] == pytest.approx([s for _, s in expected])
        assert not {r for r, _ in found[scope]} & gone
    assert [r for r, _ in found[("new-user", None, None)]] == [1_101]
