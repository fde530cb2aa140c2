"""The read verbs of Memory: search, analyse, context, get, get_all, history.

Mixed into ``Memory``; kept apart so the facade stays readable. Every read is
confined to the caller's scope, checked by ``Memory._scope``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from ..consolidate.view import profile_block
from ..context import (
    DEFAULT_BUDGET_TOKENS,
    DEFAULT_NEIGHBOUR_HITS,
    MIN_BUDGET_TOKENS,
    assemble,
    facts_of,
)
from ..errors import InvalidInputError
from ..ingest.normalise import (
    MAX_INT,
    MIN_INT,
    check_int,
    check_metadata,
    check_text,
    parse_time,
)
from ..retrieve.analysis import QueryAnalysis, analyse
from ..retrieve.archive import merge_archived, rank_archived
from ..retrieve.query import search_terms
from ..store.base import Filters
from ..tokens import TokenCounter
from ..types import (
    Context,
    ContextFact,
    Episode,
    EpisodeVersion,
    Hit,
    Page,
)
from .state import MemoryState
from .verbs import reads

#: Upper bound on ``limit`` for search and listing.
MAX_LIMIT = 1000

#: Hits ``context`` searches for before packing them into the budget.
CONTEXT_HITS = 50


class ReadVerbs(MemoryState):
    """Search and retrieval of stored episodes (see ``anamnesis.retrieve``)."""

    @reads
    def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        limit: int = 10,
        filters: Filters | Mapping[str, Any] | None = None,
        explain: bool = False,
        now: datetime | str | float | None = None,
        as_of: datetime | str | float | None = None,
        include_archive: bool = False,
    ) -> list[Hit]:
        """The episodes that best answer ``query``, with their neighbouring turns.

        ``now`` is when the question is asked (default: ``as_of`` if given, else the
        present); relative time in the question ("last week", "in June") resolves
        against it. ``as_of`` searches the memory as it stood at that moment: episodes
        recorded after it are invisible (``Filters.recorded_before``). With
        ``explain=True`` each hit says how every channel ranked it and carries the
        question's analysis (see ``analyse``). ``include_archive=True`` also searches
        the archived episodes (``archive``), a slower scan fused with the hits by
        reciprocal rank; archived hits carry an ``archive`` channel.
        """
        query = check_text(query, "query")
        limit = check_limit(limit)
        scope = self._scope(user_id, agent_id, session_id)
        search_filters = to_filters(filters)
        if as_of is not None:
            search_filters = replace(search_filters, recorded_before=parse_time(as_of, "as_of"))
        when = parse_time(now, "now") if now is not None else search_filters.recorded_before
        if not isinstance(include_archive, bool):
            raise InvalidInputError("include_archive must be True or False")
        hits = self._retriever.search(query, scope, search_filters, limit, explain, when)
        if include_archive:
            archived = rank_archived(
                self._store.iter_archived(scope, search_filters),
                self._embedder.embed_query(query),
                search_terms(query),
                limit,
            )
            hits = merge_archived(hits, archived, limit)
        self._usage.retrieved(scope.user_id, (h.episode.id for h in hits), datetime.now(UTC))
        return hits

    @reads
    def analyse(self, query: str, *, now: datetime | str | float | None = None) -> QueryAnalysis:
        """How ``search`` reads ``query`` asked at ``now`` (default: the present).

        The analysis holds the search terms, the reference time, and the temporal
        reading: what kind of time question it is (``when``, ``duration``, ``before``,
        ``after``, ``first``, ``last``, ``order``, ``range``), whether it asks about
        history or the current state, and the time ranges it names, resolved against
        ``now``. ``.to_dict()`` is JSON-friendly.
        """
        return analyse(check_text(query, "query"), parse_time(now, "now"))

    @reads
    def context(
        self,
        query: str,
        *,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        filters: Filters | Mapping[str, Any] | None = None,
        now: datetime | str | float | None = None,
        limit: int = CONTEXT_HITS,
        neighbour_hits: int = DEFAULT_NEIGHBOUR_HITS,
        facts: Sequence[ContextFact] | None = None,
        profile: bool = False,
    ) -> Context:
        """A compact, dated, provenance-tagged context for a reader LLM, within a budget.

        Searches like ``search`` (``limit`` hits), then packs the best hits, each of the
        best ``neighbour_hits`` with its neighbouring turns, grouped by session under
        dated headers, without repeats, into at most ``budget_tokens`` WordPiece tokens
        (format: docs/context-format.md). ``facts`` are placed first; by default they
        are the facts the hits carry (the ``facts`` channel of the ``facts`` preset).
        ``profile=True`` puts a short profile block before them: the current values of
        the people the question names, else of the user (``consolidate`` builds the
        profiles; none yet, no block).
        """
        query = check_text(query, "query")
        limit = check_limit(limit)
        budget_tokens = check_int(budget_tokens, "budget_tokens", minimum=MIN_BUDGET_TOKENS)
        neighbour_hits = check_int(neighbour_hits, "neighbour_hits", minimum=0, maximum=MAX_LIMIT)
        if not isinstance(profile, bool):
            raise InvalidInputError("profile must be True or False")
        scope = self._scope(user_id, agent_id, session_id)
        when = parse_time(now, "now")
        hits = self._retriever.search(query, scope, to_filters(filters), limit, False, when)
        self._usage.retrieved(scope.user_id, (h.episode.id for h in hits), datetime.now(UTC))
        if self._tokens is None:
            self._tokens = TokenCounter()
        return assemble(
            query,
            hits,
            budget_tokens=budget_tokens,
            counter=self._tokens,
            now=when,
            facts=facts_of(hits) if facts is None else facts,
            neighbour_hits=neighbour_hits,
            profile=profile_block(self._store, scope, query) if profile else (),
        )

    @reads
    def get(
        self,
        episode_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> Episode:
        """One episode by id; NotFoundError if it is not in the scope (or archived).
        Counted as a read in the episode's usage (``usage``)."""
        scope = self._scope(user_id, agent_id, session_id)
        episode = self._fetch(episode_id, scope)
        self._usage.read(scope.user_id, episode.id, datetime.now(UTC))
        return episode

    @reads
    def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
        filters: Filters | Mapping[str, Any] | None = None,
    ) -> Page:
        """A page of the scope's episodes in event-time order."""
        limit = check_limit(limit)
        offset = check_int(offset, "offset", minimum=0)
        items, total = self._store.list_episodes(
            self._scope(user_id, agent_id, session_id),
            limit=limit,
            offset=offset,
            filters=to_filters(filters),
        )
        next_offset = offset + len(items) if offset + len(items) < total else None
        return Page(items=items, total=total, next_offset=next_offset)

    @reads
    def history(
        self,
        episode_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> list[EpisodeVersion]:
        """Every version of an episode, oldest first, ending with the current one; each
        with the time it was written (``recorded_at``) and, but the current one, the
        time an update replaced it (``changed_at``)."""
        scope = self._scope(user_id, agent_id, session_id)
        current = self._fetch(episode_id, scope)
        prior = self._store.episode_versions(episode_id, scope)
        latest = EpisodeVersion(
            current.id, current.version, current.content, current.metadata, None
        )
        # A version was written when the one before it was replaced; the first, when
        # the episode was recorded.
        written = [current.recorded_at, *(v.changed_at for v in prior)]
        return [
            replace(version, recorded_at=at)
            for version, at in zip([*prior, latest], written, strict=True)
        ]


def check_limit(limit: object) -> int:
    """The ``limit`` of a search or a listing: an integer from 1 to ``MAX_LIMIT``."""
    return check_int(limit, "limit", minimum=1, maximum=MAX_LIMIT)


_FILTER_KEYS = (
    "role",
    "not_role",
    "speaker",
    "modality",
    "event_after",
    "event_before",
    "metadata",
)


def to_filters(value: Filters | Mapping[str, Any] | None) -> Filters:
    """Filters from a Filters object or a dict with keys among ``_FILTER_KEYS``."""
    if value is None:
        return Filters()
    if isinstance(value, Filters):
        _check_filter_numbers(value.metadata)
        return value
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"filters must be a dict, not {type(value).__name__}")
    unknown = set(value) - set(_FILTER_KEYS)
    if unknown:
        raise InvalidInputError(
            f"unknown filter(s) {sorted(unknown)}; allowed: {list(_FILTER_KEYS)}"
        )
    metadata = check_metadata(value.get("metadata"))
    _check_filter_numbers(metadata)
    return Filters(
        role=value.get("role"),
        not_role=value.get("not_role"),
        speaker=value.get("speaker"),
        modality=value.get("modality"),
        event_after=parse_time(value.get("event_after"), "event_after"),
        event_before=parse_time(value.get("event_before"), "event_before"),
        metadata=metadata,
    )


def _check_filter_numbers(metadata: Mapping[str, Any]) -> None:
    """A metadata filter's integers are compared in SQL, so they must fit the store's
    64-bit integers (a larger one can match nothing there, and cannot be bound)."""
    for key, item in metadata.items():
        if isinstance(item, int) and not isinstance(item, bool):
            check_int(item, f"filters metadata {key!r}", minimum=MIN_INT, maximum=MAX_INT)
