"""Salience of one incoming episode, by rules: what kind of speech act it is, and how
much checkable detail it carries.

The encoding gate (``anamnesis.ingest.gate``) reads it as one of its three signals.
Each episode gets a category and a score in [0, 1]. The category comes from the first
rule that matches, most specific first: filler (greetings, thanks, acknowledgements,
laughter), then commitments, corrections, decisions, preferences, relationships,
questions, and otherwise a plain statement. The category fixes a base score; detail
(numbers, dates and times, names, length, strong feeling) adds to it, so that a long
statement full of particulars scores high whatever its speech act.

The shape follows True Memory's hybrid scorer ("Storage Is Not Memory", arXiv
2605.04897, §4 Stage 1): fixed scores by linguistic function, with commitments 0.8,
corrections 0.6, questions 0.2 and noise 0.02 (the figures named there), and a second
scorer of length, numbers, dates and emotional markers. The other base scores and the
bonuses are ours, chosen so that a plain statement with one particular clears the
paper's salience floor of 0.10 by a wide margin and filler stays under it; the gate
sweep (docs/experiments/2026-11-25-encoding-gate.md) measures what they cost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Base score of each category. The first four figures are True Memory's.
CATEGORY_SCORES: dict[str, float] = {
    "commitment": 0.8,
    "correction": 0.6,
    "question": 0.2,
    "filler": 0.02,
    "decision": 0.7,
    "preference": 0.6,
    "relationship": 0.5,
    "statement": 0.3,
}
#: Added for each kind of detail present (once per kind).
NUMBER_BONUS = 0.15
DATE_BONUS = 0.15
NAME_BONUS = 0.1
FEELING_BONUS = 0.05
#: Up to this much for length, reached at ``LENGTH_FULL`` characters.
LENGTH_BONUS = 0.15
LENGTH_FULL = 200

_FILLER_WORDS = frozenset(
    """ok okay k kk thanks thank thx ty you u lol lmao haha hahaha hehe yeah yes yep yup
    no nope nah sure cool nice great awesome good morning night evening hi hello hey bye
    goodbye see ya later np welcome right alright got it oh ah wow hmm hm mm uh um indeed
    true totally exactly agreed sounds love that's thats it so much very lots too omg
    xd cheers gn gm glad to hear fine same here wonderful amazing definitely absolutely
    of course will do that is it's was a the be and fun interesting happy for me cute
    lovely beautiful i see know agree really""".split()
)
_WORD = re.compile(r"[a-z']+")


def _phrases(*patterns: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(patterns) + r")\b", re.IGNORECASE)


_COMMITMENT = _phrases(
    r"i(?:'ll| will| shall)",
    r"i(?:'m| am) going to",
    r"i promise",
    r"i plan to",
    r"i(?:'m| am) planning to",
    r"i intend to",
    r"we(?:'ll| will)",
    r"we(?:'re| are) going to",
    r"let's",
    r"remind me",
    r"don't forget",
    r"i have to",
    r"i need to",
    r"i must",
)
_CORRECTION = _phrases(
    r"actually",
    r"i meant",
    r"correction",
    r"i was wrong",
    r"that's (?:not|wrong)",
    r"not anymore",
    r"no longer",
    r"i mean",
    r"to be clear",
    r"sorry,? (?:i|it)",
)
_DECISION = _phrases(
    r"(?:i|we)(?:'ve)? decided",
    r"(?:i|we) chose",
    r"(?:i|we)(?:'ve)? chosen",
    r"(?:i|we)(?:'re| are) going with",
    r"settled on",
    r"made up my mind",
    r"(?:i|we) picked",
    r"(?:i|we) signed",
    r"(?:i|we) booked",
    r"(?:i|we) bought",
    r"(?:i|we) accepted",
    r"(?:i|we) quit",
    r"(?:i|we) left",
)
_PREFERENCE = _phrases(
    r"i (?:really )?(?:love|like|prefer|enjoy|hate|dislike|adore)",
    r"i can't stand",
    r"my (?:favou?rite|go-to)",
    r"i'm (?:a big )?fan of",
    r"i'm allergic",
    r"i(?:'m| am) (?:vegan|vegetarian)",
)
_RELATIONSHIP = _phrases(
    r"my (?:wife|husband|partner|boyfriend|girlfriend|fianc[eé]e?|son|daughter|kids?|"
    r"children|mom|mum|mother|dad|father|parents?|brother|sister|siblings?|grandma|"
    r"grandmother|grandpa|grandfather|aunt|uncle|cousin|friends?|boss|manager|"
    r"colleagues?|coworkers?|roommate|neighbou?r|dog|cat|pet)",
)
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|twelve|"
    r"twenty|thirty|hundred|thousand|million|dozen|half)\b",
    re.IGNORECASE,
)
_DATE = _phrases(
    r"(?:jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*",
    r"may",
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)day",
    r"yesterday",
    r"today",
    r"tomorrow",
    r"tonight",
    r"(?:last|next|this) (?:week|month|year|weekend|summer|winter|spring|fall|autumn)",
    r"\d+ (?:days?|weeks?|months?|years?) ago",
    r"\d{1,2}(?::\d{2})? ?(?:am|pm)",
)
_FEELING = _phrases(
    r"love",
    r"hate",
    r"scared",
    r"afraid",
    r"excited",
    r"thrilled",
    r"devastated",
    r"heartbroken",
    r"proud",
    r"angry",
    r"furious",
    r"anxious",
    r"worried",
    r"grateful",
    r"miss(?:ed)? (?:her|him|them|you)",
)
#: A capitalised word not at the start of a sentence: a name, a place, a brand.
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+")


@dataclass(frozen=True, slots=True)
class Salience:
    """An episode's salience: its category and its score in [0, 1]."""

    category: str
    score: float


def is_filler(text: str) -> bool:
    """True when every word of ``text`` is a greeting, thanks, acknowledgement or
    laughter (emoji and punctuation alone count as filler too)."""
    words = _WORD.findall(text.lower())
    return all(w in _FILLER_WORDS for w in words)


def category_of(text: str) -> str:
    """The speech act of ``text``: the first matching of filler, commitment,
    correction, decision, preference, relationship, question, else statement."""
    if is_filler(text):
        return "filler"
    for name, pattern in (
        ("commitment", _COMMITMENT),
        ("correction", _CORRECTION),
        ("decision", _DECISION),
        ("preference", _PREFERENCE),
        ("relationship", _RELATIONSHIP),
    ):
        if pattern.search(text):
            return name
    if text.rstrip().endswith("?"):
        return "question"
    return "statement"


def salience(text: str) -> Salience:
    """The salience of one episode's text (see the module docstring)."""
    category = category_of(text)
    score = CATEGORY_SCORES[category]
    if category != "filler":
        if _NUMBER.search(text):
            score += NUMBER_BONUS
        if _DATE.search(text):
            score += DATE_BONUS
        if _NAME.search(text.strip()):
            score += NAME_BONUS
        if _FEELING.search(text):
            score += FEELING_BONUS
        score += LENGTH_BONUS * min(1.0, len(text) / LENGTH_FULL)
    return Salience(category, min(1.0, score))
