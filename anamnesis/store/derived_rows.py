"""The rows of the derived layer (session summaries, profiles) and the session
fingerprints they are built against, as every store keeps them (``Store.write_derived``,
``Store.find_derived``, ``Store.session_prints``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class DerivedRow:
    """A stored derived item (a session summary or a person's profile), as the store
    keeps it: its searchable ``text``, a JSON ``body`` that the builder reads back,
    the episodes it was drawn from (``provenance``), the time span it covers, and the
    ``fingerprint`` of its sources when it was built (a rebuild is due when it changes).

    A summary has a ``session_id`` and no ``subject``; a profile has a ``subject``.
    """

    id: str
    kind: str
    user_id: str
    agent_id: str | None
    session_id: str | None
    subject: str | None
    text: str
    body: dict[str, Any]
    provenance: tuple[str, ...]
    start_time: datetime | None
    end_time: datetime | None
    fingerprint: str
    built_at: datetime


@dataclass(frozen=True, slots=True)
class SessionPrint:
    """The current state of one session's episodes: ``fingerprint`` changes whenever an
    episode is added, updated, removed or archived (count, sum of versions, newest row)."""

    agent_id: str | None
    session_id: str
    fingerprint: str
    start_time: datetime
    end_time: datetime
