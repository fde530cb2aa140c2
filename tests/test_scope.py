"""Scope isolation: one user's memories never reach another, through any verb or channel."""

from __future__ import annotations

import pytest

from anamnesis import Memory, NotFoundError
from anamnesis.bench.presets import BENCH_PRESETS


@pytest.fixture
def two_users(memory: Memory):
    (ana,) = memory.add(
        "My passport number is AX-1234 and I live in Lisbon", user_id="ana", session_id="s"
    )
    (bob,) = memory.add("I live in Oslo and collect stamps", user_id="bob", session_id="s")
    return memory, ana, bob


@pytest.mark.parametrize("preset", ["bm25", "dense", "hybrid"])
def test_search_never_crosses_users_on_any_channel(two_users, preset) -> None:
    memory, ana, bob = two_users
    memory.config = BENCH_PRESETS[preset]
    memory._retriever.config = BENCH_PRESETS[preset]
    for query in ("passport number Lisbon", "where do I live", "stamps Oslo"):
        assert {h.episode.user_id for h in memory.search(query, user_id="bob")} <= {"bob"}
        assert {h.episode.user_id for h in memory.search(query, user_id="ana")} <= {"ana"}
    assert memory.search("passport", user_id="carol") == []


def test_neighbours_stay_inside_the_user(two_users) -> None:
    memory, ana, bob = two_users
    # Both users have turn 0 of a session called "s": neighbours must not mix them.
    memory.add("and I have a cat", user_id="bob", session_id="s")
    (hit,) = [h for h in memory.search("Oslo stamps", user_id="bob") if h.episode.id == bob.id]
    assert [e.user_id for e in hit.context] == ["bob"]


def test_id_based_verbs_refuse_other_users_episodes(two_users) -> None:
    memory, ana, bob = two_users
    with pytest.raises(NotFoundError):
        memory.get(ana.id, user_id="bob")
    with pytest.raises(NotFoundError):
        memory.update(ana.id, content="hijacked", user_id="bob")
    with pytest.raises(NotFoundError):
        memory.history(ana.id, user_id="bob")
    with pytest.raises(NotFoundError):
        memory.delete(ana.id, user_id="bob")
    assert memory.get(ana.id, user_id="ana").content.startswith("My passport")


def test_listing_and_stats_are_per_user(two_users) -> None:
    memory, ana, bob = two_users
    assert [e.id for e in memory.get_all(user_id="bob").items] == [bob.id]
    assert memory.stats(user_id="ana")["episodes"] == 1


def test_delete_all_of_one_user_leaves_the_other_intact(two_users) -> None:
    memory, ana, bob = two_users
    memory.delete_all(user_id="ana")
    assert memory.get(bob.id, user_id="bob")
    assert memory.search("Oslo", user_id="bob")[0].episode.id == bob.id


def test_agent_and_session_narrow_the_scope(memory: Memory) -> None:
    memory.add("planning the trip to Japan", user_id="ana", agent_id="travel", session_id="t1")
    memory.add("budget for the trip to Japan", user_id="ana", agent_id="finance", session_id="f1")
    travel = memory.search("trip Japan", user_id="ana", agent_id="travel")
    assert [h.episode.agent_id for h in travel] == ["travel"]
    session = memory.search("trip Japan", user_id="ana", session_id="f1")
    assert [h.episode.session_id for h in session] == ["f1"]
    assert len(memory.search("trip Japan", user_id="ana")) == 2
