"""Reading derived items back: summaries and profiles as public types, and the
profile block ``Memory.context(..., profile=True)`` places before the excerpts."""

from __future__ import annotations

import re

from ..store.base import Store
from ..types import ContextFact, Scope
from . import profiles, summaries
from .types import Profile, SessionSummary

#: Lines of the profile block in a context: the newest current values first.
PROFILE_LINES = 8


def list_summaries(store: Store, scope: Scope) -> list[SessionSummary]:
    """The summaries of ``scope`` (of its session, if it names one), oldest first."""
    return [summaries.to_summary(row) for row, _ in store.find_derived(scope, summaries.KIND)]


def list_profiles(store: Store, scope: Scope) -> list[Profile]:
    """The profiles of ``scope``'s user (and agent), by subject."""
    rows = store.find_derived(Scope(scope.user_id, scope.agent_id), profiles.KIND)
    return sorted((profiles.to_profile(row) for row, _ in rows), key=lambda p: p.subject)


def profile_block(store: Store, scope: Scope, question: str) -> list[ContextFact]:
    """The current entries of the profiles of the people ``question`` names (by their
    subject name, as a word), else of the user's; at most ``PROFILE_LINES``, newest
    first, each with its date and the episodes behind it."""
    people = list_profiles(store, scope)
    named = [
        p
        for p in people
        if p.subject != "user" and re.search(rf"\b{re.escape(p.subject)}\b", question, re.I)
    ]
    chosen = named or [p for p in people if p.subject == "user"]
    entries = [e for p in chosen for e in p.current]
    entries.sort(key=lambda e: e.valid_from.timestamp() if e.valid_from else 0.0, reverse=True)
    return [
        ContextFact(text=e.text, valid_at=e.valid_from, source_episode_ids=e.provenance)
        for e in entries[:PROFILE_LINES]
    ]
