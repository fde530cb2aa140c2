"""Answer-type matching: a "where" question is answered by a turn that names a place.

Factoid question answering has long matched the type of answer a question expects to
the passages that contain an answer of that type (a place for "where", a date for
"when"); the passage that states where someone lives, works or went names the place,
while the turns that share the question's other words often do not. This stage does
that one match for "where" questions, without a gazetteer: a place is a capitalised
name after a word that introduces a location ("in Porto", "moved to Lisbon", "back
from Sweden"), and not a month, a weekday or a holiday ("in April", "on Monday").
Such candidates among the best ``PLACE_DEPTH`` get ``PLACE_BOOST``.

It was written for the bundled demo's first question ("Where does Maya live?", whose
answer is "I finally signed the lease on the flat in Porto"), not by reading any
benchmark's misses; every benchmark is held out for it (BENCHMARKS.md, "Leave one data
set out"). A place written in lower case ("at the beach") is not seen.
"""

from __future__ import annotations

import re

from .fusion import Fused, by_score
from .request import SearchRequest

#: Multiplier for a candidate that names a place, on a "where" question: the same
#: strength as ``time_match``'s (True Memory's ×1.3 temporal boost), so it settles
#: near-ties without lifting an unrelated turn over a strong one. Not tuned.
PLACE_BOOST = 1.3
#: How many of the best candidates it looks at.
PLACE_DEPTH = 50

#: Words after which a capitalised name is a location.
_LOCATIVE = (
    "in|at|to|from|near|into|around|across|outside|inside|through|towards|toward|via|"
    "visit|visited|visiting|live|lives|lived|living|moved|moving|leave|left"
)
#: A capitalised word after a locative word, with up to two more capitalised words.
_PLACE = re.compile(
    rf"\b(?:{_LOCATIVE})\s+(?:[Tt]he\s+)?([A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+){{0,2}})"
)
#: Capitalised words that follow "in" or "on" without being places.
_NOT_PLACES = frozenset(
    """january february march april may june july august september october november
    december jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday
    thursday friday saturday sunday christmas easter halloween thanksgiving i i'm i've
    i'll i'd my me we our you your he she they it this that there here the a an and but
    so mr mrs ms dr""".split()
)


def names_place(text: str) -> bool:
    """Whether ``text`` names a place: a capitalised name after a locative word that is
    not a time word (``"the flat in Porto"`` yes, ``"she visits in April"`` no)."""
    for match in _PLACE.finditer(text):
        first = match.group(1).split()[0].lower().rstrip("'’s")
        if first not in _NOT_PLACES:
            return True
    return False


def place_prior(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """On a "where" question, boost the best candidates that name a place."""
    if request.analysis.features.get("question_type") != "where" or not fused:
        return fused
    head = fused[:PLACE_DEPTH]
    episodes = request.episodes([f.episode_id for f in head])
    for candidate in head:
        episode = episodes.get(candidate.episode_id)
        if episode is not None and names_place(episode.content):
            candidate.score *= PLACE_BOOST
    return by_score(fused)
