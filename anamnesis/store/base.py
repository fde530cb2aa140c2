"""The one narrow interface every storage backend implements.

The Memory facade validates input and owns scope; a Store persists and retrieves.
Every method that reads or writes episodes takes the caller's Scope and enforces it
in the backend's query language, so no path can cross tenants.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from ..errors import InvalidInputError
from ..types import (
    DeleteCounts,
    Episode,
    EpisodeVersion,
    Fact,
    GateDecision,
    Scope,
    Session,
    Usage,
)
from .derived_rows import DerivedRow, SessionPrint
from .episode_times import EpisodeTimes, TimeRange

#: The schema version this code writes. Migrations move older stores forward.
SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Filters:
    """Narrowing conditions beyond scope, applied in the backend on every channel."""

    role: str | None = None
    #: Episodes of any role but this one (episodes without a role pass).
    not_role: str | None = None
    speaker: str | None = None
    modality: str | None = None
    event_after: datetime | None = None
    event_before: datetime | None = None
    recorded_before: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def is_empty(self) -> bool:
        """True when nothing beyond scope restricts the search."""
        return not (
            self.role
            or self.not_role
            or self.speaker
            or self.modality
            or self.event_after
            or self.event_before
            or self.recorded_before
            or self.metadata
        )


def scope_clauses(
    scope: Scope, alias: str, placeholder: str, *, prefix: str = ""
) -> tuple[str, list[Any]]:
    """``user_id = ? AND ...`` for the levels ``scope`` sets, in either SQL dialect.

    ``placeholder`` is the driver's parameter mark (``?`` or ``%s``); ``prefix`` goes
    before each column (SQLite's ``+`` keeps the planner off the scope index).
    """
    clauses = [f"{prefix}{alias}.user_id = {placeholder}"]
    params: list[Any] = [scope.user_id]
    for column in ("agent_id", "session_id"):
        value = getattr(scope, column)
        if value is not None:
            clauses.append(f"{prefix}{alias}.{column} = {placeholder}")
            params.append(value)
    return " AND ".join(clauses), params


def filter_clauses(
    filters: Filters,
    alias: str,
    placeholder: str,
    *,
    not_equal: str,
    stored_time: Callable[[datetime], Any],
) -> tuple[list[str], list[Any]]:
    """The clauses for ``filters``' columns and times, in either SQL dialect (the
    metadata test is each dialect's own): ``not_equal`` is its null-safe inequality
    operator and ``stored_time`` turns a time into the form its columns hold."""
    clauses: list[str] = []
    params: list[Any] = []
    for column in ("role", "speaker", "modality"):
        value = getattr(filters, column)
        if value is not None:
            clauses.append(f"{alias}.{column} = {placeholder}")
            params.append(value)
    if filters.not_role is not None:
        clauses.append(f"{alias}.role {not_equal} {placeholder}")
        params.append(filters.not_role)
    for bound, test in (
        (filters.event_after, "event_time >="),
        (filters.event_before, "event_time <"),
        (filters.recorded_before, "recorded_at <="),
    ):
        if bound is not None:
            clauses.append(f"{alias}.{test} {placeholder}")
            params.append(stored_time(bound))
    return clauses, params


def episode_of(
    row: Sequence[Any],
    stored_time: Callable[[Any], Any] = lambda value: value,
    stored_metadata: Callable[[Any], Any] = lambda value: value,
) -> Episode:
    """An Episode from the columns of ``EPISODE_COLUMNS``, in either SQL dialect:
    ``stored_time`` and ``stored_metadata`` read the columns its driver does not."""
    return Episode(
        id=row[0],
        user_id=row[1],
        agent_id=row[2],
        session_id=row[3],
        role=row[4],
        speaker=row[5],
        content=row[6],
        modality=row[7],
        event_time=stored_time(row[8]),
        recorded_at=stored_time(row[9]),
        metadata=stored_metadata(row[10]),
        content_hash=row[11],
        turn_index=row[12],
        version=row[13],
    )


def adjacent_by_episode(rows: Iterable[Sequence[Any]]) -> dict[str, list[tuple[str, int]]]:
    """``(episode_id, other_id, offset)`` rows as ``Store.adjacent_turns`` returns them:
    grouped by episode, nearest first (at equal distance, the turn before first)."""
    result: dict[str, list[tuple[str, int]]] = {}
    for source, other, offset in rows:
        result.setdefault(source, []).append((other, int(offset)))
    for pairs in result.values():
        pairs.sort(key=lambda pair: (abs(pair[1]), pair[1]))
    return result


def replaced_at(version: EpisodeVersion) -> datetime:
    """When a prior version to be stored was replaced (a store keeps replaced versions only)."""
    if version.changed_at is None:
        raise InvalidInputError(
            f"version {version.version} of episode {version.episode_id} has no changed_at: "
            "only a replaced version is kept; give the time the next version replaced it"
        )
    return version.changed_at


def fact_scope(scope: Scope) -> Scope:
    """The scope facts live in: user and agent (facts outlive the session they came from)."""
    return Scope(scope.user_id, scope.agent_id, None)


def fact_visibility(
    alias: str,
    placeholder: str,
    as_of: datetime | None,
    current_only: bool,
    to_param: Callable[[datetime], Any],
) -> tuple[str, list[Any]]:
    """The WHERE fragment for facts the memory held at ``as_of`` (None: now).

    Every visible fact was recorded by ``as_of`` and not retracted by then. With
    ``current_only`` it must also have been true at ``as_of``: begun (``valid_from``),
    not ended (``valid_to``), and not replaced or ended by what the memory knew by then.
    A supersession learned after ``as_of`` does not end the old fact at ``as_of``.
    """
    f, p = alias, placeholder
    if as_of is None:
        clauses = [f"{f}.retracted_at IS NULL"]
        params: list[Any] = []
        if current_only:
            clauses.append(f"{f}.superseded_by IS NULL AND {f}.superseded_at IS NULL")
        return " AND ".join(clauses), params
    t = to_param(as_of)
    clauses = [f"{f}.recorded_at <= {p}", f"({f}.retracted_at IS NULL OR {f}.retracted_at > {p})"]
    params = [t, t]
    if current_only:
        clauses += [
            f"({f}.superseded_at IS NULL OR {f}.superseded_at > {p})",
            f"({f}.valid_from IS NULL OR {f}.valid_from <= {p})",
            f"({f}.valid_to IS NULL OR {f}.valid_to > {p} "
            f"OR ({f}.superseded_at IS NOT NULL AND {f}.superseded_at > {p}))",
        ]
        params += [t, t, t, t]
    return " AND ".join(clauses), params


@dataclass(frozen=True, slots=True)
class Selection:
    """Which episodes of a scope ``Store.forget`` removes: those matching every
    condition given (none given: the whole scope).

    ``episode_ids``: these ids; ``event_after`` / ``event_before``: event time in
    ``[after, before)``; ``containing``: the exact, case-sensitive text appears in the
    episode's content, speaker or metadata, or in one of its prior versions.
    """

    episode_ids: tuple[str, ...] | None = None
    event_after: datetime | None = None
    event_before: datetime | None = None
    containing: str | None = None

    def is_whole_scope(self) -> bool:
        """True when no condition narrows the scope."""
        return (
            self.episode_ids is None
            and self.event_after is None
            and self.event_before is None
            and self.containing is None
        )


@dataclass(frozen=True, slots=True)
class FactQuery:
    """Which facts ``Store.find_facts`` returns.

    ``subjects`` matches any of several names of one subject (its aliases);
    ``as_of`` hides what was recorded later (None: now); ``include_superseded``
    also returns facts that were replaced, retracted or ended by ``as_of``.
    """

    subjects: tuple[str, ...] = ()
    predicate: str | None = None
    as_of: datetime | None = None
    include_superseded: bool = False
    ids: tuple[str, ...] | None = None
    limit: int = 1000


@dataclass(frozen=True, slots=True)
class Supersession:
    """Fact ``old_id`` is replaced by ``new_id``: it stays stored, with an end.

    ``new_id`` None: the fact ended with nothing in its place ("I left Tencent").
    """

    old_id: str
    new_id: str | None
    valid_to: datetime | None
    superseded_at: datetime


@dataclass(slots=True)
class FactChanges:
    """One consolidation step, written in one transaction.

    ``added`` facts with one vector each; ``supersessions`` close older facts;
    ``sources`` add provenance ``(fact_id, episode_id)`` to stored facts;
    ``retractions`` withdraw facts ``(fact_id, at)``; ``consolidated`` marks the
    episodes this step read, at ``consolidated_at``.
    """

    added: list[Fact] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)
    supersessions: list[Supersession] = field(default_factory=list)
    sources: list[tuple[str, str]] = field(default_factory=list)
    retractions: list[tuple[str, datetime]] = field(default_factory=list)
    consolidated: list[str] = field(default_factory=list)
    consolidated_at: datetime | None = None

    def is_empty(self) -> bool:
        """True when writing it would change nothing."""
        return not (
            self.added
            or self.supersessions
            or self.sources
            or self.retractions
            or self.consolidated
        )


#: Where an episode sits: ``(session_id, turn_index, speaker, role)`` (``Store.turn_info``).
TurnInfo = tuple[str | None, int | None, str | None, str | None]
#: The columns of ``episodes e`` that make a ``TurnInfo``, in its order (both backends).
TURN_COLUMNS = "e.session_id, e.turn_index, e.speaker, e.role"


@dataclass(frozen=True, slots=True)
class Candidate:
    """An episode id proposed by one channel, with that channel's raw score.

    ``turn`` is where the episode sits, ``(session_id, turn_index, speaker, role)`` as
    ``Store.turn_info`` gives it, when the store read it in the same statement as the
    id (SQLite's searches do); None when not known. It takes no part in equality.
    """

    episode_id: str
    score: float
    turn: TurnInfo | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class PendingVector:
    """An episode stored without its vector yet (``Memory(indexing="background")``):
    what the indexer embeds, and the hash ``Store.index_pending`` checks is current."""

    rowid: int
    user_id: str
    content_hash: str
    content: str
    speaker: str | None


class Store(Protocol):
    """Persistence for episodes, sessions and their lexical and dense indexes."""

    #: Names reported by ``Memory.capabilities``.
    backend: str
    #: ``normal`` or ``full`` (``config.DURABILITY_LEVELS``): how commits reach the disk.
    durability: str

    @property
    def vector_backend(self) -> str:
        """The dense search in use (and why a faster path is off, if it failed)."""
        ...

    @property
    def lexical_backend(self) -> str:
        """How lexical search runs (reported by ``Memory.capabilities``)."""
        ...

    @property
    def erasure(self) -> str:
        """How ``forget`` removes the text from the store's files (``Memory.capabilities``)."""
        ...

    # -- identity and lifecycle -------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A value from the store's metadata table, or None."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Set a value in the store's metadata table."""
        ...

    def close(self) -> None:
        """Release connections and caches. Idempotent."""
        ...

    def bulk_load(self) -> AbstractContextManager[None]:
        """A context in which many rows are written faster (indexes finished at the end)."""
        ...

    def warm_up(self) -> None:
        """Load whatever the first search would otherwise load (may do nothing)."""
        ...

    @property
    def damage(self) -> str | None:
        """Why the store was found damaged (it then refuses writes), or None."""
        ...

    def check(self) -> list[str]:
        """A full consistency check: the problems found (empty when healthy)."""
        ...

    # -- writes -------------------------------------------------------------------------
    def upsert_sessions(self, sessions: Sequence[Session]) -> None:
        """Create sessions, or fill in a start time that was unknown."""
        ...

    def insert_episodes(
        self,
        episodes: Sequence[Episode],
        vectors: np.ndarray | None,
        sessions: Sequence[Session] = (),
        versions: Sequence[EpisodeVersion] = (),
    ) -> None:
        """Store episodes with their index rows, sessions and prior versions, all or nothing.
        ``vectors`` None (stores with ``background_indexing`` only): each episode is
        marked as waiting for its vector, in the same transaction."""
        ...

    # -- background indexing --------------------------------------------------------------
    #: Whether the store can hold episodes before their vectors (the three verbs below).
    background_indexing: bool

    def pending_vectors(self, limit: int) -> list[PendingVector]:
        """The oldest ``limit`` episodes waiting for a vector, in the order stored."""
        ...

    def pending_count(self, scope: Scope | None) -> int:
        """How many episodes of ``scope`` (None: the store) wait for a vector."""
        ...

    def index_pending(self, vectors: Sequence[tuple[PendingVector, np.ndarray]]) -> int:
        """Write pending episodes' vectors (an episode deleted or changed since it was
        read is skipped) and clear their marks, in one transaction; how many written."""
        ...

    def insert_gated(
        self,
        episodes: Sequence[Episode],
        vectors: np.ndarray,
        decisions: Sequence[GateDecision],
        sessions: Sequence[Session] = (),
    ) -> None:
        """Store episodes the encoding gate has judged (one decision each, in order):
        the admitted ones as ``insert_episodes`` does, the others verbatim with their
        vector in the archive only, and every decision; all or nothing."""
        ...

    def gate_decisions(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, GateDecision]:
        """The gate's decisions about the episodes of ``scope`` (hot or archived) among
        ``episode_ids`` that were gated, by id."""
        ...

    def existing_ids(self, episode_ids: Sequence[str]) -> set[str]:
        """Which of these ids are already stored (in any scope)."""
        ...

    def next_turn_index(self, user_id: str, session_id: str) -> int:
        """The position the next turn of a session takes."""
        ...

    def vectors_for_hashes(self, hashes: Sequence[str], scope: Scope) -> dict[str, np.ndarray]:
        """Stored vectors of ``scope.user_id``'s episodes whose content hash is in
        ``hashes``. Never another user's: a vector one tenant stored (or imported)
        must not become another's, nor tell them that a text exists."""
        ...

    def episode_vectors(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, np.ndarray]:
        """Each in-scope episode's own stored vector, by id (others are left out)."""
        ...

    def update_episode(
        self,
        episode_id: str,
        scope: Scope,
        *,
        content: str,
        content_hash: str,
        metadata: dict[str, Any],
        vector: np.ndarray | None,
        changed_at: datetime,
    ) -> Episode:
        """Replace content/metadata, keeping the prior state as a version."""
        ...

    def delete_episode(self, episode_id: str, scope: Scope) -> DeleteCounts:
        """Delete one episode and every row derived from it."""
        ...

    def delete_scope(self, scope: Scope) -> DeleteCounts:
        """Delete everything inside a scope (``forget`` of the whole scope)."""
        ...

    def forget(
        self, scope: Scope, selection: Selection, *, dry_run: bool = False
    ) -> tuple[list[str], DeleteCounts]:
        """Erase the episodes of ``scope`` that ``selection`` picks, with every row
        derived from them: their ids and the rows removed per table. A session left
        empty goes too; a whole-scope selection also removes the scope's sessions and
        (without a session) its facts. More than ``EPISODE_BATCH`` episodes go in
        batches, each one transaction that leaves its episodes wholly erased and the
        rest intact (``shared.forget.forget_in_batches``); the ids and counts are those
        one transaction would give. The SQLite store then truncates its write-ahead
        log, so the text leaves the file. ``dry_run`` does the work in one transaction
        and rolls it back."""
        ...

    def archive(self, scope: Scope, selection: Selection, archived_at: datetime) -> list[str]:
        """Move the episodes of ``scope`` that ``selection`` picks out of the hot tables
        and indexes into the archive, verbatim with their vector: the copy is committed
        first, then the hot rows go. Returns the ids moved (with any of the scope whose
        earlier move was cut between the two steps)."""
        ...

    def restore(self, scope: Scope, selection: Selection) -> list[str]:
        """Bring archived episodes of ``scope`` that ``selection`` picks back into the hot
        tables and indexes, exactly as they were (same id, times, version, vector), in
        one transaction. Returns the ids restored."""
        ...

    def iter_archived(
        self, scope: Scope | None, filters: Filters, batch_size: int = 1000
    ) -> Iterator[tuple[Episode, np.ndarray | None]]:
        """The archived episodes of ``scope`` (None: every scope, for export) that pass
        ``filters``, with their vectors."""
        ...

    def record_usage(self, deltas: Sequence[Any]) -> None:
        """Add a batch of usage counts (``anamnesis.usage.UsageDelta``) in one
        transaction, without making any reader wait; counts of episodes that no longer
        exist are dropped."""
        ...

    def usage(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, Usage]:
        """The usage counters of the episodes of ``scope`` (hot or archived) among
        ``episode_ids`` that have any, by id."""
        ...

    def replace_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        """Overwrite the dense vectors of the given episodes (re-indexing)."""
        ...

    # -- reads --------------------------------------------------------------------------
    def get_episodes(self, episode_ids: Sequence[str], scope: Scope) -> list[Episode]:
        """Episodes by id, in the order asked, skipping ids outside the scope."""
        ...

    def list_episodes(
        self, scope: Scope, *, limit: int, offset: int, filters: Filters | None = None
    ) -> tuple[list[Episode], int]:
        """A page of episodes in event-time order, and the total in scope."""
        ...

    def scope_pages(self, scope: Scope, size: int) -> Iterator[list[Episode]]:
        """Every episode of ``scope``, in pages of at most ``size``, in the order they
        were stored. Each page is read by key after the last, so a page costs the same
        however many came before it (``list_episodes``' offsets walk them all)."""
        ...

    def episode_versions(self, episode_id: str, scope: Scope) -> list[EpisodeVersion]:
        """Prior versions of an episode, oldest first, each with the time an update
        replaced it (``changed_at``)."""
        ...

    def neighbours(
        self, episodes: Sequence[Episode], window: int
    ) -> dict[str, tuple[Episode, ...]]:
        """For each episode, the turns within ``window`` positions of it in its session."""
        ...

    def turn_info(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, TurnInfo]:
        """``(session_id, turn_index, speaker, role)`` of each episode in ``scope`` (others
        are left out): a light lookup for channels that reason about positions, speakers
        and roles."""
        ...

    def adjacent_turns(
        self, episode_ids: Sequence[str], scope: Scope, filters: Filters, window: int
    ) -> dict[str, list[tuple[str, int]]]:
        """For each episode, the ids of the turns within ``window`` positions of it in its
        session that satisfy ``filters``, with their signed offset (``-1`` = the turn
        before), nearest first. Only ids inside ``scope`` appear, on both sides."""
        ...

    def lexical_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, limit: int
    ) -> list[Candidate]:
        """BM25-style ranking of episodes matching any of ``terms``, best first."""
        ...

    def lexical_rank(
        self, terms: Sequence[str], episode_ids: Sequence[str], scope: Scope, limit: int
    ) -> list[Candidate]:
        """``lexical_search`` among ``episode_ids`` only (those in ``scope``; the caller
        has applied its filters): each scores what ``lexical_search`` would give it, and
        the cost follows how many ids are given, not how many episodes hold the terms."""
        ...

    def dense_search(
        self, vector: np.ndarray, scope: Scope, filters: Filters, limit: int
    ) -> list[Candidate]:
        """Episodes by cosine similarity to ``vector``, best first."""
        ...

    def dense_search_sessions(
        self,
        vector: np.ndarray,
        scope: Scope,
        session_ids: Sequence[str],
        filters: Filters,
        limit: int,
    ) -> dict[str, list[Candidate]]:
        """For each session, what ``dense_search`` answers with ``scope`` narrowed to it
        (sessions outside ``scope`` find nothing), in one read."""
        ...

    def dense_neighbours(
        self, vectors: np.ndarray, scope: Scope, limit: int
    ) -> list[list[Candidate]]:
        """For each of ``vectors``, the ``limit`` episodes of ``scope`` most similar by
        cosine, best first (``dense_search`` for many vectors, without filters: the
        encoding gate's lookup of what a batch's episodes resemble)."""
        ...

    def time_search(
        self,
        vector: np.ndarray,
        ranges: Sequence[TimeRange],
        scope: Scope,
        filters: Filters,
        limit: int,
    ) -> list[Candidate]:
        """Episodes that happened in, or mention a time overlapping, one of ``ranges``.

        Ranked by cosine similarity to ``vector``, best first: the question's words
        need not appear in them.
        """
        ...

    def episode_times(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, EpisodeTimes]:
        """Event time and resolved time mentions of each episode in scope, by id."""
        ...

    def iter_episodes(self, batch_size: int = 1000) -> Iterator[tuple[Episode, np.ndarray | None]]:
        """Every episode in the store with its vector, for export and re-indexing."""
        ...

    def iter_sessions(self) -> Iterator[Session]:
        """Every session in the store."""
        ...

    def stats(self, scope: Scope | None) -> dict[str, Any]:
        """Counts for one scope; for the whole store (``scope`` None) also where it is
        and its size, which no one scope's figures reveal. ``vectors`` counts the
        episodes that have theirs, not those still waiting for one (``pending_vectors``);
        read from the scope's indexes, not from its rows."""
        ...

    # -- facts --------------------------------------------------------------------------
    # Facts live in the user/agent scope (``fact_scope``); every method confines its
    # reads and writes to it in SQL. Deleting episodes (delete_episode, delete_scope)
    # trims their provenance and removes facts left with none.
    def write_facts(self, changes: FactChanges, scope: Scope) -> None:
        """Apply one consolidation step inside ``scope``, all or nothing."""
        ...

    def find_facts(self, scope: Scope, query: FactQuery) -> list[Fact]:
        """Facts in ``scope`` matching ``query``, newest ``valid_from`` first per slot."""
        ...

    def lexical_fact_search(
        self, terms: Sequence[str], scope: Scope, as_of: datetime | None, limit: int
    ) -> list[tuple[str, float]]:
        """Ids of facts (current or superseded, visible at ``as_of``) whose text matches
        any of ``terms``, best first, with the backend's lexical score."""
        ...

    def dense_fact_search(
        self, vector: np.ndarray, scope: Scope, as_of: datetime | None, limit: int
    ) -> list[tuple[str, float]]:
        """Ids of facts visible at ``as_of`` by cosine similarity to ``vector``, best first."""
        ...

    def fact_episodes(
        self, fact_ids: Sequence[str], scope: Scope, filters: Filters
    ) -> dict[str, list[str]]:
        """For each fact, its provenance episodes in ``scope`` that pass ``filters``,
        in event-time order."""
        ...

    def unconsolidated_episodes(
        self, scope: Scope, limit: int, after: Episode | None = None
    ) -> list[Episode]:
        """Episodes in ``scope`` that no consolidation has read yet, in event-time order
        (ties in insertion order); only those after episode ``after`` in that order,
        when given (the last one of a batch just read)."""
        ...

    def unconsolidated_scopes(self) -> list[Scope]:
        """The fact scopes (user, agent; no session) holding unconsolidated episodes."""
        ...

    def existing_fact_ids(self, fact_ids: Sequence[str]) -> set[str]:
        """Which of these fact ids are already stored (in any scope)."""
        ...

    def iter_facts(self) -> Iterator[tuple[Fact, np.ndarray | None]]:
        """Every fact in the store with its vector, for export and re-indexing."""
        ...

    def iter_consolidated(self) -> Iterator[tuple[str, str, datetime]]:
        """``(user_id, episode_id, consolidated_at)`` of every consolidated episode."""
        ...

    def replace_fact_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        """Overwrite the vectors of the given facts (re-indexing)."""
        ...

    # -- derived items: session summaries and profiles -------------------------------
    # They live in the user/agent scope like facts (a summary also names its session);
    # forgetting an episode drops, in the same transaction, every item built on it.
    def write_derived(
        self,
        scope: Scope,
        items: Sequence[DerivedRow],
        vectors: Sequence[np.ndarray],
        drop: Sequence[str] = (),
    ) -> None:
        """Replace derived items inside ``scope``, all or nothing: the items of ids in
        ``drop`` and of the ids written go, then ``items`` (one vector each) are stored."""
        ...

    def find_derived(
        self, scope: Scope, kind: str | None = None
    ) -> list[tuple[DerivedRow, np.ndarray | None]]:
        """The derived items of ``scope`` (of one ``kind``, or all), with their vectors.
        A scope with a session sees that session's summaries only."""
        ...

    def derived_texts(
        self, scope: Scope, kind: str | None = None
    ) -> list[tuple[str, str, str, np.ndarray]]:
        """``(id, kind, text, vector)`` of those of ``find_derived``'s items that have a
        vector, in its order: what matching items against a question reads."""
        ...

    def derived_episodes(
        self, item_ids: Sequence[str], scope: Scope, filters: Filters
    ) -> dict[str, list[str]]:
        """For each derived item, its provenance episodes in ``scope`` that pass
        ``filters``, in event-time order."""
        ...

    def derived_nearest(
        self,
        item_ids: Sequence[str],
        vector: np.ndarray,
        scope: Scope,
        filters: Filters,
        limit: int,
    ) -> dict[str, list[tuple[str, float]]]:
        """For each derived item, the ``limit`` of its ``derived_episodes`` (in ``scope``,
        passing ``filters``) closest to ``vector``: ``(episode id, cosine)``, best first,
        ties oldest first; an episode still waiting for its vector scores 0. The cosine
        is ``float(stored_vector @ vector)`` exactly, on every path."""
        ...

    def session_prints(self, scope: Scope) -> list[SessionPrint]:
        """The fingerprint and time span of every session with episodes in ``scope``."""
        ...
