"""A rule-based fact extractor: no model, tables of first-person patterns.

It reads what a person says about themselves ("I moved to Denver", "my sister Emma",
"I have a dog named Max", "my favourite BBQ sauce is ...", "I'm planning to ...")
and proposes ``(subject, predicate, object)`` drafts; a change said with a negation
or a past tense ("I left Tencent", "we moved out of Boston", "I quit smoking") is an
END draft, which ends the old value (see ``resolve``). First-person statements are
about the speaker: in a ``role="user"`` turn the scope's user, subject ``"user"``,
whatever name they speak under (``people``); in a turn without a role, its
``speaker`` when it names one (a conversation between named people), else the user.
Assistant turns are skipped (their "I" is the assistant).

The rules are in ``state_rules`` (what holds) and ``change_rules`` (what stopped
holding), built from ``rule_parts``. Patterns favour precision: objects are cut at
the first clause boundary and capped; questions ("Do you work at ...?"),
hypotheticals ("If I quit my job, ...") and statements shared with someone else
("Max and I love ...") state nothing, except household facts ("My husband and I
moved to Austin"). A time expression in the sentence ("last week", "in May") dates
the fact (its ``valid_from``) through ``ingest.timeparse``; otherwise the episode's
event time does.

Measured on a labelled set of statements with ``anamnesis bench facts``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from ..ingest.timeparse import resolve
from ..types import Episode
from .change_rules import CHANGE_RULES
from .predicates import USER, fact_text, normalise_value
from .rule_parts import Rule
from .state_rules import STATE_RULES
from .types import Draft

#: Confidence given to rule-extracted facts: a pattern match is strong but literal.
RULE_CONFIDENCE = 0.8

#: Every rule, state first: a sentence's new value is drafted before the old one ends.
RULES: tuple[Rule, ...] = STATE_RULES + CHANGE_RULES

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# A question: it ends with "?" and opens with an auxiliary or a question word.
_QUESTION = re.compile(
    r"^(?:(?:so|and|but|also|oh|wait|ok|okay|hey)\b[,\s]*)?(?:do|does|did|should|would|could|"
    r"can|will|is|are|am|was|were|have|has|what|where|how|why|when|who|which|whom|any)\b",
    re.IGNORECASE,
)
# Words that make the rest of a clause a hypothetical or a wish ("If I quit my job").
_HYPOTHETICAL = re.compile(
    r"\b(?:if|wish|would|could|might|maybe|perhaps|imagine|suppose|whether|unless|should)\b",
    re.IGNORECASE,
)
# A sentence that opens with a verb says it of the speaker ("Moved to Denver last year").
_NO_SUBJECT = re.compile(
    r"^(?=(?:(?:just|finally|recently|also)\s+)?(?:moved|relocated|started|bought|adopted|"
    r"joined|left|quit|landed|got engaged|got married)\b)",
    re.IGNORECASE,
)
# "I left X and now work at Y": the verb after "and" has the same subject.
_SHARED_VERB = re.compile(
    r"\b(and|but|then|so)\s+(?=(?:(?:now|then|also|just|recently|finally|currently)\s+)?"
    r"(?:work|live|moved|relocated|started|got|bought|adopted|joined|settled|quit|stopped|left)\b)",
    re.IGNORECASE,
)
#: Predicates a statement shared with someone ("my wife and I ...") still states of
#: the speaker: the household's home, pets and possessions, and what was done or is
#: planned together ("my partner and I went to Lisbon"); not a taste or a job.
_SHARED = frozenset({"lives_in", "pet", "owns", "visited", "attended", "plans"})
#: Predicates whose date is the event's, so a time expression in the sentence dates it.
_DATED = frozenset({"visited", "attended", "started", "finished", "owns", "pet", "lives_in",
                    "works_at", "job", "partner", "habit", "diet"})  # fmt: skip


# A short quoted title is part of the sentence's words ('I love "Brave" by ...').
_QUOTED = re.compile(r"[\"“”]([^\"“”\n]{1,60})[\"“”]")


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


def _hypothetical(sentence: str, start: int) -> bool:
    """Whether the clause before ``start`` makes the match a hypothetical or a wish."""
    clause = re.split(r"[,;:]|\s[-–—]\s", sentence[:start])[-1]
    return bool(_HYPOTHETICAL.search(clause))


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (on ., !, ? and line breaks)."""
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def first_person(sentence: str) -> str:
    """``sentence`` with the speaker's implied "I" written out: at the start of a
    sentence that opens with a verb, and after "and" / "but" in "I left X and now
    work at Y"; quoted titles lose their quotes."""
    sentence = _QUOTED.sub(r"\1", _NO_SUBJECT.sub("I ", sentence))
    if re.search(r"\b(?:I|[Ww]e)\b", sentence):
        sentence = _SHARED_VERB.sub(r"\1 I ", sentence)
    return sentence


def subject_of(episode: Episode) -> str | None:
    """Whom the first person of ``episode`` refers to; None for the assistant's turns."""
    role = (episode.role or "").lower()
    if role in ("assistant", "system", "tool"):
        return None
    if role == "user":
        return USER
    return episode.speaker or USER


class RuleExtractor:
    """Proposes facts from first-person sentences with ``RULES``."""

    name = "rules"

    def extract(self, episode: Episode) -> list[Draft]:
        """Every draft fact in ``episode`` (none for assistant turns)."""
        subject = subject_of(episode)
        if subject is None:
            return []
        drafts: dict[tuple[str, str, bool], Draft] = {}
        for sentence in sentences(episode.content):
            for predicate, obj, ends, valid_from in self._matches(sentence, episode):
                key = (predicate, normalise_value(obj), ends)
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
                    action="END" if ends else "ADD",
                )
        # A value the same statement says ended ("our dog Biscuit died") is not added.
        return [d for (p, o, ends), d in drafts.items() if ends or (p, o, True) not in drafts]

    @staticmethod
    def _matches(
        sentence: str, episode: Episode
    ) -> Iterable[tuple[str, str, bool, datetime | None]]:
        if sentence.rstrip().endswith("?") and _QUESTION.match(sentence):
            return
        sentence = first_person(sentence)
        mentions = None
        for rule in RULES:
            for match in rule.pattern.finditer(sentence):
                if _hypothetical(sentence, match.start()):
                    continue
                built = rule.build(match)
                if built is None:
                    continue
                predicate, obj = built
                if predicate not in _SHARED and _shared_subject(sentence, match.start()):
                    continue
                valid_from = episode.event_time
                if predicate in _DATED or rule.ends:
                    if mentions is None:
                        mentions = resolve(sentence, episode.event_time)
                    past = [m for m in mentions if m.start <= episode.event_time]
                    if past:
                        valid_from = past[0].start
                yield predicate, obj, rule.ends, valid_from
