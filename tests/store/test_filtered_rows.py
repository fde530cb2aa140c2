"""A search filtered by metadata (or while vectors wait) finds the rows SQL lets through,
remembered between searches: the same rows as evaluating the filter afresh after every
add, update and delete, in this process or another, and a repeated search reads only
the rows added since (the scope is not scanned again)."""

from __future__ import annotations

import pytest
from store_fixtures import sqlite_steps

from anamnesis import Memory
from anamnesis.embed import get_embedder
from anamnesis.store.base import Filters
from anamnesis.types import Scope

EDGE = get_embedder("edge")
USER = Scope("ana")


def passing(memory: Memory, **metadata: object) -> set[str]:
    """Ids of the episodes a search filtered by ``metadata`` may return."""
    rowids = memory.store._refreshed_rowids(USER, Filters(metadata=metadata))
    with memory.store._lock:
        places = memory.store._in_scope(list(rowids), USER)
    return {place[0] for place in places.values()}


@pytest.fixture
def memory(tmp_path):
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as memory:
        yield memory


def test_the_rows_a_metadata_filter_passes_follow_adds_updates_and_deletes(memory, tmp_path):
    work, home = memory.add(
        [
            {"content": "the quarterly report is due", "metadata": {"topic": "work"}},
            {"content": "the boiler needs a service", "metadata": {"topic": "home"}},
        ],
        user_id="ana",
    )
    assert passing(memory, topic="work") == {work.id}
    (late,) = memory.add(
        {"content": "the board meets on Friday", "metadata": {"topic": "work"}}, user_id="ana"
    )
    assert passing(memory, topic="work") == {work.id, late.id}
    memory.update(home.id, metadata={"topic": "work"}, user_id="ana")
    assert passing(memory, topic="work") == {work.id, late.id, home.id}
    memory.update(work.id, metadata={"topic": "done"}, user_id="ana")
    assert passing(memory, topic="work") == {late.id, home.id}
    memory.delete(late.id, user_id="ana")
    assert passing(memory, topic="work") == {home.id}
    # Another process's update and add are seen at the next search.
    with Memory(path=tmp_path / "m.db", embedder=EDGE, warm=False) as other:
        other.update(home.id, metadata={"topic": "home"}, user_id="ana")
        (theirs,) = other.add(
            {"content": "send the invoice", "metadata": {"topic": "work"}}, user_id="ana"
        )
    assert passing(memory, topic="work") == {theirs.id}
    hits = memory.search(
        "invoice report board boiler", user_id="ana", filters={"metadata": {"topic": "work"}}
    )
    assert [h.episode.id for h in hits] == [theirs.id]


def test_a_repeated_metadata_filter_reads_the_new_rows_not_the_scope(tmp_path):
    costs = []
    for notes in (20, 2000):
        with Memory(path=tmp_path / f"m{notes}.db", embedder=EDGE, warm=False) as memory:
            memory.add_many(
                [
                    {"content": f"note {i}", "metadata": {"topic": "work" if i % 2 else "home"}}
                    for i in range(notes)
                ],
                user_id="ana",
            )
            first = passing(memory, topic="work")
            (added,) = memory.add(
                {"content": "one more", "metadata": {"topic": "work"}}, user_id="ana"
            )
            steps, again = sqlite_steps(memory.store, lambda: passing(memory, topic="work"))
            assert again == first | {added.id}
            costs.append(steps)
    small, large = costs
    # Evaluated afresh, the filter reads every row of the scope: 100 times more here.
    assert large <= small + 5, costs
