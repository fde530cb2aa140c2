"""Derived items (session summaries, profiles) in the store, the same tests against
both backends: written and read back with provenance and vectors, scope enforced on
every path, session fingerprints that change with every write to a session, and
forget / delete removing every item built on a removed episode in its transaction."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

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

from anamnesis.store.base import DerivedRow, Filters, Selection
from anamnesis.types import Scope

ALICE = Scope("alice")
BOB = Scope("bob")
NOW = datetime(2024, 1, 1, tzinfo=UTC)


def _episodes(store, scope: Scope, session: str, *texts: str) -> list[str]:
    episodes = [
        replace(make_episode(t, scope=scope), session_id=session, turn_index=i)
        for i, t in enumerate(texts)
    ]
    store.insert_episodes(episodes, unit_vectors(len(episodes), seed=len(texts)))
    return [e.id for e in episodes]


def _item(scope: Scope, id: str, provenance, *, session: str | None = "s1") -> DerivedRow:
    return DerivedRow(
        id=id,
        kind="summary" if session else "profile",
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        session_id=session,
        subject=None if session else "user",
        text=f"summary {id}",
        body={"lines": [{"text": "x"}]},
        provenance=tuple(provenance),
        start_time=T0,
        end_time=T0,
        fingerprint="f1",
        built_at=NOW,
    )


def test_items_round_trip_with_provenance_and_vectors(store) -> None:
    ids = _episodes(store, ALICE, "s1", "I adopted a dog", "We named him Rex")
    vector = unit_vectors(1, seed=7)[0]
    store.write_derived(ALICE, [_item(ALICE, "sum_a", ids)], [vector])
    [(row, stored)] = store.find_derived(ALICE)
    assert row.provenance == tuple(ids)
    assert row.body == {"lines": [{"text": "x"}]}
    assert (row.start_time, row.fingerprint, row.session_id) == (T0, "f1", "s1")
    np.testing.assert_allclose(stored, vector, rtol=1e-6)
    assert store.find_derived(ALICE, "profile") == []
    # What matching reads: id, kind, text and vector, without provenance or body.
    [(item_id, kind, text, matched)] = store.derived_texts(ALICE)
    assert (item_id, kind, text) == ("sum_a", row.kind, row.text)
    np.testing.assert_allclose(matched, vector, rtol=1e-6)
    assert store.derived_texts(ALICE, "profile") == []
    assert store.derived_texts(BOB) == []
    assert store.derived_episodes(["sum_a"], ALICE, Filters()) == {"sum_a": ids}


def test_rewriting_an_item_replaces_it(store) -> None:
    ids = _episodes(store, ALICE, "s1", "one", "two")
    store.write_derived(ALICE, [_item(ALICE, "sum_a", ids)], unit_vectors(1))
    store.write_derived(ALICE, [_item(ALICE, "sum_a", ids[:1])], unit_vectors(1))
    [(row, _)] = store.find_derived(ALICE)
    assert row.provenance == (ids[0],)
    store.write_derived(ALICE, [], [], drop=["sum_a"])
    assert store.find_derived(ALICE) == []


def test_scope_is_enforced_on_every_path(store) -> None:
    mine = _episodes(store, ALICE, "s1", "alice's secret plan")
    store.write_derived(ALICE, [_item(ALICE, "sum_a", mine)], unit_vectors(1))
    assert store.find_derived(BOB) == []
    assert store.derived_episodes(["sum_a"], BOB, Filters()) == {}
    store.write_derived(BOB, [], [], drop=["sum_a"])  # another user cannot drop it
    assert len(store.find_derived(ALICE)) == 1
    assert store.find_derived(Scope("alice", None, "other-session")) == []
    assert store.session_prints(BOB) == []


def test_session_fingerprints_change_with_every_write(store) -> None:
    ids = _episodes(store, ALICE, "s1", "first", "second")
    [before] = store.session_prints(ALICE)
    assert (before.session_id, before.fingerprint.split(":")[0]) == ("s1", "2")
    store.update_episode(
        ids[0],
        ALICE,
        content="first, edited",
        content_hash="h2",
        metadata={},
        vector=None,
        changed_at=NOW,
    )
    [updated] = store.session_prints(ALICE)
    assert updated.fingerprint != before.fingerprint
    _episodes(store, ALICE, "s1", "third")
    [added] = store.session_prints(ALICE)
    assert added.fingerprint not in (before.fingerprint, updated.fingerprint)
    store.delete_episode(ids[1], ALICE)
    [removed] = store.session_prints(ALICE)
    assert removed.fingerprint not in (before.fingerprint, updated.fingerprint, added.fingerprint)


def test_forget_drops_every_item_built_on_a_removed_episode(store) -> None:
    kept = _episodes(store, ALICE, "s1", "kept one")
    gone = _episodes(store, ALICE, "s2", "forget me")
    store.write_derived(
        ALICE,
        [
            _item(ALICE, "sum_kept", kept),
            _item(ALICE, "sum_gone", gone, session="s2"),
            _item(ALICE, "prof_user", [*kept, *gone], session=None),
        ],
        unit_vectors(3),
    )
    _, dry = store.forget(ALICE, Selection(episode_ids=tuple(gone)), dry_run=True)
    assert dry.derived == 2 and len(store.find_derived(ALICE)) == 3
    _, counts = store.forget(ALICE, Selection(episode_ids=tuple(gone)))
    assert counts.derived == 2
    assert [row.id for row, _ in store.find_derived(ALICE)] == ["sum_kept"]
    assert store.delete_scope(ALICE).derived == 1
    assert store.find_derived(ALICE) == []


def test_looking_up_sources_costs_the_same_in_a_small_and_a_large_store(tmp_path) -> None:
    # The summaries and facts channels look up a few items' sources on every search,
    # filtered to the question's date. Without planner statistics (a store filled by
    # add, never ANALYZEd) SQLite once walked every episode of the scope dated before
    # it instead: a cost that grew with the store.
    from anamnesis.store.sqlite import SQLiteStore

    def steps(extra: int) -> int:
        store = SQLiteStore(tmp_path / f"m{extra}.db", dim=8)
        ids = _episodes(store, ALICE, "s1", "I adopted a dog", "We named him Rex")
        _episodes(store, ALICE, "s2", *(f"filler {i}" for i in range(extra)))
        store.write_derived(ALICE, [_item(ALICE, "sum_a", ids)], [unit_vectors(1, 8)[0]])
        counted = [0]

        def count() -> int:
            counted[0] += 1
            return 0

        store._conn.set_progress_handler(count, 10)
        before = Filters(event_before=datetime(2100, 1, 1, tzinfo=UTC))
        assert store.derived_episodes(["sum_a"], ALICE, before) == {"sum_a": ids}
        store.close()
        return counted[0]

    assert steps(2000) <= steps(20) + 5


def test_every_write_and_delete_of_derived_items_changes_their_epoch(store) -> None:
    # The summaries channel keeps an index of a scope's items between searches and
    # rebuilds it when this token changes; a change it missed would leave it stale.
    from anamnesis.store.shared.derived import DERIVED_EPOCH

    seen = [store.get_meta(DERIVED_EPOCH)]

    def changed() -> bool:
        seen.append(store.get_meta(DERIVED_EPOCH))
        return seen[-1] not in seen[:-1]

    ids = _episodes(store, ALICE, "s1", "I adopted a dog", "We named him Rex")
    store.write_derived(ALICE, [_item(ALICE, "sum_a", ids)], [unit_vectors(1)[0]])
    assert changed()
    store.write_derived(ALICE, [_item(ALICE, "sum_a", ids)], [unit_vectors(1)[0]])
    assert changed()  # rewritten in place
    store.write_derived(ALICE, [], [], drop=["sum_a"])
    assert changed()
    store.write_derived(ALICE, [_item(ALICE, "sum_b", ids)], [unit_vectors(1)[0]])
    assert changed()
    store.forget(ALICE, Selection(episode_ids=(ids[0],)))  # the item built on it goes
    assert changed()
    store.write_derived(ALICE, [_item(ALICE, "sum_c", ids[1:])], [unit_vectors(1)[0]])
    assert changed()
    store.delete_scope(ALICE)
    assert changed()
    store.delete_scope(BOB)  # nothing derived there: nothing changed
    assert not changed()
