"""Session summaries: the salient sentences of a session, with their provenance
(``abstractive`` builds the LLM's kind from the same row).

One summary per session (and agent), stored as a derived item of kind ``summary``
whose ``fingerprint`` is the session's (``Store.session_prints``): a summary is
rebuilt only when its session gained, lost or changed an episode.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from ..store.base import DerivedRow, SessionPrint
from ..types import Episode
from .salience import salient_sentences
from .types import SessionSummary, SummaryLine

KIND = "summary"


def summary_id(user_id: str, agent_id: str | None, session_id: str) -> str:
    """The id of a session's summary: the same for every rebuild."""
    key = "\x1f".join([KIND, user_id, agent_id or "", session_id])
    return "sum_" + hashlib.sha256(key.encode()).hexdigest()[:24]


def build_summary(
    user_id: str,
    session: SessionPrint,
    episodes: list[Episode],
    fact_objects: dict[str, tuple[str, ...]],
    built_at: datetime,
) -> DerivedRow:
    """The summary of one session from its episodes (in conversation order)."""
    kept = salient_sentences(episodes, fact_objects)
    lines = [
        {
            "text": s.text,
            "episode_id": s.episode.id,
            "speaker": s.episode.speaker or s.episode.role,
            "event_time": s.episode.event_time.isoformat(),
            "reasons": list(s.reasons),
        }
        for s in kept
    ]
    said = " ".join(f"{line['speaker'] or 'someone'}: {line['text']}" for line in lines)
    return DerivedRow(
        id=summary_id(user_id, session.agent_id, session.session_id),
        kind=KIND,
        user_id=user_id,
        agent_id=session.agent_id,
        session_id=session.session_id,
        subject=None,
        text=f"{session.start_time:%d %B %Y}: {said}",
        body={"lines": lines},
        provenance=tuple(dict.fromkeys(s.episode.id for s in kept)),
        start_time=session.start_time,
        end_time=session.end_time,
        fingerprint=session.fingerprint,
        built_at=built_at,
    )


def to_summary(row: DerivedRow) -> SessionSummary:
    """The public view of a stored summary."""
    return SessionSummary(
        id=row.id,
        user_id=row.user_id,
        agent_id=row.agent_id,
        session_id=row.session_id or "",
        text=row.text,
        lines=tuple(
            SummaryLine(
                text=line["text"],
                episode_id=line["episode_id"],
                speaker=line["speaker"],
                event_time=datetime.fromisoformat(line["event_time"]),
                reasons=tuple(line["reasons"]),
            )
            for line in row.body.get("lines", [])
        ),
        provenance=row.provenance,
        started_at=row.start_time,
        ended_at=row.end_time,
        built_at=row.built_at,
        method=row.body.get("method", "extractive"),
        model=row.body.get("model"),
    )
