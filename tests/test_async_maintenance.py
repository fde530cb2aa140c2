"""A served memory keeps taking notes while it maintains itself.

``AsyncMemory`` runs the long verbs (``forget``, ``delete_all``, ``archive``,
``restore``, ``decay``, ``consolidate``) on a maintenance thread beside the writer
thread: a write awaited while one of them runs is applied between two of its
transactions instead of after its end. The order promised
(``anamnesis.memory.async_memory``): a maintenance verb starts after every write awaited
before it; a call awaited after another returned applies after it.

Each test runs on SQLite and on PostgreSQL. A decay or archive of a scope larger than
one batch (``EPISODE_BATCH``) is held before its second batch until the test says so,
so that "meanwhile" is a fact of the test, not a matter of timing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from store_fixtures import postgres_schema_url_fixture  # noqa: F401  (a fixture by name)

from anamnesis import AsyncMemory, InvalidInputError, Memory
from anamnesis.decay import DecayPolicy
from anamnesis.embed import get_embedder
from anamnesis.store.shared.forget import EPISODE_BATCH

EDGE = get_embedder("edge")
#: Every episode recorded today has faded by then, under this policy.
LATER = "2030-01-01"
FAST_FADING = DecayPolicy(base_stability_days=1.0)
#: More episodes than two batches of a move: it takes three.
SCOPE_SIZE = 2 * EPISODE_BATCH + 1
#: How long a held batch waits for the test before it goes on by itself.
HOLD_SECONDS = 10.0


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """Where the memory lives: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "postgres":
        return {"url": request.getfixturevalue("postgres_schema_url")}
    return {"path": tmp_path / "m.db"}


class HeldMove:
    """Holds a move (archive, decay) of the memory's store before its second batch,
    until ``release()``; ``released_in_time`` says whether that came before the hold
    gave up after ``HOLD_SECONDS``."""

    def __init__(self, memory: AsyncMemory) -> None:
        self.reached = threading.Event()
        self._release = threading.Event()
        self.released_in_time: bool | None = None
        store = memory.store
        copy: Callable[..., None] = store._copy_to_archive  # type: ignore[attr-defined]
        batches = 0

        def held_copy(*args: Any) -> None:
            nonlocal batches
            batches += 1
            if batches == 2:
                self.reached.set()
                self.released_in_time = self._release.wait(HOLD_SECONDS)
            copy(*args)

        store._copy_to_archive = held_copy  # type: ignore[attr-defined]

    async def wait_reached(self) -> None:
        """Until the move has done its first batch and waits before the second."""
        assert await asyncio.to_thread(self.reached.wait, 30), "the move never reached batch 2"

    def release(self) -> None:
        self._release.set()


async def _fill(memory: AsyncMemory, user_id: str, count: int = SCOPE_SIZE) -> list[str]:
    episodes = await memory.add_many(
        [f"turn {i}: the harbour crane lifted crate {i} at dawn" for i in range(count)],
        user_id=user_id,
    )
    return [episode.id for episode in episodes]


async def _hot_ids(memory: AsyncMemory, user_id: str) -> list[str]:
    """The ids of every hot episode of the scope, page after page."""
    ids: list[str] = []
    while True:
        page = await memory.get_all(user_id=user_id, limit=1000, offset=len(ids))
        ids += [episode.id for episode in page.items]
        if len(page.items) < 1000:
            return ids


def _move(memory: AsyncMemory, verb: str) -> Any:
    """The coroutine of a decay or an archive of the whole scope of ``ana``."""
    if verb == "decay":
        return memory.decay(user_id="ana", now=LATER, policy=FAST_FADING)
    return memory.archive(user_id="ana")


@pytest.mark.parametrize("verb", ["decay", "archive"])
def test_adds_awaited_during_a_long_move_complete_before_it_ends(
    where: dict[str, Any], verb: str
) -> None:
    async def scenario() -> None:
        async with AsyncMemory(**where, embedder=EDGE, warm=False) as memory:
            old = await _fill(memory, "ana")
            hold = HeldMove(memory)
            move = asyncio.create_task(_move(memory, verb))
            await hold.wait_reached()
            # The move is between its first and second batch: the notes go in now.
            notes = [
                (await memory.add(f"note {i} taken while the {verb} runs", user_id="ana"))[0]
                for i in range(3)
            ]
            other = (await memory.add("another user's note", user_id="bo"))[0]
            hold.release()
            moved = await move
            assert hold.released_in_time, f"the adds waited for the {verb} to end"

            # The same as the move, then the adds, one after the other: the move took
            # the scope's episodes of before it began, and the notes stay hot.
            assert sorted(moved) == sorted(old)
            assert await _hot_ids(memory, "ana") == [n.id for n in notes]
            assert [e.id for e in (await memory.get_all(user_id="bo")).items] == [other.id]
            found = await memory.search("harbour crane crate", user_id="ana", limit=5)
            assert all(hit.episode.id not in old for hit in found)
            archived = await memory.search(
                "harbour crane crate 7", user_id="ana", limit=5, include_archive=True
            )
            assert any(hit.episode.id in old for hit in archived)
            assert await memory.restore(user_id="ana") != []
            assert (await memory.stats(user_id="ana"))["episodes"] == SCOPE_SIZE + len(notes)

    asyncio.run(scenario())


def test_a_restore_of_a_large_scope_lets_adds_in_between_its_batches(
    where: dict[str, Any],
) -> None:
    async def scenario() -> None:
        async with AsyncMemory(**where, embedder=EDGE, warm=False) as memory:
            old = await _fill(memory, "ana")
            assert len(await memory.archive(user_id="ana")) == SCOPE_SIZE
            released = threading.Event()
            restore_batch = memory.store._restore  # type: ignore[attr-defined]
            batches = 0

            def held_restore(*args: Any) -> list[str]:
                nonlocal batches
                batches += 1
                if batches == 2:
                    hold_reached.set()
                    in_time.append(released.wait(HOLD_SECONDS))
                result: list[str] = restore_batch(*args)
                return result

            hold_reached = threading.Event()
            in_time: list[bool] = []
            memory.store._restore = held_restore  # type: ignore[attr-defined]
            restore = asyncio.create_task(memory.restore(user_id="ana"))
            assert await asyncio.to_thread(hold_reached.wait, 30)
            note = (await memory.add("a note taken while the restore runs", user_id="ana"))[0]
            released.set()
            assert sorted(await restore) == sorted(old)
            assert in_time == [True], "the add waited for the restore to end"
            assert sorted(await _hot_ids(memory, "ana")) == sorted([*old, note.id])

    asyncio.run(scenario())


def test_a_maintenance_verb_acts_on_the_writes_awaited_before_it(
    where: dict[str, Any],
) -> None:
    async def scenario() -> None:
        async with AsyncMemory(**where, embedder=EDGE, warm=False) as memory:
            # Awaited together: the forget starts once the adds before it are applied.
            added, report, also = await asyncio.gather(
                _fill(memory, "ana"),
                memory.forget(user_id="ana"),
                memory.add("written after the forget was awaited", user_id="bo"),
            )
            assert sorted(report.episode_ids) == sorted(added)
            assert (await memory.stats(user_id="ana"))["episodes"] == 0
            assert [e.id for e in (await memory.get_all(user_id="bo")).items] == [also[0].id]

    asyncio.run(scenario())


def test_a_failing_maintenance_verb_raises_what_memory_raises(
    where: dict[str, Any],
) -> None:
    async def scenario() -> str:
        async with AsyncMemory(**where, embedder=EDGE, warm=False) as memory:
            with pytest.raises(InvalidInputError, match="user_id") as from_async:
                await memory.decay()
            with pytest.raises(InvalidInputError, match="dry_run"):
                await memory.forget(user_id="ana", dry_run="yes")  # type: ignore[arg-type]
            with pytest.raises(InvalidInputError, match="event_after is later"):
                await memory.archive(user_id="ana", event_after=2.0, event_before=1.0)
            # The threads go on: the next write and maintenance verb work.
            note = (await memory.add("still writing", user_id="ana"))[0]
            assert await memory.archive(note.id, user_id="ana") == [note.id]
            return str(from_async.value)

    message = asyncio.run(scenario())
    sync = Memory(**where, embedder=EDGE, warm=False)
    try:
        with pytest.raises(InvalidInputError) as from_sync:
            sync.decay()
    finally:
        sync.close()
    assert str(from_sync.value) == message


def test_close_waits_for_a_running_decay_to_end(where: dict[str, Any]) -> None:
    async def scenario() -> list[str]:
        memory = AsyncMemory(**where, embedder=EDGE, warm=False)
        await _fill(memory, "ana")
        hold = HeldMove(memory)
        decay = asyncio.create_task(_move(memory, "decay"))
        await hold.wait_reached()
        closing = asyncio.create_task(memory.close())
        await asyncio.sleep(0.3)
        assert not closing.done() and not decay.done()
        with pytest.raises(InvalidInputError, match="closed"):
            await memory.add("too late", user_id="ana")
        hold.release()
        await closing
        assert decay.done()
        return await decay

    moved = asyncio.run(scenario())
    assert len(moved) == SCOPE_SIZE
    reopened = Memory(**where, embedder=EDGE, warm=False)
    try:
        assert reopened.stats(user_id="ana")["episodes"] == 0
        assert len(reopened.restore(user_id="ana")) == SCOPE_SIZE
    finally:
        reopened.close()
