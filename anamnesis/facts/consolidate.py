"""Consolidation: read the episodes no consolidation has read, and update the facts.

Runs off the hot path (``Memory.consolidate``): ``add()`` only stores episodes.
Episodes are read in event-time order, in batches; each batch's facts, supersessions
and "consolidated" marks are written in one transaction, so an interrupted run
resumes where it stopped and never half-applies a batch. Facts take the agent of the
episode they came from; the name a user turn's speaker goes by becomes one of the
user's names (``people``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import numpy as np

from ..embed.base import Embedder
from ..errors import InvalidInputError
from ..llm import ChatClient
from ..store.base import Store
from ..types import Episode, Scope
from .llm_extract import LLMExtractor, LLMJudge
from .resolve import Resolver
from .rules import RuleExtractor
from .types import ConsolidationReport

#: Episodes read and written per transaction.
BATCH_SIZE = 200

ExtractorName = Literal["rules", "llm"]


def consolidate(
    store: Store,
    embedder: Embedder,
    scope: Scope,
    *,
    llm: ChatClient | None = None,
    extractor: ExtractorName | None = None,
    limit: int | None = None,
    batch_size: int = BATCH_SIZE,
) -> ConsolidationReport:
    """Extract facts from up to ``limit`` unread episodes of ``scope`` (None: all).

    ``extractor`` is ``"rules"`` (no model) or ``"llm"``; by default the LLM when
    one is configured, else the rules. With an LLM configured, the rule extractor
    still sends ambiguous conflicts to it. Episodes are read in event-time order, each
    batch after the last one read: an episode added meanwhile with an earlier time
    waits for the next consolidation.
    """
    chosen = extractor or ("llm" if llm is not None else "rules")
    if chosen == "llm" and llm is None:
        raise InvalidInputError(
            "extractor='llm' needs an LLM: pass llm=ChatClient(...) to Memory, or set "
            "ANAMNESIS_LLM_BASE_URL and ANAMNESIS_LLM_MODEL and pass llm='env'"
        )
    if chosen not in ("rules", "llm"):
        raise InvalidInputError(f"unknown extractor {chosen!r}; choose 'rules' or 'llm'")
    report = ConsolidationReport(extractor=chosen)
    judge = LLMJudge(llm) if llm is not None else None
    labels: dict[str, np.ndarray] = {}
    remaining = limit
    last: Episode | None = None
    while remaining is None or remaining > 0:
        size = batch_size if remaining is None else min(batch_size, remaining)
        episodes = store.unconsolidated_episodes(scope, size, after=last)
        if not episodes:
            break
        last = episodes[-1]
        for agent_id, group in _by_agent(episodes).items():
            home = Scope(scope.user_id, agent_id)
            resolver = Resolver(store, embedder, home, report, judge, labels)
            if chosen == "llm":
                assert llm is not None
                reader = LLMExtractor(llm, store, embedder, home)
                for episode in group:
                    resolver.note_speaker(episode)
                    for draft in reader.extract(episode, resolver.changes):
                        resolver.apply(draft)
                report.llm_calls += reader.calls
            else:
                rules = RuleExtractor()
                for episode in group:
                    resolver.note_speaker(episode)
                    for draft in rules.extract(episode):
                        resolver.apply(draft)
            changes = resolver.finish([e.id for e in group], datetime.now(UTC))
            store.write_facts(changes, home)
        report.episodes += len(episodes)
        if remaining is not None:
            remaining -= len(episodes)
    return report


def _by_agent(episodes: list[Episode]) -> dict[str | None, list[Episode]]:
    groups: dict[str | None, list[Episode]] = {}
    for episode in episodes:
        groups.setdefault(episode.agent_id, []).append(episode)
    return groups
