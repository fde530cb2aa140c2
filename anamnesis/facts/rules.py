"""A rule-based fact extractor: no model, a table of first-person patterns.

It reads what a person says about themselves ("I moved to Denver", "my sister Emma",
"I have a dog named Max", "my favourite BBQ sauce is ...", "I'm planning to ...")
and proposes ``(subject, predicate, object)`` drafts. First-person statements are
about the speaker: the episode's ``speaker`` when it names one, else the scope's
user, subject ``"user"``. Assistant turns are skipped (their "I" is the assistant).

Patterns favour precision: an object is cut at the first clause boundary, capped at
``MAX_OBJECT_WORDS`` words, and objects that are pronouns or deictic ("that", "it",
"how ...") are dropped. A time expression in the sentence ("last week", "in May")
dates the fact (its ``valid_from``) through ``ingest.timeparse``; otherwise the
episode's event time does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from ..ingest.timeparse import resolve
from ..types import Episode
from .predicates import RELATIONS, USER, fact_text, normalise_value
from .types import Draft

#: Longest object kept, in words; longer captures are cut (a fact is one short value).
MAX_OBJECT_WORDS = 6
#: Confidence given to rule-extracted facts: a pattern match is strong but literal.
RULE_CONFIDENCE = 0.8

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# Where an object ends. A clause word or a time expression ends every object; a
# preposition also ends a name-like object (a place, an employer: "Denver for work").
_CLAUSE = (
    r"and|but|because|so|which|who|that|since|while|when|where|if|though|although|or|than|"
    r"yesterday|today|tonight|tomorrow|last|this|next|ago|now|recently|lately|anymore|again|"
    r"already|soon|right now|these days|every|each|"
    r"(?:a|one|two|three|four|five|six|a few|few|several|\d+)\s+(?:days?|weeks?|months?|years?)"
)
_PREPOSITION = r"as|for|with|from|by|at|on|in|to|during|after|before|until|around|about|like"
_CLAUSE_END = re.compile(rf"\s+(?:{_CLAUSE})\b.*$", re.IGNORECASE)
_NAME_END = re.compile(rf"\s+(?:{_CLAUSE}|{_PREPOSITION}|too|these)\b.*$", re.IGNORECASE)
_DEICTIC = re.compile(
    r"^(?:that|it|this|these|those|them|you|your|how|what|when|where|why|who|which|"
    r"to hear|hearing|the way|the idea|the sound|the thought|the fact|doing that|"
    r"something|anything|everything|nothing|one|some|all|both|him|her|me|myself|yourself|"
    r"us|being|getting|having|having to|if|seeing|knowing|spending|going|doing|working|"
    r"is|was|are|were|not|so|very|really|too|more|most|there|here)\b",
    re.IGNORECASE,
)
_NAME = r"(?P<name>[A-Z][a-zA-Z'’-]+(?:\s[A-Z][a-zA-Z'’-]+)?)"
_OBJ = r"(?P<obj>[^,.;:!?()\"\n]+)"
_LEAD = r"(?:just|recently|finally|actually|also|now|currently|really|even|already)\s+"
_RELATION_WORDS = "|".join(sorted((re.escape(r) for r in RELATIONS), key=len, reverse=True))
_PETS = (
    r"(?P<pet>dog|puppy|cat|kitten|parrot|bird|rabbit|bunny|hamster|horse|fish|turtle|"
    r"snake|guinea pig)"
)
_NOT_NAMES = frozenset(
    {"I", "I'm", "The", "My", "We", "He", "She", "It", "They", "And", "But", "So", "Oh",
     "Yes", "No", "Thanks", "Hey", "Hi", "Well", "Also", "Just", "Last", "This", "That"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Rule:
    """One pattern: a compiled regex and how its match becomes ``(predicate, object)``."""

    pattern: re.Pattern[str]
    build: Callable[[re.Match[str]], tuple[str, str] | None]


def _clean(value: str, end: re.Pattern[str] = _NAME_END) -> str | None:
    """The object of a match: cut where ``end`` matches, trimmed, capped; None if empty
    or deictic."""
    value = re.split(r"\s[-–—]\s", value)[0]
    value = end.sub("", " " + value.strip()).strip()
    words = value.split()[:MAX_OBJECT_WORDS]
    while words and re.fullmatch(_PREPOSITION + "|the|a|an|my|of", words[-1], re.IGNORECASE):
        words.pop()
    if not words:
        return None
    value = " ".join(words).strip(" '’-")
    if not value or _DEICTIC.match(value) or not normalise_value(value):
        return None
    return value


def _name(value: str) -> str | None:
    value = re.sub(r"['’]s$", "", value)
    first = value.split()[0]
    return None if first in _NOT_NAMES else value


def _simple(
    predicate: str, end: re.Pattern[str] = _NAME_END
) -> Callable[[re.Match[str]], tuple[str, str] | None]:
    def build(match: re.Match[str]) -> tuple[str, str] | None:
        obj = _clean(match.group("obj"), end)
        return (predicate, obj) if obj else None

    return build


def _phrase(predicate: str) -> Callable[[re.Match[str]], tuple[str, str] | None]:
    """An object that is a phrase ("going for walks"): only clause words end it."""
    return _simple(predicate, _CLAUSE_END)


def _named(predicate: str) -> Callable[[re.Match[str]], tuple[str, str] | None]:
    def build(match: re.Match[str]) -> tuple[str, str] | None:
        name = _name(match.group("name"))
        return (predicate, name) if name else None

    return build


def _relation(match: re.Match[str]) -> tuple[str, str] | None:
    name = _name(match.group("name"))
    if not name:
        return None
    return RELATIONS[match.group("rel").lower()], name


def _pet(match: re.Match[str]) -> tuple[str, str] | None:
    name = _name(match.group("name"))
    if not name:
        return None
    pet = match.group("pet").lower()
    return "pet", f"{pet} named {name}"


def _favourite(match: re.Match[str]) -> tuple[str, str] | None:
    category = normalise_value(match.group("cat"))
    obj = _clean(match.group("obj"))
    if not category or not obj or len(category.split()) > 3:
        return None
    return f"favorite {category}", obj


def _plan(match: re.Match[str]) -> tuple[str, str] | None:
    obj = _clean_plan(match.group("obj"))
    return ("plans", obj) if obj else None


def _clean_plan(value: str) -> str | None:
    # A plan keeps its verb phrase ("move to Lisbon"), so only clause words cut it.
    cut = re.sub(
        r"\s+(?:and|but|because|so|which|since|while|when|if|though|although)\b.*$",
        "",
        value.strip(),
        flags=re.IGNORECASE,
    )
    words = cut.split()[: MAX_OBJECT_WORDS + 2]
    text = " ".join(words).strip()
    if not text or _DEICTIC.match(text):
        return None
    return text


def _rule(pattern: str, build: Callable[[re.Match[str]], tuple[str, str] | None]) -> Rule:
    return Rule(re.compile(pattern), build)


_I = r"\b(?:I|i)"
_IM = rf"{_I}(?:'m|’m| am)"

RULES: tuple[Rule, ...] = (
    # identity
    _rule(rf"(?i:\bmy name(?:'s|’s| is))\s+{_NAME}", _named("name")),
    _rule(rf"(?i:\bcall me)\s+{_NAME}", _named("name")),
    _rule(rf"{_IM}\s+(?P<obj>\d{{1,3}})\s+(?i:years?\s+old)\b", _simple("age")),
    _rule(rf"{_I}\s+(?i:just\s+)?(?i:turned)\s+(?P<obj>\d{{1,3}})\b", _simple("age")),
    # location
    _rule(rf"{_I}\s+(?i:{_LEAD})?(?i:live|reside)\s+in\s+{_OBJ}", _simple("lives_in")),
    _rule(rf"{_IM}\s+(?i:{_LEAD})?(?i:living|based)\s+in\s+{_OBJ}", _simple("lives_in")),
    _rule(
        rf"{_I}\s+(?i:{_LEAD})?(?i:moved|relocated)\s+(?i:back\s+)?to\s+{_OBJ}", _simple("lives_in")
    ),
    _rule(rf"{_IM}\s+(?i:originally\s+)?from\s+{_OBJ}", _simple("from")),
    _rule(rf"{_I}\s+(?i:grew up)\s+in\s+{_OBJ}", _simple("from")),
    # work
    _rule(rf"{_I}\s+(?i:{_LEAD})?(?i:work)\s+(?i:at|for)\s+{_OBJ}", _simple("works_at")),
    _rule(rf"{_IM}\s+(?i:{_LEAD})?(?i:working)\s+(?i:at|for)\s+{_OBJ}", _simple("works_at")),
    _rule(
        rf"{_I}\s+(?i:{_LEAD})?(?i:got|landed|accepted|started|took)\s+(?i:a\s+|my\s+|the\s+)?"
        rf"(?i:new\s+)?(?i:job|position|role)\s+(?i:at|with)\s+{_OBJ}",
        _simple("works_at"),
    ),
    _rule(rf"{_I}\s+(?i:{_LEAD})?(?i:work|worked)\s+as\s+(?i:an?\s+)?{_OBJ}", _simple("job")),
    _rule(
        rf"{_I}\s+(?i:{_LEAD})?(?i:work)\s+(?i:at|for)\s+[^,.;:!?\n]+?\s+as\s+(?i:an?\s+)?{_OBJ}",
        _simple("job"),
    ),
    _rule(rf"{_IM}\s+(?i:{_LEAD})?(?i:working)\s+as\s+(?i:an?\s+)?{_OBJ}", _simple("job")),
    _rule(
        rf"(?i:\bmy\s+(?:new\s+)?(?:job|role|position)\s+as)\s+(?i:an?\s+)?{_OBJ}",
        _simple("job"),
    ),
    _rule(
        rf"{_I}\s+(?i:{_LEAD})?(?i:started|began|took)\s+(?i:my\s+|a\s+)?(?i:new\s+)?"
        rf"(?i:job|role|position)\s+as\s+(?i:an?\s+)?{_OBJ}",
        _simple("job"),
    ),
    _rule(rf"{_I}\s+(?i:{_LEAD})?(?i:study|studied)\s+(?i:at)\s+{_OBJ}", _simple("studies_at")),
    # relationships ("my sister Emma", "my husband's name is Tom")
    _rule(rf"(?i:\bmy\s+(?P<rel>{_RELATION_WORDS}))(?:,)?\s+{_NAME}\b", _relation),
    _rule(
        rf"(?i:\bmy\s+(?P<rel>{_RELATION_WORDS})(?:'s|’s)\s+name\s+is)\s+{_NAME}",
        _relation,
    ),
    # pets and possessions
    _rule(
        rf"(?i:\b(?:I|we)\s+(?:have|had|got|adopted|'ve got|’ve got)\s+(?:a|an|another)\s+"
        rf"(?:new\s+)?(?:little\s+)?){_PETS}(?i:,?\s+(?:named|called))\s+{_NAME}",
        _pet,
    ),
    _rule(rf"(?i:\bmy\s+(?:new\s+)?){_PETS}(?:,)?\s+{_NAME}\b", _pet),
    _rule(rf"(?i:\bmy\s+){_PETS}(?i:(?:'s|’s)\s+name\s+is)\s+{_NAME}", _pet),
    _rule(
        rf"{_I}\s+(?i:{_LEAD})?(?i:bought|purchased|ordered|picked up)\s+"
        rf"(?i:myself\s+)?(?P<obj>(?i:a|an|my|the|some)\s+[^,.;:!?()\"\n]+)",
        _simple("owns"),
    ),
    _rule(
        rf"{_I}\s+(?i:{_LEAD})?(?i:got)\s+(?i:myself\s+)?"
        rf"(?P<obj>(?i:a|an|my|the)\s+(?i:new)\s+(?!(?i:job|role|position)\b)[^,.;:!?()\"\n]+)",
        _simple("owns"),
    ),
    # preferences
    _rule(
        rf"(?i:\bmy\s+(?:all-time\s+|new\s+|absolute\s+)?fav(?:ou|o)rite)\s+(?P<cat>[a-zA-Z ]+?)"
        rf"\s+(?i:is|are|has to be|would be|right now is|these days is)\s+{_OBJ}",
        _favourite,
    ),
    _rule(
        rf"(?i:\bmy\s+(?:all-time\s+|new\s+|absolute\s+)?fav(?:ou|o)rite)\s+"
        rf"(?P<cat>[a-zA-Z ]+?),\s+{_OBJ}",
        _favourite,
    ),
    _rule(
        rf"{_I}\s+(?i:really\s+|absolutely\s+|totally\s+|also\s+|just\s+)?(?i:love|like|enjoy|adore)"
        rf"\s+{_OBJ}",
        _phrase("likes"),
    ),
    _rule(
        rf"{_IM}\s+(?i:{_LEAD})?(?i:obsessed with|into|hooked on|a big fan of|a huge fan of)"
        rf"\s+{_OBJ}",
        _phrase("likes"),
    ),
    _rule(
        rf"{_I}\s+(?i:really\s+)?(?i:hate|dislike|can't stand|can’t stand|don't like|don’t like)"
        rf"\s+{_OBJ}",
        _phrase("dislikes"),
    ),
    # plans
    _rule(
        rf"{_IM}\s+(?i:{_LEAD})?(?i:planning|hoping|going|about)\s+to\s+{_OBJ}",
        _plan,
    ),
    _rule(rf"{_I}\s+(?i:{_LEAD})?(?i:plan|intend)\s+to\s+{_OBJ}", _plan),
    # events
    _rule(
        rf"{_I}\s+(?i:{_LEAD})?(?i:went to|visited|traveled to|travelled to|flew to)\s+{_OBJ}",
        _simple("visited"),
    ),
    _rule(
        rf"{_I}\s+(?i:{_LEAD})?(?i:attended|participated in|took part in)\s+{_OBJ}",
        _simple("attended"),
    ),
    _rule(
        rf"{_I}\s+(?i:{_LEAD})?(?i:joined|signed up for|enrolled in)\s+{_OBJ}",
        _simple("started"),
    ),
    _rule(
        rf"{_I}\s+(?i:{_LEAD})?(?i:finished|completed|graduated from|ran)\s+{_OBJ}",
        _simple("finished"),
    ),
)

#: Predicates whose date is the event's, so a time expression in the sentence dates it.
_DATED = frozenset({"visited", "attended", "started", "finished", "owns", "pet", "lives_in",
                    "works_at", "job"})  # fmt: skip


def _shared_subject(sentence: str, start: int) -> bool:
    """True for "Max and I love ..." or "My wife and I moved ...": the statement is not
    about the speaker alone. "My name is Ana and I work ..." joins two clauses instead:
    what precedes "and" there holds a verb."""
    before = sentence[:start]
    if not re.search(r"\band\s+$", before, re.IGNORECASE):
        return False
    phrase = re.split(r"[,;:]", before)[-1].split()[:-1]
    return len(phrase) <= 3 and not any(
        w.lower() in ("is", "am", "are", "was", "were", "i", "i'm") for w in phrase
    )


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (on ., !, ? and line breaks)."""
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def subject_of(episode: Episode) -> str | None:
    """Whom the first person of ``episode`` refers to; None for the assistant's turns."""
    if (episode.role or "").lower() in ("assistant", "system", "tool"):
        return None
    return episode.speaker or USER


class RuleExtractor:
    """Proposes facts from first-person sentences with ``RULES``."""

    name = "rules"

    def extract(self, episode: Episode) -> list[Draft]:
        """Every draft fact in ``episode`` (none for assistant turns)."""
        subject = subject_of(episode)
        if subject is None:
            return []
        drafts: dict[tuple[str, str], Draft] = {}
        for sentence in sentences(episode.content):
            for predicate, obj, valid_from in self._matches(sentence, episode):
                key = (predicate, normalise_value(obj))
                if key in drafts:
                    continue
                drafts[key] = Draft(
                    subject=subject,
                    predicate=predicate,
                    object=obj,
                    text=fact_text(subject, predicate, obj),
                    episode=episode,
                    valid_from=valid_from,
                    confidence=RULE_CONFIDENCE,
                    extractor=self.name,
                )
        return list(drafts.values())

    @staticmethod
    def _matches(sentence: str, episode: Episode) -> Iterable[tuple[str, str, datetime | None]]:
        mentions = None
        for rule in RULES:
            for match in rule.pattern.finditer(sentence):
                if _shared_subject(sentence, match.start()):
                    continue
                built = rule.build(match)
                if built is None:
                    continue
                predicate, obj = built
                valid_from = episode.event_time
                if predicate in _DATED:
                    if mentions is None:
                        mentions = resolve(sentence, episode.event_time)
                    past = [m for m in mentions if m.start <= episode.event_time]
                    if past:
                        valid_from = past[0].start
                yield predicate, obj, valid_from
