"""Who the scope's user is: the subject ``"user"`` and the names they go by.

The user is one subject whatever name they speak under. The first person of a
``role="user"`` turn is the user (``rules.subject_of``); the speaker name of such a
turn is kept as a ``goes_by`` fact of the user, and the name the user gives ("my
name is Ana") as a ``name`` fact. A fact drafted about one of those names is a fact
about the user (``resolve``), and every read reaches the user by any of them:
``Memory.facts(subject=...)``, ``fact_history``, ``derived.profile(...)`` and the
profile block of ``context``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..store.base import FactQuery, Store, fact_scope
from ..types import Episode, Fact, Scope
from .predicates import USER

#: The predicates whose objects are names the user goes by.
NAME_PREDICATES = ("name", "goes_by")


def speaker_name(episode: Episode) -> str | None:
    """The name the scope's user speaks under in ``episode``: the speaker of a user
    turn; None for other turns and unnamed ones."""
    if (episode.role or "").lower() != "user" or not episode.speaker:
        return None
    return None if episode.speaker.casefold() == USER else episode.speaker


def names_in(facts: Iterable[Fact]) -> tuple[str, ...]:
    """The user's names that ``facts`` state, in the order given, without repeats."""
    names = (
        f.object
        for f in facts
        if f.subject == USER and f.predicate in NAME_PREDICATES and f.retracted_at is None
    )
    return tuple(dict.fromkeys(names))


def user_names(store: Store, scope: Scope) -> tuple[str, ...]:
    """Every name the scope's user has gone by (replaced names too)."""
    home = fact_scope(scope)
    found: list[Fact] = []
    for predicate in NAME_PREDICATES:
        query = FactQuery(subjects=(USER,), predicate=predicate, include_superseded=True)
        found += store.find_facts(home, query)
    return names_in(found)


def is_user(subject: str, names: Sequence[str]) -> bool:
    """Whether ``subject`` is the scope's user: ``"user"`` or one of their ``names``."""
    folded = subject.casefold()
    return folded == USER or any(folded == name.casefold() for name in names)


def aliases(store: Store, scope: Scope, subject: str) -> tuple[str, ...]:
    """``subject`` and the other names of the same person: for the user, ``"user"``
    and every name they go by; anyone else only by their own name."""
    names = user_names(store, scope)
    if not is_user(subject, names):
        return (subject,)
    return tuple(sorted({subject, USER, *names}))
