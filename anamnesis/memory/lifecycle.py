"""The lifecycle verbs of Memory: forget, archive, restore, usage, strength, decay.

Mixed into ``Memory``; kept apart so the facade stays readable. Scope is checked by
``Memory._scope`` and enforced by the store in SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from ..decay import DEFAULT_DECAY, DecayPolicy, episode_strength
from ..errors import InvalidInputError
from ..ingest.normalise import check_episode_id, check_id, check_text, parse_time
from ..store.base import Selection
from ..types import Episode, ForgetReport, Scope, Usage
from .state import MemoryState
from .verbs import maintains, writes

#: Episode ids one ``forget`` call may name.
MAX_FORGET_IDS = 100_000
#: Episodes ``decay`` reads per page.
DECAY_PAGE = 1000


class LifecycleVerbs(MemoryState):
    """Erasure of episodes and of everything derived from them."""

    @maintains
    def forget(
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
        """Erase episodes completely: the episodes of the scope matching every condition
        given, with their prior versions, index rows, vectors, resolved times,
        provenance links, the facts no other episode supports, and sessions left empty.

        Conditions: ``episode_ids``; ``event_after`` / ``event_before`` (event time in
        ``[after, before)``); ``containing``, an exact, case-sensitive text found in
        the content, speaker or metadata, or in a prior version (what ``update`` keeps).
        With none, the whole scope goes, and ``user_id`` must be named. In one
        transaction, or for many episodes in batches of 500, each one transaction (a
        forget cut between two is finished by running it again); on SQLite the words
        then leave the file too (RELIABILITY.md says what is guaranteed).
        ``dry_run=True`` reports what would go and changes nothing.
        """
        if not isinstance(dry_run, bool):
            raise InvalidInputError("dry_run must be True or False")
        scope, selection = self._selection(
            episode_ids, user_id, agent_id, session_id, event_after, event_before, containing
        )
        removed, counts = self._store.forget(scope, selection, dry_run=dry_run)
        return ForgetReport(episode_ids=tuple(removed), counts=counts, dry_run=dry_run)

    @maintains
    def archive(
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
        """Move episodes out of the hot indexes into the archive in the same store,
        verbatim with their vector; returns the ids moved.

        Chooses episodes as ``forget`` does (with no condition, the whole scope of a
        named ``user_id``). Archived episodes are left out of ``search``, ``get`` and
        ``get_all``; ``search(..., include_archive=True)`` still finds them, and
        ``restore`` brings them back exactly. Their versions, facts and provenance stay.
        The copy is committed before the hot rows go, so a crash loses nothing.
        """
        scope, selection = self._selection(
            episode_ids, user_id, agent_id, session_id, event_after, event_before, containing
        )
        return self._store.archive(scope, selection, datetime.now(UTC))

    @maintains
    def restore(
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
        """Bring archived episodes back into the hot indexes exactly as they were (same
        id, times, version, metadata and vector); returns the ids restored. Chooses
        among the archived episodes as ``forget`` does."""
        scope, selection = self._selection(
            episode_ids, user_id, agent_id, session_id, event_after, event_before, containing
        )
        return self._store.restore(scope, selection)

    @writes
    def usage(
        self,
        episode_ids: Sequence[str] | str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Usage]:
        """How often each episode (of the scope, hot or archived) was retrieved by a
        search and read by ``get``, and when last; episodes never used are left out.
        Counts still pending in memory are written first."""
        ids = episode_ids_of(episode_ids) or ()
        scope = self._scope(user_id, agent_id, session_id)
        self._usage.flush()
        return self._store.usage(ids, scope)

    @writes
    def strength(
        self,
        episode_ids: Sequence[str] | str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        now: datetime | str | float | None = None,
        policy: DecayPolicy | None = None,
    ) -> dict[str, float]:
        """The strength at ``now`` (default: the present) of each hot episode of the
        scope among ``episode_ids``, on the forgetting curve of ``anamnesis.decay``."""
        ids = list(episode_ids_of(episode_ids) or ())
        scope = self._scope(user_id, agent_id, session_id)
        return self._strengths(self._store.get_episodes(ids, scope), scope, now, policy)

    @maintains
    def decay(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        now: datetime | str | float | None = None,
        policy: DecayPolicy | None = None,
        dry_run: bool = False,
    ) -> list[str]:
        """Archive the scope's episodes whose strength at ``now`` is below the policy's
        threshold (``anamnesis.decay``; default 0.05); returns their ids. Never deletes:
        ``restore`` brings them back. Nothing decays unless this is called.
        ``user_id`` must be named; ``dry_run`` only lists them."""
        if not isinstance(dry_run, bool):
            raise InvalidInputError("dry_run must be True or False")
        check_id(user_id, "user_id", required=True)
        scope = self._scope(user_id, agent_id, session_id)
        rule = _policy(policy)
        weak: list[str] = []
        for page in self._store.scope_pages(scope, DECAY_PAGE):
            strengths = self._strengths(page, scope, now, rule)
            weak += [i for i, value in strengths.items() if value < rule.archive_below]
        if dry_run or not weak:
            return weak
        return self._store.archive(scope, Selection(episode_ids=tuple(weak)), datetime.now(UTC))

    def _strengths(
        self,
        episodes: Sequence[Episode],
        scope: Scope,
        now: datetime | str | float | None,
        policy: DecayPolicy | None,
    ) -> dict[str, float]:
        when = parse_time(now, "now") or datetime.now(UTC)
        rule = _policy(policy)
        self._usage.flush()
        used = self._store.usage([e.id for e in episodes], scope)
        return {e.id: episode_strength(e, used.get(e.id), when, rule) for e in episodes}

    def _selection(
        self,
        episode_ids: object,
        user_id: str | None,
        agent_id: str | None,
        session_id: str | None,
        event_after: object,
        event_before: object,
        containing: object,
    ) -> tuple[Scope, Selection]:
        """The scope and selection of a lifecycle verb, checked; a whole-scope selection
        needs a named ``user_id``."""
        ids = episode_ids_of(episode_ids)
        after = parse_time(event_after, "event_after")
        before = parse_time(event_before, "event_before")
        if after is not None and before is not None and after > before:
            raise InvalidInputError("event_after is later than event_before")
        text = check_text(containing, "containing") if containing is not None else None
        selection = Selection(
            episode_ids=ids, event_after=after, event_before=before, containing=text
        )
        if selection.is_whole_scope():
            check_id(user_id, "user_id", required=True)
        return self._scope(user_id, agent_id, session_id), selection


def _policy(value: object) -> DecayPolicy:
    if value is None:
        return DEFAULT_DECAY
    if not isinstance(value, DecayPolicy):
        raise InvalidInputError(f"policy must be a DecayPolicy, not {type(value).__name__}")
    return value


def episode_ids_of(value: object) -> tuple[str, ...] | None:
    """The episode ids a verb names, checked: None, one id, or a list of ids."""
    if value is None:
        return None
    if isinstance(value, str):
        return (check_episode_id(value),)
    if not isinstance(value, list | tuple):
        raise InvalidInputError(
            f"episode_ids must be an id or a list of ids, not {type(value).__name__}"
        )
    if len(value) > MAX_FORGET_IDS:
        raise InvalidInputError(
            f"at most {MAX_FORGET_IDS:,} episode ids per call; forget in batches"
        )
    return tuple(dict.fromkeys(check_episode_id(item) for item in value))
