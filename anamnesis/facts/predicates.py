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
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Predicate:
    """A known predicate: its sentence template and whether it is a single slot."""

    name: str
    template: str
    single_valued: bool


_TABLE = [
    Predicate("name", "{s}'s name is {o}", True),
    Predicate("age", "{s} is {o} years old", True),
    Predicate("lives_in", "{s} lives in {o}", True),
    Predicate("from", "{s} is from {o}", True),
    Predicate("works_at", "{s} works at {o}", True),
    Predicate("job", "{s} works as {o}", True),
    Predicate("studies_at", "{s} studies at {o}", True),
    Predicate("partner", "{s}'s partner is {o}", True),
    Predicate("likes", "{s} likes {o}", False),
    Predicate("dislikes", "{s} dislikes {o}", False),
    Predicate("pet", "{s} has a {o}", False),
    Predicate("owns", "{s} has {o}", False),
    Predicate("plans", "{s} plans to {o}", False),
    Predicate("visited", "{s} went to {o}", False),
    Predicate("attended", "{s} attended {o}", False),
    Predicate("started", "{s} started {o}", False),
    Predicate("finished", "{s} finished {o}", False),
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


_ARTICLE = re.compile(r"^(?:a|an|the|my|our|some)\s+", re.IGNORECASE)
_NON_WORD = re.compile(r"[^\w\s'-]+")


def normalise_value(value: str) -> str:
    """A comparable form of an object: lower case, no leading article, no punctuation."""
    text = _NON_WORD.sub(" ", value.lower()).strip()
    text = _ARTICLE.sub("", text)
    return re.sub(r"\s+", " ", text)


def predicate_label(predicate: str) -> str:
    """The words a predicate name stands for, for embedding (``lives_in`` -> ``lives in``)."""
    return predicate.replace("_", " ")
