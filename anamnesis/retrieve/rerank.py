"""Score-based rerankers: the MemX four-factor score and True Memory's surprise factor.

Both run after fusion on the fused candidates and only reorder them.

*MemX four-factor* (MemX §3.4, Eqs. 1–4, Table 1)::

    s(m) = 0.45·f_sem + 0.25·f_rec + 0.05·f_freq + 0.10·f_imp
    ŝ(m) = sigmoid((s(m) − μ) / σ)        μ, σ over this query's candidates

What each factor reads here (MemX reads retrieval counters that search updates):

* ``f_sem``: the fused RRF score. MemX feeds the raw RRF score; raw RRF scores are
  ~0.03 at most, so next to a recency term in [0, 1] they decide almost nothing.
  ``semantic="rrf-max"`` (the default) divides by the query's best RRF score so both
  terms span [0, 1]; ``semantic="rrf"`` is the paper's literal formula.
* ``f_rec = 2^(−days/30)``: age of the episode's *event time* at the question's
  reference time (``now``), never ingest wall-clock time, which is meaningless after a
  bulk load. Episodes dated after ``now`` count as age 0.
* ``f_freq``: MemX counts how often search returned a memory. That needs a write on
  every read (a counter row per hit), which would make search a writer, serialise
  concurrent readers on SQLite and make benchmark results depend on question order.
  We do not count reads, so ``f_freq`` is 0 for every episode and drops out after the
  z-score. The slot stays so a caller-maintained counter can feed it:
  ``metadata["retrieval_count"]`` (an integer) is used when present.
* ``f_imp``: the caller's explicit annotation ``metadata["importance"]`` in [0, 1];
  0.5 (neutral) when absent.

*Surprise* (True Memory §4.1 Stage 9): ``score × (1 + 0.2·σ)`` where σ is the fraction
of an episode's "fingerprints" (numbers, dates, proper nouns, event words) that did not
occur in the preceding turns of its session. True Memory measures novelty against its
whole running fact set at write time; here it is computed at query time against the
``window`` turns before each candidate, which needs one neighbour query per search.
"""

from __future__ import annotations

import math
import re
from datetime import datetime

import numpy as np

from ..types import Episode
from .fusion import Fused
from .request import SearchRequest

#: MemX Table 1 weights (they sum to 0.85 by design; only ratios matter after z-score).
MEMX_WEIGHTS = {"semantic": 0.45, "recency": 0.25, "frequency": 0.05, "importance": 0.10}
#: MemX Eq. 2 recency half-life, in days.
MEMX_HALF_LIFE_DAYS = 30.0
#: MemX Eq. 4: skip the z-score when the candidates' scores are this close to equal.
MEMX_MIN_STD = 1e-6
#: Importance of an episode without an explicit annotation.
NEUTRAL_IMPORTANCE = 0.5
#: True Memory's surprise multiplier α (TM §4.1 Stage 9, TRUEMEMORY_ALPHA_SURPRISE).
SURPRISE_ALPHA = 0.2
#: How many preceding turns of the same session count as "already known" for surprise.
SURPRISE_WINDOW = 3
#: How many of the best fused candidates the surprise factor rescores (each needs its
#: preceding turns fetched and scanned: on LongMemEval's long turns 100 candidates with
#: 5 turns each cost seconds per search).
SURPRISE_DEPTH = 30
#: How many of the best fused candidates the reranking stages rescore.
RERANK_DEPTH = 100


def memx(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """Rerank by the MemX four-factor score; ``score`` becomes the calibrated ŝ in (0, 1).

    Options (``stage_options["memx"]``): ``weights`` (dict overriding MEMX_WEIGHTS),
    ``half_life_days``, ``semantic`` ("rrf-max" or "rrf"), ``depth``.
    """
    options = request.options("memx")
    depth = int(options.get("depth", RERANK_DEPTH))
    head, tail = fused[:depth], fused[depth:]
    if not head:
        return fused
    weights = {**MEMX_WEIGHTS, **dict(options.get("weights", {}))}
    half_life = float(options.get("half_life_days", MEMX_HALF_LIFE_DAYS))
    episodes = request.episodes([f.episode_id for f in head])
    rrf = np.array([f.score for f in head], dtype=np.float64)
    if options.get("semantic", "rrf-max") == "rrf-max" and rrf.max() > 0:
        rrf = rrf / rrf.max()
    composite = []
    for f, semantic in zip(head, rrf, strict=True):
        episode = episodes.get(f.episode_id)
        factors = memx_factors(episode, request.analysis.now, half_life)
        composite.append(
            weights["semantic"] * semantic
            + weights["recency"] * factors["recency"]
            + weights["frequency"] * factors["frequency"]
            + weights["importance"] * factors["importance"]
        )
    calibrated = zscore_sigmoid(np.array(composite))
    for f, value in zip(head, calibrated, strict=True):
        f.score = float(value)
    head.sort(key=lambda f: f.score, reverse=True)
    # The tail was never scored: keep it below every calibrated score, in its order.
    floor = min((f.score for f in head), default=0.0)
    for position, f in enumerate(tail, start=1):
        f.score = floor * (1.0 - position / (len(tail) + 1)) * 0.5
    return head + tail


def memx_factors(episode: Episode | None, now: datetime, half_life_days: float) -> dict[str, float]:
    """The recency, frequency and importance factors of one episode (MemX Eqs. 2–3)."""
    if episode is None:
        return {"recency": 0.0, "frequency": 0.0, "importance": NEUTRAL_IMPORTANCE}
    age_days = max(0.0, (now - episode.event_time).total_seconds() / 86400.0)
    recency = 2.0 ** (-age_days / half_life_days)
    count = episode.metadata.get("retrieval_count", 0)
    count = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0
    frequency = min(1.0, math.log(count + 1) / 10.0)
    importance = episode.metadata.get("importance", NEUTRAL_IMPORTANCE)
    if not isinstance(importance, int | float) or isinstance(importance, bool):
        importance = NEUTRAL_IMPORTANCE
    return {
        "recency": recency,
        "frequency": frequency,
        "importance": min(1.0, max(0.0, float(importance))),
    }


def zscore_sigmoid(scores: np.ndarray) -> np.ndarray:
    """MemX Eq. 4: ``sigmoid((s − mean) / std)``; unchanged when std < 1e-6."""
    if scores.size == 0:
        return scores
    std = float(scores.std())
    if std < MEMX_MIN_STD:
        return scores
    return 1.0 / (1.0 + np.exp(-(scores - scores.mean()) / std))


# -- surprise ------------------------------------------------------------------------------

_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday "
    "friday saturday sunday yesterday today tomorrow weekend"
).split()
#: Words that mark a life event (True Memory's "event keywords"; our list).
_EVENTS = frozenset(
    """married marry wedding engaged divorced born birthday died passed funeral moved move
    graduated graduation hired fired promoted promotion retired started joined quit left
    bought sold adopted visited trip travel travelled traveled vacation holiday concert
    won lost broke diagnosed surgery pregnant baby kid job interview exam degree
    launched finished signed accident""".split()
)
_NUMBER = re.compile(r"\b\d+(?:[.,:/]\d+)*\b")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")


def fingerprints(text: str) -> set[str]:
    """The fact fingerprints of a text: numbers, date words, proper nouns and event words.

    A proper noun is a capitalised word that does not start a sentence.
    """
    found = {m.group(0) for m in _NUMBER.finditer(text)}
    previous_end = 0
    for match in _WORD.finditer(text):
        word = match.group(0)
        between = text[previous_end : match.start()]
        sentence_start = previous_end == 0 or any(mark in between for mark in ".!?\n")
        previous_end = match.end()
        lower = word.lower().rstrip("'’s") if word.endswith(("'s", "’s")) else word.lower()
        if lower in _MONTHS or lower in _EVENTS:
            found.add(lower)
        elif word[0].isupper() and not sentence_start and word != "I":
            found.add(lower)
    return found


def surprise(text: str, known: set[str]) -> float:
    """The fraction of ``text``'s fingerprints that are not in ``known`` (0 without any)."""
    return novelty(fingerprints(text), known)


def novelty(prints: set[str], known: set[str]) -> float:
    """The fraction of ``prints`` not in ``known`` (0 for no prints)."""
    return len(prints - known) / len(prints) if prints else 0.0


def surprise_stage(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """Multiply each candidate's score by ``1 + α·σ`` (True Memory Stage 9) and resort.

    Options (``stage_options["surprise"]``): ``alpha``, ``window``, ``depth``.
    """
    options = request.options("surprise")
    alpha = float(options.get("alpha", SURPRISE_ALPHA))
    window = int(options.get("window", SURPRISE_WINDOW))
    depth = int(options.get("depth", SURPRISE_DEPTH))
    head, tail = fused[:depth], fused[depth:]
    episodes = request.episodes([f.episode_id for f in head])
    anchored = list(episodes.values())
    before = request.store.neighbours(anchored, window) if window > 0 else {}
    prints: dict[str, set[str]] = {}

    def of(episode: Episode) -> set[str]:
        if episode.id not in prints:
            prints[episode.id] = fingerprints(episode.content)
        return prints[episode.id]

    for f in head:
        episode = episodes.get(f.episode_id)
        if episode is None:
            continue
        known: set[str] = set()
        for other in before.get(episode.id, ()):
            if (other.turn_index or 0) < (episode.turn_index or 0):
                known |= of(other)
        f.score *= 1.0 + alpha * novelty(of(episode), known)
    head.sort(key=lambda f: f.score, reverse=True)
    return _keep_order(head, tail)


def _keep_order(head: list[Fused], tail: list[Fused]) -> list[Fused]:
    """``head + tail``, lowering tail scores that a reranked head fell below."""
    if head and tail:
        floor = head[-1].score
        for f in tail:
            f.score = min(f.score, floor)
    return head + tail
