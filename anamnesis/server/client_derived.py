"""``RemoteMemory.derived`` and ``AsyncRemoteMemory.derived``: ``Memory.derived``'s
summaries and profiles over HTTP, with the same arguments and return types."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..consolidate.types import Profile, SessionSummary

#: A client's ``_call``: sends one verb's arguments and decodes its answer.
Call = Callable[[str, dict[str, Any]], Any]
AsyncCall = Callable[[str, dict[str, Any]], Awaitable[Any]]


class RemoteDerivedView:
    """Summaries and profiles served by ``anamnesis serve`` (``remote.derived``)."""

    def __init__(self, call: Call) -> None:
        self._call = call

    def summaries(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> list[SessionSummary]:
        """``Memory.derived.summaries``, over HTTP."""
        found: list[SessionSummary] = self._call("derived.summaries", locals())
        return found

    def profiles(self, *, user_id: str | None = None, agent_id: str | None = None) -> list[Profile]:
        """``Memory.derived.profiles``, over HTTP."""
        found: list[Profile] = self._call("derived.profiles", locals())
        return found

    def profile(
        self,
        subject: str = "user",
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> Profile | None:
        """``Memory.derived.profile``, over HTTP."""
        found: Profile | None = self._call("derived.profile", locals())
        return found


class AsyncRemoteDerivedView:
    """Summaries and profiles served by ``anamnesis serve``, as coroutines."""

    def __init__(self, call: AsyncCall) -> None:
        self._call = call

    async def summaries(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> list[SessionSummary]:
        """``Memory.derived.summaries``, over HTTP."""
        found: list[SessionSummary] = await self._call("derived.summaries", locals())
        return found

    async def profiles(
        self, *, user_id: str | None = None, agent_id: str | None = None
    ) -> list[Profile]:
        """``Memory.derived.profiles``, over HTTP."""
        found: list[Profile] = await self._call("derived.profiles", locals())
        return found

    async def profile(
        self,
        subject: str = "user",
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> Profile | None:
        """``Memory.derived.profile``, over HTTP."""
        found: Profile | None = await self._call("derived.profile", locals())
        return found
