"""The statement in force first: when a question asks how things stand, of two
candidates about the same thing the later one ranks above the earlier.

People restate what changes ("my new manager is Sofia" after "my manager is Rui"), and
both statements match the question about as well; what tells them apart is their
order in time, which no channel reads. Two candidates are taken to be about the same
thing when their stored embeddings are close (``SAME_THING``) and both are among the
best ``DEPTH`` of the fused list; the earlier is then placed just below the later one,
wherever it was. Nothing else moves, so a candidate with no later counterpart keeps
its rank, and a superseded statement stays findable a few places down.

The stage stands aside when the question asks about the past or about time itself:
a past-tense question ("where did she work…", "what was…"), history ("used to",
"previously", "changed"), a named time ("in 2023"), and questions of duration, order
or sequence ("how long…", "which came first…", "before…").
``present_tense`` and ``present_terms`` also serve the lexical channel: "now",
"currently", "these days" say when, not what, and are dropped from its terms.
"""

from __future__ import annotations

import re

import numpy as np

from .fusion import Fused, by_score
from .query import words
from .request import SearchRequest

#: The best candidates (first) that yield to a later statement about the same thing...
DEPTH = 10
#: ... found among this many.
POOL = 30
#: The best candidates among which the later ones gain, in proportion to their age.
RECENCY_DEPTH = 5
#: Cosine between two candidates' stored embeddings above which they are taken to be
#: about the same thing.
SAME_THING = 0.5

#: Questions about time itself: how long, in what order, which came first.
_BY_TIME = frozenset({"duration", "order", "first", "before", "after"})
#: A past-tense or perfect auxiliary asking about an event or a former state.
_PAST = re.compile(
    r"\b(?:did|didn't|was|wasn't|were|weren't|had|hadn't|used to|previous(?:ly)?|"
    r"former(?:ly)?|before|originally|at first|in the past|ago|last (?:year|month|week))\b",
    re.IGNORECASE,
)
#: Words that say "as things stand" rather than what the question is about.
_PRESENT = re.compile(
    r"\b(?:(?:right )?now|currently|current|nowadays|these days|at the moment|at present|"
    r"presently|still|anymore|any more|these days|today)\b",
    re.IGNORECASE,
)


def present_terms(text: str) -> set[str]:
    """The lower-cased words of the present-state phrases in ``text`` ("now", "these
    days" -> {"these", "days"}), to drop from lexical terms."""
    found: set[str] = set()
    for match in _PRESENT.finditer(text):
        found.update(match.group(0).lower().split())
    return found


def asks_about_present(request: SearchRequest) -> bool:
    """Whether the question asks how things stand now (see the module docstring)."""
    analysis = request.analysis
    time = analysis.time
    if time.ranges or _BY_TIME.intersection(time.asks):
        return False
    if time.current:
        return True
    return not time.history and _PAST.search(analysis.text) is None


def current_first(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """When the question asks about the present, each of the best ``depth`` candidates
    yields its place to the latest candidate about the same thing among the best
    ``pool`` (which takes its score), and settles just below it."""
    options = request.options("current_first")
    depth = int(options.get("depth", DEPTH))
    pool_size = int(options.get("pool", POOL))
    threshold = float(options.get("same_thing", SAME_THING))
    pool = fused[: max(depth, pool_size)]
    if len(pool) < 2 or not asks_about_present(request):
        return fused
    ids = [f.episode_id for f in pool]
    episodes = request.episodes(ids)
    vectors = request.stored_vectors(ids)
    known = [f for f in pool if f.episode_id in episodes and f.episode_id in vectors]
    if len(known) < 2:
        return fused
    matrix = np.stack([vectors[f.episode_id] for f in known]).astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix /= np.where(norms == 0, 1.0, norms)
    scores = matrix @ matrix.T
    similar = scores >= threshold
    shared = options.get("shared_terms")
    if shared is not None:
        # Two candidates that both say a word of the question answer the same thing at
        # a lower similarity ("standup is at 09:45" / "standup moved to 10:00").
        asked = set(_question_terms(request))
        said = [asked & set(_stems(episodes[f.episode_id].content)) for f in known]
        overlap = np.array([[bool(a & b) for b in said] for a in said])
        similar |= overlap & (scores >= float(shared))
    times = [episodes[f.episode_id].event_time for f in known]
    head = {f.episode_id for f in pool[:depth]}
    nearest = options.get("successor", "latest") == "nearest"
    # Oldest first, so that a chain of restatements ends with the latest on top.
    for i in sorted(range(len(known)), key=lambda k: times[k]):
        candidate = known[i]
        if candidate.episode_id not in head:
            continue
        later = [j for j in range(len(known)) if similar[i, j] and times[j] > times[i]]
        if not later:
            continue
        if nearest:
            successor = known[max(later, key=lambda j: float(scores[i, j]))]
        else:
            successor = known[max(later, key=lambda j: times[j])]
        successor.score = max(successor.score, candidate.score)
        # A hair under: a tie would keep the old order.
        step = max(abs(successor.score) * 1e-6, 1e-12)
        candidate.score = min(candidate.score, successor.score - step)
        head.add(successor.episode_id)
    recency = float(options.get("recency", 0.0))
    if recency:
        fused = by_score(fused)
        top = fused[: int(options.get("recency_depth", RECENCY_DEPTH))]
        dated = request.episodes([f.episode_id for f in top])
        stamps = {
            f.episode_id: dated[f.episode_id].event_time.timestamp()
            for f in top
            if f.episode_id in dated
        }
        if stamps:
            oldest, newest = min(stamps.values()), max(stamps.values())
            span = newest - oldest
            if span > 0:
                for f in top:
                    if f.episode_id in stamps:
                        f.score *= 1.0 + recency * (stamps[f.episode_id] - oldest) / span
    return by_score(fused)


def _stems(text: str) -> list[str]:
    """Lower-cased words with a plural or verb "s" cut ("standups" -> "standup")."""
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words(text)]


def _question_terms(request: SearchRequest) -> list[str]:
    """The question's content words, without present-state words and subject names."""
    drop = present_terms(request.analysis.text)
    for name in subject_names(request):
        drop.update(words(name))
    return [t for t in _stems(" ".join(request.analysis.terms)) if t not in drop]


#: Nearest episodes read to tell whether a name in the question is the memory's
#: subject...
SUBJECT_POOL = 50
#: ... which it is when at least this share of them say it.
SUBJECT_SHARE = 0.2


def subject_names(request: SearchRequest) -> list[str]:
    """The names in the question that name the memory's own subject: a person most of
    its notes are about ("Dara's mum flew back", "Dara started…"), found in at least
    ``SUBJECT_SHARE`` of the question's nearest episodes.

    Such a name tells nothing apart (every note is about that person), yet it pulls the
    lexical and dense channels toward any note that says it. In a chat between named
    people the names live in the speaker field, not the text, and are rarely this
    frequent, so the names stay there.
    """
    key = "subject_names"
    if key not in request.memo:
        asked = request.analysis.features.get("names", [])
        found: list[str] = []
        if asked:
            vector = request.text_vector(request.analysis.text)
            near = request.store.dense_search(vector, request.scope, request.filters, SUBJECT_POOL)
            texts = [
                e.content.lower() for e in request.episodes([c.episode_id for c in near]).values()
            ]
            for name in asked:
                word = name.lower()
                pattern = re.compile(rf"\b{re.escape(word)}\b")
                if texts and sum(1 for t in texts if pattern.search(t)) >= SUBJECT_SHARE * len(
                    texts
                ):
                    found.append(name)
        request.memo[key] = found
    result: list[str] = request.memo[key]
    return result


def without_subject(text: str, subjects: list[str]) -> str:
    """``text`` with the subject's name put in the first person, as most notes are
    written ("Where does Dara work?" -> "Where does I work?", "Dara's" -> "my")."""
    for name in subjects:
        text = re.sub(rf"\b{re.escape(name)}['’]s\b", "my", text)
        text = re.sub(rf"\b{re.escape(name)}\b", "I", text)
    return text


#: Share of the question's nearest episodes without a session above which they are
#: taken for notes.
NOTES_SHARE = 0.5


def reads_notes(request: SearchRequest) -> bool:
    """Whether the question's nearest episodes are mostly notes (stored without a
    session), rather than turns of a conversation.

    The speaker, role, session and reply channels read a conversation's structure; notes
    have none, so those channels only ever vote for the few turns that do, above the
    notes that hold the answer.
    """
    key = "reads_notes"
    if key not in request.memo:
        from .candidates import dense_pool, turn_info

        pool = dense_pool(request)[:SUBJECT_POOL]
        info = turn_info(request, [c.episode_id for c in pool])
        sessionless = sum(1 for c in pool if c.episode_id in info and info[c.episode_id][0] is None)
        request.memo[key] = bool(pool) and sessionless >= NOTES_SHARE * len(pool)
    result: bool = request.memo[key]
    return result
