"""Derived candidate channels and the query understanding the basic channels use.

- ``speaker_lexical`` / ``speaker_dense``: BM25 / cosine restricted to the turns of the
  speakers the question names ("What did Caroline paint?" searches Caroline's turns),
  one list per named speaker, interleaved.
- ``role_lexical`` / ``role_dense``: BM25 / cosine without the turns of the other side
  of the chat: the question addresses the user's own turns, or the assistant's for
  "what did you recommend?"; turns without a role stay in. Both, like the speaker
  channels, read the lexical and dense rankings searched ``SearchConfig.pool`` times
  deeper than the channels, so that no channel but those two searches the whole scope.
- ``entity``: BM25 over only the capitalised names of the question that are not
  speakers (places, titles, other people).
- ``prf``: BM25 over the question's terms plus pseudo-relevance-feedback terms taken
  from the best lexical hits (``expansion.feedback_terms``).
- ``dense_prf``: cosine search with the question's vector moved towards its best
  seed hits (Rocchio feedback; an ablation, it lost recall on LoCoMo).
- ``neighbours``: the turns adjacent to the best seed hits (an answer often sits in
  the reply), each inheriting a discounted share of its seed's score.
- ``replies``: the turn after each best seed hit that asks something ("What's your
  favourite game?" -> "Xenoblade Chronicles!"), inheriting its seed's score.
- ``session``: sessions scored by their best seed hits; the turns of the best sessions
  ranked by cosine inside each (not for summary requests, which cover every session).

The seed ranking is the weighted RRF of the configured ``seed_channels``, computed
once per search and shared (``SearchRequest.memo``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from ..errors import InvalidInputError
from ..store.base import Candidate, Filters, TurnInfo
from .currency import present_terms, reads_notes, subject_names
from .expansion import feedback_terms
from .fusion import fused_scores
from .hyde import hyde
from .llm_decompose import llm_subqueries
from .query import search_terms, words
from .request import SearchRequest
from .understanding import CHAT_KINDS, chat_kind, is_summary_request, named_speakers, strip_names

#: RRF constant used to merge one channel's per-sub-query or per-speaker lists.
_MERGE_K = 60
#: Sub-queries beyond this many are ignored (each costs a search per channel).
MAX_SUBQUERIES = 4
#: The other side of a user-assistant chat: what the role channels leave out.
OTHER_ROLE = {"user": "assistant", "assistant": "user"}
#: Named speakers beyond this many are ignored by the speaker channels.
MAX_SPEAKERS = 3


def merge_lists(lists: Sequence[Sequence[Candidate]], limit: int) -> list[Candidate]:
    """One ranked list from several (sub-query or per-speaker) lists of one channel.

    Ordered by plain RRF over the lists; each episode keeps its best raw score. A
    single list is returned as it is.
    """
    if len(lists) == 1:
        return list(lists[0][:limit])
    score: dict[str, float] = defaultdict(float)
    raw: dict[str, float] = {}
    for candidates in lists:
        for rank, c in enumerate(candidates, start=1):
            score[c.episode_id] += 1.0 / (_MERGE_K + rank)
            raw[c.episode_id] = max(raw.get(c.episode_id, c.score), c.score)
    order = sorted(score, key=lambda i: -score[i])[:limit]
    return [Candidate(i, raw[i]) for i in order]


#: ``turn_info`` of an episode it does not know (out of scope or deleted).
NO_TURN: tuple[None, None, None, None] = (None, None, None, None)


def turn_info(request: SearchRequest, ids: Sequence[str]) -> dict[str, TurnInfo]:
    """``(session_id, turn_index, speaker, role)`` of episodes, looked up once per search
    (or not at all for those a store search already placed: ``Candidate.turn``)."""
    return request.lookup("turn_info", ids, request.store.turn_info)


#: Channels that filter the lexical and dense rankings rather than search again.
_POOL_FILTERS = frozenset({"speaker_lexical", "speaker_dense", "role_lexical", "role_dense"})


def pool_depth(request: SearchRequest, limit: int) -> int:
    """How deep the lexical and dense channels search: ``SearchConfig.pool`` times
    ``limit`` when a speaker or role channel will filter their rankings (one search
    serves all)."""
    config = request.config
    return config.pool * limit if _POOL_FILTERS & set(config.channels) else limit


def keep_pool(
    request: SearchRequest, name: str, ranked: list[Candidate], limit: int
) -> list[Candidate]:
    """Remember a base channel's deep ranking for the speaker channels; return its top."""
    request.memo[("pool", name)] = ranked
    request.known("turn_info", {c.episode_id: c.turn for c in ranked if c.turn is not None})
    return ranked[:limit]


def _pool(request: SearchRequest, name: str) -> list[Candidate]:
    """The deep ranking of base channel ``name`` (lexical or dense) for this search."""
    request.channel(name, request.config.candidates)
    return request.memo[("pool", name)]


def dense_pool(request: SearchRequest) -> list[Candidate]:
    """The dense ranking, ``SearchConfig.pool`` times deeper than the channel depth when a
    speaker or role channel is configured: where the speaker channels find the named
    speakers and their turns, the role channels the addressed side's, and
    ``dense_context`` its candidates."""
    return _pool(request, "dense")


def speakers_named(request: SearchRequest) -> list[str]:
    """Speakers the question names, first named first.

    Known speakers are those of the question's nearest turns (the dense pool): a
    person the question is about speaks in them (turns are embedded as
    ``"Speaker: text"``), and this costs one lookup by id instead of a scan of the
    whole scope.
    """
    key = "speakers_named"
    if key not in request.memo:
        pool = dense_pool(request)
        info = turn_info(request, [c.episode_id for c in pool])
        speakers = (info[c.episode_id][2] for c in pool if c.episode_id in info)
        known = dict.fromkeys(speaker for speaker in speakers if speaker)
        request.memo[key] = named_speakers(request.analysis.text, known)[:MAX_SPEAKERS]
    return request.memo[key]


#: What the question analysis may do to the query (``SearchConfig.query``):
QUERY_FEATURES = {
    "speakers": "drop the names of known speakers from the lexical terms",
    "decompose": "run a multi-part question's parts as sub-queries (rule-based)",
    "decompose-llm": "the same, the parts written by an LLM (needs ANAMNESIS_LLM_*)",
    "tense": 'drop present-state words ("now", "these days") from the lexical terms',
    "subject": "the memory's own subject's name neither matched nor embedded",
    "subject-speaker": 'with "subject": the speaker of the notes counts as their subject too',
    "tense-dense": "over notes, present-state words are left out of the embedded question too",
}


def query_texts(request: SearchRequest) -> list[str]:
    """The question, followed by its sub-queries when ``"decompose"`` (rule-made) or
    ``"decompose-llm"`` (LLM-written) is configured: at most ``MAX_SUBQUERIES``, the
    rules' first, none twice."""
    subqueries: list[str] = []
    if "decompose" in request.config.query:
        subqueries += request.analysis.features["subqueries"]
    if "decompose-llm" in request.config.query:
        subqueries += llm_subqueries(request, MAX_SUBQUERIES)
    texts = list(dict.fromkeys([request.analysis.text, *subqueries]))
    return texts[: 1 + MAX_SUBQUERIES]


def _terms(request: SearchRequest, text: str) -> list[str]:
    """Lexical terms of one query text (the question's own are already analysed), speaker
    names dropped when configured."""
    terms = list(request.analysis.terms) if text == request.analysis.text else search_terms(text)
    if "speakers" in request.config.query:
        terms = strip_names(terms, speakers_named(request))
    if "tense" in request.config.query and reads_notes(request):
        present = present_terms(text)
        terms = [t for t in terms if t not in present]
    if "subject" in request.config.query:
        terms = strip_names(terms, subject_names(request))
    return terms


def query_terms(request: SearchRequest) -> list[tuple[str, list[str]]]:
    """Each query text with its lexical terms (speaker names dropped when configured);
    texts left without terms are skipped."""
    pairs = [(text, _terms(request, text)) for text in query_texts(request)]
    return [(text, terms) for text, terms in pairs if terms]


def question_lexical(request: SearchRequest, depth: int) -> list[Candidate]:
    """BM25 over the question's own terms, ``depth`` deep: searched once per search and
    shared by the lexical channel and the speaker channel, which ask for the same."""
    key = ("question_lexical", depth)
    if key not in request.memo:
        terms = _terms(request, request.analysis.text)
        request.memo[key] = (
            request.store.lexical_search(terms, request.scope, request.filters, depth)
            if terms
            else []
        )
    return request.memo[key]


def _per_speaker(request: SearchRequest, pool: Sequence[Candidate], limit: int) -> list[Candidate]:
    """``pool`` restricted to the named speakers' turns, speakers interleaved."""
    if request.filters.speaker is not None:
        return []  # the caller already restricted every channel to one speaker
    named = speakers_named(request)
    if not named:
        return []
    info = turn_info(request, [c.episode_id for c in pool])
    lists: list[list[Candidate]] = [[] for _ in named]
    for c in pool:
        speaker = info.get(c.episode_id, NO_TURN)[2]
        if speaker in named:
            lists[named.index(speaker)].append(c)
    # Interleave, so that every named speaker is represented near the top.
    merged: list[Candidate] = []
    for rank in range(max(len(c) for c in lists)):
        merged.extend(c[rank] for c in lists if rank < len(c))
    return merged[:limit]


def speaker_lexical(request: SearchRequest, limit: int) -> list[Candidate]:
    """BM25 over the named speakers' own turns (the lexical ranking, ``SearchConfig.pool``
    times deeper, filtered to them)."""
    if not speakers_named(request):
        return []
    return _per_speaker(request, question_lexical(request, request.config.pool * limit), limit)


def speaker_dense(request: SearchRequest, limit: int) -> list[Candidate]:
    """Cosine over the named speakers' own turns (the dense ranking, ``SearchConfig.pool``
    times deeper, filtered to them)."""
    return _per_speaker(request, dense_pool(request), limit)


def _role_filters(request: SearchRequest) -> Filters | None:
    """The request's filters narrowed to the turns of the role the question addresses
    and turns without a role (notes added as plain text), or None when it addresses
    both (a summary), the caller already filters by role, or the store shows no chat
    (none of the question's nearest turns is the other side's)."""
    role = request.analysis.features.get("role")
    if request.filters.role is not None or request.filters.not_role is not None or role is None:
        return None
    # Only in a chat with two sides: when none of the question's nearest turns is the
    # other side's, there is nothing to leave out.
    pool = [c.episode_id for c in dense_pool(request)]
    if not any(info[3] == OTHER_ROLE[role] for info in turn_info(request, pool).values()):
        return None
    return replace(request.filters, not_role=OTHER_ROLE[role])


def _role_ranked(request: SearchRequest, base: str, limit: int) -> list[Candidate]:
    """Base channel ``base``'s deep pool without the other side's turns.

    The pool is ranked as a search over the whole scope, so its turns of the addressed
    role come in the order a search restricted to them would give; the channel reads
    them there and never searches the scope again, so its cost does not grow with the
    scope. It may propose fewer than ``limit``.
    """
    filters = _role_filters(request)
    if filters is None:
        return []
    pool = _pool(request, base)
    info = turn_info(request, [c.episode_id for c in pool])
    kept = [c for c in pool if info.get(c.episode_id, NO_TURN)[3] != filters.not_role]
    return kept[:limit]


def role_lexical(request: SearchRequest, limit: int) -> list[Candidate]:
    """BM25 over the turns of the role the question addresses (``addressed_role``)."""
    if not _terms(request, request.analysis.text):
        return []
    return _role_ranked(request, "lexical", limit)


def role_dense(request: SearchRequest, limit: int) -> list[Candidate]:
    """Cosine over the turns of the role the question addresses (``addressed_role``)."""
    return _role_ranked(request, "dense", limit)


def entity(request: SearchRequest, limit: int) -> list[Candidate]:
    """BM25 over only the question's capitalised names that are not known speakers."""
    speaker_words = {w for s in speakers_named(request) for w in words(s)}
    terms = [
        t
        for name in request.analysis.features["names"]
        for t in search_terms(name)
        if t not in speaker_words
    ]
    if not terms:
        return []
    return request.store.lexical_search(
        list(dict.fromkeys(terms)), request.scope, request.filters, limit
    )


#: Where ``prf`` ranks (``stage_options["prf"]["over"]``): every episode of the scope,
#: or only those of the first stage's lexical and dense rankings.
PRF_OVER = ("scope", "rankings")


def prf(request: SearchRequest, limit: int) -> list[Candidate]:
    """BM25 over the question's terms plus feedback terms from the best lexical hits.

    With ``stage_options["prf"]["over"] = "rankings"`` it ranks only the episodes of the
    lexical and dense channels' deep rankings: a reordering of what the first stage
    found, whose cost does not grow with the scope (the feedback terms are common
    words, whose postings do); default ``"scope"``: a search of the whole scope."""
    config = request.config
    over = request.options("prf").get("over", "scope")
    if over not in PRF_OVER:
        raise InvalidInputError(f"prf over must be one of {PRF_OVER}, got {over!r}")
    terms = _terms(request, request.analysis.text)
    if not terms:
        return []
    seeds = request.channel("lexical", limit)[: config.prf_docs]
    if not seeds:
        return []
    episodes = request.episodes([c.episode_id for c in seeds])
    speaker_words = [w for s in speakers_named(request) for w in words(s)]
    extra = feedback_terms(
        terms, [e.content for e in episodes.values()], config.prf_terms, exclude=speaker_words
    )
    if over == "scope":
        return request.store.lexical_search([*terms, *extra], request.scope, request.filters, limit)
    ranked = [c.episode_id for c in [*_pool(request, "lexical"), *dense_pool(request)]]
    return request.store.lexical_rank(
        [*terms, *extra], list(dict.fromkeys(ranked)), request.scope, limit
    )


#: Weight of the feedback centroid against the question's own vector in ``dense_prf``.
DENSE_PRF_WEIGHT = 0.5


def dense_prf(request: SearchRequest, limit: int) -> list[Candidate]:
    """Cosine search with the question's vector moved towards its best hits (Rocchio):
    ``q + DENSE_PRF_WEIGHT * mean(vectors of the prf_docs best seed hits)``."""
    seeds = [i for i, _ in seed_ranking(request)[: request.config.prf_docs]]
    vectors = list(request.stored_vectors(seeds).values())
    if not vectors:
        return []
    moved = np.asarray(request.query_vector, dtype=np.float32) + DENSE_PRF_WEIGHT * np.mean(
        np.vstack(vectors), axis=0
    )
    moved /= np.linalg.norm(moved)
    return request.store.dense_search(moved, request.scope, request.filters, limit)


def seed_ranking(request: SearchRequest) -> list[tuple[str, float]]:
    """The fused ranking of the configured seed channels, best first (memoised)."""
    key = "seed_ranking"
    if key not in request.memo:
        config = request.config
        names_ = [n for n in config.seed_channels if n in config.channels]
        lists = {n: request.channel(n, config.candidates) for n in names_}
        request.memo[key] = fused_scores(lists, config.weights, config.rrf_k, config.score_mix)
    return request.memo[key]


def neighbours(request: SearchRequest, limit: int) -> list[Candidate]:
    """Turns next to the best seed hits; each inherits ``decay ** distance`` of its
    seed's fused score, summed over seeds. Seeds themselves are not proposed."""
    seeds = seed_ranking(request)[: request.config.seeds]
    decay = request.config.neighbour_decay
    sources = [i for i, _ in seeds]
    return _inherit(request, seeds, sources, lambda offset: decay ** abs(offset), limit)


def replies(request: SearchRequest, limit: int) -> list[Candidate]:
    """The next turn after each of the best seed hits that asks a question (its text
    holds a "?"): the reply is where the answer sits. Each reply inherits its seed's
    fused score, summed over seeds; seeds themselves are not proposed. In a two-sided
    chat only replies from the side the question addresses count (the assistant's
    answer to the user's question is not the user's own words)."""
    seeds = seed_ranking(request)[: request.config.seeds]
    episodes = request.episodes([i for i, _ in seeds])
    asking = [i for i, _ in seeds if i in episodes and "?" in episodes[i].content]
    filters = _role_filters(request) if asking else None
    return _inherit(request, seeds, asking, lambda offset: float(offset == 1), limit, filters)


def _inherit(
    request: SearchRequest,
    seeds: list[tuple[str, float]],
    sources: list[str],
    share: Callable[[int], float],
    limit: int,
    filters: Filters | None = None,
) -> list[Candidate]:
    """The ``limit`` best turns adjacent to ``sources`` (seed ids) that pass ``filters``
    (default: the search's): each scores ``share(offset)`` of its source's seed score,
    summed over sources; seeds themselves are left out."""
    if not sources:
        return []
    seed_score = dict(seeds)
    adjacent = request.store.adjacent_turns(sources, request.scope, filters or request.filters, 1)
    inherited: dict[str, float] = defaultdict(float)
    for source, pairs in adjacent.items():
        for other, offset in pairs:
            weight = share(offset)
            if weight > 0.0 and other not in seed_score:
                inherited[other] += seed_score[source] * weight
    order = sorted(inherited, key=lambda i: -inherited[i])[:limit]
    return [Candidate(i, inherited[i]) for i in order]


def session(request: SearchRequest, limit: int) -> list[Candidate]:
    """Turns of the best sessions: a session scores the sum of its three best seed
    scores; inside each of the ``sessions`` best, turns rank by cosine, and a turn's
    score is its session's score (best = 1) times its cosine.

    With ``stage_options["session"]["role"] = "addressed"``, in a chat with two sides
    the turns it opens are those of the role the question addresses, as the role
    channels' are (default ``"all"``: every turn of the session). With
    ``stage_options["session"]["other_role"] = f`` the other side's turns score ``f``
    times their score (default 1: as the addressed side's; 0 leaves them out). With
    ``stage_options["session"]["chats"]``, only in those kinds of chat (``CHAT_KINDS``,
    told by the seeds' roles: ``chat_kind``; default every kind)."""
    config = request.config
    if is_summary_request(request.analysis.text):
        return []  # a summary covers the whole conversation, not its best sessions
    seeds = seed_ranking(request)[: config.candidates]
    if not seeds:
        return []
    where = turn_info(request, [i for i, _ in seeds])
    options = request.options("session")
    chats = options.get("chats", CHAT_KINDS)
    if not isinstance(chats, (tuple, list)) or not set(chats) <= set(CHAT_KINDS):
        raise InvalidInputError(f"session chats must be among {CHAT_KINDS}, got {chats!r}")
    if chat_kind([where.get(i, NO_TURN)[3] is not None for i, _ in seeds]) not in chats:
        return []
    per_session: dict[str, list[float]] = defaultdict(list)
    for episode_id, score in seeds:
        session_id = where.get(episode_id, NO_TURN)[0]
        if session_id is not None:
            per_session[session_id].append(score)
    if not per_session:
        return []
    totals = {s: sum(sorted(v, reverse=True)[:3]) for s, v in per_session.items()}
    best = sorted(totals, key=lambda s: (-totals[s], s))[: config.sessions]
    top = totals[best[0]]
    filters = request.filters
    if options.get("role", "all") == "addressed":
        filters = _role_filters(request) or filters
    scored: dict[str, float] = {}
    turns = request.store.dense_search_sessions(
        request.query_vector, request.scope, best, filters, limit
    )
    for session_id in best:
        for c in turns[session_id]:
            scored[c.episode_id] = max(
                scored.get(c.episode_id, 0.0), totals[session_id] / top * c.score
            )
    _discount_other_role(request, scored, float(options.get("other_role", 1.0)))
    order = sorted(scored, key=lambda i: -scored[i])[:limit]
    return [Candidate(i, scored[i]) for i in order]


def _discount_other_role(request: SearchRequest, scored: dict[str, float], share: float) -> None:
    """Scale by ``share`` the scores of the turns of the side the question does not
    address (0: drop them), in a chat with two sides (``_role_filters``); nothing
    otherwise."""
    if not 0.0 <= share <= 1.0:
        raise InvalidInputError(f"session other_role must be between 0 and 1, got {share}")
    if share == 1.0 or not scored:
        return
    narrowed = _role_filters(request)
    if narrowed is None:
        return
    info = turn_info(request, list(scored))
    for episode_id in list(scored):
        if info.get(episode_id, NO_TURN)[3] == narrowed.not_role:
            if share == 0.0:
                del scored[episode_id]
            else:
                scored[episode_id] *= share


#: The channels this module adds to ``channels.CHANNELS``.
DERIVED_CHANNELS: dict[str, Callable[[SearchRequest, int], list[Candidate]]] = {
    "hyde": hyde,
    "speaker_lexical": speaker_lexical,
    "speaker_dense": speaker_dense,
    "role_lexical": role_lexical,
    "role_dense": role_dense,
    "entity": entity,
    "prf": prf,
    "dense_prf": dense_prf,
    "neighbours": neighbours,
    "replies": replies,
    "session": session,
}
