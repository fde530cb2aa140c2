"""The public views of derived items: session summaries and profiles."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class SummaryLine:
    """One sentence of a session kept in its summary, with where it came from and why
    (``reasons``: the salience cues it carried, see ``anamnesis.consolidate.salience``)."""

    text: str
    episode_id: str
    speaker: str | None
    event_time: datetime
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """A summary of one session.

    ``method`` says how it was made: ``"extractive"`` (``text`` is the session's most
    salient sentences in order, ``lines``) or ``"abstractive"`` (``text`` is what
    ``model`` wrote from the session's turns; ``lines`` still holds the extractive
    sentences it was shown as the important ones). ``provenance`` holds the ids of the
    episodes the lines were drawn from (extractive) or of every turn shown to the
    model (abstractive); ``started_at`` / ``ended_at`` the event times of the
    session's first and last turn.
    """

    id: str
    user_id: str
    agent_id: str | None
    session_id: str
    text: str
    lines: tuple[SummaryLine, ...]
    provenance: tuple[str, ...]
    started_at: datetime | None
    ended_at: datetime | None
    built_at: datetime
    method: str = "extractive"
    model: str | None = None


@dataclass(frozen=True, slots=True)
class ProfileEntry:
    """One attribute, preference or relation of a person: a fact of the fact layer.

    ``current`` is False for a value that was replaced or ended (``valid_to`` says
    when); ``provenance`` the episodes that state it.
    """

    predicate: str
    object: str
    text: str
    current: bool
    valid_from: datetime | None
    valid_to: datetime | None
    fact_id: str
    provenance: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Profile:
    """What the memory knows about one person (``subject``: ``"user"`` or a speaker's
    name), current values first, with the episodes behind each."""

    id: str
    user_id: str
    agent_id: str | None
    subject: str
    text: str
    entries: tuple[ProfileEntry, ...]
    provenance: tuple[str, ...]
    built_at: datetime

    @property
    def current(self) -> tuple[ProfileEntry, ...]:
        """The entries that still hold."""
        return tuple(e for e in self.entries if e.current)
