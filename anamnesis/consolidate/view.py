"""Reading derived items back: summaries and profiles as public types, and the
profile block ``Memory.context(..., profile=True)`` places before the excerpts."""

from __future__ import annotations

import re

from ..facts.people import is_user, user_names
from ..facts.predicates import USER
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


def find_profile(store: Store, scope: Scope, subject: str) -> Profile | None:
    """The profile of one person, or None; the user's by any of their names."""
    if is_user(subject, user_names(store, scope)):
        subject = USER
    found = [p for p in list_profiles(store, scope) if p.subject == subject]
    return found[0] if found else None


def _names(text: str, names: tuple[str, ...]) -> bool:
    """Whether ``text`` names one of ``names`` (as a word)."""
    return any(re.search(rf"\b{re.escape(name)}\b", text, re.I) for name in names)


def profile_block(store: Store, scope: Scope, question: str) -> list[ContextFact]:
    """The current entries of the profiles of the people ``question`` names (by their
    subject name, or one of the user's names, as a word), else of the user's; at most
    ``PROFILE_LINES``, newest first, each with its date and the episodes behind it."""
    people = list_profiles(store, scope)
    mine = user_names(store, scope)
    named = [p for p in people if _names(question, mine if p.subject == USER else (p.subject,))]
    chosen = named or [p for p in people if p.subject == USER]
    entries = [e for p in chosen for e in p.current]
    entries.sort(key=lambda e: e.valid_from.timestamp() if e.valid_from else 0.0, reverse=True)
    return [
        ContextFact(text=e.text, valid_at=e.valid_from, source_episode_ids=e.provenance)
        for e in entries[:PROFILE_LINES]
    ]
