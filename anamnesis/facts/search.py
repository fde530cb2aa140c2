"""Facts on the read path: find the facts a question is about, and order them by time.

``matching_facts`` ranks facts by their text (BM25 and cosine, fused by RRF) as the
memory held them at ``as_of``. ``order_facts`` then applies the question's intent:
a *current-state* question ("where do I live now?") gets current values before the
ones they replaced; a *history* question ("what were my previous jobs?") gets each
matched slot's whole supersession chain, oldest first. The ``facts`` search channel
(``retrieve.channels``) turns the ordered facts into their provenance episodes; the
intent is the question analysis's (``TimeIntent.wants_history``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

import numpy as np

from ..retrieve.fusion import weighted_rrf
from ..store.base import Candidate, FactQuery, Store
from ..types import Fact, Scope

Intent = Literal["current", "history"]

#: Facts each fact index proposes per question.
FACT_CANDIDATES = 20
#: Cosine similarity (MiniLM) below which a fact is not proposed by the dense fact
#: index alone: every fact is *some* distance from any question, and the channel
#: must not push unrelated facts' episodes into the fused list. Set by hand to leave
#: out questions' matches with facts about other attributes.
DENSE_FACT_FLOOR = 0.35


def current_at(fact: Fact, as_of: datetime | None) -> bool:
    """Whether ``fact`` was the standing value at ``as_of`` (None: now)."""
    if as_of is None:
        return fact.is_current
    if fact.retracted_at is not None and fact.retracted_at <= as_of:
        return False
    return fact.superseded_at is None or fact.superseded_at > as_of


def matching_facts(
    store: Store,
    scope: Scope,
    terms: Sequence[str],
    vector: np.ndarray,
    as_of: datetime | None,
    limit: int = FACT_CANDIDATES,
) -> list[tuple[Fact, float]]:
    """Facts whose text matches the question, best first, with their fused score."""
    lexical = store.lexical_fact_search(terms, scope, as_of, limit)
    dense = [
        (fact_id, score)
        for fact_id, score in store.dense_fact_search(vector, scope, as_of, limit)
        if score >= DENSE_FACT_FLOOR
    ]
    fused = weighted_rrf(
        {
            "lexical": [Candidate(i, s) for i, s in lexical],
            "dense": [Candidate(i, s) for i, s in dense],
        },
        {},
    )
    if not fused:
        return []
    ids = tuple(f.episode_id for f in fused)
    found = store.find_facts(scope, FactQuery(ids=ids, as_of=as_of, include_superseded=True))
    by_id = {f.id: f for f in found}
    return [(by_id[f.episode_id], f.score) for f in fused if f.episode_id in by_id]


def order_facts(
    store: Store,
    scope: Scope,
    ranked: Sequence[tuple[Fact, float]],
    intent: Intent,
    as_of: datetime | None,
) -> list[tuple[Fact, float]]:
    """``ranked`` in the order the question's intent wants (see the module docstring)."""
    if intent == "current":
        return sorted(ranked, key=lambda pair: not current_at(pair[0], as_of))
    out: list[tuple[Fact, float]] = []
    seen: set[str] = set()
    for fact, score in ranked:
        if fact.id in seen:
            continue
        chain = history(store, scope, fact.subject, fact.predicate, as_of)
        for member in chain or [fact]:
            if member.id not in seen:
                seen.add(member.id)
                out.append((member, score))
    return out


def history(
    store: Store,
    scope: Scope,
    subject: str | Sequence[str],
    predicate: str,
    as_of: datetime | None = None,
) -> list[Fact]:
    """Every value a slot has held (as known at ``as_of``), oldest first."""
    subjects = (subject,) if isinstance(subject, str) else tuple(subject)
    found = store.find_facts(
        scope,
        FactQuery(subjects=subjects, predicate=predicate, as_of=as_of, include_superseded=True),
    )
    return sorted(found, key=lambda f: (f.valid_from or f.recorded_at, f.recorded_at))
