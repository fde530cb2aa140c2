"""The SQLite store's in-memory lexical index ranks exactly as FTS5's bm25() does, and
stays exact through appends, updates and deletes by this process or another one."""

from __future__ import annotations

import numpy as np
import pytest
from store_fixtures import DIM, locomo_word_corpus, make_episode, unit_vectors

from anamnesis.retrieve.query import search_terms
from anamnesis.store.base import Candidate, Filters
from anamnesis.store.index import lexical as lexical_index
from anamnesis.store.index.lexical import SCOPE_KEY, LexicalIndex, Postings
from anamnesis.store.sqlite import SQLiteStore
from anamnesis.store.sqlite import lexical as sqlite_lexical
from anamnesis.store.sqlite.erasure import TOKENIZE
from anamnesis.types import Scope

CONVERSATION = Scope("conv-26", session_id="s1")
OTHER_SESSION = Scope("conv-26", session_id="s2")
OTHER_TENANT = Scope("bob", agent_id="helper")
NO_FILTERS = Filters()


def _corpus() -> tuple[list, list[list[str]]]:
    """The 76 real LoCoMo turns in one scope; 124 sentences recombined from them in two
    others (so that document frequencies, lengths and N span tenants); and the queries
    (``locomo_word_corpus``)."""
    turns, mixed, queries = locomo_word_corpus()
    episodes = [make_episode(t, scope=CONVERSATION) for t in turns]
    episodes += [make_episode(t, scope=OTHER_SESSION) for t in mixed[:40]]
    episodes += [make_episode(t, scope=OTHER_TENANT) for t in mixed[40:]]
    return episodes, queries


@pytest.fixture
def store(tmp_path):
    store = SQLiteStore(tmp_path / "memory.db", dim=DIM)
    yield store
    store.close()


def _fill(store: SQLiteStore) -> list[list[str]]:
    episodes, queries = _corpus()
    store.insert_episodes(episodes, unit_vectors(len(episodes)))
    return queries


def _assert_same_ranking(got: list[Candidate], expected: list[Candidate]) -> None:
    """Same scores in the same order; ids equal up to the order of tied scores."""
    assert [c.score for c in got] == pytest.approx([c.score for c in expected], rel=1e-9)
    by_score: dict[float, set[str]] = {}
    for c in expected:
        by_score.setdefault(round(c.score, 9), set()).add(c.episode_id)
    for c in got:
        assert c.episode_id in by_score[round(c.score, 9)]


def _in_memory_only(store: SQLiteStore, monkeypatch) -> None:
    """Make any fall-back to FTS5 fail the test: the in-memory index must answer."""

    def refuse(*args, **kwargs):
        raise AssertionError("lexical search fell back to FTS5")

    monkeypatch.setattr(store, "fts5_lexical_search", refuse)


def _compare(store: SQLiteStore, queries, scopes, monkeypatch, filters=NO_FILTERS) -> int:
    compared = 0
    for terms in queries:
        for scope in scopes:
            expected = store.fts5_lexical_search(terms, scope, filters, 10)
            with monkeypatch.context() as patch:
                _in_memory_only(store, patch)
                got = store.lexical_search(terms, scope, filters, 10)
            _assert_same_ranking(got, expected)
            compared += bool(expected)
    return compared


def test_ranking_and_scores_equal_fts5_bm25_in_every_scope(store, monkeypatch):
    queries = _fill(store)
    scopes = (CONVERSATION, OTHER_SESSION, OTHER_TENANT, Scope("conv-26"))
    assert _compare(store, queries, scopes, monkeypatch) > 150


def test_ranking_given_episodes_scores_them_as_the_whole_search_does(store, monkeypatch):
    queries = _fill(store)
    scopes = (CONVERSATION, Scope("conv-26"))
    compared = 0
    for n, terms in enumerate(queries):
        for scope in scopes:
            everything = store.fts5_lexical_search(terms, scope, NO_FILTERS, 1000)
            given = [c.episode_id for c in everything[n % 3 :: 3]]
            expected = [c for c in everything if c.episode_id in given][:10]
            with monkeypatch.context() as patch:
                _in_memory_only(store, patch)
                if n % 2:  # the sums of a start of the terms are remembered, and reused
                    store.lexical_search(terms[: (len(terms) + 1) // 2], scope, NO_FILTERS, 10)
                _assert_same_ranking(store.lexical_rank(terms, given, scope, 10), expected)
            # While the in-memory index is not current, FTS5 scores the same episodes.
            with monkeypatch.context() as patch:
                patch.setattr(store._lexical, "rank", lambda *args: None)
                _assert_same_ranking(store.lexical_rank(terms, given, scope, 10), expected)
            compared += bool(expected)
    assert compared > 100


def test_filters_narrow_the_in_memory_ranking_as_they_narrow_fts5(store, monkeypatch):
    queries = _fill(store)
    filters = Filters(event_after=make_episode().event_time.replace(year=2023))
    late = Filters(
        event_before=store.list_episodes(CONVERSATION, limit=1, offset=40)[0][0].event_time
    )
    for f in (filters, late):
        _compare(store, queries[:20], (CONVERSATION,), monkeypatch, f)


def test_results_stay_inside_the_scope(store, monkeypatch):
    _fill(store)
    _in_memory_only(store, monkeypatch)
    words = ["caroline", "support", "group", "painting", "melanie"]
    tenant = {c.episode_id for c in store.lexical_search(words, OTHER_TENANT, Filters(), 200)}
    session = {c.episode_id for c in store.lexical_search(words, CONVERSATION, Filters(), 200)}
    assert tenant and session and not tenant & session
    assert all(e.user_id == "bob" for e in store.get_episodes(list(tenant), OTHER_TENANT))
    assert store.lexical_search(words, Scope("nobody"), Filters(), 10) == []
    assert store.lexical_search(words, Scope("bob", agent_id="other"), Filters(), 10) == []


def test_appends_are_indexed_incrementally(store, monkeypatch):
    queries = _fill(store)
    store.lexical_search(["caroline"], CONVERSATION, Filters(), 10)
    index = store._lexical._index
    new = [make_episode("Caroline adopted a zebra named Quasar", scope=CONVERSATION)]
    store.insert_episodes(new, unit_vectors(1, seed=3))
    _in_memory_only(store, monkeypatch)
    (hit,) = store.lexical_search(["quasar"], CONVERSATION, Filters(), 10)
    assert hit.episode_id == new[0].id
    assert store._lexical._index is index  # appended to, not rebuilt
    monkeypatch.undo()
    _compare(store, queries[:20], (CONVERSATION, OTHER_TENANT), monkeypatch)


def test_a_catch_up_reads_the_appended_rows_by_rowid_not_every_episode(store):
    _fill(store)
    store.lexical_search(["caroline"], CONVERSATION, Filters(), 10)
    store.insert_episodes(
        [make_episode("a zebra named Quasar", scope=CONVERSATION)], unit_vectors(1)
    )
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        store.lexical_search(["quasar"], CONVERSATION, Filters(), 10)
    finally:
        store._conn.set_trace_callback(None)
    (catch_up,) = [s for s in statements if s.startswith("INSERT INTO temp.anamnesis_pending")]
    select = catch_up[catch_up.index("SELECT") :]
    plan = " ".join(row[3] for row in store._conn.execute(f"EXPLAIN QUERY PLAN {select}"))
    assert "SCAN" not in plan, plan


def test_this_process_deletes_and_updates_apply_in_place(store, monkeypatch):
    queries = _fill(store)
    store.lexical_search(["caroline"], CONVERSATION, Filters(), 10)
    index = store._lexical._index
    victim, changed = store.lexical_search(["caroline"], CONVERSATION, Filters(), 2)
    store.delete_episode(victim.episode_id, CONVERSATION)
    store.update_episode(
        changed.episode_id,
        CONVERSATION,
        content="A note about a heron",
        content_hash="h-heron",
        metadata={},
        vector=None,
        changed_at=make_episode().event_time,
    )
    store.delete_scope(OTHER_SESSION)
    with monkeypatch.context() as patch:
        _in_memory_only(store, patch)
        found = {
            c.episode_id for c in store.lexical_search(["caroline"], CONVERSATION, Filters(), 200)
        }
        assert victim.episode_id not in found and changed.episode_id not in found
        (heron,) = store.lexical_search(["heron"], CONVERSATION, Filters(), 10)
        assert heron.episode_id == changed.episode_id
    assert store._lexical._index is index
    _compare(store, queries, (CONVERSATION, OTHER_SESSION, OTHER_TENANT), monkeypatch)


def test_another_process_writes_are_seen(store, tmp_path, monkeypatch):
    queries = _fill(store)
    store.lexical_search(["caroline"], CONVERSATION, Filters(), 10)
    other = SQLiteStore(tmp_path / "memory.db", dim=DIM)
    try:
        added = make_episode("Caroline keeps a pet axolotl", scope=CONVERSATION)
        other.insert_episodes([added], unit_vectors(1, seed=5))
        (hit,) = store.lexical_search(["axolotl"], CONVERSATION, Filters(), 10)
        assert hit.episode_id == added.id
        ranked = store.lexical_search(["caroline"], CONVERSATION, Filters(), 5)
        gone = next(c.episode_id for c in ranked if c.episode_id != added.id)
        other.delete_episode(gone, CONVERSATION)
        other.update_episode(
            added.id,
            CONVERSATION,
            content="Caroline keeps a pet iguana",
            content_hash="h-iguana",
            metadata={},
            vector=None,
            changed_at=added.event_time,
        )
    finally:
        other.close()
    assert store.lexical_search(["axolotl"], CONVERSATION, Filters(), 10) == []
    assert [c.episode_id for c in store.lexical_search(["iguana"], CONVERSATION, Filters(), 5)] == [
        added.id
    ]
    found = {c.episode_id for c in store.lexical_search(["caroline"], CONVERSATION, Filters(), 200)}
    assert gone not in found
    _compare(store, queries[:30], (CONVERSATION, OTHER_TENANT), monkeypatch)


def test_a_large_build_runs_in_the_background_while_fts5_answers(store, monkeypatch):
    queries = _fill(store)
    monkeypatch.setattr(sqlite_lexical, "SYNC_ROWS", 0)
    expected = store.fts5_lexical_search(queries[0], CONVERSATION, Filters(), 10)
    first = store.lexical_search(queries[0], CONVERSATION, Filters(), 10)
    _assert_same_ranking(first, expected)
    worker = store._lexical._worker
    assert worker is not None
    worker.join(timeout=30)
    assert store._lexical.ready
    _compare(store, queries[:10], (CONVERSATION,), monkeypatch)


def test_warm_up_builds_the_index(store, monkeypatch):
    queries = _fill(store)
    store.warm_up()
    assert store._lexical.ready
    _compare(store, queries[:5], (CONVERSATION,), monkeypatch)


def test_terms_fts5_reads_as_phrases_fall_back_to_fts5(store):
    _fill(store)
    store.insert_episodes(
        [make_episode("state-of-the-art art of the state", scope=CONVERSATION)],
        unit_vectors(1, seed=9),
    )
    for terms in (["state-of-the-art"], ["art", "state-of-the-art"]):
        expected = store.fts5_lexical_search(terms, CONVERSATION, Filters(), 10)
        _assert_same_ranking(store.lexical_search(terms, CONVERSATION, Filters(), 10), expected)


def test_words_are_split_and_stemmed_as_fts5_splits_each_alone(store, monkeypatch):
    """The index tokenises many words in one statement; each comes out as FTS5 splits
    it when indexed on its own: stemmed, split at punctuation, or into nothing."""
    _fill(store)
    monkeypatch.setattr(sqlite_lexical, "_TERMS_PER_STATEMENT", 7)  # several statements
    words = ["running", "x-ray", "can't", "--", "Café", "happily", "running", "state-of-the-art"]
    words += [f"w{n}ords" for n in range(20)]
    conn = store._conn
    assert store._lexical._prepare(conn)
    conn.execute(f"CREATE VIRTUAL TABLE temp.alone USING fts5(t, tokenize='{TOKENIZE}')")
    conn.execute("CREATE VIRTUAL TABLE temp.alone_v USING fts5vocab(temp, alone, instance)")
    expected = []
    for word in words:
        conn.execute("INSERT INTO temp.alone (rowid, t) VALUES (1, ?)", (word,))
        expected.append(
            tuple(t for (t,) in conn.execute("SELECT term FROM temp.alone_v ORDER BY offset"))
        )
        conn.execute("DELETE FROM temp.alone")
    got = store._lexical._tokens(conn, words)
    assert got == expected
    assert got[1] == ("x", "rai") and got[3] == () and got[0] == got[6] == ("run",)
    assert got[4] == ("cafe",)


def test_closing_the_store_stops_a_background_build_quietly(store, monkeypatch):
    queries = _fill(store)
    errors = []
    monkeypatch.setattr("threading.excepthook", errors.append)
    monkeypatch.setattr(sqlite_lexical, "SYNC_ROWS", 0)
    store.lexical_search(queries[0], CONVERSATION, Filters(), 10)
    worker = store._lexical._worker
    store.close()
    worker.join(timeout=30)
    assert errors == [] and not store._lexical.ready


def test_filters_see_another_process_appends_and_deletes(store, tmp_path):
    """Filtered searches read the dense index's filter columns: they follow what another
    process appends (new columns) and deletes (a rebuild)."""
    first = make_episode("Caroline paints", scope=CONVERSATION, role="assistant")
    store.insert_episodes([first], unit_vectors(1, seed=1))
    user = Filters(role="user")
    assert store.dense_search(unit_vectors(1, seed=1)[0], CONVERSATION, user, 5) == []
    other = SQLiteStore(tmp_path / "memory.db", dim=DIM)
    try:
        added = make_episode("Caroline swims", scope=CONVERSATION, role="user")
        other.insert_episodes([added], unit_vectors(1, seed=2))
        hits = store.dense_search(unit_vectors(1, seed=1)[0], CONVERSATION, user, 5)
        assert [c.episode_id for c in hits] == [added.id]
        other.delete_episode(added.id, CONVERSATION)
    finally:
        other.close()
    assert store.dense_search(unit_vectors(1, seed=1)[0], CONVERSATION, user, 5) == []
    assert [
        c.episode_id
        for c in store.lexical_search(["caroline"], CONVERSATION, Filters(not_role="user"), 5)
    ] == [first.id]


def _index_of(docs: dict[int, list[str]], scope: str = "s") -> LexicalIndex:
    """A LexicalIndex over ``docs`` (rowid -> tokens), every row in scope ``scope``."""
    index = LexicalIndex()
    index.add(_postings(docs, scope))
    return index


def _postings(docs: dict[int, list[str]], scope: str = "s") -> Postings:
    keys, counts, rowids = [], [], []
    instances: dict[str, list[int]] = {}
    for rowid, tokens in sorted(docs.items()):
        for token in [*tokens, SCOPE_KEY + scope]:
            instances.setdefault(token, []).append(rowid)
    for key, rows in instances.items():
        keys.append(key)
        counts.append(len(rows))
        rowids += rows
    ordered = sorted(docs)
    return Postings(
        keys=keys,
        counts=np.array(counts, dtype=np.int64),
        rowids=np.array(rowids, dtype=np.int64),
        length_rowids=np.array(ordered, dtype=np.int64),
        lengths=np.array([len(docs[r]) + 1 for r in ordered], dtype=np.int64),
    )


def _zipf_docs(count: int, seed: int, first_rowid: int = 1) -> dict[int, list[str]]:
    """Documents of words drawn from a Zipf distribution over 300 words: a few words in
    most documents, most words in few, as in text."""
    rng = np.random.default_rng(seed)
    return {
        first_rowid + i: [f"w{min(int(w), 300)}" for w in rng.zipf(1.3, rng.integers(3, 40))]
        for i in range(count)
    }


def _term_sets(seed: int, count: int) -> list[list[str]]:
    """Query token sequences, each followed by the same with feedback tokens appended,
    as ``prf`` asks after ``lexical``; some tokens repeat (a feedback term with the stem
    of a question term)."""
    rng = np.random.default_rng(seed)
    sets: list[list[str]] = []
    for _ in range(count):
        question = [f"w{int(w)}" for w in rng.integers(1, 120, rng.integers(1, 6))]
        extra = [f"w{int(w)}" for w in rng.integers(1, 300, rng.integers(1, 9))]
        sets += [question, [*question, *extra]]
    return sets


@pytest.mark.parametrize("sparse_share", [1, 64, 10**9])
def test_remembered_scores_rank_exactly_as_scores_from_scratch(monkeypatch, sparse_share):
    """A token sequence scored from a remembered one (the question's tokens, then the
    same with feedback tokens) gives the same floating-point scores and order as a
    fresh index, whether the matched rows alone or every row are scored."""
    docs = _zipf_docs(3000, seed=11)
    warm = _index_of(docs)
    compared = 0
    for terms in _term_sets(seed=12, count=60):
        with monkeypatch.context() as patch:
            patch.setattr(lexical_index, "SPARSE_SHARE", 10**9)
            fresh = _index_of(docs).search(terms, ["s"], 50)
        monkeypatch.setattr(lexical_index, "SPARSE_SHARE", sparse_share)
        assert warm.search(terms, ["s"], 50) == fresh
        assert warm.search(terms, ["s"], 50) == fresh  # answered from memory
        compared += bool(fresh)
    assert compared > 100


def test_a_repeated_token_counts_once_per_time_it_is_given():
    docs = _zipf_docs(300, seed=13)
    index = _index_of(docs)
    once = dict(index.search(["w1", "w2"], ["s"], 1000))
    twice = dict(index.search(["w1", "w2", "w1"], ["s"], 1000))
    only = dict(index.search(["w1"], ["s"], 1000))
    assert set(once) == set(twice)
    for rowid, score in twice.items():
        assert score == pytest.approx(once[rowid] + only.get(rowid, 0.0), rel=1e-12)


def test_remembered_scores_follow_appends_and_removals():
    docs = _zipf_docs(500, seed=21)
    index = _index_of(docs)
    terms = ["w1", "w7"]
    before = index.search(terms, ["s"], 1000)
    newcomers = {10_001: ["w7", "w7", "w7", "w1"], 10_002: ["w7"]}
    index.add(_postings(newcomers))
    after = index.search(terms, ["s"], 1000)
    assert {r for r, _ in after} == {r for r, _ in before} | set(newcomers)
    assert after == _index_of({**docs, **newcomers}).search(terms, ["s"], 1000)
    index.remove([10_001, before[0][0]])
    kept = index.search(terms, ["s"], 1000)
    assert {r for r, _ in kept} == {r for r, _ in after} - {10_001, before[0][0]}


def test_allowed_rows_are_remembered_under_their_key_until_the_rows_change():
    docs = _zipf_docs(400, seed=31)
    index = _index_of(docs)
    terms = ["w1", "w2"]
    even = np.array([r for r in docs if r % 2 == 0], dtype=np.int64)
    asked: list[str] = []

    def rows(name: str, rowids: np.ndarray):
        def give() -> np.ndarray:
            asked.append(name)
            return rowids

        return give

    unfiltered = index.search(terms, ["s"], 1000)
    expected = [(r, s) for r, s in unfiltered if r % 2 == 0][:20]
    assert index.search(terms, ["s"], 20, rows("even", even), "even") == expected
    assert index.search(terms, ["s"], 20, rows("even", even), "even") == expected
    assert asked == ["even"]  # the second search matched the rows it remembered
    odd = np.array([r for r in docs if r % 2], dtype=np.int64)
    assert all(r % 2 for r, _ in index.search(terms, ["s"], 20, rows("odd", odd), "odd"))
    index.add(_postings({1_000: ["w1", "w2"]}))
    with_new = np.append(even, 1_000)
    found = index.search(terms, ["s"], 1000, rows("even", with_new), "even")
    assert 1_000 in {r for r, _ in found}
    assert asked == ["even", "odd", "even"]  # asked again once the rows changed
    everything = index.search(terms, ["s"], 20)
    assert index.search(terms, ["s"], 20, rows("none", None), "none") == everything


def test_filtered_searches_follow_this_process_appends_and_deletes(store, monkeypatch):
    """The rows a filter lets through are remembered between searches, and forgotten
    when rows are added or deleted."""
    _fill(store)
    _in_memory_only(store, monkeypatch)
    users = Filters(role="user")
    first = make_episode("Caroline collects blue marbles", scope=CONVERSATION, role="user")
    store.insert_episodes([first], unit_vectors(1, seed=41))
    assert [c.episode_id for c in store.lexical_search(["marbles"], CONVERSATION, users, 5)] == [
        first.id
    ]
    second = make_episode("Marbles again", scope=CONVERSATION, role="user")
    helper = make_episode("Marbles from the helper", scope=CONVERSATION, role="assistant")
    store.insert_episodes([second, helper], unit_vectors(2, seed=42))
    found = {c.episode_id for c in store.lexical_search(["marbles"], CONVERSATION, users, 5)}
    assert found == {first.id, second.id}
    store.delete_episode(first.id, CONVERSATION)
    found = {c.episode_id for c in store.lexical_search(["marbles"], CONVERSATION, users, 5)}
    assert found == {second.id}


def test_feedback_searches_after_the_question_equal_fts5_bm25(store, monkeypatch):
    """As ``prf`` asks: the question's terms, then the same with terms of its best hits
    appended (some the question's own words in another form), answered from the
    remembered question scores, rank as FTS5 ranks them."""
    queries = _fill(store)
    compared = 0
    for terms in queries[:60]:
        hits = store.fts5_lexical_search(terms, CONVERSATION, NO_FILTERS, 3)
        texts = [e.content for e in store.get_episodes([c.episode_id for c in hits], CONVERSATION)]
        extra = [t for text in texts for t in search_terms(text)][:8]
        extra += [t + "s" for t in terms[:2]]  # stems the question's own terms yield
        for query in (terms, [*terms, *extra]):
            expected = store.fts5_lexical_search(query, CONVERSATION, NO_FILTERS, 10)
            with monkeypatch.context() as patch:
                _in_memory_only(store, patch)
                _assert_same_ranking(
                    store.lexical_search(query, CONVERSATION, NO_FILTERS, 10), expected
                )
            compared += bool(expected)
    assert compared > 80


def test_remembered_rows_stay_inside_each_scope_and_follow_deletes(store, tmp_path):
    """The rows a search maps to episodes are remembered between searches; each search
    still keeps only those of its own scope, and a delete by another process is seen."""
    mine = [make_episode(f"Caroline paints {n}", scope=CONVERSATION) for n in range(3)]
    theirs = [make_episode(f"Caroline paints {n}", scope=OTHER_TENANT) for n in range(3)]
    session_two = [make_episode("Caroline paints again", scope=OTHER_SESSION)]
    store.insert_episodes([*mine, *theirs, *session_two], unit_vectors(7, seed=51))
    whole = Scope("conv-26")

    def found(scope: Scope) -> set[str]:
        return {c.episode_id for c in store.lexical_search(["caroline"], scope, NO_FILTERS, 20)}

    for _ in range(2):  # the second round reads the remembered rows
        assert found(CONVERSATION) == {e.id for e in mine}
        assert found(OTHER_TENANT) == {e.id for e in theirs}
        assert found(whole) == {e.id for e in [*mine, *session_two]}
        assert found(Scope("bob", agent_id="someone else")) == set()
    other = SQLiteStore(tmp_path / "memory.db", dim=DIM)
    try:
        other.delete_episode(mine[0].id, CONVERSATION)
    finally:
        other.close()
    assert found(CONVERSATION) == {e.id for e in mine[1:]}
    pairs = [(rowid, 1.0) for rowid in range(1, 8)]
    assert mine[0].id not in {c.episode_id for c in store._candidates(pairs, CONVERSATION)}
    store.delete_episode(mine[1].id, CONVERSATION)
    # Forgotten here: nothing of the row stays in this process's memory of rows.
    assert store._row_places is None
    assert found(CONVERSATION) == {mine[2].id}


def _mixed_scopes(count: int, seed: int, first_rowid: int = 1) -> LexicalIndex:
    """An index of ``_zipf_docs`` whose rows fall in scopes "a", "b" and "a b" in turn."""
    index = LexicalIndex()
    docs = _zipf_docs(count, seed=seed, first_rowid=first_rowid)
    for n, scope in enumerate(("a", "b", "a b")):
        part = {r: t for i, (r, t) in enumerate(sorted(docs.items())) if i % 3 == n}
        index.add(_scoped_postings(part, scope.split()))
    return index


def _scoped_postings(docs: dict[int, list[str]], scope: list[str]) -> Postings:
    """``_postings`` with every row holding each of ``scope``'s tokens."""
    tagged = {
        rowid: [*tokens, *(SCOPE_KEY + s for s in scope[1:])] for rowid, tokens in docs.items()
    }
    return _postings(tagged, scope[0])


def test_a_scope_mask_follows_removals_and_appends_as_one_taken_afresh(monkeypatch):
    """A scope's mask over the rows is kept through removals (their rows cleared) and
    appends (extended by the new rows), not taken again from the scope's postings: it
    equals the mask a fresh look at the postings gives."""
    index = LexicalIndex()
    docs = _zipf_docs(600, seed=31)
    rows = sorted(docs)
    index.add(_scoped_postings({r: docs[r] for r in rows[:300]}, ["a"]))
    index.add(_scoped_postings({r: docs[r] for r in rows[300:]}, ["a", "b"]))
    scopes = [("a",), ("b",), ("a", "b")]
    for scope in scopes:
        index.in_scope(scope)
    fresh_postings = index._postings

    def no_scope_postings(key: str):
        assert not key.startswith(SCOPE_KEY), "a scope mask was taken again"
        return fresh_postings(key)

    monkeypatch.setattr(index, "_postings", no_scope_postings)
    index.remove([rows[3], rows[350], rows[599]])
    index.add(_scoped_postings({5000: ["w1"], 5001: ["w2", "w3"]}, ["b"]))
    index.add(_scoped_postings({5002: ["w1", "w1"]}, ["a", "b"]))
    index.remove([5001, rows[10]])
    kept = {scope: index.in_scope(scope).copy() for scope in scopes}
    monkeypatch.undo()
    index._scope_masks.clear()
    for scope in scopes:
        assert np.array_equal(kept[scope], index.in_scope(scope)), scope


def test_searches_after_removals_rank_as_an_index_that_never_held_the_rows():
    """Scores and order after removals (and appends between them) are those of an index
    built from the rows that remain, bit for bit, in every scope; a removed row is
    never returned."""
    index = _mixed_scopes(1500, seed=41)
    terms_sets = _term_sets(seed=42, count=20)
    for terms in terms_sets:  # remembered scores and masks, then made stale
        index.search(terms, ["a"], 50)
    removed = [2, 3, 500, 1001, 1499]
    index.remove(removed)
    index.add(_scoped_postings({3000: ["w1", "w5"], 3001: ["w2"]}, ["a"]))
    index.remove([3001])
    docs = _zipf_docs(1500, seed=41)
    fresh = LexicalIndex()
    for n, scope in enumerate(("a", "b", "a b")):
        part = {
            r: t for i, (r, t) in enumerate(sorted(docs.items())) if i % 3 == n and r not in removed
        }
        fresh.add(_scoped_postings(part, scope.split()))
    fresh.add(_scoped_postings({3000: ["w1", "w5"]}, ["a"]))
    compared = 0
    for terms in terms_sets:
        for scope in (["a"], ["b"], ["a", "b"]):
            got = index.search(terms, scope, 50)
            assert got == fresh.search(terms, scope, 50)
            assert not {r for r, _ in got} & {*removed, 3001}
            compared += bool(got)
    assert compared > 60
