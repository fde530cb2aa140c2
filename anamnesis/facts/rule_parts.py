"""The parts the fact rules are built from: regex pieces, object cleaning, builders.

A rule (``Rule``) is a compiled first-person pattern and a builder that turns its
match into ``(predicate, object)``, or None when the object is not a value (a
pronoun, a deictic word, an empty capture). Objects are cut at the first clause
boundary and capped at ``MAX_OBJECT_WORDS`` words. Names and words are read in any
script (``letters``). The tables of rules are in ``state_rules`` (what holds) and
``change_rules`` (what stopped holding).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..ingest.timeparse import ASCII_FOLDS
from .letters import CAPITAL, LOWER, MARKS, WORD, capitalised, letter_or
from .predicates import RELATIONS, normalise_value

#: Longest object kept, in words; longer captures are cut (a fact is one short value).
MAX_OBJECT_WORDS = 6

#: Longest plan kept, in words: a plan is a verb phrase ("take my road bike out for a
#: longer ride"), longer than a name.
MAX_PLAN_WORDS = 10

Build = Callable[[re.Match[str]], tuple[str, str] | None]

# Time expressions that end an object ("hiking on weekends", "apply this fall").
_TIME = (
    r"yesterday|today|tonight|tomorrow|ago|now|recently|lately|anymore|"
    r"(?:last|this|next|that)\s+(?:week|weekend|month|year|morning|afternoon|evening|night|"
    r"time|summer|winter|spring|fall|autumn|season|semester|(?:mon|tues|wednes|thurs|fri|"
    r"satur|sun)day)s?|"
    r"any more|again|already|soon|right now|these days|every|each|daily|weekly|nightly|"
    r"twice|once|on weekends|on weekdays|on (?:mon|tues|wednes|thurs|fri|satur|sun)days?|"
    r"at night|in the (?:morning|evening|afternoon)|before bed|"
    r"the (?:day|night) (?:before|after)(?: yesterday| tomorrow)?|the other (?:day|night)|"
    r"(?:by|in|until|since) (?:january|february|march|april|may|june|july|august|"
    r"september|october|november|december|spring|summer|fall|autumn|winter|\d{4})|"
    r"(?:a|one|two|three|four|five|six|a few|few|several|\d+)\s+"
    r"(?:days?|weeks?|months?|years?|times?)"
)
# Where an object ends. A clause word, a time expression or a degree adverbial ("a
# lot", "so much": how much, not what) ends every object; a preposition also ends a
# name-like object (a place, an employer: "Denver for work").
_CLAUSE = (
    rf"and|but|because|so|which|who|that|since|while|when|where|if|though|although|or|than|"
    rf"rather|instead|too|as well|either|a lot|so much|very much|the most|the least|"
    rf"I|I'm|I've|I'd|I'll|{_TIME}"
)
PREPOSITION = r"as|for|with|from|by|at|on|in|to|during|after|before|until|around|about|like|over"
CLAUSE_END = re.compile(rf"\s+(?:{_CLAUSE})\b.*$", re.IGNORECASE)
NAME_END = re.compile(rf"\s+(?:{_CLAUSE}|{PREPOSITION}|too|these)\b.*$", re.IGNORECASE)
_DEICTIC = re.compile(
    r"^(?:that|it|its|this|these|those|them|their|his|you|your|how|what|when|where|why|who|"
    r"which|"
    r"to hear|hearing|the way|the idea|the sound|the thought|the fact|doing that|"
    r"something|anything|everything|nothing|one|some|all|both|him|her|me|myself|yourself|"
    r"us|being|getting|having|having to|if|seeing|knowing|spending|going|doing|working|"
    r"is|was|are|were|not|so|very|really|too|more|most|best|there|here|much|enough|"
    r"a lot)\b",
    re.IGNORECASE,
)
# An object that ends in a pronoun refers to something said before ("watching it").
_ENDS_IN_PRONOUN = re.compile(
    r"\s(?:it|them|him|her|this|that|these|those|you|one|ones)$", re.IGNORECASE
)
# A reaction to something just shown ("I like the floating sectional idea"), not a taste.
_REACTION = re.compile(
    rf"^the\s+(?:[\w{MARKS}'-]+\s+){{0,3}}(?:idea|ideas|suggestion|suggestions|list|schedule|"
    r"option|options|caption|post|posts|tips|recommendations|one|ones|sound|look|way|name)$",
    re.IGNORECASE,
)
# A letter of a name, or an apostrophe or a hyphen in one ("O'Brien", "Jean-Luc").
_NAME_LETTER = letter_or("'’-")
NAME = rf"(?P<name>{CAPITAL}{_NAME_LETTER}+(?:\s{CAPITAL}{_NAME_LETTER}+)?)"
#: Where a name ends: on a letter or a mark, before no word character (``\b`` would
#: end "Zoe" and U+0308, a decomposed "Zoë", before its mark).
END_OF_NAME = rf"(?<!['’-])(?!{WORD})"
OBJ = r"(?P<obj>[^,.;:!?()\"\n]+)"
#: Adverbs between the subject and the verb; they stack ("I actually already bought").
LEAD = (
    r"(?:(?:just|recently|finally|actually|also|now|currently|really|even|already|still)\s+)"
    r"{1,2}"
)
# "... which I used to make a baguette", "the tones that I love": a relative clause
# is about the thing before it, not a statement of the speaker's.
NOT_RELATIVE = r"(?<!\bwhich\s)(?<!\bthat\s)(?<!\bthan\s)(?<!\bwhat\s)"
I = r"\b(?:I|i)"  # noqa: E741 - the pronoun
IM = rf"{I}(?:'m|’m| am)"
#: "I" or "we": household facts (home, pets, possessions) are the speaker's either way.
WE = r"\b(?:I|i|[Ww]e)"
WERE = rf"(?:{IM}|\b[Ww]e(?:'re|’re| are))"
RELATION_WORDS = "|".join(sorted((re.escape(r) for r in RELATIONS), key=len, reverse=True))
PETS = (
    r"(?P<pet>dog|puppy|cat|kitten|parrot|bird|rabbit|bunny|hamster|horse|fish|goldfish|"
    r"turtle|snake|guinea pig|pup|lizard|ferret|gecko)"
)
_NOT_NAMES = frozenset(
    {"I", "I'm", "The", "My", "We", "He", "She", "It", "They", "And", "But", "So", "Oh",
     "Yes", "No", "Thanks", "Hey", "Hi", "Well", "Also", "Just", "Last", "This", "That"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Rule:
    """One pattern: a compiled regex and how its match becomes ``(predicate, object)``.

    ``ends``: the match says the value stopped holding (an END draft).
    """

    pattern: re.Pattern[str]
    build: Build
    ends: bool = False


def rule(pattern: str, build: Build, ends: bool = False) -> Rule:
    """A ``Rule`` from a pattern string."""
    return Rule(re.compile(pattern), build, ends)


# A dash with a space on either side ends a clause ("Rio de Janeiro- we ..."); a
# hyphen has none ("sci-fi").
_DASH = re.compile(r"\s[-–—]\s?|\s?[-–—]\s")
# Words that open a clause or a verb phrase, not a noun joined by "and" / "or".
_NOT_CONJUNCT = re.compile(
    r"^(?:I|I'm|I've|I'd|I'll|we|you|he|she|it|they|this|that|these|those|there|then|now|so|"
    r"also|still|just|really|not|more|even|is|are|was|were|am|be|been|has|have|had|do|does|"
    r"did|will|can|could|would|should|get|got|make|made|\w+ing)$",
    re.IGNORECASE,
)
_ENDS_PHRASE = re.compile(rf"^(?:{PREPOSITION}|{_TIME})\b", re.IGNORECASE)
_JOINED = "\x00"
#: Longest conjunct kept after "and" / "or", in words.
MAX_CONJUNCT_WORDS = 3


def joined(value: str) -> str:
    """``value`` with the "and" / "or" that join two nouns protected from the clause cut:
    "fantasy and sci-fi movies", "a Slim Jim or pretzels on my way home". A conjunct is
    kept when it is one to three words that end the object (or run into a preposition
    or a time phrase) and none of them opens a clause or a verb phrase ("and I ...",
    "or scrolling through ...", "and lakes were ...")."""
    words = value.split(" ")
    for index, word in enumerate(words):
        if word.lower() not in ("and", "or") or index == 0:
            continue
        for size in range(1, MAX_CONJUNCT_WORDS + 1):
            conjunct = words[index + 1 : index + 1 + size]
            rest = " ".join(words[index + 1 + size :])
            if len(conjunct) < size or any(_NOT_CONJUNCT.match(w) for w in conjunct):
                break
            if not rest or _ENDS_PHRASE.match(rest):
                words[index] = _JOINED + word  # marked: no longer a clause word
                break
    return " ".join(words)


def clean(value: str, end: re.Pattern[str] = NAME_END) -> str | None:
    """The object of a match: cut where ``end`` matches (but not between two nouns
    joined by "and" / "or"), trimmed, capped; None if empty or deictic."""
    value = _DASH.split(value)[0]
    value = end.sub("", " " + joined(value.strip())).replace(_JOINED, "").strip()
    words = capped(value.split(), MAX_OBJECT_WORDS)
    while words and re.fullmatch(PREPOSITION + "|the|a|an|my|of", words[-1], re.IGNORECASE):
        words.pop()
    if not words:
        return None
    value = " ".join(words).strip(" '’-")
    if not value or _DEICTIC.match(value) or not normalise_value(value):
        return None
    if _ENDS_IN_PRONOUN.search(value) or _REACTION.match(value):
        return None
    return value


def capped(words: list[str], limit: int) -> list[str]:
    """At most ``limit`` words; when the cap falls inside a phrase, the object ends
    before the last preposition kept ("play tennis in high | school" -> "play
    tennis"), so no phrase is left half said."""
    if len(words) <= limit:
        return words
    kept = words[:limit]
    for index in range(limit - 1, 1, -1):
        if re.fullmatch(PREPOSITION, kept[index], re.IGNORECASE):
            return kept[:index]
    return kept


def name_of(value: str) -> str | None:
    """A person's or pet's name from a capture ("Emma's" -> "Emma"); None for a word
    that only looks like one ("The", "My")."""
    value = re.sub(r"['’]s$", "", value)
    first = value.split()[0]
    return None if first in _NOT_NAMES else value


# A gerund that opens an activity ("being a mom", "getting lost in ...").
_GERUND = re.compile(r"^(?:being|getting|seeing|spending|going|doing|working|having)\s+")


def activity(predicate: str) -> Build:
    """A phrase object that may open with a gerund ("being a mom", "seeing my teammates
    succeed") when it runs to three words or more and its second word is no pronoun
    ("seeing you", "doing this" are none)."""
    inner = phrase(predicate)

    def build(match: re.Match[str]) -> tuple[str, str] | None:
        built = inner(match)
        if built is not None:
            return built
        cut = CLAUSE_END.sub("", " " + match.group("obj").strip()).strip()
        words = cut.split()[:MAX_OBJECT_WORDS]
        if len(words) < 3 or not _GERUND.match(cut) or _DEICTIC.match(" ".join(words[1:])):
            return None
        return predicate, " ".join(words)

    return build


def begun(predicate: str) -> Build:
    """An activity begun ("playing chess"), without its purpose ("... to get better");
    "learning how to swim" keeps its "how to"."""
    inner = phrase(predicate)

    def build(match: re.Match[str]) -> tuple[str, str] | None:
        built = inner(match)
        if built is None:
            return None
        purpose = r"(?<!\bhow)(?<!\bwhat)(?<!\bwhere)\s+(?:to|in order to)\s+"
        return predicate, re.split(purpose, built[1], maxsplit=1)[0]

    return build


def simple(predicate: str, end: re.Pattern[str] = NAME_END) -> Build:
    """A builder: ``predicate`` and the cleaned ``obj`` group."""

    def build(match: re.Match[str]) -> tuple[str, str] | None:
        obj = clean(match.group("obj"), end)
        return (predicate, obj) if obj else None

    return build


def phrase(predicate: str) -> Build:
    """An object that is a phrase ("going for walks"): only clause words end it."""
    return simple(predicate, CLAUSE_END)


def place(predicate: str) -> Build:
    """An object that names a place or an organisation: it starts with a capital, or a
    letter of a script without case ("Denver", "the Bay Area", "Łódź", "東京"), so "a new
    apartment" or "night" is none."""
    inner = simple(predicate)

    def build(match: re.Match[str]) -> tuple[str, str] | None:
        built = inner(match)
        if built is None:
            return None
        head = re.sub(r"^(?:the|my|our)\s+", "", built[1], flags=re.IGNORECASE)
        return built if capitalised(head) else None

    return build


def employer(predicate: str) -> Build:
    """An employer: a name ("Google") or a described one ("a small startup", "the
    bank"), but not a bare common word ("night", "home")."""
    inner = simple(predicate)

    def build(match: re.Match[str]) -> tuple[str, str] | None:
        built = inner(match)
        if built is None:
            return None
        first = built[1].split()[0]
        ok = capitalised(first) or first.lower() in ("a", "an", "the", "my", "our")
        return built if ok else None

    return build


# A quantity before a possession is not part of it ("some new storage bins").
_QUANTITY = re.compile(
    r"^(?:some|a few|lots of|a lot of|a couple of|a bunch of|several|plenty of)\s+", re.IGNORECASE
)


def possession(predicate: str) -> Build:
    """A thing had: the cleaned ``obj`` group without a quantity before it ("some new
    storage bins" -> "new storage bins"; "a pair of shoes" stays whole); an animal is
    no possession."""
    inner = simple(predicate)

    def build(match: re.Match[str]) -> tuple[str, str] | None:
        obj = match.group("obj").strip()
        if re.search(rf"\b(?:{PETS}|pet)s?$", clean(obj) or "", re.IGNORECASE):
            return None  # "I got a new puppy": a pet, read by the pet rules
        unquantified = _QUANTITY.sub("", obj)
        if unquantified == obj:
            return inner(match)
        value = clean(unquantified)
        return (predicate, value) if value else None

    return build


def fixed(predicate: str, obj: str) -> Build:
    """A builder with a fixed object ("I smoke" -> habit "smoking")."""
    return lambda match: (predicate, obj)


def named(predicate: str) -> Build:
    """A builder: ``predicate`` and the ``name`` group."""

    def build(match: re.Match[str]) -> tuple[str, str] | None:
        name = name_of(match.group("name"))
        return (predicate, name) if name else None

    return build


def relation(match: re.Match[str]) -> tuple[str, str] | None:
    """The relation named by the ``rel`` group, to the ``name`` group."""
    name = name_of(match.group("name"))
    if not name:
        return None
    # Spelled as the pattern matched it ("ſiſter" matches "sister"), looked up as ASCII.
    return RELATIONS[match.group("rel").translate(ASCII_FOLDS).lower()], name


def pet(match: re.Match[str]) -> tuple[str, str] | None:
    """A pet: "dog named Max" from the ``pet`` and ``name`` groups."""
    name = name_of(match.group("name"))
    if not name:
        return None
    return "pet", f"{match.group('pet').lower()} named {name}"


def favourite(match: re.Match[str]) -> tuple[str, str] | None:
    """``favorite <cat>`` and the object."""
    category = normalise_value(match.group("cat"))
    obj = clean(match.group("obj"))
    if not category or not obj or len(category.split()) > 3:
        return None
    return f"favorite {category}", obj


def plan(match: re.Match[str]) -> tuple[str, str] | None:
    """A plan keeps its verb phrase ("move to Lisbon"); clause words and time
    expressions cut it."""
    obj = clean_plan(match.group("obj"))
    if obj and re.match(r"(?:a|an)\s", obj, re.IGNORECASE):
        obj = _PURPOSE.sub("", obj)  # "a camping trip to connect with nature"
    return ("plans", obj) if obj else None


# "to" and a verb after a planned thing is its purpose; "to" and a place is where.
_PURPOSE = re.compile(
    rf"\s+to\s+(?!(?:the|a|an|my|our|his|her|their|this|that|see|visit)\b){LOWER}.*$"
)
# A plan whose verb takes "something" / "anything" says nothing yet ("do something
# similar").
_VAGUE_PLAN = re.compile(r"^\w+\s+(?:something|anything)\b", re.IGNORECASE)


def clean_plan(value: str) -> str | None:
    """A plan's verb phrase, cut at a clause word or a time expression."""
    cut = CLAUSE_END.sub("", " " + value.strip())
    cut = re.sub(r"\s+during\b.*$", "", cut, flags=re.IGNORECASE)
    words = capped(cut.split(), MAX_PLAN_WORDS)
    while words and re.fullmatch(PREPOSITION + "|the|a|an|my|of", words[-1], re.IGNORECASE):
        words.pop()
    text = " ".join(words).strip()
    if not text or _DEICTIC.match(text) or _VAGUE_PLAN.match(text):
        return None
    return text
