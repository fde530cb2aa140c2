"""Profiles: per person, the attributes, preferences and relations the fact layer
holds, current values first, each with its provenance and validity times.

One profile per subject (``"user"`` or a named speaker) and agent, stored as a
derived item of kind ``profile``; its ``fingerprint`` hashes the state of the
subject's facts, so a profile is rebuilt only when one of its facts changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime

from ..store.base import DerivedRow
from ..types import Fact
from .types import Profile, ProfileEntry

KIND = "profile"
#: Entries of a profile's text (its searchable, embedded form); the body keeps all.
MAX_TEXT_ENTRIES = 40


def profile_id(user_id: str, agent_id: str | None, subject: str) -> str:
    """The id of a person's profile: the same for every rebuild."""
    key = "\x1f".join([KIND, user_id, agent_id or "", subject])
    return "prof_" + hashlib.sha256(key.encode()).hexdigest()[:24]


def fingerprint(facts: Sequence[Fact]) -> str:
    """A digest of what a profile shows of ``facts``: changes when one is added,
    replaced, ended, withdrawn, deleted or gains or loses a source."""
    parts = sorted(
        "|".join(
            str(v)
            for v in (
                f.id,
                f.object,
                f.valid_from,
                f.valid_to,
                f.superseded_at,
                f.retracted_at,
                ",".join(f.provenance),
            )
        )
        for f in facts
    )
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _order(fact: Fact) -> tuple:
    start = fact.valid_from.timestamp() if fact.valid_from else float("-inf")
    return (not fact.is_current, fact.predicate, -start, fact.id)


def build_profile(
    user_id: str, agent_id: str | None, subject: str, facts: Sequence[Fact], built_at: datetime
) -> DerivedRow:
    """The profile of ``subject`` from its facts (current and replaced)."""
    ordered = sorted(facts, key=_order)
    entries = [
        {
            "predicate": f.predicate,
            "object": f.object,
            "text": f.text,
            "current": f.is_current,
            "valid_from": f.valid_from.isoformat() if f.valid_from else None,
            "valid_to": f.valid_to.isoformat() if f.valid_to else None,
            "fact_id": f.id,
            "provenance": list(f.provenance),
        }
        for f in ordered
    ]
    current = [f.text for f in ordered if f.is_current][:MAX_TEXT_ENTRIES]
    before = [f.text for f in ordered if not f.is_current][:MAX_TEXT_ENTRIES]
    text = f"{subject}: " + "; ".join(current)
    if before:
        text += ". Previously: " + "; ".join(before)
    starts = [f.valid_from for f in ordered if f.valid_from is not None]
    return DerivedRow(
        id=profile_id(user_id, agent_id, subject),
        kind=KIND,
        user_id=user_id,
        agent_id=agent_id,
        session_id=None,
        subject=subject,
        text=text,
        body={"entries": entries},
        provenance=tuple(dict.fromkeys(e for f in ordered for e in f.provenance)),
        start_time=min(starts) if starts else None,
        end_time=None,
        fingerprint=fingerprint(facts),
        built_at=built_at,
    )


def _time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def to_profile(row: DerivedRow) -> Profile:
    """The public view of a stored profile."""
    return Profile(
        id=row.id,
        user_id=row.user_id,
        agent_id=row.agent_id,
        subject=row.subject or "",
        text=row.text,
        entries=tuple(
            ProfileEntry(
                predicate=e["predicate"],
                object=e["object"],
                text=e["text"],
                current=bool(e["current"]),
                valid_from=_time(e["valid_from"]),
                valid_to=_time(e["valid_to"]),
                fact_id=e["fact_id"],
                provenance=tuple(e["provenance"]),
            )
            for e in row.body.get("entries", [])
        ),
        provenance=row.provenance,
        built_at=row.built_at,
    )
