"""Which sentences of a session carry its facts, events and decisions.

A rule, no model. Each sentence of each turn scores one point per cue it carries:

- ``fact`` (3 points): it states the object of a fact the fact layer extracted from
  its turn ("I work at Moonshot AI" -> works_at Moonshot AI); the other sentences of
  a turn that produced a fact get 1 point (``fact-turn``);
- ``number``: a digit or a number word ("two kids", "15 years");
- ``date``: a time expression the time resolver reads ("last Friday", "in May 2023");
- ``name``: a capitalised word that does not open the sentence (a person, a place, a
  title), other than "I" and the names of the session's speakers (a greeting's
  "Hey Caroline" tells nothing);
- ``decision``: a verb of decision, commitment or life event ("decided", "will",
  "signed", "moved", "adopted", "started", "quit").

A sentence under ``MIN_WORDS`` words (greetings, "Thanks!", "Haha wow") scores
nothing; a question loses a point (it asks, it does not tell); so does a sentence of
an assistant turn (in a user-assistant chat what is remembered about the user is in
the user's turns). A session's summary keeps its sentences scoring at least
``MIN_SCORE`` (a fact, or two cues), at most ``MAX_LINES``, best first, and shows them
in conversation order; a session where none qualifies keeps its best one.

The constants are a first guess, not tuned on any benchmark (see the study
docs/experiments/2026-11-25-summaries-and-profiles.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from ..ingest.timeparse import resolve
from ..types import Episode

#: Sentences shorter than this many words score nothing.
MIN_WORDS = 4
#: A sentence enters a summary with at least this score.
MIN_SCORE = 2
#: At most this many sentences per summary.
MAX_LINES = 6
#: Characters of one sentence kept in a summary line.
MAX_LINE_CHARS = 300
#: Points for a sentence that states a fact's object / a sentence of a fact's turn.
FACT_POINTS = 3
FACT_TURN_POINTS = 1

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|"
    r"thirty|hundred|thousand|million|dozen|first|second|third|once|twice)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:decid\w*|will|won't|going to|gonna|plan\w*|promis\w*|commit\w*|"
    r"sign\w*|book\w*|start\w*|began|finish\w*|quit|stopp\w*|left|mov(?:e|ed|ing)|"
    r"bought|buy\w*|sold|adopt\w*|join\w*|graduat\w*|married|engaged|hired|fired|"
    r"won|lost|got|visit\w*|went|travel\w*|met|launch\w*|applied|accept\w*|"
    r"chose|picked|switch\w*|learn\w*|register\w*|volunteer\w*)\b",
    re.IGNORECASE,
)
_NAME = re.compile(r"(?<=[\w,;:] )[A-Z][\w'-]+")
_WORD = re.compile(r"[\w'-]+")


@dataclass(frozen=True, slots=True)
class Scored:
    """One sentence of one turn with its salience and the cues that gave it."""

    episode: Episode
    position: int
    text: str
    score: int
    reasons: tuple[str, ...]


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (on ., !, ? followed by a space, and line breaks)."""
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def score_sentence(
    sentence: str,
    event_time: datetime,
    fact_objects: tuple[str, ...],
    role: str | None,
    speakers: frozenset[str] = frozenset(),
) -> tuple[int, tuple[str, ...]]:
    """The salience of one sentence of a turn, and its cues (module docstring)."""
    if len(_WORD.findall(sentence)) < MIN_WORDS:
        return 0, ()
    reasons: list[str] = []
    score = 0
    lowered = sentence.lower()
    if any(obj and obj.lower() in lowered for obj in fact_objects):
        reasons.append("fact")
        score += FACT_POINTS
    elif fact_objects:
        reasons.append("fact-turn")
        score += FACT_TURN_POINTS
    for name, found in (
        ("number", _NUMBER.search(sentence)),
        ("date", resolve(sentence, event_time)),
        ("name", [n for n in _NAME.findall(sentence) if n not in speakers]),
        ("decision", _DECISION.search(sentence)),
    ):
        if found:
            reasons.append(name)
            score += 1
    if sentence.endswith("?"):
        score -= 1
    if (role or "").lower() in ("assistant", "system", "tool"):
        score -= 1
    return max(score, 0), tuple(reasons)


def salient_sentences(
    episodes: list[Episode], fact_objects: dict[str, tuple[str, ...]]
) -> list[Scored]:
    """The sentences of a session's turns that its summary keeps, in conversation order.

    ``fact_objects`` maps an episode id to the objects of the facts drawn from it.
    """
    speakers = frozenset(e.speaker for e in episodes if e.speaker)
    scored = [
        Scored(episode, position, sentence[:MAX_LINE_CHARS], *score)
        for episode in episodes
        for position, sentence in enumerate(sentences(episode.content))
        for score in [
            score_sentence(
                sentence,
                episode.event_time,
                fact_objects.get(episode.id, ()),
                episode.role,
                speakers,
            )
        ]
    ]
    order = {id(s): i for i, s in enumerate(scored)}
    ranked = sorted(scored, key=lambda s: (-s.score, -len(s.text), order[id(s)]))
    kept = [s for s in ranked if s.score >= MIN_SCORE][:MAX_LINES] or ranked[:1]
    return sorted(kept, key=lambda s: order[id(s)])
