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


# -- an item's closest sources (``derived_nearest``: the summaries channel's proposals) ----
def _cited(store, count: int = 20) -> tuple[list, np.ndarray, list]:
    """Alice's ``count`` turns in two sessions, roles alternating, and Bob's one turn,
    all cited by Alice's profile ``prof_a``: (Alice's episodes, their vectors, Bob's id).
    Bob's turn holds the question's own vector (``_QUESTION``): the closest of all."""
    alice = [
        replace(
            make_episode(f"turn {i}", scope=ALICE, role="user" if i % 2 else "assistant"),
            session_id="s1" if i < count // 2 else "s2",
            turn_index=i,
        )
        for i in range(count)
    ]
    vectors = unit_vectors(count, seed=11)
    store.insert_episodes(alice, vectors)
    bob = make_episode("bob's turn", scope=BOB)
    store.insert_episodes([bob], _QUESTION[None, :])
    provenance = [*(e.id for e in alice), bob.id]
    store.write_derived(ALICE, [_item(ALICE, "prof_a", provenance, session=None)], unit_vectors(1))
    return alice, vectors, [bob.id]


_QUESTION = unit_vectors(1, seed=12)[0]


def _expected(episodes, vectors, limit: int, keep=lambda e: True) -> list[tuple[str, float]]:
    """The ``limit`` closest of ``episodes`` (in time order) that ``keep`` lets through,
    each with its stored vector's own cosine, ties oldest first."""
    scored = [
        (e.id, float(v @ _QUESTION)) for e, v in zip(episodes, vectors, strict=True) if keep(e)
    ]
    return sorted(scored, key=lambda pair: -pair[1])[:limit]


def test_an_item_proposes_its_closest_sources_in_scope_and_filters(store) -> None:
    alice, vectors, bob = _cited(store)
    nearest = store.derived_nearest(["prof_a"], _QUESTION, ALICE, Filters(), 8)
    assert nearest == {"prof_a": _expected(alice, vectors, 8)}  # the scores exactly
    assert not {episode_id for episode_id, _ in nearest["prof_a"]} & set(bob)
    users = store.derived_nearest(["prof_a"], _QUESTION, ALICE, Filters(role="user"), 8)
    assert users == {"prof_a": _expected(alice, vectors, 8, lambda e: e.role == "user")}
    others = store.derived_nearest(["prof_a"], _QUESTION, ALICE, Filters(not_role="user"), 3)
    assert others == {"prof_a": _expected(alice, vectors, 3, lambda e: e.role != "user")}
    later = Filters(event_after=alice[15].event_time)
    assert store.derived_nearest(["prof_a"], _QUESTION, ALICE, later, 8) == {
        "prof_a": _expected(alice, vectors, 8, lambda e: e.event_time >= alice[15].event_time)
    }
    in_s2 = Scope("alice", None, "s2")
    assert store.derived_nearest(["prof_a"], _QUESTION, in_s2, Filters(), 8) == {
        "prof_a": _expected(alice, vectors, 8, lambda e: e.session_id == "s2")
    }
    # Alice's item is not Bob's, though it cites his turn.
    assert store.derived_nearest(["prof_a"], _QUESTION, BOB, Filters(), 8) == {}
    assert store.derived_nearest(["prof_a"], _QUESTION, ALICE, Filters(), 0) == {}


def test_an_archived_source_is_not_proposed_until_it_is_restored(store) -> None:
    alice, vectors, _ = _cited(store)
    best = _expected(alice, vectors, 8)
    first = best[0][0]
    assert store.derived_nearest(["prof_a"], _QUESTION, ALICE, Filters(), 8)["prof_a"] == best
    store.archive(ALICE, Selection(episode_ids=(first,)), NOW)
    assert store.derived_nearest(["prof_a"], _QUESTION, ALICE, Filters(), 8)["prof_a"] == (
        _expected(alice, vectors, 8, lambda e: e.id != first)
    )
    store.restore(ALICE, Selection(episode_ids=(first,)))
    assert store.derived_nearest(["prof_a"], _QUESTION, ALICE, Filters(), 8)["prof_a"] == best


def test_sources_tied_on_cosine_come_oldest_first(store) -> None:
    episodes = [make_episode(f"same words {i}", scope=ALICE) for i in range(6)]
    same = np.repeat(unit_vectors(1, seed=3), 6, axis=0)
    store.insert_episodes(list(reversed(episodes)), same)  # stored newest first
    cited = [e.id for e in reversed(episodes)]
    store.write_derived(ALICE, [_item(ALICE, "prof_a", cited, session=None)], unit_vectors(1))
    nearest = store.derived_nearest(["prof_a"], _QUESTION, ALICE, Filters(), 4)
    assert [episode_id for episode_id, _ in nearest["prof_a"]] == [e.id for e in episodes[:4]]


def test_a_source_waiting_for_its_vector_scores_zero(store) -> None:
    alice, vectors, _ = _cited(store, count=4)
    waiting = make_episode("not embedded yet", scope=ALICE)
    store.insert_episodes([waiting], None)
    provenance = [*(e.id for e in alice), waiting.id]
    store.write_derived(ALICE, [_item(ALICE, "prof_a", provenance, session=None)], unit_vectors(1))
    expected = sorted([*_expected(alice, vectors, 8), (waiting.id, 0.0)], key=lambda pair: -pair[1])
    nearest = store.derived_nearest(["prof_a"], _QUESTION, ALICE, Filters(), 8)
    assert nearest == {"prof_a": expected}


def test_a_metadata_filter_and_a_changed_vector_are_honoured(store) -> None:
    # A metadata filter is evaluated in SQL only; a re-embedded turn is scored by its
    # new vector at once.
    alice, vectors, _ = _cited(store)
    tagged = {e.id for e in alice[::3]}
    for episode in alice[::3]:
        store.update_episode(
            episode.id,
            ALICE,
            content=episode.content,
            content_hash=episode.content_hash,
            metadata={"topic": "pets"},
            vector=None,
            changed_at=NOW,
        )
    pets = Filters(metadata={"topic": "pets"})
    assert store.derived_nearest(["prof_a"], _QUESTION, ALICE, pets, 8) == {
        "prof_a": _expected(alice, vectors, 8, lambda e: e.id in tagged)
    }
    worst = _expected(alice, vectors, 20)[-1][0]
    at = [e.id for e in alice].index(worst)
    vectors[at] = _QUESTION
    store.update_episode(
        worst,
        ALICE,
        content="now the closest",
        content_hash="h-closest",
        metadata={},
        vector=_QUESTION,
        changed_at=NOW,
    )
    nearest = store.derived_nearest(["prof_a"], _QUESTION, ALICE, Filters(), 8)
    assert nearest == {"prof_a": _expected(alice, vectors, 8)}
    assert nearest["prof_a"][0][0] == worst


def test_sqlite_scores_many_sources_each_by_its_own_product(tmp_path) -> None:
    # The SQLite store finds an item's closest sources with the dense index's blocked
    # scan, whose products round differently from one vector's: the cosines it gives,
    # and so the order, must still be each stored vector's own, to the last bit.
    from anamnesis.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "m.db", dim=256)
    episodes = [make_episode(f"turn {i}", scope=ALICE) for i in range(600)]
    vectors = unit_vectors(600, dim=256, seed=5)
    store.insert_episodes(episodes, vectors)
    ids = [e.id for e in episodes]
    store.write_derived(ALICE, [_item(ALICE, "prof_a", ids, session=None)], unit_vectors(1, 256))
    rng = np.random.default_rng(9)
    for _ in range(20):
        query = vectors[rng.integers(600)] + rng.normal(0, 0.05, 256).astype(np.float32)
        query = (query / np.linalg.norm(query)).astype(np.float32)
        scored = sorted(
            ((e.id, float(v @ query)) for e, v in zip(episodes, vectors, strict=True)),
            key=lambda pair: -pair[1],
        )
        nearest = store.derived_nearest(["prof_a"], query, ALICE, Filters(), 8)
        assert nearest == {"prof_a": scored[:8]}
    store.close()


def test_sqlite_reads_no_source_one_by_one_at_each_search(tmp_path) -> None:
    # A profile cites every turn behind its facts: at each search the SQLite store
    # scores them off the dense index, so what SQL does costs the same for a profile
    # citing 20 turns or 2,000.
    from anamnesis.store.sqlite import SQLiteStore

    def steps(cited: int) -> int:
        store = SQLiteStore(tmp_path / f"m{cited}.db", dim=8)
        episodes = [make_episode(f"turn {i}", scope=ALICE, role="user") for i in range(cited)]
        store.insert_episodes(episodes, unit_vectors(cited, 8))
        provenance = [e.id for e in episodes]
        store.write_derived(
            ALICE, [_item(ALICE, "prof_a", provenance, session=None)], [unit_vectors(1, 8)[0]]
        )
        question, users = unit_vectors(1, 8, seed=1)[0], Filters(role="user")
        store.derived_nearest(["prof_a"], question, ALICE, users, 8)  # the first reads them
        counted = [0]

        def count() -> int:
            counted[0] += 1
            return 0

        store._conn.set_progress_handler(count, 10)
        assert len(store.derived_nearest(["prof_a"], question, ALICE, users, 8)["prof_a"]) == 8
        store.close()
        return counted[0]

    assert steps(2000) <= steps(20) + 5


def test_the_closest_rows_are_found_among_rows_within_a_rounding_of_each_other() -> None:
    # Rows a few units in the last place apart: the blocked scan and a row's own
    # product disagree on their order, so the rows kept around the ``limit``-th must
    # reach far enough for the exact ``limit`` best to be among them.
    from anamnesis.store.index.dense import DenseIndex

    rng = np.random.default_rng(4)
    base = unit_vectors(1, 256, seed=2)[0]
    noise = rng.integers(-3, 4, size=(3000, 256)) * np.spacing(np.abs(base))
    rows = (base + noise).astype(np.float32)
    index = DenseIndex(256)
    index.append((i + 1, "alice", None, "s1", row.tobytes()) for i, row in enumerate(rows))
    positions, groups = np.arange(3000), np.repeat([0, 1], [1000, 2000])
    for _ in range(20):
        query = (base + rng.normal(0, 0.01, 256)).astype(np.float32)
        exact = np.array([float(row @ query) for row in rows])
        found, cosines = index.nearest_among(query, positions, groups, 8)
        assert cosines.tolist() == exact[found].tolist()
        for group in (0, 1):
            mine = np.sort(cosines[groups[found] == group])[::-1][:8]
            assert mine.tolist() == np.sort(exact[groups == group])[::-1][:8].tolist()


def test_the_summaries_channel_proposes_a_profiles_best_turns(store) -> None:
    # A profile citing more turns than an item may propose: the channel proposes the
    # ``ITEM_EPISODES`` closest that are in scope and pass the filters, each scored by
    # the mean of the profile's cosine and its own; Bob's turn, the closest of all,
    # and the turns the filter leaves out are never proposed.
    from anamnesis.config import SearchConfig
    from anamnesis.retrieve.analysis import analyse
    from anamnesis.retrieve.request import SearchRequest
    from anamnesis.retrieve.summaries import ITEM_EPISODES, summaries

    alice, vectors, bob = _cited(store)
    [(_, profile_vector)] = [(i, v) for i, _, _, v in store.derived_texts(ALICE)]
    profile_cosine = float(profile_vector @ _QUESTION)
    for filters, keep in (
        (Filters(), lambda e: True),
        (Filters(role="user"), lambda e: e.role == "user"),
    ):
        request = SearchRequest(
            analysis=analyse("what did I say?", NOW),
            scope=ALICE,
            filters=filters,
            store=store,
            embedder=None,  # type: ignore[arg-type]  (the question's vector is given)
            config=SearchConfig(),
            _vector=_QUESTION,
        )
        proposed = [(c.episode_id, c.score) for c in summaries(request, 50)]
        assert proposed == [
            (episode_id, 0.5 * profile_cosine + 0.5 * cosine)
            for episode_id, cosine in _expected(alice, vectors, ITEM_EPISODES, keep)
        ]
        assert len(alice) > ITEM_EPISODES and not {i for i, _ in proposed} & set(bob)


def test_sqlite_reads_an_items_sources_at_a_cost_that_does_not_grow_with_the_items(
    tmp_path,
) -> None:
    # The first search that asks for an item reads its cited rowids: by the item's id,
    # not by walking every derived item of the user (the scope's index would let
    # SQLite's planner do that, without statistics).
    from anamnesis.store.sqlite import SQLiteStore

    def steps(items: int) -> int:
        store = SQLiteStore(tmp_path / f"m{items}.db", dim=16)
        ids = _episodes(store, ALICE, "s1", *(f"turn {i}" for i in range(items)))
        store.write_derived(
            ALICE,
            [_item(ALICE, f"sum_{i}", [episode_id]) for i, episode_id in enumerate(ids)],
            unit_vectors(items),
        )
        store.dense_search(unit_vectors(1)[0], ALICE, Filters(), 1)  # the index loaded
        counted = [0]

        def count() -> int:
            counted[0] += 1
            return 0

        store._conn.set_progress_handler(count, 10)
        asked = ["sum_0", "sum_1", "sum_2", "sum_3"]  # as many as the channel asks for
        assert len(store.derived_nearest(asked, unit_vectors(1)[0], ALICE, Filters(), 8)) == 4
        store.close()
        return counted[0]

    assert steps(2000) <= steps(20) + 5
