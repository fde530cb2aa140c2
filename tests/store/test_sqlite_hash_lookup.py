"""Looking up stored vectors by text hash reads the hashes asked for, not the scope."""

from __future__ import annotations

from store_fixtures import sqlite_steps

from anamnesis import Memory
from anamnesis.embed import get_embedder
from anamnesis.types import Scope


def steps_of_lookup(memory: Memory, hashes: list[str]) -> int:
    """SQLite virtual-machine steps (in units of 100) spent by one hash lookup."""
    count, _ = sqlite_steps(
        memory.store, lambda: memory.store.vectors_for_hashes(hashes, Scope(user_id="u"))
    )
    return count


def test_a_hash_lookup_costs_the_same_in_a_small_and_a_large_scope(tmp_path):
    edge = get_embedder("edge")
    costs = []
    for size in (50, 4000):
        memory = Memory(path=tmp_path / f"m{size}.db", embedder=edge)
        episodes = memory.add_many(
            [f"note number {i} about topic {i % 97}" for i in range(size)], user_id="u"
        )
        hashes = [e.content_hash for e in episodes[:5]]
        found = memory.store.vectors_for_hashes(hashes, Scope(user_id="u"))
        assert set(found) == set(hashes)
        costs.append(steps_of_lookup(memory, hashes))
        memory.close()
    small, large = costs
    # Through the user's index every lookup walked the whole scope (80x the rows here).
    assert large <= small + 5, costs
