"""The lifecycle verbs of AsyncMemory: forget, archive, restore, usage, gate_decisions,
strength, decay, each ``Memory``'s verb as a coroutine (``async_memory`` explains the
threads: writes in order on the writer thread, reads on the reader pool).

Mixed into ``AsyncMemory``; kept apart so the facade stays readable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from .decay import DecayPolicy
from .memory import Memory
from .types import ForgetReport, GateDecision, Usage

T = TypeVar("T")


class AsyncLifecycleVerbs:
    """Erasure, archive, usage, the gate's decisions and decay, as coroutines."""

    _memory: Memory

    async def _write(
        self, call: Callable[..., T], *args: Any, **kwargs: Any
    ) -> T:  # pragma: no cover - provided by AsyncMemory
        raise NotImplementedError

    async def _read(
        self, call: Callable[..., T], *args: Any, **kwargs: Any
    ) -> T:  # pragma: no cover - provided by AsyncMemory
        raise NotImplementedError

    async def forget(
        self,
        episode_ids: Sequence[str] | str | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        event_after: datetime | str | float | None = None,
        event_before: datetime | str | float | None = None,
        containing: str | None = None,
        dry_run: bool = False,
    ) -> ForgetReport:
        """``Memory.forget``, run on the writer thread."""
        return await self._write(
            self._memory.forget,
            episode_ids,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            event_after=event_after,
            event_before=event_before,
            containing=containing,
            dry_run=dry_run,
        )

    async def archive(
        self,
        episode_ids: Sequence[str] | str | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        event_after: datetime | str | float | None = None,
        event_before: datetime | str | float | None = None,
        containing: str | None = None,
    ) -> list[str]:
        """``Memory.archive``, run on the writer thread."""
        return await self._write(
            self._memory.archive,
            episode_ids,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            event_after=event_after,
            event_before=event_before,
            containing=containing,
        )

    async def restore(
        self,
        episode_ids: Sequence[str] | str | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        event_after: datetime | str | float | None = None,
        event_before: datetime | str | float | None = None,
        containing: str | None = None,
    ) -> list[str]:
        """``Memory.restore``, run on the writer thread."""
        return await self._write(
            self._memory.restore,
            episode_ids,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            event_after=event_after,
            event_before=event_before,
            containing=containing,
        )

    async def usage(
        self,
        episode_ids: Sequence[str] | str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Usage]:
        """``Memory.usage``, run on the writer thread (it writes pending counts first)."""
        return await self._write(
            self._memory.usage,
            episode_ids,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
        )

    async def gate_decisions(
        self,
        episode_ids: Sequence[str] | str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, GateDecision]:
        """``Memory.gate_decisions``, on a reader thread."""
        return await self._read(
            self._memory.gate_decisions,
            episode_ids,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
        )

    async def strength(
        self,
        episode_ids: Sequence[str] | str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        now: datetime | str | float | None = None,
        policy: DecayPolicy | None = None,
    ) -> dict[str, float]:
        """``Memory.strength``, run on the writer thread (it writes pending counts first)."""
        return await self._write(
            self._memory.strength,
            episode_ids,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            now=now,
            policy=policy,
        )

    async def decay(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        now: datetime | str | float | None = None,
        policy: DecayPolicy | None = None,
        dry_run: bool = False,
    ) -> list[str]:
        """``Memory.decay``, run on the writer thread."""
        return await self._write(
            self._memory.decay,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            now=now,
            policy=policy,
            dry_run=dry_run,
        )
