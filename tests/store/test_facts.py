"""Fact storage, the same tests against both backends (SQLite and PostgreSQL).

Supersession keeps every fact; ``as_of`` hides what was recorded later and shows what
was true then; scope is enforced on every path; deleting episodes trims provenance
and removes facts left with none.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from store_fixtures import (  # noqa: F401  (fixtures are found by their registered names)
    T0,
    backend_fixture,
    make_episode,
    open_store_fixture,
    postgres_schema_url_fixture,
    store_fixture,
    store_url_fixture,
    unit_vectors,
)

from anamnesis.store.base import FactChanges, FactQuery, Filters, Supersession
from anamnesis.types import DeleteCounts, Fact, Scope

ALICE = Scope("alice")
BOB = Scope("bob")
DAY = timedelta(days=1)


def make_fact(
    obj: str,
    *,
    id: str,
    scope: Scope = ALICE,
    predicate: str = "lives_in",
    subject: str = "user",
    valid_from=T0,
    recorded_at=None,
    provenance: tuple[str, ...] = (),
) -> Fact:
    return Fact(
        id=id,
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        subject=subject,
        predicate=predicate,
        object=obj,
        text=f"{subject} {predicate.replace('_', ' ')} {obj}",
        valid_from=valid_from,
        valid_to=None,
        recorded_at=recorded_at or valid_from,
        provenance=provenance,
    )


def with_episodes(store, scope: Scope, *texts: str) -> list[str]:
    episodes = [make_episode(t, scope=scope) for t in texts]
    store.insert_episodes(episodes, unit_vectors(len(episodes), seed=len(texts)))
    return [e.id for e in episodes]


def write(store, scope: Scope, *facts: Fact, supersessions=(), seed: int = 0) -> None:
    vectors = list(unit_vectors(len(facts), seed=seed)) if facts else []
    store.write_facts(
        FactChanges(added=list(facts), vectors=vectors, supersessions=list(supersessions)),
        scope,
    )


def boston_then_denver(store) -> list[str]:
    """Alice lived in Boston from T0; on T0+30d she moved to Denver (learned that day)."""
    sources = with_episodes(store, ALICE, "I live in Boston", "I moved to Denver")
    write(store, ALICE, make_fact("Boston", id="f_boston", provenance=(sources[0],)))
    moved = T0 + 30 * DAY
    write(
        store,
        ALICE,
        make_fact("Denver", id="f_denver", valid_from=moved, provenance=(sources[1],)),
        supersessions=[Supersession("f_boston", "f_denver", moved, moved)],
        seed=1,
    )
    return sources


def objects(facts: list[Fact]) -> list[str]:
    return [f.object for f in facts]


def test_superseded_facts_are_never_deleted(store):
    boston_then_denver(store)
    assert objects(store.find_facts(ALICE, FactQuery())) == ["Denver"]
    both = store.find_facts(ALICE, FactQuery(include_superseded=True))
    assert objects(both) == ["Denver", "Boston"]  # newest valid_from first
    boston = both[1]
    assert boston.superseded_by == "f_denver" and not boston.is_current
    assert boston.valid_to == T0 + 30 * DAY
    assert both[0].supersedes == "f_boston"


def test_a_fact_ended_with_no_successor_stays_stored_and_stops_being_current(store):
    """ "I moved out of Boston": an ending is a supersession with no new fact."""
    sources = with_episodes(store, ALICE, "I live in Boston", "We moved out of Boston")
    write(store, ALICE, make_fact("Boston", id="f_boston", provenance=(sources[0],)))
    left = T0 + 30 * DAY
    write(store, ALICE, supersessions=[Supersession("f_boston", None, left, left)], seed=1)
    assert store.find_facts(ALICE, FactQuery()) == []
    [boston] = store.find_facts(ALICE, FactQuery(include_superseded=True))
    assert (boston.valid_to, boston.superseded_at, boston.superseded_by) == (left, left, None)
    assert not boston.is_current
    assert objects(store.find_facts(ALICE, FactQuery(as_of=left - DAY))) == ["Boston"]
    assert store.find_facts(ALICE, FactQuery(as_of=left + DAY)) == []
    assert (store.stats(ALICE)["facts"], store.stats(ALICE)["current_facts"]) == (1, 0)


def test_as_of_hides_later_records_and_shows_what_was_true_then(store):
    boston_then_denver(store)

    def at(moment, **kwargs):
        return objects(store.find_facts(ALICE, FactQuery(as_of=moment, **kwargs)))

    assert at(T0 - DAY) == []  # nothing recorded yet
    assert at(T0 + 10 * DAY) == ["Boston"]
    assert at(T0 + 10 * DAY, include_superseded=True) == ["Boston"]  # Denver not yet known
    assert at(T0 + 31 * DAY) == ["Denver"]
    assert at(T0 + 31 * DAY, include_superseded=True) == ["Denver", "Boston"]


def test_a_supersession_learned_later_does_not_end_the_old_fact_earlier(store):
    sources = with_episodes(store, ALICE, "I work at Acme", "I had switched to Initech")
    write(
        store, ALICE, make_fact("Acme", id="f_acme", predicate="works_at", provenance=sources[:1])
    )
    switched, learned = T0 + 10 * DAY, T0 + 40 * DAY
    write(
        store,
        ALICE,
        make_fact(
            "Initech",
            id="f_initech",
            predicate="works_at",
            valid_from=switched,
            recorded_at=learned,
            provenance=sources[1:],
        ),
        supersessions=[Supersession("f_acme", "f_initech", switched, learned)],
        seed=2,
    )
    # On day 20 the memory still believed Acme: the switch was only learned on day 40.
    assert objects(store.find_facts(ALICE, FactQuery(as_of=T0 + 20 * DAY))) == ["Acme"]
    assert objects(store.find_facts(ALICE, FactQuery(as_of=T0 + 41 * DAY))) == ["Initech"]


def test_slot_queries_and_provenance(store):
    sources = boston_then_denver(store)
    write(
        store,
        ALICE,
        make_fact("hiking", id="f_hiking", predicate="likes", provenance=(sources[0],)),
        seed=3,
    )
    store.write_facts(FactChanges(sources=[("f_hiking", sources[1])]), ALICE)
    [hiking] = store.find_facts(ALICE, FactQuery(predicate="likes"))
    assert hiking.provenance == tuple(sources)  # oldest source first
    assert objects(store.find_facts(ALICE, FactQuery(subjects=("someone",)))) == []
    assert store.fact_episodes(["f_hiking"], ALICE, Filters()) == {"f_hiking": sources}
    later = Filters(event_after=T0 + timedelta(minutes=10**6))
    assert store.fact_episodes(["f_hiking"], ALICE, later) == {}


def test_fact_search_is_scoped(store):
    boston_then_denver(store)
    with_episodes(store, BOB, "I live in Denver too")
    write(store, BOB, make_fact("Denver", id="f_bob", scope=BOB), seed=4)
    lexical = store.lexical_fact_search(["denver"], ALICE, None, 10)
    assert [fact_id for fact_id, _ in lexical] == ["f_denver"]
    vector = unit_vectors(1, seed=4)[0]  # Bob's fact vector
    dense = store.dense_fact_search(vector, ALICE, None, 10)
    assert {fact_id for fact_id, _ in dense} == {"f_boston", "f_denver"}
    assert store.find_facts(BOB, FactQuery(ids=("f_denver",))) == []
    assert store.fact_episodes(["f_denver"], BOB, Filters()) == {}
    # A supersession or a source named from the wrong scope changes nothing.
    store.write_facts(FactChanges(supersessions=[Supersession("f_denver", "f_bob", T0, T0)]), BOB)
    store.write_facts(FactChanges(sources=[("f_denver", "ep_x")]), BOB)
    [denver] = store.find_facts(ALICE, FactQuery())
    assert denver.is_current and len(denver.provenance) == 1


def test_fact_search_respects_as_of(store):
    boston_then_denver(store)
    early = store.lexical_fact_search(["denver", "boston"], ALICE, T0 + DAY, 10)
    assert [fact_id for fact_id, _ in early] == ["f_boston"]


def test_deleting_an_episode_trims_provenance_and_removes_orphans(store):
    sources = boston_then_denver(store)
    store.write_facts(FactChanges(sources=[("f_boston", sources[1])]), ALICE)
    counts = store.delete_episode(sources[0], ALICE)
    assert counts.facts == 0  # Boston is still stated by the second episode
    [boston] = store.find_facts(ALICE, FactQuery(ids=("f_boston",), include_superseded=True))
    assert boston.provenance == (sources[1],)
    counts = store.delete_episode(sources[1], ALICE)
    assert counts.facts == 2
    assert store.find_facts(ALICE, FactQuery(include_superseded=True)) == []


def test_deleting_the_newest_value_makes_the_old_one_current_again(store):
    sources = boston_then_denver(store)
    assert store.delete_episode(sources[1], ALICE).facts == 1
    [boston] = store.find_facts(ALICE, FactQuery())
    assert boston.is_current and boston.valid_to is None and boston.superseded_at is None


def test_deleting_a_middle_value_relinks_the_chain(store):
    sources = boston_then_denver(store)
    [third] = with_episodes(store, ALICE, "Now in Lisbon")
    later = T0 + 60 * DAY
    write(
        store,
        ALICE,
        make_fact("Lisbon", id="f_lisbon", valid_from=later, provenance=(third,)),
        supersessions=[Supersession("f_denver", "f_lisbon", later, later)],
        seed=5,
    )
    store.delete_episode(sources[1], ALICE)
    chain = store.find_facts(ALICE, FactQuery(include_superseded=True))
    by_id = {f.id: f for f in chain}
    assert set(by_id) == {"f_boston", "f_lisbon"}
    assert by_id["f_boston"].superseded_by == "f_lisbon"
    assert by_id["f_lisbon"].supersedes == "f_boston"
    assert by_id["f_boston"].valid_to == later


def test_delete_scope_removes_the_scopes_facts_only(store):
    boston_then_denver(store)
    with_episodes(store, BOB, "I live in Denver too")
    write(store, BOB, make_fact("Denver", id="f_bob", scope=BOB), seed=4)
    counts = store.delete_scope(ALICE)
    assert counts.facts == 2 and counts.episodes == 2
    assert store.find_facts(ALICE, FactQuery(include_superseded=True)) == []
    assert objects(store.find_facts(BOB, FactQuery())) == ["Denver"]
    assert store.delete_scope(ALICE) == DeleteCounts()


def test_unconsolidated_episodes_in_event_order(store):
    first, second = with_episodes(store, ALICE, "one", "two")
    with_episodes(store, BOB, "bob's")
    assert [e.id for e in store.unconsolidated_episodes(ALICE, 10)] == [first, second]
    store.write_facts(FactChanges(consolidated=[first], consolidated_at=T0), ALICE)
    store.write_facts(FactChanges(consolidated=[second], consolidated_at=T0), BOB)  # not Bob's
    assert [e.id for e in store.unconsolidated_episodes(ALICE, 10)] == [second]
    assert store.unconsolidated_scopes() == [Scope("alice"), Scope("bob")]
    store.write_facts(FactChanges(consolidated=[second], consolidated_at=T0), ALICE)
    assert store.unconsolidated_scopes() == [Scope("bob")]
    assert [(u, e) for u, e, _ in store.iter_consolidated()] == [
        ("alice", first),
        ("alice", second),
    ]
    store.delete_episode(first, ALICE)
    assert [(u, e) for u, e, _ in store.iter_consolidated()] == [("alice", second)]


def test_unconsolidated_episodes_after_a_cursor_follow_it_ties_in_insertion_order(store):
    # Consolidation reads batch after batch, each after the last episode read.
    tied = [make_episode(f"tied {i}", scope=ALICE, event_time=T0 + DAY) for i in range(3)]
    early, late = (
        make_episode(t, scope=ALICE, event_time=T0 + d) for t, d in (("e", 0 * DAY), ("l", 2 * DAY))
    )
    store.insert_episodes([late, *tied, early], unit_vectors(5))
    everything = [e.id for e in store.unconsolidated_episodes(ALICE, 10)]
    assert everything == [early.id, *(e.id for e in tied), late.id]
    for i, cursor in enumerate(store.unconsolidated_episodes(ALICE, 10)):
        after = store.unconsolidated_episodes(ALICE, 10, after=cursor)
        assert [e.id for e in after] == everything[i + 1 :]
    store.write_facts(FactChanges(consolidated=[late.id], consolidated_at=T0), ALICE)
    assert [e.id for e in store.unconsolidated_episodes(ALICE, 10, after=tied[0])] == [
        tied[1].id,
        tied[2].id,
    ]


def test_reading_after_a_cursor_costs_the_same_however_many_episodes_precede_it(tmp_path):
    # Without the cursor each batch walked every consolidated episode before it: a
    # consolidation of a large scope grew with the square of its size.
    from anamnesis.store.sqlite import SQLiteStore

    def steps(before: int) -> int:
        store = SQLiteStore(tmp_path / f"m{before}.db", dim=8)
        read = [make_episode(f"read {i}", scope=ALICE) for i in range(before)]
        new = [make_episode(f"new {i}", scope=ALICE) for i in range(5)]
        store.insert_episodes([*read, *new], unit_vectors(before + 5, 8))
        store.write_facts(FactChanges(consolidated=[e.id for e in read], consolidated_at=T0), ALICE)
        counted = [0]

        def count() -> int:
            counted[0] += 1
            return 0

        store._conn.set_progress_handler(count, 10)
        found = store.unconsolidated_episodes(ALICE, 2, after=read[-1])
        store._conn.set_progress_handler(None, 0)
        assert [e.id for e in found] == [new[0].id, new[1].id]
        store.close()
        return counted[0]

    assert steps(2000) <= steps(20) + 5


def test_iter_facts_and_vector_replacement(store):
    boston_then_denver(store)
    fresh = np.ones(16, dtype=np.float32) / 4.0
    store.replace_fact_vectors({"f_boston": fresh})
    vectors = {fact.id: vector for fact, vector in store.iter_facts()}
    assert set(vectors) == {"f_boston", "f_denver"}
    assert np.allclose(vectors["f_boston"], fresh)
    assert store.existing_fact_ids(["f_boston", "nope"]) == {"f_boston"}


def test_stats_count_facts(store):
    boston_then_denver(store)
    assert (store.stats(ALICE)["facts"], store.stats(ALICE)["current_facts"]) == (2, 1)
    assert store.stats(BOB)["facts"] == 0


def test_migrations_skip_numbers_that_do_not_exist(monkeypatch):
    """Branches reserve migration numbers; a gap must not stop a store from opening."""
    from anamnesis.store.postgres import schema as postgres_schema
    from anamnesis.store.sqlite import schema as sqlite_schema

    for schema in (sqlite_schema, postgres_schema):
        monkeypatch.setattr(schema, "MIGRATIONS", {1: [], 3: [], 4: []})
        assert schema.pending(0) == [1, 3, 4]
        assert schema.pending(1) == [3, 4]
        assert schema.pending(4) == []


def test_a_version_one_sqlite_store_upgrades_to_the_fact_tables(tmp_path):
    from anamnesis.store.sqlite import SQLiteStore
    from anamnesis.store.sqlite.driver import sqlite3
    from anamnesis.store.sqlite.schema import LATEST, MIGRATIONS

    conn = sqlite3.connect(tmp_path / "old.db")
    for statement in MIGRATIONS[1]:
        conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('application', 'anamnesis'), ('schema_version', '1')")
    conn.commit()
    conn.close()
    store = SQLiteStore(tmp_path / "old.db", dim=16)
    try:
        assert store.get_meta("schema_version") == str(LATEST)
        assert store.find_facts(ALICE, FactQuery()) == []
    finally:
        store.close()
