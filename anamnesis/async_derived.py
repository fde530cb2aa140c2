"""``AsyncMemory.derived``: ``Memory.derived`` as coroutines, run on the reader pool
(``async_memory`` explains the threads)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .consolidate.types import Profile, SessionSummary
from .memory_derived import DerivedView

#: ``AsyncMemory._read``: runs a call on a reader thread.
Read = Callable[..., Awaitable[Any]]


class AsyncDerivedView:
    """Summaries and profiles of one ``AsyncMemory`` (``memory.derived``)."""

    def __init__(self, view: DerivedView, read: Read) -> None:
        self._view = view
        self._read = read

    async def summaries(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> list[SessionSummary]:
        """``Memory.derived.summaries``, run on a reader thread."""
        found: list[SessionSummary] = await self._read(
            self._view.summaries, user_id=user_id, agent_id=agent_id, session_id=session_id
        )
        return found

    async def profiles(
        self, *, user_id: str | None = None, agent_id: str | None = None
    ) -> list[Profile]:
        """``Memory.derived.profiles``, run on a reader thread."""
        found: list[Profile] = await self._read(
            self._view.profiles, user_id=user_id, agent_id=agent_id
        )
        return found

    async def profile(
        self,
        subject: str = "user",
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> Profile | None:
        """``Memory.derived.profile``, run on a reader thread."""
        found: Profile | None = await self._read(
            self._view.profile, subject, user_id=user_id, agent_id=agent_id
        )
        return found
