"""What in a text looks like an identifier: an order number, a code, a proper noun.

The exact-match guard (``exact``) looks a question's identifiers up in the scope; the
later-statement stage (``currency``) reads the ones a note names.
"""

from __future__ import annotations

import re

from ..ingest.timeparse import MONTHS, WEEKDAYS
from .query import search_terms, words

#: Digits a term needs to be an identifier: fewer make a count, a day or an ordinal
#: ("3 days", "the 20th"); an order number, a code or a year has more.
MIN_DIGITS = 3
#: A capitalised word that is not all capitals ("Zbigniew", "McAllister"; not "API").
_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*[a-z][\w'’-]*")
_YEAR = re.compile(r"(?:1[89]|2[01])\d\d")
#: Where a sentence starts: its first word is capitalised whatever it is.
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\s*)[\"'(\s]*$")


def identifier_terms(text: str) -> list[str]:
    """The search terms of ``text`` that look like identifiers: they hold at least
    ``MIN_DIGITS`` digits, or the question capitalises them inside a sentence (a
    proper noun). A word opening a
    sentence, or written in capitals for emphasis or as an acronym ("ONLY", "API"),
    is not one."""
    capitalised = {
        term
        for match in _CAPITALISED.finditer(text)
        if not _SENTENCE_START.search(text[: match.start()])
        for term in words(match.group(0))
    }
    return [
        t
        for t in search_terms(text)
        if (_digits(t) >= MIN_DIGITS or t in capitalised) and not _calendar(t)
    ]


def _calendar(term: str) -> bool:
    """A month, a weekday or a year: a date, which the time channels read (turns
    rarely write their own date, so a date is rare in text without naming a turn)."""
    return term in MONTHS or term in WEEKDAYS or bool(_YEAR.fullmatch(term))


def _digits(term: str) -> int:
    return sum(c.isdigit() for c in term)
