"""Listing one session's episodes reads that session, not the user's whole scope:
consolidation lists every session of a scope, one after another, to summarise it."""

from __future__ import annotations

from store_fixtures import sqlite_steps

from anamnesis import Memory
from anamnesis.embed import get_embedder
from anamnesis.types import Scope


def steps_of_listing(memory: Memory, scope: Scope) -> tuple[int, list[str]]:
    """SQLite virtual-machine steps (in units of 100) spent listing ``scope``, and the
    ids listed."""
    count, (page, total) = sqlite_steps(
        memory.store, lambda: memory.store.list_episodes(scope, limit=100, offset=0)
    )
    assert total == len(page)
    return count, [e.content for e in page]


def test_listing_a_session_costs_the_same_in_a_small_and_a_large_scope(tmp_path):
    edge = get_embedder("edge")
    costs = []
    for sessions in (2, 400):
        memory = Memory(path=tmp_path / f"m{sessions}.db", embedder=edge)
        # Every session spans the same days, so the one listed lies amid the others.
        for s in range(sessions):
            memory.add_many(
                [
                    {"content": f"turn {t} of session {s}", "event_time": 1_700_000_000 + t * 60}
                    for t in range(10)
                ],
                user_id="u",
                session_id=f"s{s}",
            )
        steps, listed = steps_of_listing(memory, Scope("u", session_id="s1"))
        assert listed == [f"turn {t} of session 1" for t in range(10)]  # in event-time order
        costs.append(steps)
        memory.close()
    small, large = costs
    # Ordered through the user's time index, the listing walked every episode of the
    # user (200 times the rows here) to find the session's.
    assert large <= small + 5, costs
