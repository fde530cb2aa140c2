"""Rule-based query understanding: question type, names, speakers, addressed role,
sub-queries.

Everything here is a pure function of the question text (and, for speakers, the
names the store knows), offline and deterministic. ``analysis.analyse`` records the
results as features; the channels in ``candidates`` act on them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from difflib import SequenceMatcher

from .query import STOPWORDS, search_terms, words

#: Question types, recognised by their opening words (first match wins).
_TYPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("when", re.compile(r"^\s*(when|what (year|month|date|day|time)|how long ago|since when)\b")),
    ("how-many", re.compile(r"^\s*how (many|much|often|long)\b")),
    ("where", re.compile(r"^\s*(where|in which (city|country|place|state))\b")),
    ("who", re.compile(r"^\s*(who|whom|whose|with whom)\b")),
    ("why", re.compile(r"^\s*why\b")),
    ("how", re.compile(r"^\s*how\b")),
    ("which", re.compile(r"^\s*which\b")),
    ("what", re.compile(r"^\s*what\b")),
    (
        "yes-no",
        re.compile(r"^\s*(is|are|was|were|do|does|did|has|have|had|can|could|would|will|should)\b"),
    ),
)

_NAME = re.compile(r"\b[A-Z][\w'’.-]*(?:\s+(?:of\s+|the\s+)?[A-Z][\w'’.-]*)*")
#: Capitalised words that open questions or are otherwise not names.
_NOT_NAMES = STOPWORDS | {
    "what",
    "when",
    "where",
    "who",
    "why",
    "how",
    "which",
    "would",
    "could",
    "should",
    "did",
    "does",
    "do",
    "is",
    "are",
    "was",
    "were",
    "has",
    "have",
    "can",
    "will",
    "in",
    "on",
    "the",
    "a",
    "an",
    "i",
    "if",
    "besides",
    "apart",
    "according",
    "based",
    "given",
    "considering",
}


#: The kinds of chat: turns of named people (LoCoMo, the hand-written chats) or of a user
#: and an assistant (LongMemEval, BEAM). Some parts of the pipeline act on one kind only.
CHAT_KINDS = ("speakers", "roles")


def chat_kind(has_role: Sequence[bool]) -> str:
    """``"roles"`` when most of the candidates have a chat role, else ``"speakers"``."""
    return "roles" if 2 * sum(has_role) > len(has_role) else "speakers"


def question_type(text: str) -> str:
    """``when``, ``how-many``, ``where``, ``who``, ``why``, ``how``, ``which``, ``what``,
    ``yes-no`` or ``other``, from the question's opening words."""
    lowered = text.lower().lstrip("\"'( ")
    for name, pattern in _TYPES:
        if pattern.match(lowered):
            return name
    return "other"


def names(text: str) -> list[str]:
    """Capitalised names in ``text`` (people, places, titles), in order, deduplicated.

    A run of capitalised words is one name ("New York", "Little Women"); question words
    and other function words that happen to be capitalised are not names. Possessives
    are cut ("Caroline's" -> "Caroline").
    """
    found: dict[str, None] = {}
    for match in _NAME.finditer(text):
        parts = [re.sub(r"['’]s?$", "", p).strip(".-") for p in match.group(0).split()]
        while parts and parts[0].lower() in _NOT_NAMES:
            parts.pop(0)
        if parts:
            found.setdefault(" ".join(parts), None)
    return list(found)


def named_speakers(text: str, speakers: Iterable[str]) -> list[str]:
    """The known ``speakers`` that ``text`` names, in the order it names them.

    A speaker is named by their full name or by its first word ("Caroline" for
    "Caroline Smith"), case-insensitively, possessives included; or by another
    spelling of that first word (``same_name``: "Muhammad" for "Muhhamed"), when
    the question's name is no known speaker's own.
    """
    tokens = [w.split("'")[0] for w in words(text)]
    positions = {t: i for i, t in reversed(list(enumerate(tokens)))}
    firsts = {speaker: [w.split("'")[0] for w in words(speaker)][:1] for speaker in speakers}
    exact = {parts[0] for parts in firsts.values() if parts}
    asked = [w for name in names(text) for w in words(name) if w not in exact]
    hits: list[tuple[int, str]] = []
    for speaker, parts in firsts.items():
        if not parts:
            continue
        first = positions.get(parts[0])
        if first is None:
            first = next((positions[w] for w in asked if same_name(w, parts[0])), None)
        if first is not None:
            hits.append((first, speaker))
    return [speaker for _, speaker in sorted(hits)]


#: Shortest name matched by its spelling rather than letter for letter: shorter names
#: differ in a letter and are other people ("Jon", "Jen").
MIN_RESPELLED_NAME = 5
#: How alike (difflib's ratio) two spellings of one name are at the least: one
#: substitution in a 5-letter name, or two in a 10-letter one ("Melanie"/"Melany" 0.92,
#: "Catherine"/"Katherine" differ in the initial and never match).
NAME_SIMILARITY = 0.8


def same_name(asked: str, known: str) -> bool:
    """True when ``asked`` (a name in a question) is ``known`` (a speaker's first
    name), letter for letter or, for names of ``MIN_RESPELLED_NAME`` letters or more
    with the same initial, respelled: the same consonants in the same order
    ("Muhammad", "Muhhamed", "Mohammed") or spellings ``NAME_SIMILARITY`` alike.

    Questions name people as their askers remember them; a speaker label typed once
    by the person who set the chat up is not how a questioner spells the name.
    """
    a, k = asked.lower(), known.lower()
    if a == k:
        return True
    if min(len(a), len(k)) < MIN_RESPELLED_NAME or a[0] != k[0]:
        return False
    return _consonants(a) == _consonants(k) or SequenceMatcher(None, a, k).ratio() >= (
        NAME_SIMILARITY
    )


def _consonants(name: str) -> str:
    """The initial, then the other consonants with doubles collapsed ("muhhamed" ->
    "mhmd")."""
    rest = re.sub(r"[^a-z]|[aeiouy]", "", name[1:])
    return name[0] + re.sub(r"(.)\1+", r"\1", rest)


#: A question whose answer gathers several mentions: a count ("how many times"), or a
#: plural thing ("What books…", "Which countries…", "What are some…").
_LIST_QUESTION = re.compile(
    r"^\s*(?:how many|how often|in how many)\b"
    r"|^\s*(?:what|which)\s+(?:(?:kinds?|types?|sorts?)\s+of\b"
    r"|(?!(?:is|was|has|does|address|business|class|process|status)\b)[a-z]{2,}[^s\W]s\b)"
    r"|^\s*what\s+(?:are|were)\s+(?:some|all|the)\b"
    r"|\b(?:all the|every time|each time)\b",
    re.IGNORECASE,
)


def is_list_question(text: str) -> bool:
    """Whether the answer gathers several mentions (a count or a list)."""
    return _LIST_QUESTION.search(text) is not None


#: A question about what the assistant said: "you mentioned", "our previous chat",
#: "your recommendation".
_ASSISTANT_CUES = re.compile(
    r"\byou\s+(?:had\s+|have\s+)?(?:said|told|mentioned|recommended|suggested|provided|gave"
    r"|given|listed|shared|described|explained|proposed|wrote|advised|showed|offered"
    r"|came up with)\b"
    r"|\bdid\s+you\s+(?:say|tell|mention|recommend|suggest|provide|give|list|share|describe"
    r"|explain|propose|write|advise|show|offer)\b"
    r"|\bour\s+(?:previous|last|earlier|past|prior)\s+(?:conversation|chat|discussion"
    r"|exchange)s?\b"
    r"|\byour\s+(?:previous\s+|last\s+|earlier\s+)?(?:answer|response|reply|suggestion"
    r"|recommendation|advice)s?\b",
    re.IGNORECASE,
)


#: A request for a summary of the conversation, which covers both sides of it.
_SUMMARY_CUES = re.compile(r"\bsummar(?:y|ies|ise|ize|ising|izing)\b|\brecap\b", re.IGNORECASE)


def is_summary_request(text: str) -> bool:
    """Whether the question asks for a summary or recap of the conversation."""
    return _SUMMARY_CUES.search(text) is not None


def addressed_role(text: str) -> str | None:
    """The chat role whose turns hold the answer: ``"assistant"`` for questions about
    what the assistant said ("Can you remind me of the hotel you recommended?", "what
    did you suggest?"; not "what do you suggest?", which asks for new advice), None
    for a summary or recap (both sides of the conversation), otherwise ``"user"``.

    In a user-assistant chat the user's life, plans, preferences and instructions are
    in the user's own turns; the assistant's (longer, more varied) turns hold its own
    answers. On LongMemEval-S dev this reading names the role of an evidence turn
    for 239 of the 242 questions that have evidence turns.
    """
    if is_summary_request(text):
        return None
    return "assistant" if _ASSISTANT_CUES.search(text) else "user"


def strip_names(terms: Sequence[str], speakers: Iterable[str]) -> list[str]:
    """``terms`` without the words of the given speaker names.

    Turns are stored without their speaker's name in the text, so a name in the
    question matches only turns that *address* that person (the other party's), which
    is the wrong way round; speaker-aware channels use the name as a filter instead.
    """
    drop = {w.split("'")[0] for s in speakers for w in words(s)}
    kept = [t for t in terms if t not in drop]
    return kept or list(terms)


_COORDINATED = re.compile(
    r"\b(?P<a>[A-Z][\w'’-]+)\s*(?:,\s*[A-Z][\w'’-]+\s*)*(?:,\s*)?\s+(?:and|&)\s+"
    r"(?P<b>[A-Z][\w'’-]+)\b"
)


def decompose(text: str) -> list[str]:
    """Sub-queries of a multi-part question, or ``[]`` when it is one question.

    Rules, applied in order:
    - several questions in one (``"Where did she go? What did she buy?"``): each one;
    - coordinated names (``"What do Jon and Gina both like?"``): one sub-query per
      name, the others removed (``"What do Jon like?"``, ``"What do Gina like?"``),
      when at least two of the coordinated words are capitalised names;
    - two clauses joined by ``and`` each opening with a question word
      (``"When did X move and where did she live?"``): each clause.
    """
    parts = [p.strip() for p in re.split(r"(?<=\?)\s+", text.strip()) if p.strip()]
    if len(parts) > 1:
        return parts
    match = _COORDINATED.search(text)
    if match:
        listed = re.findall(r"[A-Z][\w'’-]+", match.group(0))
        listed = [n for n in listed if n.lower() not in _NOT_NAMES]
        if len(listed) >= 2:
            out = []
            for name in listed:
                sub = text[: match.start()] + name + text[match.end() :]
                sub = re.sub(r"\b(both|all|each|together)\s+", "", sub)
                out.append(re.sub(r"\s+", " ", sub).strip())
            return out
    clauses = re.split(
        r",?\s+and\s+(?=(?:what|when|where|who|why|how|which)\b)", text, flags=re.IGNORECASE
    )
    if len(clauses) > 1 and all(search_terms(c) for c in clauses):
        return [c.strip() for c in clauses]
    return []


#: A turn of at most this many words that ends with "?" only asks; a longer one usually
#: tells something before it asks ("I moved to Lisbon last week... any tips?"), as
#: users' turns in LongMemEval do.
ASKING_WORDS = 40


def only_asks(text: str, words: int = ASKING_WORDS) -> bool:
    """Whether ``text`` ends with "?" and has at most ``words`` words (a turn that only
    asks: ``question_prior`` scales it down, the learned ranker reads it)."""
    text = text.rstrip()
    return text.endswith("?") and len(text.split()) <= words
