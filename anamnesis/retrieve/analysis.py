"""Query analysis: what a question asks for, computed once and shared by every stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .query import search_terms
from .time_intent import TimeIntent, time_intent
from .understanding import addressed_role, decompose, names, question_type


@dataclass(frozen=True, slots=True)
class QueryAnalysis:
    """Everything the pipeline learns from the question before retrieving.

    ``now`` is the reference time of the question (when it is asked); relative time
    expressions in the question resolve against it. ``time`` is its temporal reading
    (intents, history/current-state, the time ranges it names; see ``time_intent``).
    ``features`` holds what other analysers add; ``to_dict`` is what
    ``explain=True`` reports.
    """

    text: str
    terms: tuple[str, ...]
    now: datetime
    time: TimeIntent = field(default_factory=TimeIntent)
    features: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view for explanations."""
        return {
            "text": self.text,
            "terms": list(self.terms),
            "now": self.now.isoformat(),
            "time": self.time.to_dict(),
            **{
                name: value.to_dict() if hasattr(value, "to_dict") else value
                for name, value in self.features.items()
            },
        }


def analyse(text: str, now: datetime | None = None) -> QueryAnalysis:
    """Analyse ``text`` as asked at ``now`` (default: the present, UTC).

    Features: ``question_type`` (``understanding.question_type``), ``names`` (the
    capitalised names in the question), ``role`` (the chat role whose turns should
    hold the answer, ``understanding.addressed_role``) and ``subqueries`` (its
    rule-based decomposition, empty for a single question).
    """
    when = now if now is not None else datetime.now(UTC)
    return QueryAnalysis(
        text=text,
        terms=tuple(search_terms(text)),
        now=when,
        time=time_intent(text, when),
        features={
            "question_type": question_type(text),
            "names": names(text),
            "role": addressed_role(text),
            "subqueries": decompose(text),
        },
    )
