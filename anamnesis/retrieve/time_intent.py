"""What a question asks about time, found with rules (no LLM).

``time_intent(text, now)`` reports:

- ``asks``: the kinds of temporal question it is: ``when`` ("when did…", "what
  date…"; not "what to do when it rains"), ``duration`` ("how long…", "how many
  days…"), ``before`` / ``after``,
  ``first`` / ``last`` ("the first…", "most recently"), ``order`` ("in what order…",
  "timeline"), and ``range`` when it names a time ("in June", "two weeks ago");
- ``history``: it asks how something was or changed ("previous", "used to", "all the
  … I've had", "changed");
- ``current``: it asks for the present state ("current", "now", "latest");
- ``ranges``: the time expressions in the question, resolved against ``now`` with
  ``anamnesis.ingest.timeparse`` and widened by ``RANGE_SLACK`` (people date events
  loosely: "a month ago" is rarely the calendar month). A time after "since" opens a
  range that runs up to ``now``, and it is the latest such time not after ``now``
  ("since Christmas" asked in November is last year's Christmas).

Keywords are matched after the resolved time expressions are taken out of the text, so
"last week" is a range, not a "last" question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..ingest.timeparse import MONTHS, TimeMention, resolve

#: "since" right before (or opening) a time expression.
_SINCE = re.compile(r"\bsince\s*$", re.IGNORECASE)

#: How far each resolved question range is widened on both sides, by granularity.
#: Chosen by hand, not tuned: about half a unit for weeks, a week for a month, and
#: nothing for years (the words already say the whole year).
RANGE_SLACK = {
    "day": timedelta(days=1),
    "weekend": timedelta(days=1),
    "week": timedelta(days=3),
    "month": timedelta(days=7),
    "season": timedelta(days=14),
    "year": timedelta(0),
}

_ASKS = {
    "when": r"\bwhen (?:did|do|does|was|were|is|are|will|would|has|have|had|can|could)\b"
    r"|\bwhat (?:date|day|time|year|month|week)\b|"
    r"\bwhich (?:date|day|year|month|week)\b|\bin what (?:year|month)\b",
    "duration": r"\bhow (?:long|much time|many (?:days|weeks|months|years|hours|minutes|times))\b"
    r"|\b(?:days?|weeks?|months?|years?) (?:ago|passed|between|after|before|since)\b"
    r"|\bsince when\b",
    "before": r"\bbefore\b|\bprior to\b|\bearlier than\b|\buntil\b",
    "after": r"\bafter\b|\blater than\b|\bsince\b|\bfollowing\b",
    "first": r"\bfirst\b|\bearliest\b|\binitial(?:ly)?\b|\boriginal(?:ly)?\b",
    "last": r"\blast\b|\blatest\b|\bmost recent(?:ly)?\b|\bfinal(?:ly)?\b",
    "order": r"\border\b|\bsequence\b|\bchronolog|\btimeline\b|\bwhich (?:came|happened) first\b",
}
_HISTORY = (
    r"\bprevious(?:ly)?\b|\bused to\b|\bdid (?:i|you|we|he|she|they) use to\b"
    r"|\bformer(?:ly)?\b|\bchang(?:e|ed|es|ing)\b|\bswitch(?:ed)?\b"
    r"|\bhistory\b|\bover time\b|\bover the years\b"
    r"|\bbefore (?:i|you|we) (?:got|had|switched|moved)\b"
    r"|\ball (?:the|of the|my)\b.*\b(?:i've|i have|i had|i've ever)\b"
    r"|\boriginal(?:ly)?\b|\bin the past\b|\bmy old\b"
    # A bare "before" / "earlier" / "prior" closing the question ("What companies did I
    # work at before?"); "before Christmas" names a time instead.
    r"|\b(?:before|earlier|prior)\s*[?.!]*\s*$"
)
_CURRENT = (
    r"\bcurrent(?:ly)?\b|\bnow\b|\bright now\b|\blatest\b|\bthese days\b|\bat the moment\b"
    r"|\bnowadays\b|\bat present\b|\bstill\b|\bmost recent(?:ly)?\b|\bup to date\b"
)
_ASK_PATTERNS = {kind: re.compile(p, re.IGNORECASE) for kind, p in _ASKS.items()}
_HISTORY_PATTERN = re.compile(_HISTORY, re.IGNORECASE)
_CURRENT_PATTERN = re.compile(_CURRENT, re.IGNORECASE)

#: Kinds of question whose answer is the order of events, not one event.
ORDERING = frozenset({"order", "first", "last"})
#: Kinds of question whose answer is a date or a span of time.
DATING = frozenset({"when", "duration"})


#: A month name or a year: the expression names a time on the calendar.
_CALENDAR = re.compile(
    rf"\b(?:{'|'.join(sorted(MONTHS, key=len, reverse=True))}|(?:1[0-9]|2[0-9])\d\d)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class QueryRange:
    """A time the question names: the expression, its resolution, and the search window."""

    mention: TimeMention
    start: datetime
    end: datetime

    @property
    def calendar(self) -> bool:
        """Whether the expression names a calendar time ("on 4 December 2023", "in
        May"), which means that very time, rather than one relative to when the question
        is asked ("a month ago", "the past few weeks"), which people use loosely."""
        return bool(_CALENDAR.search(self.mention.expression))

    @property
    def exact(self) -> tuple[datetime, datetime]:
        """The named time itself, without the search window's margin."""
        return (self.mention.start, self.mention.end)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view."""
        return {
            "expression": self.mention.expression,
            "calendar": self.calendar,
            "granularity": self.mention.granularity,
            "resolved": [self.mention.start.isoformat(), self.mention.end.isoformat()],
            "window": [self.start.isoformat(), self.end.isoformat()],
        }


@dataclass(frozen=True, slots=True)
class TimeIntent:
    """The temporal reading of one question (see the module docstring)."""

    asks: tuple[str, ...] = ()
    history: bool = False
    current: bool = False
    ranges: tuple[QueryRange, ...] = ()

    @property
    def temporal(self) -> bool:
        """Whether the question is about time at all."""
        return bool(self.asks)

    @property
    def ordering(self) -> bool:
        """Whether the answer is an order of events (order, first, last)."""
        return bool(ORDERING.intersection(self.asks))

    @property
    def dating(self) -> bool:
        """Whether the answer is a date or a span of time (when, how long)."""
        return bool(DATING.intersection(self.asks))

    @property
    def wants_history(self) -> bool:
        """Whether a fact question wants the whole history of a value rather than the
        standing one: history markers and no current-state marker."""
        return self.history and not self.current

    @property
    def windows(self) -> list[tuple[datetime, datetime]]:
        """The search windows of the named times, as ``[start, end)`` pairs."""
        return [(r.start, r.end) for r in self.ranges]

    @property
    def calendar_times(self) -> list[tuple[datetime, datetime]]:
        """The calendar times the question names, themselves (no margin)."""
        return [r.exact for r in self.ranges if r.calendar]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view for explanations."""
        return {
            "temporal": self.temporal,
            "asks": list(self.asks),
            "history": self.history,
            "current": self.current,
            "ranges": [r.to_dict() for r in self.ranges],
        }


def time_intent(text: str, now: datetime) -> TimeIntent:
    """How ``text``, asked at ``now``, is about time."""
    mentions = resolve(text, now)
    rest = text
    for mention in mentions:
        rest = rest.replace(mention.expression, " ")
    asks = [kind for kind, pattern in _ASK_PATTERNS.items() if pattern.search(rest)]
    if mentions:
        asks.append("range")
    return TimeIntent(
        asks=tuple(asks),
        history=_HISTORY_PATTERN.search(text) is not None,
        current=_CURRENT_PATTERN.search(rest) is not None,
        ranges=tuple(_query_range(text, m, now) for m in mentions),
    )


def _query_range(text: str, mention: TimeMention, now: datetime) -> QueryRange:
    """The search window of one resolved expression (see the module docstring)."""
    slack = RANGE_SLACK[mention.granularity]
    at = text.find(mention.expression)
    opening = mention.expression.lower().startswith("since ")
    if not (opening or (at > 0 and _SINCE.search(text[:at]))):
        return QueryRange(mention, mention.start - slack, mention.end + slack)
    start, end = mention.start, max(now, mention.end)
    while start > now and start.year > 1:  # "since May" asked in April: last May
        start, end = start.replace(year=start.year - 1), now
    return QueryRange(mention, start - slack, end + slack)
