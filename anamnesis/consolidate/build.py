"""Bring a scope's summaries and profiles up to date: the step ``Memory.consolidate``
(and so the background worker) runs after extracting facts.

Incremental: a session's summary is rebuilt only when the session's fingerprint
differs from the one it was built from, and only once every episode of the session
has been read by fact consolidation (its summary uses their facts); a profile only
when its person's facts changed. Items whose session or facts are gone are dropped.
Writes go in batches of ``BATCH_SIZE`` items, each batch one transaction: a run cut
anywhere leaves every stored item whole and consistent with its fingerprint, and the
next run builds what is still due, to the same result.

Given a ``Summarizer`` (``anamnesis.consolidate.abstractive``), sessions get the
model's summary instead of the extractive one; a summary is then due when it is not
the model's (its fingerprint holds the mode and the model), so turning the model on,
off or changing it rebuilds every summary at the next run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from ..embed.base import Embedder
from ..facts.people import is_user, names_in
from ..facts.predicates import USER
from ..store.base import DerivedRow, FactQuery, SessionPrint, Store, fact_scope
from ..types import Episode, Fact, Scope
from . import profiles, summaries
from .abstractive import Summarizer

#: Items written per transaction.
BATCH_SIZE = 20
#: Episodes read per page when a session is summarised.
PAGE = 1000
#: Facts read per scope (all of them, replaced ones included).
MAX_FACTS = 1_000_000
#: Unconsolidated episodes looked at to find sessions whose facts are not all read.
MAX_PENDING = 100_000


@dataclass(slots=True)
class RefreshReport:
    """What one refresh built and dropped."""

    summaries: int = 0
    profiles: int = 0
    dropped: int = 0
    #: Of ``summaries``: written by the model / extractive because the model failed.
    abstractive: int = 0
    fallbacks: int = 0


def refresh(
    store: Store,
    embedder: Embedder,
    scope: Scope,
    *,
    batch_size: int | None = None,
    summarizer: Summarizer | None = None,
) -> RefreshReport:
    """Rebuild the summaries and profiles of ``scope`` that are out of date, in
    transactions of ``batch_size`` items (default ``BATCH_SIZE``); with a
    ``summarizer``, the summaries are the model's (module docstring)."""
    batch_size = batch_size or BATCH_SIZE
    run = summarizer.start() if summarizer is not None else None
    report = RefreshReport()
    home = fact_scope(scope)
    now = datetime.now(UTC)
    facts = store.find_facts(home, FactQuery(include_superseded=True, limit=MAX_FACTS))
    stored = {row.id: row for row, _ in store.find_derived(home)}
    pending = {
        (e.agent_id, e.session_id) for e in store.unconsolidated_episodes(scope, MAX_PENDING)
    }
    prints = store.session_prints(scope)
    due = [
        p
        for p in prints
        if (p.agent_id, p.session_id) not in pending
        and _fingerprint(stored, summaries.summary_id(home.user_id, p.agent_id, p.session_id))
        != (summarizer.fingerprint(p) if summarizer is not None else p.fingerprint)
    ]
    alive = {summaries.summary_id(home.user_id, p.agent_id, p.session_id) for p in prints}
    stale = [
        row
        for row in stored.values()
        if row.kind == summaries.KIND
        and row.id not in alive
        and (scope.session_id is None or row.session_id == scope.session_id)
    ]
    objects = _fact_objects(facts)
    for agent_id, batch in _batches(due, batch_size):
        build = summaries.build_summary if run is None else run.build
        rows = [
            build(home.user_id, p, _session_episodes(store, home.user_id, p), objects, now)
            for p in batch
        ]
        _write(store, embedder, Scope(home.user_id, agent_id), rows, ())
        report.summaries += len(rows)
    if run is not None:
        report.abstractive, report.fallbacks = run.abstractive, run.fallbacks
    by_person = _by_person(facts)
    profile_rows = [
        (agent_id, subject, items)
        for (agent_id, subject), items in sorted(by_person.items(), key=lambda kv: repr(kv[0]))
        if _fingerprint(stored, profiles.profile_id(home.user_id, agent_id, subject))
        != profiles.fingerprint(items)
    ]
    people = {profiles.profile_id(home.user_id, a, s) for a, s in by_person}
    stale += [r for r in stored.values() if r.kind == profiles.KIND and r.id not in people]
    for start in range(0, len(profile_rows), batch_size):
        chunk = profile_rows[start : start + batch_size]
        for agent_id in dict.fromkeys(a for a, _, _ in chunk):
            rows = [
                profiles.build_profile(home.user_id, a, subject, items, now)
                for a, subject, items in chunk
                if a == agent_id
            ]
            _write(store, embedder, Scope(home.user_id, agent_id), rows, ())
            report.profiles += len(rows)
    for agent_id in dict.fromkeys(r.agent_id for r in stale):
        gone = [r.id for r in stale if r.agent_id == agent_id]
        _write(store, embedder, Scope(home.user_id, agent_id), [], gone)
        report.dropped += len(gone)
    return report


def _fingerprint(stored: dict[str, DerivedRow], item_id: str) -> str | None:
    row = stored.get(item_id)
    return None if row is None else row.fingerprint


def _write(
    store: Store,
    embedder: Embedder,
    scope: Scope,
    rows: Sequence[DerivedRow],
    drop: Sequence[str],
) -> None:
    texts = [r.text for r in rows]
    vectors: list[np.ndarray] = list(embedder.embed_documents(texts)) if texts else []
    store.write_derived(scope, rows, vectors, drop)


def _batches(
    prints: Sequence[SessionPrint], size: int
) -> Iterable[tuple[str | None, list[SessionPrint]]]:
    """The sessions due, by agent, in groups of at most ``size``."""
    agents = dict.fromkeys(p.agent_id for p in prints)
    for agent_id in agents:
        mine = [p for p in prints if p.agent_id == agent_id]
        for start in range(0, len(mine), size):
            yield agent_id, mine[start : start + size]


def _session_episodes(store: Store, user_id: str, session: SessionPrint) -> list[Episode]:
    """The episodes of one session of one agent, in conversation order."""
    scope = Scope(user_id, session.agent_id, session.session_id)
    out: list[Episode] = []
    while True:
        page, total = store.list_episodes(scope, limit=PAGE, offset=len(out))
        out += page
        if not page or len(out) >= total:
            break
    mine = [e for e in out if e.agent_id == session.agent_id]
    return sorted(mine, key=lambda e: (e.turn_index is None, e.turn_index or 0, e.event_time))


def _fact_objects(facts: Sequence[Fact]) -> dict[str, tuple[str, ...]]:
    """The objects of the facts drawn from each episode."""
    out: dict[str, list[str]] = {}
    for fact in facts:
        for episode_id in fact.provenance:
            out.setdefault(episode_id, []).append(fact.object)
    return {k: tuple(dict.fromkeys(v)) for k, v in out.items()}


def _by_person(facts: Sequence[Fact]) -> dict[tuple[str | None, str], list[Fact]]:
    """The facts of each person and agent; the user's under ``"user"``, whatever name
    a fact gives them (``facts.people``)."""
    names = names_in(facts)
    out: dict[tuple[str | None, str], list[Fact]] = {}
    for fact in facts:
        subject = USER if is_user(fact.subject, names) else fact.subject
        out.setdefault((fact.agent_id, subject), []).append(fact)
    return out
