"""Values passed between the extraction and resolution steps of consolidation.

The stored, public ``Fact`` lives in ``anamnesis.types``; these are the drafts an
extractor proposes before conflict resolution decides what to write.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..types import Episode

Action = Literal["ADD", "UPDATE", "NONE", "END"]


@dataclass(frozen=True, slots=True)
class Draft:
    """A fact an extractor read in one episode, not yet reconciled with the store.

    ``action`` and ``target`` come from a context-aware extractor (the LLM): UPDATE
    names the stored fact it replaces, END the stored fact that stopped holding, NONE
    the stored fact it restates. A rule extractor proposes ADD, or END with no
    target for a value the statement says stopped holding ("I left Tencent", "I quit
    smoking"; an empty ``object`` ends whatever the slot holds), and leaves the
    decision to conflict resolution.
    ``single_valued`` None means: look the predicate up in the vocabulary.
    """

    subject: str
    predicate: str
    object: str
    text: str
    episode: Episode
    valid_from: datetime | None
    confidence: float
    extractor: str
    action: Action = "ADD"
    target: str | None = None
    single_valued: bool | None = None


@dataclass(slots=True)
class ConsolidationReport:
    """What one ``Memory.consolidate`` call did."""

    episodes: int = 0
    drafts: int = 0
    added: int = 0
    superseded: int = 0
    ended: int = 0
    confirmed: int = 0
    ambiguous: int = 0
    llm_calls: int = 0
    extractor: str = "rules"
    #: Session summaries and profiles rebuilt, and derived items dropped
    #: (``anamnesis.consolidate``).
    summaries: int = 0
    profiles: int = 0
    derived_dropped: int = 0
    #: Of ``summaries``: written by the LLM / extractive because the LLM failed
    #: (``anamnesis.consolidate.abstractive``).
    abstractive_summaries: int = 0
    summary_fallbacks: int = 0
