"""The public value types: what goes into memory and what comes back out."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal

Modality = Literal["text", "image", "audio", "video", "file"]
MODALITIES: tuple[str, ...] = ("text", "image", "audio", "video", "file")


@dataclass(frozen=True, slots=True)
class Scope:
    """Who a memory belongs to. ``user_id`` is always set; the others narrow it."""

    user_id: str
    agent_id: str | None = None
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class Episode:
    """One event, stored verbatim.

    ``event_time`` is when it happened in the world (given by the caller, or the time
    it was added); ``recorded_at`` is when this store learned of it.
    ``content`` is the text we index: for an image or audio it is the derived text
    (caption, transcript), and ``modality`` records what it was derived from.
    ``content_hash`` is the SHA-256 of the text the dense index embeds (the speaker's
    name and the content); episodes with equal hashes share one vector.
    """

    id: str
    user_id: str
    agent_id: str | None
    session_id: str | None
    role: str | None
    speaker: str | None
    content: str
    modality: str
    event_time: datetime
    recorded_at: datetime
    metadata: dict[str, Any]
    content_hash: str
    turn_index: int | None = None
    version: int = 1


@dataclass(frozen=True, slots=True)
class EpisodeVersion:
    """One version of an episode's content and metadata.

    ``changed_at`` is when an update replaced this version (None for the current
    one); ``recorded_at`` is when this version was written: the episode's
    ``recorded_at`` for version 1, the update that made it for each later one.
    ``Memory.history`` sets both; a store's kept versions carry ``changed_at`` only.
    """

    episode_id: str
    version: int
    content: str
    metadata: dict[str, Any]
    changed_at: datetime | None
    recorded_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Session:
    """A conversation: a named group of episodes with its own start time."""

    id: str
    user_id: str
    agent_id: str | None
    started_at: datetime | None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChannelScore:
    """How one retrieval channel ranked a hit (1-based rank) and the raw score it gave."""

    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class Fact:
    """An atomic statement ``(subject, predicate, object)`` distilled from episodes.

    Bi-temporal: ``valid_from`` / ``valid_to`` say when it was true in the world
    (None: unknown / still true); ``recorded_at`` / ``retracted_at`` when this memory
    learned it and withdrew it. A fact that a newer value replaced keeps its row:
    ``superseded_by`` names the replacement, ``superseded_at`` is when we learned of
    the replacement, and ``valid_to`` is when the replacement became true. A fact
    that *ended* with no replacement ("I left Tencent", "I quit smoking") has
    ``valid_to`` and ``superseded_at`` and no ``superseded_by``.
    ``provenance`` holds the ids of the episodes it was extracted from. ``text`` is a
    short sentence that states it, which the fact indexes search.
    """

    id: str
    user_id: str
    agent_id: str | None
    subject: str
    predicate: str
    object: str
    text: str
    valid_from: datetime | None
    valid_to: datetime | None
    recorded_at: datetime
    retracted_at: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    superseded_at: datetime | None = None
    confidence: float = 1.0
    provenance: tuple[str, ...] = ()
    extractor: str = "rules"
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def is_current(self) -> bool:
        """True while nothing has replaced, ended or withdrawn it."""
        return (
            self.superseded_at is None and self.superseded_by is None and self.retracted_at is None
        )


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result: the episode, its fused score, and its neighbouring turns.

    ``channels`` and ``analysis`` are filled when ``explain=True``: for each channel
    that proposed the episode, its rank and raw score there; and how the question was
    read (``QueryAnalysis.to_dict()``: terms, reference time, temporal intents and
    the time ranges it names), the same for every hit of one search; with background
    indexing, ``analysis["dense_index"]`` says how many of the scope's episodes wait
    for their vector (found only by the channels that match words). ``facts`` holds
    the facts drawn from this episode that matched the question (when the ``facts``
    channel is on).
    """

    episode: Episode
    score: float
    context: tuple[Episode, ...] = ()
    channels: dict[str, ChannelScore] = field(default_factory=dict)
    analysis: dict[str, Any] = field(default_factory=dict)
    facts: tuple[Fact, ...] = ()


@dataclass(frozen=True, slots=True)
class Page:
    """One page of ``get_all``: the items, and the offset of the next page if any."""

    items: list[Episode]
    total: int
    next_offset: int | None


@dataclass(frozen=True, slots=True)
class DeleteCounts:
    """What a delete or forget removed, table by table.

    ``times``: resolved time mentions; ``sources``: provenance links from facts to the
    removed episodes (a fact that keeps another source stays, without the link);
    ``facts``: facts left with no source, removed; ``consolidated``: the marks saying
    consolidation had read an episode; ``archived``: archived episodes; ``usage``: their
    usage counters; ``gate_decisions``: the encoding gate's records of them;
    ``derived``: session summaries and profiles built on them.
    """

    episodes: int = 0
    versions: int = 0
    vectors: int = 0
    sessions: int = 0
    times: int = 0
    facts: int = 0
    sources: int = 0
    consolidated: int = 0
    archived: int = 0
    usage: int = 0
    gate_decisions: int = 0
    derived: int = 0

    def __add__(self, other: DeleteCounts) -> DeleteCounts:
        return DeleteCounts(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(DeleteCounts))
        )

    def to_dict(self) -> dict[str, int]:
        """The counts by table name."""
        return {f.name: getattr(self, f.name) for f in fields(DeleteCounts)}


@dataclass(frozen=True, slots=True)
class Usage:
    """How an episode has been used: ``retrieved`` is how many searches returned it
    (and ``last_retrieved_at`` the latest), ``read`` how many times ``get`` read it
    (and ``last_read_at``). The two are counted apart, as MemX does: being read by id
    says nothing of how well a search finds an episode."""

    episode_id: str
    retrieved: int = 0
    last_retrieved_at: datetime | None = None
    read: int = 0
    last_read_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class GateDecision:
    """What the encoding gate decided about an episode when it was added, and why.

    ``admitted`` episodes went to the hot indexes; the others were stored verbatim in
    the archive (``search(..., include_archive=True)`` finds them, ``restore`` brings
    them back). ``novelty``, ``salience`` and ``prediction_error`` are the three
    signals in [0, 1]; ``score`` their weighted mean; ``threshold`` the bar it was held
    to (the gate's, plus the offset of the episode's salience ``category``);
    ``reason`` says which rule decided; ``gate`` names the settings (a preset name, or
    ``custom``). See ``anamnesis.ingest.gate``.
    """

    episode_id: str
    admitted: bool
    novelty: float
    salience: float
    prediction_error: float
    score: float
    threshold: float
    category: str
    reason: str
    gate: str
    decided_at: datetime


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What ``Memory.forget`` removed, or with ``dry_run`` would remove.

    ``episode_ids`` are the episodes selected; ``counts`` the rows per table, the same
    whether the forget ran or was only tried (a dry run does the work in a transaction
    and rolls it back).
    """

    episode_ids: tuple[str, ...]
    counts: DeleteCounts
    dry_run: bool


@dataclass(frozen=True, slots=True)
class ContextFact:
    """A fact offered to the reader, with when it held and the episodes it came from.

    Context assembly takes these from a facts layer when one is configured; the
    episodes named in ``source_episode_ids`` are its provenance.
    """

    text: str
    valid_at: datetime | None = None
    source_episode_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ContextLine:
    """One excerpt line: an episode, and its search rank if it was a hit (None for a
    neighbouring turn included for context)."""

    episode: Episode
    rank: int | None = None
    score: float | None = None


@dataclass(frozen=True, slots=True)
class ContextSession:
    """The excerpts of one session (conversation), in turn order, under a dated header."""

    session_id: str | None
    started_at: datetime | None
    lines: tuple[ContextLine, ...]


@dataclass(frozen=True, slots=True)
class Context:
    """What ``Memory.context`` hands a reader LLM: ``text`` within ``budget_tokens``.

    ``text`` is the rendered context (format in docs/context-format.md); ``tokens`` its
    size in WordPiece tokens. ``profile``, ``facts`` and ``sessions`` are the same content as data,
    with provenance (episode ids) for every line.
    """

    query: str
    text: str
    tokens: int
    budget_tokens: int
    now: datetime | None
    facts: tuple[ContextFact, ...] = ()
    sessions: tuple[ContextSession, ...] = ()
    #: The profile block (``Memory.context(..., profile=True)``), placed first.
    profile: tuple[ContextFact, ...] = ()

    @property
    def episode_ids(self) -> tuple[str, ...]:
        """Every episode in the context, in the order it appears."""
        return tuple(line.episode.id for s in self.sessions for line in s.lines)

    @property
    def episodes(self) -> tuple[Episode, ...]:
        """Every episode in the context, in the order it appears."""
        return tuple(line.episode for s in self.sessions for line in s.lines)


#: The counts every backend's ``Store.stats`` reports (``Memory.stats`` sets them to
#: None when a damaged store cannot be read).
STAT_COUNTS = (
    "episodes",
    "users",
    "sessions",
    "vectors",
    "versions",
    "facts",
    "current_facts",
    "first_event",
    "last_event",
)
