"""The Store contract: the same tests against every backend (SQLite and PostgreSQL).

Pure store tests use random unit vectors; nothing here loads an embedding model.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    DEFAULT_SCOPE,
    DIM,
    T0,
    backend_fixture,
    make_episode,
    open_store_fixture,
    postgres_schema_url_fixture,
    store_fixture,
    store_url_fixture,
    unit_vectors,
)

from anamnesis.errors import InvalidInputError, NotFoundError
from anamnesis.store.base import FactQuery, Filters, Selection
from anamnesis.types import DeleteCounts, EpisodeVersion, GateDecision, Scope, Session

ALICE = Scope("alice")
BOB = Scope("bob")


def add(store, episodes, seed=0, vectors=None, **kwargs):
    """Insert episodes with random vectors (or the given ones); returns the vectors."""
    vectors = unit_vectors(len(episodes), seed=seed) if vectors is None else vectors
    store.insert_episodes(episodes, vectors, **kwargs)
    return vectors


def ids(candidates):
    return [c.episode_id for c in candidates]


# -- meta and lifecycle ---------------------------------------------------------------------------
def test_meta_round_trips_and_overwrites(store):
    assert store.get_meta("missing") is None
    store.set_meta("embedder_name", "minilm")
    store.set_meta("embedder_name", "edge")
    assert store.get_meta("embedder_name") == "edge"


def test_each_backend_says_how_forget_erases(store, backend):
    """``Memory.capabilities["erasure"]``: in place on SQLite (FTS5 secure-delete, with
    the SQLite the store depends on); what stays on disk on PostgreSQL."""
    expected = "fts5 secure-delete" if backend == "sqlite" else "rows deleted"
    assert store.erasure.startswith(expected)


def test_reopening_keeps_data_and_close_is_idempotent(open_store):
    first = open_store()
    add(first, [make_episode("kept across reopen", id="ep_keep")])
    first.set_meta("k", "v")
    first.close()
    first.close()
    second = open_store()
    assert second.get_meta("k") == "v"
    assert [e.id for e in second.get_episodes(["ep_keep"], ALICE)] == ["ep_keep"]


# -- insert and get -------------------------------------------------------------------------------
def test_a_scopes_stats_say_nothing_of_the_whole_store(store):
    add(store, [make_episode("mine", id="ep_a"), make_episode("theirs", id="ep_b", scope=BOB)])
    whole = store.stats(None)
    alice = store.stats(ALICE)
    assert (whole["episodes"], alice["episodes"]) == (2, 1)
    where = {"path", "file_bytes"} if store.backend == "sqlite" else {"url", "table_bytes"}
    assert where <= whole.keys()
    assert not where & alice.keys()


def test_a_read_naming_a_nul_character_is_bad_input_or_finds_nothing(store):
    add(store, [make_episode("plain text", id="ep_a")])
    reads = [
        lambda: store.find_facts(ALICE, FactQuery(predicate="lives\x00in")),
        lambda: store.find_facts(ALICE, FactQuery(subjects=("us\x00er",))),
        lambda: store.list_episodes(ALICE, limit=10, offset=0, filters=Filters(speaker="a\x00b"))[
            0
        ],
    ]
    for read in reads:
        try:
            assert read() == []
        except InvalidInputError as refused:  # PostgreSQL cannot hold the character
            assert "NUL" in str(refused)


def test_insert_then_get_returns_every_field(store):
    episode = make_episode(
        "Ana moved to Lisbon in May — café ☕",
        scope=Scope("alice", "agent-1", "s1"),
        role="assistant",
        speaker="Ana",
        modality="image",
        metadata={"source": "chat", "n": 3, "nested": {"a": [1, 2.5, None, True]}},
        turn_index=7,
    )
    add(store, [episode])
    [got] = store.get_episodes([episode.id], Scope("alice"))
    assert got == episode


def test_get_keeps_requested_order_and_skips_other_scopes(store):
    mine = [make_episode(f"mine {i}") for i in range(3)]
    theirs = make_episode("theirs", scope=BOB)
    add(store, [*mine, theirs])
    wanted = [mine[2].id, theirs.id, mine[0].id, "ep_missing"]
    assert [e.id for e in store.get_episodes(wanted, ALICE)] == [mine[2].id, mine[0].id]
    assert store.get_episodes([], ALICE) == []


def test_insert_requires_one_vector_per_episode(store):
    with pytest.raises(ValueError):
        store.insert_episodes([make_episode()], unit_vectors(2))


def _decision(episode_id: str, admitted: bool) -> GateDecision:
    return GateDecision(
        episode_id=episode_id,
        admitted=admitted,
        novelty=0.5,
        salience=0.5,
        prediction_error=0.5,
        score=0.5,
        threshold=0.4,
        category="other",
        reason="test",
        gate="custom",
        decided_at=T0,
    )


def test_a_gated_insert_sends_the_admitted_hot_and_the_rejected_to_the_archive(store):
    kept, dropped = make_episode("kept", id="kept"), make_episode("dropped", id="dropped")
    decisions = [_decision("kept", True), _decision("dropped", False)]
    store.insert_gated([kept, dropped], unit_vectors(2), decisions)
    assert [e.id for e in store.get_episodes(["kept", "dropped"], DEFAULT_SCOPE)] == ["kept"]
    assert [e.id for e, _ in store.iter_archived(DEFAULT_SCOPE, Filters())] == ["dropped"]
    found = store.gate_decisions(["kept", "dropped"], DEFAULT_SCOPE)
    assert {i: d.admitted for i, d in found.items()} == {"kept": True, "dropped": False}
    assert store.gate_decisions(["kept", "dropped"], Scope(user_id="someone-else")) == {}


def test_a_gated_insert_requires_one_vector_and_one_decision_per_episode(store):
    episodes = [make_episode("a", id="a"), make_episode("b", id="b")]
    decisions = [_decision("a", True), _decision("b", True)]
    with pytest.raises(ValueError):
        store.insert_gated(episodes, unit_vectors(1), decisions)
    with pytest.raises(ValueError):
        store.insert_gated(episodes, unit_vectors(2), decisions[:1])
    assert store.get_episodes(["a", "b"], DEFAULT_SCOPE) == []


def test_insert_is_all_or_nothing_on_a_duplicate_id_in_the_batch(store):
    first = make_episode("first", scope=Scope("alice", None, "s1"), turn_index=0)
    dup = make_episode("second", id=first.id)
    session = Session("s1", "alice", None, T0)
    version = EpisodeVersion(first.id, 1, "older", {}, T0)
    with pytest.raises(InvalidInputError):
        add(store, [first, dup], sessions=[session], versions=[version])
    assert store.existing_ids([first.id]) == set()
    assert list(store.iter_episodes()) == []
    assert list(store.iter_sessions()) == []
    assert store.stats(None)["versions"] == 0
    assert store.lexical_search(["first"], ALICE, Filters(), 10) == []


def test_insert_is_all_or_nothing_when_an_id_is_already_stored(store):
    stored = make_episode("stored")
    add(store, [stored])
    fresh = make_episode("fresh words")
    with pytest.raises(InvalidInputError):
        add(store, [fresh, make_episode("clash", id=stored.id)])
    assert store.existing_ids([fresh.id, stored.id]) == {stored.id}
    assert store.lexical_search(["fresh"], ALICE, Filters(), 10) == []


def test_insert_with_sessions_and_versions(store):
    scope = Scope("alice", "agent", "s1")
    episode = make_episode("now", scope=scope, turn_index=0)
    version = EpisodeVersion(episode.id, 1, "before", {"v": 1}, T0)
    add(
        store,
        [episode],
        sessions=[Session("s1", "alice", "agent", T0, {"topic": "x"})],
        versions=[version],
    )
    assert list(store.iter_sessions()) == [Session("s1", "alice", "agent", T0, {"topic": "x"})]
    assert store.episode_versions(episode.id, ALICE) == [version]


def test_upsert_sessions_fills_unknown_start_and_keeps_known_one(store):
    later = T0 + timedelta(days=1)
    store.upsert_sessions([Session("s1", "alice", None, None), Session("s2", "alice", None, T0)])
    store.upsert_sessions(
        [Session("s1", "alice", None, later), Session("s2", "alice", None, later)]
    )
    started = {s.id: s.started_at for s in store.iter_sessions()}
    assert started == {"s1": later, "s2": T0}


# -- simple lookups -------------------------------------------------------------------------------
def test_existing_ids_sees_every_scope(store):
    a, b = make_episode("a"), make_episode("b", scope=BOB)
    add(store, [a, b])
    assert store.existing_ids([a.id, b.id, "nope"]) == {a.id, b.id}
    assert store.existing_ids([]) == set()


def test_next_turn_index_counts_per_user_and_session(store):
    assert store.next_turn_index("alice", "s1") == 0
    add(
        store,
        [make_episode(f"t{i}", scope=Scope("alice", None, "s1"), turn_index=i) for i in range(3)],
    )
    add(store, [make_episode("bob", scope=Scope("bob", None, "s1"), turn_index=9)], seed=1)
    assert store.next_turn_index("alice", "s1") == 3
    assert store.next_turn_index("bob", "s1") == 10
    assert store.next_turn_index("alice", "s2") == 0


def test_vectors_for_hashes_returns_stored_vectors(store):
    episodes = [make_episode("x", content_hash="h1"), make_episode("y", content_hash="h2")]
    vectors = add(store, episodes)
    found = store.vectors_for_hashes(["h1", "h2", "h1", "missing"], DEFAULT_SCOPE)
    assert set(found) == {"h1", "h2"}
    np.testing.assert_array_equal(found["h1"], vectors[0])
    assert found["h2"].dtype == np.float32
    assert store.vectors_for_hashes([], DEFAULT_SCOPE) == {}
    assert store.vectors_for_hashes(["h1"], Scope("bob")) == {}


def test_episode_vectors_are_each_episodes_own_and_stay_in_scope(store):
    same_text = [make_episode("x", content_hash="h1"), make_episode("y", content_hash="h1")]
    bobs = make_episode("z", scope=Scope("bob"))
    vectors = add(store, [*same_text, bobs])
    found = store.episode_vectors([e.id for e in [*same_text, bobs]] + ["missing"], ALICE)
    assert set(found) == {same_text[0].id, same_text[1].id}
    for episode, vector in zip(same_text, vectors, strict=False):
        np.testing.assert_array_equal(found[episode.id], vector)
        assert found[episode.id].dtype == np.float32
    assert store.episode_vectors([], ALICE) == {}
    assert store.episode_vectors([bobs.id], Scope("bob")).keys() == {bobs.id}


def test_dense_search_sessions_answers_as_dense_search_in_each_session(store):
    episodes = [
        make_episode(f"{session} turn {i}", scope=Scope("alice", None, session), turn_index=i)
        for session in ("s1", "s2", "s3")
        for i in range(4)
    ]
    bobs = [make_episode("bob turn", scope=Scope("bob", None, "s1"), turn_index=0)]
    vectors = add(store, [*episodes, *bobs])
    query = vectors[5]
    for filters in (Filters(), Filters(event_before=episodes[2].event_time)):
        found = store.dense_search_sessions(query, ALICE, ["s2", "s1", "s2"], filters, 3)
        assert set(found) == {"s1", "s2"}
        for session in ("s1", "s2"):
            alone = store.dense_search(query, Scope("alice", None, session), filters, 3)
            assert ids(found[session]) == ids(alone)
            assert [c.score for c in found[session]] == pytest.approx([c.score for c in alone])
    assert ids(store.dense_search_sessions(query, BOB, ["s1"], Filters(), 5)["s1"]) == [bobs[0].id]
    # A search narrowed to one session finds nothing in another.
    narrowed = store.dense_search_sessions(query, Scope("alice", None, "s1"), ["s2"], Filters(), 5)
    assert narrowed == {"s2": []}


# -- listing --------------------------------------------------------------------------------------
def test_list_episodes_pages_in_event_time_order(store):
    episodes = [make_episode(f"e{i}", event_time=T0 + timedelta(hours=10 - i)) for i in range(7)]
    add(store, episodes)
    expected = [e.id for e in reversed(episodes)]
    page, total = store.list_episodes(ALICE, limit=3, offset=0)
    assert total == 7 and [e.id for e in page] == expected[:3]
    page, total = store.list_episodes(ALICE, limit=3, offset=6)
    assert [e.id for e in page] == expected[6:]
    assert store.list_episodes(BOB, limit=10, offset=0) == ([], 0)


def test_scope_pages_read_every_episode_of_the_scope_once_in_storage_order(store):
    episodes = [make_episode(f"e{i}", scope=ALICE if i % 3 else BOB) for i in range(11)]
    add(store, episodes)
    pages = list(store.scope_pages(ALICE, 3))
    assert [len(page) for page in pages] == [3, 3, 1]
    assert [e.id for page in pages for e in page] == [
        e.id for e in episodes if e.user_id == "alice"
    ]
    assert [e.id for page in store.scope_pages(BOB, 100) for e in page] == [
        e.id for e in episodes if e.user_id == "bob"
    ]
    assert list(store.scope_pages(Scope("nobody"), 3)) == []


@pytest.mark.parametrize(
    "filters, expected",
    [
        (Filters(role="assistant"), {"b"}),
        (Filters(speaker="Ana"), {"c"}),
        (Filters(modality="image"), {"d"}),
        (Filters(event_after=T0 + timedelta(hours=2)), {"c", "d"}),
        (Filters(event_before=T0 + timedelta(hours=2)), {"a", "b"}),
        (Filters(recorded_before=T0 + timedelta(hours=1, minutes=30)), {"a", "b"}),
        (Filters(metadata={"topic": "work"}), {"a", "c"}),
        (Filters(metadata={"topic": "work", "n": 1}), {"a"}),
        (Filters(role="user", metadata={"topic": "work"}), {"a", "c"}),
        (Filters(role="user", event_before=T0 + timedelta(hours=3)), {"a", "c"}),
        (Filters(role="system"), set()),
        (Filters(not_role="user"), {"b"}),
        (Filters(not_role="assistant", speaker="Ana"), {"c"}),
    ],
)
def test_filters_apply_to_every_channel(store, filters, expected):
    specs = {
        "a": dict(role="user", metadata={"topic": "work", "n": 1}),
        "b": dict(role="assistant", metadata={"topic": "home"}),
        "c": dict(role="user", speaker="Ana", metadata={"topic": "work", "n": 2}),
        "d": dict(role="user", modality="image"),
    }
    episodes = {
        name: make_episode(
            f"shared word {name}", id=f"ep_{name}", event_time=T0 + timedelta(hours=i), **spec
        )
        for i, (name, spec) in enumerate(specs.items())
    }
    vectors = add(store, list(episodes.values()))
    expected_ids = {f"ep_{n}" for n in expected}
    page, total = store.list_episodes(ALICE, limit=10, offset=0, filters=filters)
    assert {e.id for e in page} == expected_ids and total == len(expected)
    assert set(ids(store.lexical_search(["shared"], ALICE, filters, 10))) == expected_ids
    assert set(ids(store.dense_search(vectors[0], ALICE, filters, 10))) == expected_ids


def test_filtered_searches_follow_appends_and_deletes(store):
    first = [make_episode(f"first {i}", role="user" if i % 2 else "assistant") for i in range(6)]
    vectors = add(store, first)
    users = {e.id for e in first if e.role == "user"}

    def found(filters):
        return set(ids(store.dense_search(vectors[0], ALICE, filters, 20)))

    assert found(Filters(role="user")) == users
    more = [make_episode(f"more {i}", role="user") for i in range(3)]
    add(store, more, seed=1)
    users |= {e.id for e in more}
    assert found(Filters(role="user")) == users
    assert found(Filters(not_role="user")) == {e.id for e in first} - users
    store.delete_episode(more[0].id, ALICE)
    assert found(Filters(role="user")) == users - {more[0].id}


# -- neighbours -----------------------------------------------------------------------------------
def test_neighbours_are_the_surrounding_turns_of_the_same_session(store):
    s1 = [
        make_episode(f"s1 turn {i}", scope=Scope("alice", None, "s1"), turn_index=i)
        for i in range(6)
    ]
    s2 = [make_episode("s2 turn", scope=Scope("alice", None, "s2"), turn_index=2)]
    bob = [make_episode("bob turn", scope=Scope("bob", None, "s1"), turn_index=3)]
    loose = make_episode("no session")
    add(store, [*s1, *s2, *bob, loose])
    around = store.neighbours([s1[2], s1[5], loose], window=1)
    assert [e.id for e in around[s1[2].id]] == [s1[1].id, s1[3].id]
    assert [e.id for e in around[s1[5].id]] == [s1[4].id]
    assert around[loose.id] == ()
    assert [e.id for e in store.neighbours([s1[2]], window=2)[s1[2].id]] == [
        s1[0].id,
        s1[1].id,
        s1[3].id,
        s1[4].id,
    ]
    assert store.neighbours([s1[2]], window=0) == {s1[2].id: ()}


def test_turn_info_and_adjacent_turns_stay_in_scope_and_filters(store):
    s1 = [
        make_episode(
            f"s1 turn {i}", scope=Scope("alice", None, "s1"), turn_index=i, speaker="Caroline"
        )
        for i in range(5)
    ]
    bob = [make_episode("bob turn", scope=Scope("bob", None, "s1"), turn_index=3)]
    loose = make_episode("no session")
    add(store, [*s1, *bob, loose])
    info = store.turn_info([s1[2].id, bob[0].id, loose.id], ALICE)
    assert info == {s1[2].id: ("s1", 2, "Caroline", "user"), loose.id: (None, None, None, "user")}
    around = store.adjacent_turns([s1[2].id, s1[4].id, bob[0].id], ALICE, Filters(), 1)
    assert around == {
        s1[2].id: [(s1[1].id, -1), (s1[3].id, 1)],
        s1[4].id: [(s1[3].id, -1)],
    }
    wide = store.adjacent_turns([s1[2].id], ALICE, Filters(), 2)[s1[2].id]
    assert wide == [(s1[1].id, -1), (s1[3].id, 1), (s1[0].id, -2), (s1[4].id, 2)]
    # A filter hides neighbours (here: turns dated after the question).
    before = Filters(event_before=s1[3].event_time)
    assert store.adjacent_turns([s1[2].id], ALICE, before, 1) == {s1[2].id: [(s1[1].id, -1)]}
    assert store.adjacent_turns([s1[2].id], ALICE, Filters(), 0) == {}


def test_turn_info_after_a_search_stays_in_scope_and_forgets_deleted_turns(store):
    # A search may remember where its hits sit; turn_info must still answer per scope
    # and drop a turn once it is deleted.
    agent = Scope("alice", "helper", "s1")
    turns = [
        make_episode(f"the red kite {i}", scope=agent, turn_index=i, speaker="Ann")
        for i in range(3)
    ]
    vectors = add(store, turns)
    every = [t.id for t in turns]
    store.lexical_search(["red", "kite"], ALICE, Filters(), 10)
    store.dense_search(vectors[0], ALICE, Filters(), 10)
    assert store.turn_info(every, ALICE) == {
        t.id: ("s1", i, "Ann", "user") for i, t in enumerate(turns)
    }
    assert store.turn_info(every, BOB) == {}
    assert store.turn_info(every, Scope("alice", "other")) == {}
    assert store.turn_info(every, Scope("alice", None, "s2")) == {}
    store.delete_episode(turns[1].id, ALICE)
    assert set(store.turn_info(every, ALICE)) == {turns[0].id, turns[2].id}


def test_searches_place_each_hit_as_turn_info_does(store):
    # Channels that reason about speakers and roles read where each hit sits from the
    # search itself instead of looking every hit up again.
    turns = [
        make_episode(
            f"the blue kite flew on day {i}",
            scope=Scope("alice", None, "s1"),
            turn_index=i,
            speaker="Caroline" if i % 2 else None,
            role="assistant" if i == 2 else "user",
            event_time=T0 + timedelta(hours=i),
        )
        for i in range(4)
    ]
    loose = make_episode("a blue kite without a session", event_time=T0)
    vectors = add(store, [*turns, loose])
    window = [(T0, T0 + timedelta(days=1))]
    for found in (
        store.lexical_search(["blue", "kite"], ALICE, Filters(), 10),
        store.dense_search(vectors[0], ALICE, Filters(), 10),
        store.time_search(vectors[0], window, ALICE, Filters(), 10),
        store.dense_search_sessions(vectors[0], ALICE, ["s1"], Filters(), 10)["s1"],
    ):
        assert found
        expected = store.turn_info(ids(found), ALICE)
        assert {c.episode_id: c.turn for c in found} == expected


# -- lexical search -------------------------------------------------------------------------------
def test_lexical_search_ranks_more_matching_terms_first_and_respects_scope(store):
    episodes = [
        make_episode("Caroline went hiking in the mountains", id="ep_both"),
        make_episode("Caroline likes coffee", id="ep_one"),
        make_episode("The weather is nice", id="ep_none"),
        make_episode(
            "Caroline hiking mountains", id="ep_other_agent", scope=Scope("alice", "agent-2")
        ),
        make_episode("Caroline hiking mountains", id="ep_bob", scope=BOB),
    ]
    add(store, episodes)
    hits = store.lexical_search(["caroline", "hiking"], Scope("alice", None), Filters(), 10)
    assert set(ids(hits)) == {"ep_both", "ep_one", "ep_other_agent"}
    assert ids(hits).index("ep_both") < ids(hits).index("ep_one")
    assert all(h.score > 0 for h in hits)
    assert hits == sorted(hits, key=lambda h: -h.score)
    scoped = store.lexical_search(["caroline"], Scope("alice", "agent-2"), Filters(), 10)
    assert ids(scoped) == ["ep_other_agent"]
    assert store.lexical_search([], ALICE, Filters(), 10) == []
    assert len(store.lexical_search(["caroline"], ALICE, Filters(), 1)) == 1


def test_lexical_rank_scores_the_given_episodes_as_lexical_search_does(store):
    words = ["kite", "blue", "harbour", "sister", "winter", "garden"]
    rng = np.random.default_rng(7)
    episodes = [
        make_episode(" ".join(rng.choice(words, size=int(rng.integers(1, 6)))), id=f"ep_{i}")
        for i in range(40)
    ] + [make_episode("blue kite in the harbour", id="ep_bob", scope=BOB)]
    add(store, episodes)
    terms = ["blue", "kite", "harbour"]
    everything = store.lexical_search(terms, ALICE, Filters(), 100)
    given = [f"ep_{i}" for i in range(0, 40, 3)] + ["ep_bob", "ep_missing"]
    ranked = store.lexical_rank(terms, given, ALICE, 5)
    # The given episodes of the scope that match, in the whole search's order and with
    # its scores; another scope's and unknown ids are left out.
    expected = [c for c in everything if c.episode_id in given][:5]
    assert [(c.episode_id, round(c.score, 9)) for c in ranked] == [
        (c.episode_id, round(c.score, 9)) for c in expected
    ]
    assert len(ranked) == 5
    assert store.lexical_rank(terms, [], ALICE, 5) == []
    assert store.lexical_rank([], given, ALICE, 5) == []
    assert store.lexical_rank(terms, ["ep_bob"], ALICE, 5) == []


def test_lexical_search_stems_and_survives_odd_terms(store):
    add(store, [make_episode("She was running marathons", id="ep_run")])
    assert ids(store.lexical_search(["runs"], ALICE, Filters(), 5)) == ["ep_run"]
    odd = ['"', "o'neil", "a*b", "NEAR", "AND", "(", "marathon"]
    assert ids(store.lexical_search(odd, ALICE, Filters(), 5)) == ["ep_run"]


# -- dense search ---------------------------------------------------------------------------------
def test_dense_search_returns_nearest_first_with_cosine_scores(store):
    episodes = [make_episode(f"e{i}") for i in range(30)]
    vectors = add(store, episodes)
    hits = store.dense_search(vectors[7], ALICE, Filters(), 5)
    assert hits[0].episode_id == episodes[7].id
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    expected = np.argsort(-(vectors @ vectors[7]), kind="stable")[:5]
    assert ids(hits) == [episodes[i].id for i in expected]
    for hit, i in zip(hits, expected, strict=True):
        assert hit.score == pytest.approx(float(vectors[i] @ vectors[7]), abs=1e-5)


def test_dense_search_respects_scope(store):
    scopes = [Scope("alice"), Scope("alice", "a1"), Scope("alice", "a1", "s1"), BOB]
    episodes = [make_episode(f"e{i}", scope=scopes[i % 4]) for i in range(40)]
    vectors = add(store, episodes)
    query = vectors[3]  # a bob episode
    for scope in scopes:
        hits = store.dense_search(query, scope, Filters(), 100)
        in_scope = [
            e.id
            for e in episodes
            if e.user_id == scope.user_id
            and (scope.agent_id is None or e.agent_id == scope.agent_id)
            and (scope.session_id is None or e.session_id == scope.session_id)
        ]
        assert sorted(ids(hits)) == sorted(in_scope)


def test_dense_search_stays_complete_under_a_selective_filter(store):
    episodes = [make_episode(f"e{i}", role="rare" if i % 100 == 0 else "user") for i in range(500)]
    vectors = add(store, episodes)
    hits = store.dense_search(vectors[1], ALICE, Filters(role="rare"), 10)
    assert sorted(ids(hits)) == sorted(e.id for e in episodes if e.role == "rare")


# -- update ---------------------------------------------------------------------------------------
def test_update_keeps_prior_versions_and_reindexes(store):
    episode = make_episode("original zebra text", metadata={"v": 1})
    add(store, [episode])
    new_vector = unit_vectors(1, seed=99)[0]
    changed = T0 + timedelta(days=3)
    updated = store.update_episode(
        episode.id,
        ALICE,
        content="replaced giraffe text",
        content_hash="hash-new",
        metadata={"v": 2},
        vector=new_vector,
        changed_at=changed,
    )
    assert (updated.content, updated.metadata, updated.version) == (
        "replaced giraffe text",
        {"v": 2},
        2,
    )
    assert updated.event_time == episode.event_time
    assert store.get_episodes([episode.id], ALICE) == [updated]
    assert store.episode_versions(episode.id, ALICE) == [
        EpisodeVersion(episode.id, 1, "original zebra text", {"v": 1}, changed)
    ]
    assert store.lexical_search(["zebra"], ALICE, Filters(), 5) == []
    assert ids(store.lexical_search(["giraffe"], ALICE, Filters(), 5)) == [episode.id]
    assert store.dense_search(new_vector, ALICE, Filters(), 1)[0].score == pytest.approx(
        1.0, abs=1e-5
    )
    np.testing.assert_array_equal(
        store.vectors_for_hashes(["hash-new"], ALICE)["hash-new"], new_vector
    )


def test_update_without_vector_keeps_the_old_one_and_counts_versions(store):
    episode = make_episode("text")
    [vector] = add(store, [episode])
    for n in range(3):
        store.update_episode(
            episode.id,
            ALICE,
            content="text",
            content_hash=episode.content_hash,
            metadata={"n": n},
            vector=None,
            changed_at=T0 + timedelta(days=n),
        )
    assert [v.version for v in store.episode_versions(episode.id, ALICE)] == [1, 2, 3]
    assert store.get_episodes([episode.id], ALICE)[0].version == 4
    assert store.dense_search(vector, ALICE, Filters(), 1)[0].score == pytest.approx(1.0, abs=1e-5)


def test_update_outside_scope_is_not_found(store):
    episode = make_episode("x", scope=Scope("alice", "a1"))
    add(store, [episode])
    for scope in (BOB, Scope("alice", "a2"), Scope("alice", None, "s9")):
        with pytest.raises(NotFoundError):
            store.update_episode(
                episode.id,
                scope,
                content="hijack",
                content_hash="h",
                metadata={},
                vector=None,
                changed_at=T0,
            )
    assert store.get_episodes([episode.id], ALICE)[0].content == "x"


# -- delete ---------------------------------------------------------------------------------------
def _assert_gone(store, episode, vector, scope):
    assert store.get_episodes([episode.id], scope) == []
    assert episode.id not in ids(
        store.lexical_search(episode.content.split(), scope, Filters(), 100)
    )
    assert episode.id not in ids(store.dense_search(vector, scope, Filters(), 100))
    assert episode.id not in {e.id for e, _ in store.iter_episodes()}
    assert store.existing_ids([episode.id]) == set()


def test_delete_episode_removes_every_derived_row(store):
    keep, gone = make_episode("keep apple"), make_episode("gone apple")
    vectors = add(store, [keep, gone])
    store.update_episode(
        gone.id,
        ALICE,
        content="gone apple",
        content_hash=gone.content_hash,
        metadata={"x": 1},
        vector=None,
        changed_at=T0,
    )
    counts = store.delete_episode(gone.id, ALICE)
    assert counts == DeleteCounts(episodes=1, versions=1, vectors=1)
    _assert_gone(store, gone, vectors[1], ALICE)
    assert store.episode_versions(gone.id, ALICE) == []
    assert ids(store.lexical_search(["apple"], ALICE, Filters(), 10)) == [keep.id]
    with pytest.raises(NotFoundError):
        store.delete_episode(gone.id, ALICE)


def test_delete_episode_outside_scope_is_not_found(store):
    episode = make_episode("x", scope=Scope("alice", "a1", "s1"))
    add(store, [episode])
    for scope in (BOB, Scope("alice", "a2"), Scope("alice", "a1", "s2")):
        with pytest.raises(NotFoundError):
            store.delete_episode(episode.id, scope)
    assert store.existing_ids([episode.id]) == {episode.id}


@pytest.mark.parametrize(
    "scope",
    [Scope("alice"), Scope("alice", "a1"), Scope("alice", "a1", "s1")],
    ids=["user", "agent", "session"],
)
def test_delete_scope_removes_exactly_the_scope(store, scope):
    layout = [
        Scope("alice", "a1", "s1"),
        Scope("alice", "a1", "s2"),
        Scope("alice", "a2", "s1"),
        Scope("bob", "a1", "s1"),
    ]
    episodes = [
        make_episode(f"word{i} common", scope=layout[i % 4], turn_index=i) for i in range(16)
    ]
    vectors = add(
        store,
        episodes,
        sessions=[
            Session(s.session_id, s.user_id, s.agent_id, T0)
            for s in layout
            if s.session_id != "s1" or s.agent_id == "a1"
        ],
    )
    for e in episodes[:4]:
        store.update_episode(
            e.id,
            Scope(e.user_id),
            content=e.content,
            content_hash=e.content_hash,
            metadata={"edited": True},
            vector=None,
            changed_at=T0,
        )

    def inside(e):
        return (
            e.user_id == scope.user_id
            and (scope.agent_id is None or e.agent_id == scope.agent_id)
            and (scope.session_id is None or e.session_id == scope.session_id)
        )

    doomed = [e for e in episodes if inside(e)]
    sessions_before = list(store.iter_sessions())
    doomed_sessions = [
        s
        for s in sessions_before
        if s.user_id == scope.user_id
        and (scope.agent_id is None or s.agent_id == scope.agent_id)
        and (scope.session_id is None or s.id == scope.session_id)
    ]
    counts = store.delete_scope(scope)
    assert counts == DeleteCounts(
        episodes=len(doomed),
        vectors=len(doomed),
        versions=sum(1 for e in episodes[:4] if inside(e)),
        sessions=len(doomed_sessions),
    )
    for e in doomed:
        _assert_gone(store, e, vectors[episodes.index(e)], Scope(e.user_id))
    survivors = {e.id for e in episodes if not inside(e)}
    assert {e.id for e, _ in store.iter_episodes()} == survivors
    assert store.lexical_search(["common"], scope, Filters(), 100) == []
    assert store.dense_search(vectors[0], scope, Filters(), 100) == []
    assert len(list(store.iter_sessions())) == len(sessions_before) - len(doomed_sessions)
    assert store.delete_scope(scope) == DeleteCounts()


# -- forget ---------------------------------------------------------------------------------------
def _forget_layout(store):
    """alice's episodes in two sessions (one secret in each of content, speaker,
    metadata and a prior version) and bob's copy of the secret."""
    s1, s2 = Scope("alice", None, "s1"), Scope("alice", None, "s2")
    episodes = [
        make_episode("the code is zebra-7", scope=s1, event_time=T0),
        make_episode("hello", scope=s1, speaker="zebra-7", event_time=T0 + timedelta(days=1)),
        make_episode("note", scope=s2, metadata={"k": "zebra-7 é"}, event_time=T0 + timedelta(2)),
        make_episode("first draft", scope=s2, event_time=T0 + timedelta(days=3)),
        make_episode("plain words", scope=s2, event_time=T0 + timedelta(days=4)),
        make_episode("bob knows zebra-7", scope=Scope("bob", None, "s1"), event_time=T0),
    ]
    vectors = add(
        store,
        episodes,
        sessions=[
            Session("s1", "alice", None, T0),
            Session("s2", "alice", None, T0),
            Session("s1", "bob", None, T0),
        ],
    )
    store.update_episode(
        episodes[3].id,
        ALICE,
        content="final text",
        content_hash="hash-final",
        metadata={},
        vector=None,
        changed_at=T0,
    )
    return episodes, vectors


def test_forget_by_content_finds_every_copy_in_scope_only(store):
    episodes, vectors = _forget_layout(store)
    removed, counts = store.forget(ALICE, Selection(containing="zebra-7"))
    assert sorted(removed) == sorted(e.id for e in episodes[:3])
    assert (counts.episodes, counts.vectors, counts.sessions) == (3, 3, 1)  # s1 emptied
    for e, v in zip(episodes[:3], vectors[:3], strict=True):
        _assert_gone(store, e, v, ALICE)
    removed, counts = store.forget(ALICE, Selection(containing="first draft"))
    assert removed == [episodes[3].id] and (counts.episodes, counts.versions) == (1, 1)
    assert store.existing_ids([episodes[3].id]) == set()
    assert store.existing_ids([episodes[5].id]) == {episodes[5].id}
    assert {(s.user_id, s.id) for s in store.iter_sessions()} == {("alice", "s2"), ("bob", "s1")}


def test_forget_by_ids_and_time_range_stays_in_scope(store):
    episodes, _ = _forget_layout(store)
    removed, _ = store.forget(ALICE, Selection(episode_ids=(episodes[5].id, episodes[4].id)))
    assert removed == [episodes[4].id]  # bob's id is not alice's to forget
    removed, _ = store.forget(
        ALICE, Selection(event_after=T0 + timedelta(days=1), event_before=T0 + timedelta(days=3))
    )
    assert sorted(removed) == sorted([episodes[1].id, episodes[2].id])
    assert store.existing_ids([e.id for e in episodes]) == {
        episodes[0].id,
        episodes[3].id,
        episodes[5].id,
    }


def test_forget_dry_run_rolls_back(store):
    episodes, vectors = _forget_layout(store)
    before = [e for e, _ in store.iter_episodes()]
    removed, counts = store.forget(ALICE, Selection(containing="zebra-7"), dry_run=True)
    assert len(removed) == 3 and counts.episodes == 3
    assert [e for e, _ in store.iter_episodes()] == before
    assert ids(store.lexical_search(["code"], ALICE, Filters(), 10)) == [episodes[0].id]
    assert ids(store.dense_search(vectors[0], ALICE, Filters(), 1)) == [episodes[0].id]
    assert store.forget(ALICE, Selection(containing="zebra-7")) == (removed, counts)


def test_archive_then_restore_round_trips_every_field(store):
    episodes, vectors = _forget_layout(store)
    alice = [e for e, _ in store.iter_episodes() if e.user_id == "alice"]
    before = {e.id: (e, v) for e, v in store.iter_episodes()}
    times = store.episode_times([e.id for e in alice], ALICE)
    versions = store.episode_versions(episodes[3].id, ALICE)
    moved = store.archive(ALICE, Selection(), T0)
    assert sorted(moved) == sorted(e.id for e in alice)
    assert store.get_episodes(moved, ALICE) == []
    assert store.lexical_search(["code"], ALICE, Filters(), 10) == []
    assert store.dense_search(vectors[0], ALICE, Filters(), 10) == []
    archived = {e.id: (e, v) for e, v in store.iter_archived(ALICE, Filters())}
    assert {e.id: e for e, _ in archived.values()} == {e.id: e for e in alice}
    assert [e.id for e, _ in store.iter_archived(ALICE, Filters(role="nobody"))] == []
    assert store.restore(BOB, Selection()) == []
    assert sorted(store.restore(ALICE, Selection())) == sorted(moved)
    after = {e.id: (e, v) for e, v in store.iter_episodes()}
    assert after.keys() == before.keys()
    for episode_id, (episode, vector) in before.items():
        assert after[episode_id][0] == episode
        np.testing.assert_allclose(after[episode_id][1], vector, rtol=1e-6)
    assert store.episode_times([e.id for e in alice], ALICE) == times
    assert store.episode_versions(episodes[3].id, ALICE) == versions
    assert ids(store.lexical_search(["code"], ALICE, Filters(), 10)) == [episodes[0].id]
    assert list(store.iter_archived(ALICE, Filters())) == []


# -- vectors --------------------------------------------------------------------------------------
def test_replace_vectors_overwrites_dense_index(store):
    episodes = [make_episode(f"e{i}") for i in range(5)]
    add(store, episodes)
    fresh = unit_vectors(5, seed=42)
    store.replace_vectors({e.id: v for e, v in zip(episodes, fresh, strict=True)})
    for e, v in zip(episodes, fresh, strict=True):
        assert store.dense_search(v, ALICE, Filters(), 1)[0].episode_id == e.id
    stored = dict((e.id, v) for e, v in store.iter_episodes())
    np.testing.assert_array_equal(stored[episodes[2].id], fresh[2])


# -- iteration and stats --------------------------------------------------------------------------
def test_iter_episodes_yields_everything_with_vectors_in_insert_order(store):
    episodes = [make_episode(f"e{i}", scope=ALICE if i % 2 else BOB) for i in range(25)]
    vectors = add(store, episodes)
    got = list(store.iter_episodes(batch_size=4))
    assert [e for e, _ in got] == episodes
    for (_, vector), expected in zip(got, vectors, strict=True):
        assert vector.dtype == np.float32
        np.testing.assert_array_equal(vector, expected)


def test_iter_sessions_yields_every_session_sorted(store):
    sessions = [
        Session("s2", "bob", None, T0),
        Session("s1", "alice", "a", None, {"k": 1}),
        Session("s0", "bob", "b", T0 + timedelta(seconds=1)),
    ]
    store.upsert_sessions(sessions)
    assert list(store.iter_sessions()) == sorted(sessions, key=lambda s: (s.user_id, s.id))


def test_stats_counts_scope_and_whole_store(store):
    add(
        store,
        [
            make_episode("a", scope=Scope("alice", None, "s1"), event_time=T0),
            make_episode("b", scope=Scope("alice", None, "s2"), event_time=T0 + timedelta(days=1)),
            make_episode("c", scope=BOB),
        ],
    )
    first = store.get_episodes([e.id for e, _ in store.iter_episodes()][:1], ALICE)[0]
    store.update_episode(
        first.id, ALICE, content="a2", content_hash="h", metadata={}, vector=None, changed_at=T0
    )
    everything = store.stats(None)
    assert everything["backend"] in ("sqlite", "postgres")
    assert (
        everything["episodes"],
        everything["users"],
        everything["vectors"],
        everything["versions"],
    ) == (3, 2, 3, 1)
    alice = store.stats(ALICE)
    assert (
        alice["episodes"],
        alice["users"],
        alice["sessions"],
        alice["vectors"],
        alice["versions"],
    ) == (2, 1, 2, 2, 1)
    assert alice["first_event"] == T0.isoformat()
    assert alice["last_event"] == (T0 + timedelta(days=1)).isoformat()
    empty = store.stats(Scope("nobody"))
    assert (empty["episodes"], empty["first_event"]) == (0, None)


# -- tenant isolation through every verb ----------------------------------------------------------
def test_no_verb_reads_or_writes_across_tenants(store):
    """Two tenants with identical text and vectors: every scoped verb sees only its own."""
    vector = unit_vectors(1, seed=5)
    secret = make_episode("secret launch codes", scope=BOB, turn_index=0, metadata={"tag": "x"})
    mine = make_episode(
        "secret launch codes", scope=Scope("alice", None, "s1"), turn_index=0, metadata={"tag": "x"}
    )
    store.insert_episodes([secret, mine], np.vstack([vector, vector]))
    store.update_episode(
        secret.id,
        BOB,
        content="secret launch codes",
        content_hash="h2",
        metadata={"tag": "x"},
        vector=None,
        changed_at=T0,
    )
    filters = Filters(metadata={"tag": "x"})

    assert store.get_episodes([secret.id], ALICE) == []
    page, total = store.list_episodes(ALICE, limit=100, offset=0, filters=filters)
    assert [e.id for e in page] == [mine.id] and total == 1
    assert store.episode_versions(secret.id, ALICE) == []
    assert ids(store.lexical_search(["secret", "codes"], ALICE, filters, 100)) == [mine.id]
    assert ids(store.dense_search(vector[0], ALICE, filters, 100)) == [mine.id]
    assert ids(store.dense_search(vector[0], Scope("alice", None, "s1"), Filters(), 100)) == [
        mine.id
    ]
    assert store.neighbours([mine], window=5) == {mine.id: ()}
    with pytest.raises(NotFoundError):
        store.update_episode(
            secret.id, ALICE, content="x", content_hash="x", metadata={}, vector=None, changed_at=T0
        )
    with pytest.raises(NotFoundError):
        store.delete_episode(secret.id, ALICE)
    assert store.stats(ALICE)["episodes"] == 1 and store.stats(ALICE)["versions"] == 0
    assert store.next_turn_index("alice", secret.session_id or "") == 0
    assert store.delete_scope(ALICE).episodes == 1
    assert [e.id for e in store.get_episodes([secret.id], BOB)] == [secret.id]
    assert store.episode_versions(secret.id, BOB)[0].content == "secret launch codes"


def test_scope_values_are_data_not_sql(store):
    evil = Scope("alice' OR '1'='1", 'x" OR 1=1 --', "s'; DROP TABLE episodes; --")
    add(store, [make_episode("victim"), make_episode("attacker", scope=evil)])
    assert ids(store.lexical_search(["victim"], evil, Filters(), 10)) == []
    assert store.list_episodes(evil, limit=10, offset=0)[1] == 1
    assert store.delete_scope(evil).episodes == 1
    assert store.list_episodes(ALICE, limit=10, offset=0)[1] == 1


# -- concurrency ----------------------------------------------------------------------------------
def test_concurrent_writers_and_readers_share_one_store(store):
    per_thread = 40

    def work(n: int) -> None:
        scope = Scope(f"user{n}")
        for i in range(per_thread // 4):
            batch = [make_episode(f"thread{n} item{i} shared", scope=scope) for _ in range(4)]
            add(store, batch, seed=n * 1000 + i)
            store.lexical_search(["shared"], scope, Filters(), 5)
            store.dense_search(unit_vectors(1, seed=i)[0], scope, Filters(), 5)

    with ThreadPoolExecutor(max_workers=6) as pool:
        for future in [pool.submit(work, n) for n in range(6)]:
            future.result()
    assert store.stats(None)["episodes"] == 6 * per_thread
    for n in range(6):
        assert store.list_episodes(Scope(f"user{n}"), limit=1, offset=0)[1] == per_thread


def test_vectors_keep_their_dimension(store):
    assert DIM == unit_vectors(1).shape[1]
    [vector] = add(store, [make_episode("x", content_hash="hx")])
    assert store.vectors_for_hashes(["hx"], DEFAULT_SCOPE)["hx"].shape == (DIM,)
    assert vector.shape == (DIM,)


# -- event time: resolved time mentions ---------------------------------------------------------
MAY_8 = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)


def _mentions(store, episode, scope=ALICE):
    found = store.episode_times([episode.id], scope).get(episode.id)
    return None if found is None else [(m.expression, m.start, m.end) for m in found.mentions]


def test_time_mentions_are_resolved_against_the_event_time_and_stored(store):
    said = make_episode("I went to the support group yesterday and on the 5th", event_time=MAY_8)
    plain = make_episode("No dates here")
    add(store, [said, plain])
    times = store.episode_times([said.id, plain.id, "ep_missing"], ALICE)
    assert set(times) == {said.id, plain.id}
    assert times[said.id].event_time == MAY_8
    assert _mentions(store, said) == [
        ("yesterday", datetime(2023, 5, 7, tzinfo=UTC), datetime(2023, 5, 8, tzinfo=UTC)),
        ("on the 5th", datetime(2023, 5, 5, tzinfo=UTC), datetime(2023, 5, 6, tzinfo=UTC)),
    ]
    assert times[plain.id].mentions == ()
    assert store.episode_times([said.id], BOB) == {}


def test_updating_content_recomputes_its_time_mentions(store):
    episode = make_episode("We met yesterday", event_time=MAY_8)
    add(store, [episode])
    store.update_episode(
        episode.id,
        ALICE,
        content="We met two days ago",
        content_hash="h2",
        metadata={},
        vector=None,
        changed_at=MAY_8,
    )
    assert _mentions(store, episode) == [
        ("two days ago", datetime(2023, 5, 6, tzinfo=UTC), datetime(2023, 5, 7, tzinfo=UTC))
    ]
    store.update_episode(
        episode.id,
        ALICE,
        content="We met",
        content_hash="h3",
        metadata={},
        vector=None,
        changed_at=MAY_8,
    )
    assert _mentions(store, episode) == []


def test_deletes_remove_and_count_time_mentions(store):
    one = make_episode("yesterday and last week", event_time=MAY_8)
    other = make_episode("tomorrow", event_time=MAY_8, scope=Scope("alice", "a1"))
    bobs = make_episode("yesterday", event_time=MAY_8, scope=BOB)
    add(store, [one, other, bobs])
    assert store.delete_episode(one.id, ALICE) == DeleteCounts(episodes=1, vectors=1, times=2)
    assert store.delete_scope(ALICE) == DeleteCounts(episodes=1, vectors=1, times=1)
    assert _mentions(store, bobs, BOB) == [
        ("yesterday", datetime(2023, 5, 7, tzinfo=UTC), datetime(2023, 5, 8, tzinfo=UTC))
    ]


def test_time_search_finds_episodes_by_event_time_or_mentioned_time(store):
    mentioned = make_episode("I went to the support group yesterday", event_time=MAY_8)
    happened = make_episode("Lovely walk", event_time=datetime(2023, 5, 7, 9, tzinfo=UTC))
    elsewhere = make_episode("Later that summer", event_time=datetime(2023, 7, 1, tzinfo=UTC))
    bobs = make_episode("Lovely walk", event_time=datetime(2023, 5, 7, 9, tzinfo=UTC), scope=BOB)
    vectors = add(store, [mentioned, happened, elsewhere, bobs])
    may_7 = [(datetime(2023, 5, 7, tzinfo=UTC), datetime(2023, 5, 8, tzinfo=UTC))]
    found = store.time_search(vectors[1], may_7, ALICE, Filters(), 10)
    assert ids(found) == [happened.id, mentioned.id]  # ranked by similarity to the vector
    assert found[0].score == pytest.approx(1.0, abs=1e-5)
    assert ids(store.time_search(vectors[1], may_7, BOB, Filters(), 10)) == [bobs.id]
    assert ids(store.time_search(vectors[1], may_7, Scope("alice", "a1"), Filters(), 10)) == []
    assert store.time_search(vectors[1], [], ALICE, Filters(), 10) == []
    assert ids(store.time_search(vectors[1], may_7, ALICE, Filters(role="assistant"), 10)) == []


def test_time_search_honours_recorded_before(store):
    early = make_episode("yesterday was fun", event_time=MAY_8, recorded_at=MAY_8)
    late = make_episode(
        "I did it yesterday", event_time=MAY_8, recorded_at=MAY_8 + timedelta(days=30)
    )
    vectors = add(store, [early, late])
    may_7 = [(datetime(2023, 5, 7, tzinfo=UTC), datetime(2023, 5, 8, tzinfo=UTC))]
    as_of = Filters(recorded_before=MAY_8 + timedelta(days=1))
    assert ids(store.time_search(vectors[1], may_7, ALICE, as_of, 10)) == [early.id]


def _downgrade_to_before_times(backend, store_url):
    """Make the store look as if written before time mentions (and facts, archive,
    usage counters, gate decisions, derived items, pending vectors and, on PostgreSQL,
    the lexemes' bounds) existed."""
    later = (
        "archived_episodes",
        "episode_usage",
        "gate_decisions",
        "derived_items",
        "derived_sources",
    )
    if backend == "sqlite":
        from anamnesis.store.sqlite.driver import sqlite3

        with sqlite3.connect(store_url) as conn:
            for table in ("facts_fts", "facts", "fact_sources", "consolidated_episodes", *later):
                conn.execute(f"DROP TABLE {table}")
            conn.execute("DROP TRIGGER episode_times_delete")
            conn.execute("DROP TABLE episode_times")
            conn.execute("DROP TRIGGER pending_vectors_delete")
            conn.execute("DROP TABLE pending_vectors")
            conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    else:
        import psycopg

        with psycopg.connect(store_url) as conn:
            for table in (
                "facts",
                "fact_sources",
                "consolidated_episodes",
                "episode_times",
                "pending_vectors",
                *later,
            ):
                conn.execute(f"DROP TABLE {table}")
            conn.execute("ALTER TABLE text_lexemes DROP COLUMN max_tf, DROP COLUMN max_density")
            conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")


def test_opening_an_older_store_backfills_time_mentions(open_store, backend, store_url):
    first = open_store()
    episode = make_episode("I went to the support group yesterday", event_time=MAY_8)
    add(first, [episode])
    first.close()
    _downgrade_to_before_times(backend, store_url)
    reopened = open_store()
    assert _mentions(reopened, episode) == [
        ("yesterday", datetime(2023, 5, 7, tzinfo=UTC), datetime(2023, 5, 8, tzinfo=UTC))
    ]
    assert reopened.delete_episode(episode.id, ALICE).times == 1
