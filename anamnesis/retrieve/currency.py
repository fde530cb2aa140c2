"""What is true now: the statement in force first, for notes as for conversations.

An agent's memory restates what changes ("my new manager is Sofia" after "my manager
is Rui"), and both statements match a question about as well; what tells them apart is
their order in time, which no channel reads. Four parts, each switched on by the
configuration and each measured on its own (BENCHMARKS.md, "An agent's life"):

- ``current_first`` (a post-fusion stage), for a question about the present:
  each of the best ``DEPTH`` candidates yields its place to the latest candidate about
  the same thing among the best ``POOL`` (stored embeddings closer than
  ``SAME_THING``, or closer than ``SHARED_WORD`` and both saying a word of the question
  that few candidates say) dated a later day, which takes its score; it settles just below
  every later candidate about the same thing (the latest may have moved on to
  something else again, and a superseded statement must not stay above the statement
  that replaced it); then, among the best ``RECENCY_DEPTH``, the later gain in
  proportion to their age in days (``RECENCY``); last, a statement among the best
  ``ENDED_DEPTH`` that names a thing a later note says ended ("Cancelled the
  CityFitness membership" after "gym at CityFitness before work") keeps ``ENDED`` of
  its score. It runs after the guards, so that a statement the exact-match guard
  pinned still yields to its successor.
  A superseded statement stays a few places down, findable for "before" questions.
- ``present_terms`` (query feature ``"tense"``): "now", "currently", "these days" say
  when, not what, and are left out of the lexical terms; with ``"tense-dense"``
  (``without_present``; not in the default), of the embedded question too, over notes.
- ``subject_names`` (query feature ``"subject"``): the name of the person a memory is
  about is in most of its notes, so it tells nothing apart; it is neither matched nor
  embedded. With ``"subject-speaker"``, the speaker of most of the notes counts too:
  "Where does Miguel work?" over Miguel's own "I started a new job" asks about "I".
- ``reads_notes`` (``SearchConfig.notes_channels``): over notes, stored without a
  session, the channels that read a conversation's speakers, roles and sessions stand
  aside. The three parts above act over notes only: in a conversation a later turn
  about the same thing more often answers or goes on than restates (on LoCoMo and BEAM
  they cost MRR; BENCHMARKS.md).

A question is about the present unless it is in the past tense ("where did she
work…", "what was…"), asks for history ("used to", "previously", "changed"), names a
time already over ("in 2023") or asks about time itself ("how long…", "which came
first…"); a question that says "now", "still" or "currently" is about the present
unless it is in the past tense or names a time already over.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import numpy as np

from ..store.base import Candidate
from .fusion import Fused, by_score
from .identifiers import identifier_terms
from .query import search_terms
from .request import SearchRequest

#: The best candidates that yield to a later statement about the same thing...
DEPTH = 10
#: ... found among this many.
POOL = 10
#: Cosine between two candidates' stored embeddings from which they are taken to be
#: about the same thing (chosen on the life personas of the agent-life dev set).
SAME_THING = 0.55
#: Candidates read to tell whether a word of the question is rare among them ...
WORD_POOL = 30
#: ... which it is when at most this many say it.
RARE_WORD_HOLDERS = 2
#: Cosine from which two candidates that both say a rare word of the question are
#: taken to be about the same thing.
SHARED_WORD = 0.4
#: Among this many of the best candidates, the later ones gain ...
RECENCY_DEPTH = 8
#: ... up to this share of their score, in proportion to their age among them.
RECENCY = 0.4

#: Among this many of the best candidates, a statement that a later note ended ...
ENDED_DEPTH = 5
#: ... keeps this share of its score.
ENDED = 0.3
#: Most notes a name may be in and still name one thing ("Ohlsdorf", "CityFitness").
ENDED_HOLDERS = 3

#: Nearest episodes read to tell whether a name in the question is the memory's
#: subject ...
SUBJECT_POOL = 50
#: ... which it is when at least this share of them say it.
SUBJECT_SHARE = 0.2
#: Share of the question's nearest episodes without a session from which they are
#: taken for notes.
NOTES_SHARE = 0.5

#: Questions about time itself: how long, in what order, which came first.
_BY_TIME = frozenset({"duration", "order", "first", "before", "after"})
#: A past-tense or perfect auxiliary asking about an event or a former state.
_PAST = re.compile(
    r"\b(?:did|didn't|was|wasn't|were|weren't|had|hadn't|used to|previous(?:ly)?|"
    r"former(?:ly)?|before|originally|at first|in the past|ago|last (?:year|month|week))\b",
    re.IGNORECASE,
)
#: The past tense or a former state, without "before", which also names a moment
#: ("before work", "before bed").
_PAST_TENSE = re.compile(
    r"\b(?:did|didn't|was|wasn't|were|weren't|had|hadn't|used to|previous(?:ly)?|"
    r"former(?:ly)?|originally|at first|in the past|ago|last (?:year|month|week))\b",
    re.IGNORECASE,
)
#: Words that say a thing ended: left, quit, sold, cancelled, the last day, no longer.
_ENDING = re.compile(
    r"\b(?:left|leaving|quit|quitting|(?:handed in|gave) (?:my|his|her|their) notice|"
    r"cancel(?:led|ed|s|ling)?|sold|selling|moved out|moving out|"
    r"last (?:day|night|week|shift|session)|no longer|any ?more|ended|closed|gave up|"
    r"stopped|retir(?:ed|ing))\b",
    re.IGNORECASE,
)
#: Words that say "as things stand" rather than what the question is about.
_PRESENT = re.compile(
    r"\b(?:(?:right )?now|currently|current|nowadays|these days|at the moment|at present|"
    r"presently|still|anymore|any more|today)\b",
    re.IGNORECASE,
)


def without_present(text: str) -> str:
    """``text`` without its present-state phrases ("Where does she work now?" -> "Where
    does she work?"), to embed what the question asks, not when."""
    stripped = re.sub(r"\s{2,}", " ", _PRESENT.sub(" ", text))
    stripped = re.sub(r"[\s,]+([?.!])", r"\1", re.sub(r"\s*,(?:\s*,)*", ",", stripped)).strip()
    return stripped if re.search(r"\w", stripped) else text


def present_terms(text: str) -> set[str]:
    """The lower-cased words of the present-state phrases in ``text`` ("now", "these
    days" -> {"these", "days"}), to leave out of the lexical terms."""
    found: set[str] = set()
    for match in _PRESENT.finditer(text):
        found.update(match.group(0).lower().split())
    return found


def asks_about_present(request: SearchRequest, *, said_now_wins: bool = True) -> bool:
    """Whether the question asks how things stand now (see the module docstring).

    With ``said_now_wins``, a question that says "now", "still", "currently" or "these
    days" asks about the present whatever else it names, unless it is in the past tense,
    asks for history or names a time already over: "Is she still flying to Denver for
    Thanksgiving?", "How many days a week does she work now?", "Is he still going to
    the gym before work?" ask what holds now, though they name a time, a count of days
    or the word "before".
    """
    analysis = request.analysis
    time = analysis.time
    if said_now_wins and time.current and not time.history:
        over = any(r.mention.end <= analysis.now for r in time.ranges)
        if not over and _PAST_TENSE.search(analysis.text) is None:
            return True
    if time.ranges or _BY_TIME.intersection(time.asks):
        return False
    if time.current:
        return True
    return not time.history and _PAST.search(analysis.text) is None


def current_first(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """For a question about the present, the later of two statements about the same
    thing first, and the later of the best few a little higher (module docstring).

    Options (``stage_options["current_first"]``): ``depth``, ``pool``, ``same_thing``,
    ``recency``, ``recency_depth``, ``shared_word`` (0 for none), ``ended`` (1 for
    none), their defaults this module's constants; and
    ``said_now_wins`` (default true; ``asks_about_present``) and ``below_all`` (default
    true: a statement settles below every later one about the same thing, not only
    below the latest, which may be about something else again).
    """
    options = request.options("current_first")
    said_now_wins = bool(options.get("said_now_wins", True))
    if (
        len(fused) < 2
        or not reads_notes(request)
        or not asks_about_present(request, said_now_wins=said_now_wins)
    ):
        return fused
    _successors_first(
        request,
        fused,
        depth=int(options.get("depth", DEPTH)),
        pool=int(options.get("pool", POOL)),
        same_thing=float(options.get("same_thing", SAME_THING)),
        below_all=bool(options.get("below_all", True)),
        shared_word=float(options.get("shared_word", SHARED_WORD)),
    )
    fused = by_score(fused)
    _later_higher(
        request,
        fused[: int(options.get("recency_depth", RECENCY_DEPTH))],
        float(options.get("recency", RECENCY)),
    )
    ended = float(options.get("ended", ENDED))
    if ended < 1.0:
        fused = by_score(fused)
        for candidate in _ended(request, fused[:ENDED_DEPTH]):
            candidate.score *= ended
    return by_score(fused)


def _ended(request: SearchRequest, top: list[Fused]) -> list[Fused]:
    """Those of ``top`` that name a thing ("Gymnasium Ohlsdorf", "CityFitness") that a
    later note names with a word that says it ended ("Lena's last day at Gymnasium
    Ohlsdorf", "Cancelled the CityFitness membership"): the statement no longer holds,
    whatever the later note says instead. A name in more than ``ENDED_HOLDERS`` notes
    names too many things to tell."""
    episodes = request.episodes([f.episode_id for f in top])
    found = []
    for candidate in top:
        episode = episodes.get(candidate.episode_id)
        if episode is None:
            continue
        day = _day(episode.event_time)
        for term in identifier_terms(episode.content):
            key = ("name_holders", term)
            if key not in request.memo:
                request.memo[key] = request.store.lexical_search(
                    [term], request.scope, request.filters, ENDED_HOLDERS + 1
                )
            holders: list[Candidate] = request.memo[key]
            if len(holders) > ENDED_HOLDERS:
                continue
            later = request.episodes([h.episode_id for h in holders])
            if any(_day(e.event_time) > day and _ENDING.search(e.content) for e in later.values()):
                found.append(candidate)
                break
    return found


def _successors_first(
    request: SearchRequest,
    fused: list[Fused],
    *,
    depth: int,
    pool: int,
    same_thing: float,
    below_all: bool = True,
    shared_word: float = 0.0,
) -> None:
    """Each of the best ``depth`` candidates yields its score to the latest candidate
    about the same thing among the best ``pool``, and settles just below every later
    candidate about the same thing (with ``below_all``; else just below the latest).

    Two candidates are about the same thing when their embeddings are closer than
    ``same_thing``, or, with ``shared_word``, closer than it and both say a word of the
    question that few of the best candidates say (``_share_a_rare_word``)."""
    candidates = fused[: max(depth, pool)]
    ids = [f.episode_id for f in candidates]
    episodes = request.episodes(ids)
    vectors = request.stored_vectors(ids)
    known = [f for f in candidates if f.episode_id in episodes and f.episode_id in vectors]
    if len(known) < 2:
        return
    matrix = np.stack([vectors[f.episode_id] for f in known]).astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix /= np.where(norms == 0, 1.0, norms)
    cosine = matrix @ matrix.T
    similar = cosine >= same_thing
    if shared_word:
        similar |= (cosine >= shared_word) & _share_a_rare_word(request, fused, known, episodes)
    days = [_day(episodes[f.episode_id].event_time) for f in known]
    head = {f.episode_id for f in candidates[:depth]}
    # Oldest first, so that a chain of restatements ends with the latest on top.
    for i in sorted(range(len(known)), key=lambda k: days[k]):
        candidate = known[i]
        if candidate.episode_id not in head:
            continue
        later = [j for j in range(len(known)) if similar[i, j] and days[j] > days[i]]
        if not later:
            continue
        successor = known[max(later, key=lambda j: days[j])]
        successor.score = max(successor.score, candidate.score)
        # Below every later statement about the same thing, or only the latest; a
        # hair under, as a tie would keep the old order.
        floor = min(known[j].score for j in later) if below_all else successor.score
        candidate.score = min(candidate.score, floor - max(abs(floor) * 1e-6, 1e-12))
        head.add(successor.episode_id)


def _share_a_rare_word(
    request: SearchRequest, fused: list[Fused], known: list[Fused], episodes: dict[str, Any]
) -> np.ndarray:
    """Which pairs of ``known`` both say a word of the question that at most
    ``RARE_WORD_HOLDERS`` of the best ``WORD_POOL`` candidates say: the word names the
    thing asked about ("Lofoten", "cane"), so the two notes speak of it, however
    differently ("planning a trip to Lofoten" and "the Lofoten trip is off")."""
    asked = set(request.analysis.terms) - present_terms(request.analysis.text)
    pool = fused[:WORD_POOL]
    texts = request.episodes([f.episode_id for f in pool])
    said = {i: set(search_terms(e.content)) & asked for i, e in texts.items()}
    holders = {w: sum(w in words for words in said.values()) for w in asked}
    rare = {w for w, n in holders.items() if 0 < n <= RARE_WORD_HOLDERS}
    mine = [
        said.get(f.episode_id, set(search_terms(episodes[f.episode_id].content))) & rare
        for f in known
    ]
    shared = np.zeros((len(known), len(known)), dtype=bool)
    for i, a in enumerate(mine):
        for j, b in enumerate(mine):
            shared[i, j] = i != j and bool(a & b)
    return shared


def _later_higher(request: SearchRequest, top: list[Fused], recency: float) -> None:
    """Scale each of ``top`` by up to ``1 + recency``, in proportion to how late it is
    between the oldest and the newest of them (notes of one day gain alike)."""
    if not recency or len(top) < 2:
        return
    dated = request.episodes([f.episode_id for f in top])
    stamps = {
        f.episode_id: _day(dated[f.episode_id].event_time) for f in top if f.episode_id in dated
    }
    if not stamps:
        return
    oldest, newest = min(stamps.values()), max(stamps.values())
    if newest <= oldest:
        return
    for candidate in top:
        if candidate.episode_id in stamps:
            age = (stamps[candidate.episode_id] - oldest) / (newest - oldest)
            candidate.score *= 1.0 + recency * age


def _day(when: datetime) -> int:
    """The day of an event: statements made the same day are not one after another."""
    return when.toordinal()


def subject_names(request: SearchRequest) -> list[str]:
    """The names in the question that name the memory's own subject: a person most of
    its notes are about ("Dara's mum flew back", "Dara started…"), said by at least
    ``SUBJECT_SHARE`` of the question's ``SUBJECT_POOL`` nearest episodes; with the
    query feature ``"subject-speaker"``, or their speaker (Miguel's own "I started a
    new job" is about Miguel).

    Such a name tells nothing apart, yet it pulls the lexical and dense channels toward
    any note that says it. In a conversation between named people the names live in
    the speaker field, not the text, and so stay in the query.
    """
    key = "subject_names"
    if key not in request.memo:
        asked = request.analysis.features.get("names", [])
        found: list[str] = []
        if asked and reads_notes(request):
            near = _neighbours(request)
            episodes = request.episodes([c.episode_id for c in near])
            texts = [e.content.lower() for e in episodes.values()]
            if "subject-speaker" in request.config.query:
                # A note a person speaks is about them, in the first person ("I started
                # a new job"): their name is in the speaker field, not the text.
                texts = [f"{e.speaker or ''}: {e.content}".lower() for e in episodes.values()]
            for name in asked:
                pattern = re.compile(rf"\b{re.escape(name.lower())}\b")
                saying = sum(1 for text in texts if pattern.search(text))
                if texts and saying >= SUBJECT_SHARE * len(texts):
                    found.append(name)
        request.memo[key] = found
    names: list[str] = request.memo[key]
    return names


def without_subject(text: str, subjects: list[str]) -> str:
    """``text`` with the subject's name in the first person, as most notes are written
    ("Where does Dara work?" -> "Where does I work?", "Dara's" -> "my")."""
    for name in subjects:
        text = re.sub(rf"\b{re.escape(name)}['’]s\b", "my", text)
        text = re.sub(rf"\b{re.escape(name)}\b", "I", text)
    return text


def reads_notes(request: SearchRequest) -> bool:
    """Whether most of the question's nearest episodes are notes rather than turns of a
    conversation: stored without a session, or in sessions where only one side speaks
    (an agent's `remember` calls, a user's journal).

    The speaker, role, session and reply channels read a conversation's structure;
    notes have none, so those channels only ever vote for the few turns that do, above
    the notes that hold the answer. The other parts of this module act on notes only:
    a note asserts something on its own, so a later note about the same thing restates
    it, where a later turn of a conversation more often answers or goes on.
    """
    key = "reads_notes"
    if key not in request.memo:
        near = _neighbours(request)
        info = request.lookup("turn_info", [c.episode_id for c in near], request.store.turn_info)
        places = [info[c.episode_id] for c in near if c.episode_id in info]
        in_sessions = [p for p in places if p[0] is not None]
        sides = {p[2] or p[3] for p in in_sessions}
        turns = len(in_sessions) if len(sides) > 1 else 0
        request.memo[key] = bool(places) and len(places) - turns >= NOTES_SHARE * len(places)
    answer: bool = request.memo[key]
    return answer


def _neighbours(request: SearchRequest) -> list[Candidate]:
    """The question's ``SUBJECT_POOL`` nearest episodes by its own text's embedding."""
    return request.nearest(request.analysis.text, SUBJECT_POOL)
