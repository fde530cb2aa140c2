"""The predicate vocabulary: what each predicate means and how many values it holds.

A *single-valued* predicate is a slot: a person lives in one place, has one employer,
one favourite film at a time, so a new value supersedes the old one. A
*multi-valued* predicate accumulates (likes, friends, pets, plans, things done).
Predicates outside this table (from the LLM extractor) say for themselves whether
they are single-valued; unknown ones are treated as multi-valued, which never
supersedes anything by mistake.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache

from ..types import Fact


@dataclass(frozen=True, slots=True)
class Predicate:
    """A known predicate: its sentence templates and whether it is a single slot.

    ``template`` states the fact about a named subject; ``first_person`` states it as
    the user would ("I live in Denver"), which is what a fact about the user is
    embedded as: personal questions are asked in the first person.
    """

    name: str
    template: str
    first_person: str
    single_valued: bool


_TABLE = [
    Predicate("name", "{s}'s name is {o}", "My name is {o}", True),
    Predicate("goes_by", "{s} goes by {o}", "I go by {o}", False),
    Predicate("age", "{s} is {o} years old", "I am {o} years old", True),
    Predicate("lives_in", "{s} lives in {o}", "I live in {o}", True),
    Predicate("from", "{s} is from {o}", "I am from {o}", True),
    Predicate("works_at", "{s} works at {o}", "I work at {o}", True),
    Predicate("job", "{s} works as {o}", "I work as {o}", True),
    Predicate("team", "{s} is on the {o} team", "I am on the {o} team", True),
    Predicate("work_location", "{s} works from {o}", "I work from {o}", True),
    Predicate("studies_at", "{s} studies at {o}", "I study at {o}", True),
    Predicate("partner", "{s}'s partner is {o}", "My partner is {o}", True),
    Predicate("likes", "{s} likes {o}", "I like {o}", False),
    Predicate("dislikes", "{s} dislikes {o}", "I dislike {o}", False),
    Predicate("pet", "{s} has a {o}", "I have a {o}", False),
    Predicate("owns", "{s} has {o}", "I have {o}", False),
    Predicate("plans", "{s} plans to {o}", "I plan to {o}", False),
    Predicate("visited", "{s} went to {o}", "I went to {o}", False),
    Predicate("attended", "{s} attended {o}", "I attended {o}", False),
    Predicate("started", "{s} started {o}", "I started {o}", False),
    Predicate("finished", "{s} finished {o}", "I finished {o}", False),
]
PREDICATES: dict[str, Predicate] = {p.name: p for p in _TABLE}

#: Family and social relations; the predicate is the relation ("sister", "friend").
RELATIONS = {
    "wife": "partner", "husband": "partner", "partner": "partner", "spouse": "partner",
    "boyfriend": "partner", "girlfriend": "partner", "fiance": "partner",
    "fiancé": "partner", "fiancee": "partner", "fiancée": "partner",
    "sister": "sister", "brother": "brother", "mom": "mother", "mum": "mother",
    "mother": "mother", "dad": "father", "father": "father", "son": "son",
    "daughter": "daughter", "friend": "friend", "best friend": "best friend",
    "cousin": "cousin", "aunt": "aunt", "uncle": "uncle", "grandma": "grandmother",
    "grandmother": "grandmother", "grandpa": "grandfather", "grandfather": "grandfather",
    "niece": "niece", "nephew": "nephew", "boss": "boss", "manager": "boss",
    "coworker": "coworker", "co-worker": "coworker", "colleague": "coworker",
    "roommate": "roommate", "neighbor": "neighbour", "neighbour": "neighbour",
    "therapist": "therapist", "doctor": "doctor", "mentor": "mentor",
}  # fmt: skip
#: Relations a person has one of at a time (a new one replaces the old).
SINGLE_RELATIONS = frozenset({"partner", "mother", "father", "boss", "therapist", "mentor"})


#: Slots that belong to another slot's value: when that value changes or ends, the
#: values of its dependent slots stated before the change end with it, unless the
#: statement of the change states them again (``resolve``, step 5). A new employer
#: ends the old job's title, manager, team and place of work.
DEPENDENT_SLOTS: dict[str, tuple[str, ...]] = {
    "works_at": ("job", "boss", "team", "work_location"),
}


def is_single_valued(predicate: str) -> bool:
    """Whether a new value of ``predicate`` replaces the old one."""
    known = PREDICATES.get(predicate)
    if known is not None:
        return known.single_valued
    if predicate.startswith("favorite "):
        return True
    return predicate in SINGLE_RELATIONS


def fact_text(subject: str, predicate: str, obj: str) -> str:
    """The sentence that states a fact: ``"user lives in Denver"``."""
    known = PREDICATES.get(predicate)
    if known is not None:
        return known.template.format(s=subject, o=obj)
    if predicate.startswith("favorite "):
        return f"{subject}'s {predicate} is {obj}"
    if predicate in RELATIONS.values():
        return f"{subject}'s {predicate} is {obj}"
    return f"{subject} {predicate.replace('_', ' ')} {obj}"


#: The subject of facts about the scope's user (see ``rules``).
USER = "user"


def search_text(subject: str, predicate: str, obj: str, text: str) -> str:
    """The text a fact is embedded as: first person for the user, else its sentence."""
    if subject != USER:
        return text
    known = PREDICATES.get(predicate)
    if known is not None:
        return known.first_person.format(o=obj)
    if predicate.startswith("favorite ") or predicate in RELATIONS.values():
        return f"My {predicate} is {obj}"
    return f"I {predicate.replace('_', ' ')} {obj}"


_ARTICLE = re.compile(r"^(?:a|an|the|my|our|some)\s+", re.IGNORECASE)


@cache
def _non_word() -> re.Pattern[str]:
    """Punctuation; the marks on letters are part of a word ("प्रिया", a decomposed
    "Zoë")."""
    # Imported on first use: the classes of ``letters`` are built from the Unicode
    # database, which ``import anamnesis`` need not wait for.
    from .letters import MARKS

    return re.compile(rf"[^\w{MARKS}\s'-]+")


def normalise_value(value: str) -> str:
    """A comparable form of an object: lower case, no leading article, no punctuation,
    letters composed (a decomposed "Zoë", "e" and U+0308, is the composed one)."""
    text = _non_word().sub(" ", unicodedata.normalize("NFC", value).lower()).strip()
    text = _ARTICLE.sub("", text)
    return re.sub(r"\s+", " ", text)


_AGE_WORD = re.compile(r"^(?:brand[- ]new|new|old|current|first)\s+")


def bare_value(value: str) -> str:
    """``normalise_value`` without a leading word of age ("new car" -> "car"): what an
    ending names ("I sold my car") matches the value as it was stated ("a new car")."""
    return _AGE_WORD.sub("", normalise_value(value))


def predicate_label(predicate: str) -> str:
    """The words a predicate name stands for, for embedding (``lives_in`` -> ``lives in``)."""
    return predicate.replace("_", " ")


def embedding_text(fact: Fact) -> str:
    """What a stored fact's vector embeds (``search_text`` of its parts)."""
    return search_text(fact.subject, fact.predicate, fact.object, fact.text)
