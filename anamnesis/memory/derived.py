"""``Memory.derived``: the session summaries and profiles that ``consolidate`` builds.

Read-only views, scoped like every verb (``Memory._scope``, enforced in SQL). Every
surface offers them as thin calls on this view: ``AsyncMemory.derived``
(``async_verbs``, generated), the REST routes ``/v1/derived/...`` and ``RemoteMemory.derived`` /
``AsyncRemoteMemory.derived`` (``server/remote_verbs``, generated), the MCP tools ``summaries``
and ``profile``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..consolidate.types import Profile, SessionSummary
from ..consolidate.view import find_profile, list_profiles, list_summaries
from ..ingest.normalise import check_text
from ..store.base import Store
from ..types import Scope

#: ``Memory._scope``: checks the ids and returns the scope a verb acts in.
ScopeOf = Callable[[str | None, str | None, str | None], Scope]


class DerivedView:
    """Summaries and profiles of one ``Memory`` (``memory.derived``)."""

    def __init__(self, store: Store, scope_of: ScopeOf) -> None:
        self._store = store
        self._scope_of = scope_of

    def summaries(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> list[SessionSummary]:
        """The session summaries of the scope, oldest session first, each with the
        sentences it kept, the episodes they came from and the session's time span."""
        scope = self._scope_of(user_id, agent_id, session_id)
        return list_summaries(self._store, scope)

    def profiles(self, *, user_id: str | None = None, agent_id: str | None = None) -> list[Profile]:
        """Every profile of the scope (the user's, and each named speaker's)."""
        scope = self._scope_of(user_id, agent_id, None)
        return list_profiles(self._store, scope)

    def profile(
        self,
        subject: str = "user",
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> Profile | None:
        """The profile of one person (``"user"`` or a speaker's name), or None; the
        user's by any name they go by."""
        subject = check_text(subject, "subject")
        return find_profile(self._store, self._scope_of(user_id, agent_id, None), subject)
