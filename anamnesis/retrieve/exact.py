"""The exact-match guard: an identifier the user typed keeps its turns at the top.

In a store of near-identical turns (order updates, templated notifications, the same
request about different people) every turn is as close to the question in meaning as
the next; what tells them apart is the identifier the user typed: an order number, a
name. BM25 ranks the turn that holds it first, but fusion and the stages after it
weigh meaning, chat role and position, and can bury it (issue 22: lexical ranks 1
and 2 ended at 14 and 37). So, last of all stages, this one looks each identifier of
the question up in the searched scope; one found in at most ``RARE_TERM_EPISODES``
episodes names them, and they go first: the ones holding more of the identifiers
before the others, and otherwise in the order the pipeline gave them.

An identifier is a search term with three digits or more ("A1234", "4471") or that the
question capitalises inside a sentence (a proper noun: "Zbigniew"), not in capitals
throughout (emphasis, an acronym), and not a date (a month, a weekday, a year: the
time channels read those). Common
words are never rare enough to act, and the names of the chat's speakers are left
out: every turn a speaker said holds their name (as its speaker, not in its text).
Designed from the reviewers' templated store, not from a benchmark's misses; why it
should hold elsewhere: a word the user typed that only one or two memories hold is
the strongest evidence a question can carry, whatever the corpus.
"""

from __future__ import annotations

from dataclasses import replace

from ..types import ChannelScore
from .candidates import speakers_named
from .fusion import Fused
from .identifiers import identifier_terms
from .query import words
from .request import SearchRequest

#: Most episodes an identifier may be found in and still name them: an order number
#: or a rare name is held by the turn that gives it and perhaps its reply.
RARE_TERM_EPISODES = 2
#: Most episodes put first, whatever the question names.
MAX_PINNED = 3
#: How ``explain=True`` names the guard among a hit's channels.
CHANNEL = "exact_match"


def exact_match(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """Put the episodes that alone hold an identifier of the question first."""
    terms = identifier_terms(request.analysis.text)
    if terms:
        speakers = {w for name in speakers_named(request) for w in words(name)}
        terms = [t for t in terms if t not in speakers]
    held: dict[str, int] = {}
    for term in terms:
        holders = request.store.lexical_search(
            [term], request.scope, request.filters, RARE_TERM_EPISODES + 1
        )
        if len(holders) <= RARE_TERM_EPISODES:
            for candidate in holders:
                held[candidate.episode_id] = held.get(candidate.episode_id, 0) + 1
    if not held:
        return fused
    by_id = {f.episode_id: f for f in fused}
    position = {f.episode_id: i for i, f in enumerate(fused)}
    # More identifiers held first; among equals, the pipeline's own order.
    pinned = sorted(held, key=lambda e: (-held[e], position.get(e, len(fused))))[:MAX_PINNED]
    rest = [f for f in fused if f.episode_id not in pinned]
    top = max((f.score for f in fused), default=0.0)
    head = []
    for rank, episode_id in enumerate(pinned, start=1):
        hit = by_id.get(episode_id, Fused(episode_id))
        channels = {**hit.channels, CHANNEL: ChannelScore(rank, float(held[episode_id]))}
        # Above every other hit, in pinned order, so scores still read best first.
        score = top + (MAX_PINNED + 1 - rank) * 1e-6
        head.append(replace(hit, score=score, channels=channels))
    return head + rest
