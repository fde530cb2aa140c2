"""Post-fusion stages: rerankers and filters that reorder or drop fused candidates.

A stage is a function ``(request, fused) -> fused`` registered in ``STAGES`` under
the name that ``SearchConfig.stages`` lists; stages run in the configured order and
read their settings from ``SearchConfig.stage_options[name]``.

The temporal stages read each candidate's event time and the times its text mentions
(``Store.episode_times``), never when the store recorded it: a memory stored today
about last Tuesday is an event of last Tuesday.

| stage | what it does |
|---|---|
| ``memx`` | MemX four-factor score, z-score + sigmoid (rerank.py) |
| ``surprise`` | True Memory ×(1 + 0.2·σ) novelty factor (rerank.py) |
| ``dedup`` | drop same-session repeats: hash or cosine ≥ 0.97 (filters.py) |
| ``abstain`` | empty result on a likely miss, MemX rule R1 (filters.py) |
| ``cross-encoder`` | a given cross-encoder over the top 30 (crossencoder.py) |
| ``ensemble-e5`` | e5-small rescoring of the top 20 (ensemble.py) |
| ``role_prior`` | the other side of a chat ×0.5 (``rerank-role``) |
| ``question_prior`` | short turns ending with "?" ×0.6 |
| ``fact_boost`` | ×1.2 for episodes stating a matching fact (``facts-rerank``) |
| ``learned_rerank`` | a logistic model reorders the top 100 (ranker.py) |
| ``exact_match`` | turns alone holding a typed identifier first (exact.py) |
| ``strength_prior`` | × strength^0.1 on the top 100 (strength_prior.py; off) |
| ``place_prior`` | ×1.3 for turns naming a place, "where" questions (answer_type.py) |

The default preset runs ``time_match``, ``question_prior``, ``place_prior`` and
``exact_match`` (``ranker`` adds ``learned_rerank``); the others are off because they
did not improve recall on the benchmarks. Each stage's cost and recall: the study
"Post-fusion stages and context assembly" (docs/experiments/) and BENCHMARKS.md, "Leave
one data set out".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..facts.search import current_at
from .answer_type import place_prior
from .candidates import OTHER_ROLE, turn_info
from .crossencoder import cross_encoder_stage
from .currency import current_first
from .ensemble import ensemble_e5
from .exact import exact_match
from .filters import abstain, dedup
from .fusion import Fused, by_score
from .ranker import edge_view, learned_rerank, ranker_settings
from .request import SearchRequest
from .rerank import memx, surprise_stage
from .resources import StageResources
from .strength_prior import strength_prior
from .understanding import ASKING_WORDS, is_list_question, only_asks

Stage = Callable[[SearchRequest, list[Fused]], list[Fused]]

#: Multiplier for candidates whose event time, or a time they mention, falls in a time
#: the question names. True Memory's ×1.3 temporal boost (design notes §4.2, §6.2):
#: multiplicative, so it reorders near-ties but cannot lift an irrelevant episode
#: over a strongly relevant one. Not tuned on the benchmarks.
TIME_MATCH_BOOST = 1.3
#: Multiplier for candidates that mention a time at all, when the answer is a date or
#: a span ("when…", "how long…", "how many days…"): the answer to "when did…" is in
#: the turn that dates the event. Gentler than the
#: match boost because a mention is weaker evidence than a matching date; chosen by
#: hand (half of TIME_MATCH_BOOST's lift) and not tuned per question.
DATED_BOOST = 1.15


def time_match(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """Boost candidates dated in, or mentioning, a time the question names.

    A candidate in a named time's search window (the time and a margin around it)
    gets ``TIME_MATCH_BOOST``. When the question names a calendar time ("on 4 December
    2023", "in May"), one dated in, or mentioning a time inside, that time itself
    ("yesterday", said on 5 December) is multiplied again by
    ``stage_options["time_match"]["exact"]`` (default 1: no extra boost). Relative
    times ("a month ago") get no extra boost: people use them loosely (option
    ``"relative": True`` gives it to them too, an ablation).
    """
    windows = request.analysis.time.windows
    if not windows or not fused:
        return fused
    options = request.options("time_match")
    exact_boost = float(options.get("exact", 1.0))
    exact = request.analysis.time.calendar_times
    if options.get("relative", False):  # ablation: relative times count as exact too
        exact = [r.exact for r in request.analysis.time.ranges]
    times = request.episode_times([f.episode_id for f in fused])
    for candidate in fused:
        found = times.get(candidate.episode_id)
        if found is not None and found.overlaps(windows):
            candidate.score *= TIME_MATCH_BOOST
            if exact and exact_boost != 1.0 and found.overlaps(exact):
                candidate.score *= exact_boost
    return by_score(fused)


def dated(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """For "when" and "how long" questions, boost candidates whose text mentions a time."""
    if not request.analysis.time.dating or not fused:
        return fused
    times = request.episode_times([f.episode_id for f in fused])
    for candidate in fused:
        found = times.get(candidate.episode_id)
        if found is not None and found.mentions:
            candidate.score *= DATED_BOOST
    return by_score(fused)


#: For "in what order" questions, each further candidate from the same day as
#: better-ranked ones is scaled by this factor once per such candidate, so the top of
#: the list covers more of the timeline. Chosen by hand (a candidate's RRF score
#: falls by about this much from rank 1 to rank 20) and not tuned per question.
SPREAD_DECAY = 0.8


def spread(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """For "in what order…" questions, favour candidates from different days.

    An order question needs one event from each point of the timeline, and a list
    ranked by relevance alone tends to fill up with one conversation. Candidates are
    grouped by the calendar day of their event time; the n-th best of a day keeps
    ``SPREAD_DECAY ** (n - 1)`` of its score. "first" and "last" do not trigger it:
    they are too often ordinals ("my first sprint") rather than the question.
    ``stage_options["spread"]["when"]`` widens it to ``"list"`` questions (counts and
    plurals, ``understanding.is_list_question``) or ``"always"``.
    """
    when = request.options("spread").get("when", "order")
    if not fused or not _spread_applies(request, str(when)):
        return fused
    times = request.episode_times([f.episode_id for f in fused])
    seen: dict[object, int] = {}
    for candidate in fused:
        found = times.get(candidate.episode_id)
        day = found.event_time.date() if found is not None else None
        earlier = seen.get(day, 0)
        candidate.score *= SPREAD_DECAY**earlier
        seen[day] = earlier + 1
    return by_score(fused)


#: Multiplier for candidates that state a fact matching the question (``fact_boost``):
#: like TIME_MATCH_BOOST it reorders near-ties without lifting an unrelated episode over
#: a strongly relevant one. Chosen by hand, between DATED_BOOST and TIME_MATCH_BOOST.
FACT_BOOST = 1.2


def fact_boost(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """Boost candidates that state a fact matching the question.

    The facts are those the ``facts`` channel finds, as the memory held them at the
    search's ``as_of``. A current-state question boosts the episodes that state a
    value standing then; a history question, every value of the chain. The hits carry
    the facts. Unlike the channel, it adds no candidates. Needs ``Memory.consolidate``
    to have run.
    """
    if not fused:
        return fused
    request.channel("facts", request.config.candidates)  # fills request.facts
    as_of = request.filters.recorded_before
    history = request.analysis.time.wants_history
    for candidate in fused:
        stated = request.facts.get(candidate.episode_id, ())
        if any(history or current_at(fact, as_of) for fact in stated):
            candidate.score *= FACT_BOOST
    return by_score(fused)


#: Default multiplier of the ``role_prior`` stage for turns of the other chat role.
ROLE_PRIOR = 0.5


def role_prior(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """Scale down turns of the other side of the chat than the question addresses.

    ``understanding.addressed_role`` names the role whose turns hold the answer (the
    user's own, unless the question asks what the assistant said); turns of the other
    role keep ``stage_options["role_prior"]["factor"]`` (default ``ROLE_PRIOR``) of
    their score. Episodes without a role, and searches already filtered to a role,
    are left alone.
    """
    role = request.analysis.features.get("role")
    if role is None or request.filters.role is not None or not fused:
        return fused
    other = OTHER_ROLE[role]
    factor = float(request.options("role_prior").get("factor", ROLE_PRIOR))
    roles = {i: info[3] for i, info in turn_info(request, [f.episode_id for f in fused]).items()}
    for candidate in fused:
        if roles.get(candidate.episode_id) == other:
            candidate.score *= factor
    return by_score(fused)


#: Default multiplier of the ``question_prior`` stage for turns that only ask.
QUESTION_PRIOR = 0.6
#: Default word limit of a turn that only asks (option ``words``).
QUESTION_PRIOR_WORDS = ASKING_WORDS
#: How many of the best fused candidates ``question_prior`` reads.
QUESTION_PRIOR_DEPTH = 100


def question_prior(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """Scale down short turns that end by asking a question.

    A short turn that ends with "?" asks for something rather than telling it, yet it
    shares the question's words: "So what's your favourite game?" matches "What is
    Nate's favourite game?" better than the answer does, and among the best hits
    evidence turns end with "?" far less often than the others (study "Calendar dates
    and asking turns"). Such turns among the best ``QUESTION_PRIOR_DEPTH`` keep
    ``stage_options["question_prior"]["factor"]`` (default ``QUESTION_PRIOR``) of their
    score when they have at most ``["words"]`` (default ``QUESTION_PRIOR_WORDS``)
    words. The ``replies`` channel already proposes the answer that follows them.

    Turns with a chat role are left alone: in a user–assistant chat the user's questions
    carry facts about the user ("Can you suggest a gift for my sister, who loves
    pottery?"), and on LongMemEval the prior cost turn recall (option ``"roles":
    True`` scales them too, an ablation).
    """
    options = request.options("question_prior")
    factor = float(options.get("factor", QUESTION_PRIOR))
    words = int(options.get("words", QUESTION_PRIOR_WORDS))
    roles = bool(options.get("roles", False))
    head = fused[:QUESTION_PRIOR_DEPTH]
    ids = [f.episode_id for f in head]
    if not roles:
        # Roles come from turn_info, which the role channels have usually read already:
        # in a user–assistant chat no turn's text needs reading at all.
        info = turn_info(request, ids)
        ids = [i for i in ids if i in info and info[i][3] is None]
    episodes = request.episodes(ids)
    for candidate in head:
        episode = episodes.get(candidate.episode_id)
        if episode is not None and only_asks(episode.content, words):
            candidate.score *= factor
    return by_score(fused)


def _spread_applies(request: SearchRequest, when: str) -> bool:
    """Whether ``spread`` acts on this question: ``"order"`` questions (the default),
    ``"list"`` questions as well (a count or a list: "How many times…", "What books…"),
    or ``"always"``."""
    if when == "always" or "order" in request.analysis.time.asks:
        return True
    return when == "list" and is_list_question(request.analysis.text)


def chronological(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """For order / first / last questions, return the hits oldest first.

    Only the ``request.limit`` hits the caller keeps are reordered, so the set
    returned is the one relevance chose; what changes is the order in which they are
    read. Rank-based metrics at cut-offs below the limit measure relevance order and
    will drop; use it for presentation, not for ranking.
    """
    if not request.analysis.time.ordering or not fused:
        return fused
    keep = len(fused) if request.limit is None else request.limit
    head, tail = fused[:keep], fused[keep:]
    times = request.episode_times([f.episode_id for f in head])
    head.sort(
        key=lambda f: (
            (times[f.episode_id].event_time, -f.score)
            if f.episode_id in times
            else (request.analysis.now, -f.score)
        )
    )
    return head + tail


#: Every post-fusion stage a configuration may name.
STAGES: dict[str, Stage] = {
    "time_match": time_match,
    "dated": dated,
    "spread": spread,
    "chronological": chronological,
    "role_prior": role_prior,
    "question_prior": question_prior,
    "fact_boost": fact_boost,
    "memx": memx,
    "surprise": surprise_stage,
    "dedup": dedup,
    "abstain": abstain,
    "cross-encoder": cross_encoder_stage,
    "ensemble-e5": ensemble_e5,
    "learned_rerank": learned_rerank,
    "exact_match": exact_match,
    "strength_prior": strength_prior,
    "place_prior": place_prior,
    "current_first": current_first,
}

#: Checks of a stage's options (``SearchConfig.stage_options``), with what they load,
#: run when a ``Retriever`` is built: a bad option fails then, not at the first search.
STAGE_CHECKS: dict[str, Callable[[Mapping[str, object]], object]] = {
    "learned_rerank": ranker_settings,
}
#: What a stage reads at every search, loaded by ``Retriever.warm_up``.
STAGE_WARM_UPS: dict[str, Callable[[StageResources], object]] = {
    "learned_rerank": edge_view,
}
