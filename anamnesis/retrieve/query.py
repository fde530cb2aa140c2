"""Turning a question into search terms."""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)

#: A compact English stopword list (function words and question words). Content words
#: such as "like", "work" or "family" are deliberately kept: they carry meaning in
#: personal memories.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can could did didn't do does doesn't doing don't
    down during each few for from further had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if
    in into is isn't it it's its itself let's me more most my myself no nor not of off on
    once only or other ought our ours ourselves out over own same she she'd she'll she's
    should so some such than that that's the their theirs them themselves then there
    there's these they they'd they'll they're they've this those through to too under until
    up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's which while who who's whom why why's will with won't would wouldn't you you'd
    you'll you're you've your yours yourself yourselves also just s t did does ever""".split()
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens of ``text``, apostrophes normalised."""
    found: list[str] = _WORD.findall(text.lower().replace("’", "'"))
    return found


def search_terms(text: str) -> list[str]:
    """The distinct content words of a query, in order: what the lexical channel matches."""
    seen: dict[str, None] = {}
    for word in words(text):
        if word in STOPWORDS:
            continue
        base = word.split("'")[0]  # "caroline's" -> "caroline"
        if base and base not in STOPWORDS:
            seen.setdefault(base, None)
    return list(seen)
