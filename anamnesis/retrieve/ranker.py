"""The learned ranker: a logistic model reorders the best fused candidates.

Fusion and the priors score each candidate from its channel ranks and a few fixed
multipliers. Many cheap signals that tell evidence from near misses are left out: the
question's rare words appearing in the turn, the named speaker saying it, its session
holding other good hits, the turns beside it scoring well (the answer often follows
the turn that matches), the turn being a mere question, its length, the times it
mentions, and its similarity to the question seen through a second, static model
(``edge_cosine_z``: words rather than MiniLM's sentence sense), which also matches
each of the question's words to the turn's closest in sense (``soft_match_z``).
``learned_rerank`` reads ``FEATURES`` for each of the best ``RANKER_DEPTH`` candidates
and orders them by a logistic model's score; the rest keep their order behind them.
There is one model for chats between named people and one for user–assistant chats
(``CHAT_KINDS``).

The model is fitted by ``scripts/ranker_train.py`` on the first half of each
benchmark's cases (LoCoMo, BEAM, LongMemEval) and judged on the second half
(BENCHMARKS.md, "Learned ranker"). Held out by case, not by kind of data: a model
learns the chats it was fitted on (one fitted on the user–assistant benchmarks alone
ranked LoCoMo worse than fusion did, and fitted on two data sets the bundled one lost
recall on the third, so it is the ``ranker`` preset, not the default: BENCHMARKS.md,
"Leave one data set out"); ``ranker_fit`` fits one on your own labelled
questions. It is trained on the output of the ``full-priors``
pipeline, so it belongs after that pipeline's stages: the features of a channel a
configuration does not run are zero. Features are scale-free where they can be (ranks,
z-scores within the candidates, fractions of the question's words), so the model does
not depend on the embedder's cosine scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ..embed.static import WordLlamaEmbedder
from ..errors import InvalidInputError
from ..ingest.normalise import embedding_text
from .candidates import NO_TURN, speakers_named, turn_info
from .currency import reads_notes
from .fusion import Fused, standardise
from .query import words
from .request import SearchRequest
from .resources import StageResources, TextCache, load_model_file
from .understanding import CHAT_KINDS, chat_kind, only_asks

#: How many of the best fused candidates the model reorders. The fused top 100 holds
#: more of LoCoMo's evidence than the top 50, and a model over 100 gained recall@50 as
#: well as recall@10 on held-out cases (BENCHMARKS.md, "Learned ranker").
RANKER_DEPTH = 100
#: The model bundled in ``anamnesis/data`` (fitted on the benchmarks' first halves).
DEFAULT_RANKER_MODEL = "ranker-logistic.json"
#: Channels whose rank and score are features (those of ``full-priors``).
RANKED_CHANNELS = (
    "lexical",
    "dense",
    "speaker_lexical",
    "prf",
    "session",
    "temporal",
    "role_lexical",
    "role_dense",
    "replies",
)
#: The features, in model order.
FEATURES: tuple[str, ...] = (
    "log_rank",  # log(1 + fused rank - 1)
    "score_ratio",  # fused score / the best fused score
    *(f"rank_{c}" for c in RANKED_CHANNELS),  # 10 / (10 + channel rank), 0 if absent
    *(f"z_{c}" for c in RANKED_CHANNELS),  # channel score z-scored among the candidates
    "cosine_z",  # cosine to the question, z-scored among the candidates
    "near_top_z",  # best cosine to one of the top 3 (itself excluded), z-scored
    "edge_cosine_z",  # the static edge model's cosine (first EDGE_CHARS), z-scored
    "soft_match_z",  # the question's tokens matched to the turn's by sense, z-scored
    "coverage",  # share of the question's content words in the turn
    "rare_coverage",  # the same, each word weighted by its rarity among the candidates
    "names_coverage",  # share of the question's non-speaker names in the turn
    "log_words",  # log(1 + words in the turn)
    "asks",  # 1 for a short turn ending with "?"
    "speaker_named",  # 1 when the question names the turn's speaker
    "session_share",  # share of the top 10 from the turn's session
    "session_rank",  # log(1 + rank of the turn's session by its first candidate)
    "beside_top5",  # 1 when the turn is adjacent to one of the top 5
    "neighbour_score",  # best score_ratio of a candidate one turn away (0 if none)
    "neighbour_score_2",  # the same within two turns
    "neighbour_cosine_z",  # best cosine_z of a candidate one turn away (NO_NEIGHBOUR_Z)
    "mentions_time",  # 1 when the turn mentions a time
    "dating_mentions",  # 1 when it does and the question asks when / how long
    "in_window",  # 1 when dated in, or mentioning, a time the question names (+ margin)
    "in_calendar",  # the same for the calendar time itself
    "role_match",  # 1 when the turn's chat role is the one the question addresses
    "has_role",  # 1 when the turn has a chat role
)


#: How much of each candidate the edge view reads: its first characters. On the
#: held-out halves ``edge_cosine_z`` gained as much reading 250 as 500, 1,000 or all of
#: each turn, and ``soft_match_z`` gained more over 1,000 than over 250 (BENCHMARKS.md,
#: "A second view" and "Words matched by sense"); tokenising is most of its cost.
EDGE_CHARS = 1000
#: How many candidates' token ids and vectors an ``EdgeView`` keeps (a few KB each).
EDGE_CACHE = 20_000

#: ``neighbour_cosine_z`` of a turn with no candidate beside it: below almost every
#: candidate's own z-score.
NO_NEIGHBOUR_Z = -2.0

#: Each feature's column in a feature row.
_COLUMN = {name: i for i, name in enumerate(FEATURES)}


@dataclass(frozen=True, slots=True)
class RankerModel:
    """A logistic model over ``FEATURES``: ``logit = coef · (x - mean) / scale``."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    trained_on: str = ""

    def __post_init__(self) -> None:
        sizes = {len(self.features), len(self.mean), len(self.scale), len(self.coef)}
        if len(sizes) != 1:
            raise InvalidInputError("ranker model: features, mean, scale and coef differ in length")
        if self.features != FEATURES:
            raise InvalidInputError(
                "ranker model was fitted on other features than this version computes; "
                "re-fit it (anamnesis fit-ranker)"
            )

    def logits(self, x: np.ndarray) -> np.ndarray:
        """The model's logit for each row of ``x``."""
        mean, scale = np.asarray(self.mean), np.asarray(self.scale)
        return ((x - mean) / scale) @ np.asarray(self.coef) + self.intercept

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> RankerModel:
        """The model from its JSON form (see ``to_dict``)."""
        return cls(
            features=tuple(data["features"]),  # type: ignore[arg-type]
            mean=tuple(float(v) for v in data["mean"]),  # type: ignore[attr-defined]
            scale=tuple(float(v) for v in data["scale"]),  # type: ignore[attr-defined]
            coef=tuple(float(v) for v in data["coef"]),  # type: ignore[attr-defined]
            intercept=float(data["intercept"]),  # type: ignore[arg-type]
            trained_on=str(data.get("trained_on", "")),
        )

    def to_dict(self) -> dict[str, object]:
        """A JSON-friendly form (its tuples serialise as lists)."""
        return asdict(self)


#: The ranker has a model for each kind of chat (``CHAT_KINDS``). The signals differ: who
#: speaks matters between named people, the role between a user and an assistant; one
#: model for both lost recall on BEAM.
#: The kinds the stage reorders unless told otherwise (``stage_options["chats"]``).
#: Held out, the user–assistant model gains turn recall and the evidence within 2,000
#: tokens, and loses LongMemEval's session ndcg (BENCHMARKS.md, "Learned ranker");
#: ``("speakers",)`` keeps those chats in the fused order (``full-ranker-speakers``).
DEFAULT_CHATS = CHAT_KINDS


@lru_cache(maxsize=8)
def load_ranker(name: str = DEFAULT_RANKER_MODEL) -> dict[str, RankerModel]:
    """The ranker's model for each chat kind: from a JSON file at path ``name``, or a
    file of that name in ``anamnesis/data``."""
    return load_model_file(name, "ranker model", _ranker_from_dict)


def _ranker_from_dict(data: Mapping[str, Any]) -> dict[str, RankerModel]:
    return {kind: RankerModel.from_dict(data["models"][kind]) for kind in CHAT_KINDS}


def ranker_to_dict(models: Mapping[str, RankerModel]) -> dict[str, object]:
    """The JSON form that ``load_ranker`` reads."""
    return {"models": {kind: models[kind].to_dict() for kind in CHAT_KINDS}}


def candidate_features(request: SearchRequest, fused: Sequence[Fused]) -> np.ndarray:
    """One row of ``FEATURES`` per candidate of ``fused`` (in order)."""
    n = len(fused)
    x = np.zeros((n, len(FEATURES)), dtype=np.float64)
    if n == 0:
        return x
    column = _COLUMN
    ids = [f.episode_id for f in fused]
    episodes = request.episodes(ids)
    info = turn_info(request, ids)
    times = request.episode_times(ids)
    stored = request.stored_vectors(ids)

    # Similarity: to the question, and to the best three candidates.
    query = request.query_vector
    zero = np.zeros(len(query), dtype=np.float32)
    vectors = np.stack([stored.get(i, zero) for i in ids]).astype(np.float64)
    x[:, column["cosine_z"]] = standardise(vectors @ query)
    near = vectors @ vectors[: min(3, n)].T
    for j in range(near.shape[1]):
        near[j, j] = -1.0
    x[:, column["near_top_z"]] = standardise(near.max(axis=1)) if n > 1 else 0.0
    embedded = [
        embedding_text(episodes[i].content, episodes[i].speaker) if i in episodes else ""
        for i in ids
    ]
    edge_cosines, soft_matches = edge_view(request.resources).read(request.analysis.text, embedded)
    x[:, column["edge_cosine_z"]] = standardise(edge_cosines)
    x[:, column["soft_match_z"]] = standardise(soft_matches)

    # Fusion: the fused rank and score, each channel's rank and standardised score.
    x[:, column["log_rank"]] = np.log1p(np.arange(n))
    best = fused[0].score if fused[0].score > 0 else 1.0
    x[:, column["score_ratio"]] = [f.score / best for f in fused]
    for channel in RANKED_CHANNELS:
        rows = [r for r, f in enumerate(fused) if channel in f.channels]
        if not rows:
            continue
        ranks = np.array([fused[r].channels[channel].rank for r in rows], dtype=np.float64)
        scores = np.array([fused[r].channels[channel].score for r in rows], dtype=np.float64)
        x[rows, column[f"rank_{channel}"]] = 10.0 / (10.0 + ranks)
        x[rows, column[f"z_{channel}"]] = standardise(scores)

    # Words: the question's content words and names found in each turn.
    terms = request.analysis.terms  # its content words (query.search_terms)
    speakers = set(speakers_named(request)) if any(e.speaker for e in episodes.values()) else set()
    names = {n.lower() for n in request.analysis.features.get("names", ())}
    names -= {s.lower() for s in speakers}
    texts = {i: episodes[i].content if i in episodes else "" for i in ids}
    tokens = {i: words(t) for i, t in texts.items()}
    present = {i: {w.split("'")[0] for w in toks} for i, toks in tokens.items()}
    found_in = {t: sum(1 for i in ids if t in present[i]) for t in terms}
    rarity = {t: math.log((n + 1) / (found_in[t] + 0.5)) for t in terms}
    rare_total = sum(rarity.values()) or 1.0

    # Sessions and positions.
    turns = [info.get(i, NO_TURN) for i in ids]
    sessions = [t[0] for t in turns]
    session_rank = {s: r for r, s in enumerate(dict.fromkeys(sessions))}
    top10 = sessions[:10]
    top5 = [(t[0], t[1]) for t in turns[:5] if t[1] is not None]

    neighbours = _neighbour_features(turns, x[:, column["score_ratio"]], x[:, column["cosine_z"]])
    for name, values in neighbours.items():
        x[:, column[name]] = values

    time = request.analysis.time
    windows, calendar = time.windows, time.calendar_times
    role = request.analysis.features.get("role")
    for r, i in enumerate(ids):
        row = x[r]
        mine = present[i]
        if terms:
            row[column["coverage"]] = sum(1 for t in terms if t in mine) / len(terms)
            row[column["rare_coverage"]] = sum(rarity[t] for t in terms if t in mine) / rare_total
        if names:
            row[column["names_coverage"]] = len(names & mine) / len(names)
        row[column["log_words"]] = math.log1p(len(tokens[i]))
        row[column["asks"]] = float(only_asks(texts[i]))
        episode = episodes.get(i)
        row[column["speaker_named"]] = float(episode is not None and episode.speaker in speakers)
        session, index, _, turn_role = turns[r]
        row[column["session_share"]] = sum(1 for s in top10 if s == session) / 10.0
        row[column["session_rank"]] = math.log1p(session_rank[session])
        row[column["beside_top5"]] = float(
            index is not None and any(s == session and abs(t - index) == 1 for s, t in top5)
        )
        found = times.get(i)
        if found is not None:
            row[column["mentions_time"]] = float(bool(found.mentions))
            row[column["dating_mentions"]] = float(time.dating and bool(found.mentions))
            row[column["in_window"]] = float(bool(windows) and found.overlaps(windows))
            row[column["in_calendar"]] = float(bool(calendar) and found.overlaps(calendar))
        row[column["has_role"]] = float(turn_role is not None)
        row[column["role_match"]] = float(role is not None and turn_role == role)
    return x


@dataclass(frozen=True, slots=True)
class EdgeText:
    """A candidate text as the edge view reads it: its token ids and its vector."""

    token_ids: np.ndarray
    vector: np.ndarray


class EdgeView(TextCache[EdgeText]):
    """The ranker's second view of the candidates, through the static edge model
    (WordLlama): it reads words rather than MiniLM's sentence sense, and its errors
    differ. Of each candidate's first ``EDGE_CHARS`` characters it gives

    - ``cosines``: the text's vector against the question's;
    - ``soft_matches``: how well the question's tokens are matched by the text's, each
      by its closest token in sense ("puppy" for "dog", "painted" for "painting"), the
      rarer ones among the candidates weighing more. A soft form of word coverage;

    ``read`` gives both from one pass (the ranker's features).

    Tokenising is most of its cost (study "Learned ranker"), and the same
    candidates come back search after search of one memory, so it keeps the token ids
    and vectors of the last ``capacity`` texts. A ``Retriever`` holds one in its
    ``StageResources``.
    """

    def __init__(self, capacity: int = EDGE_CACHE) -> None:
        super().__init__(capacity)
        self.model = WordLlamaEmbedder()

    def _compute(self, texts: list[str]) -> dict[str, EdgeText]:
        ids = self.model.token_ids([t[:EDGE_CHARS] for t in texts])
        vectors = self.model.pooled(ids)
        return {
            t: EdgeText(i.astype(np.int32), v) for t, i, v in zip(texts, ids, vectors, strict=True)
        }

    def read(self, question: str, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``cosines`` and ``soft_matches`` of ``texts`` at once: the question is
        tokenised, and the texts looked up, once for both."""
        if not texts:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.float64)
        question_ids = self.model.token_ids([question])[0]
        entries = self.values(texts)
        query = self.model.pooled([question_ids])[0]
        cosines = np.stack([e.vector for e in entries]) @ query
        return cosines, self._soft_matches(np.unique(question_ids), entries)

    def cosines(self, question: str, texts: Sequence[str]) -> np.ndarray:
        """Each text's cosine to ``question``."""
        return self.read(question, texts)[0]

    def soft_matches(self, question: str, texts: Sequence[str]) -> np.ndarray:
        """For each text, the mean over the question's distinct tokens of their best
        cosine to one of the text's tokens, weighted by ``log(1 + n / (1 + df))`` where
        ``df`` counts the ``n`` texts holding the token itself (0 for a text without
        tokens, or all 0 for a question without)."""
        return self.read(question, texts)[1]

    def _soft_matches(self, asked: np.ndarray, entries: Sequence[EdgeText]) -> np.ndarray:
        """``soft_matches`` of the question's distinct token ids ``asked``."""
        out = np.zeros(len(entries), dtype=np.float64)
        lengths = np.array([len(e.token_ids) for e in entries], dtype=np.intp)
        if len(asked) == 0 or not lengths.any():
            return out
        flat = np.concatenate([e.token_ids for e in entries])
        present = lengths > 0
        starts = (np.cumsum(lengths) - lengths)[present]  # empty texts add no columns
        distinct, where = np.unique(flat, return_inverse=True)
        asked_vectors = self.model.token_vectors(asked)
        similarity = (asked_vectors @ self.model.token_vectors(distinct).T)[:, where]
        best = np.maximum.reduceat(similarity, starts, axis=1)  # (asked, texts with tokens)
        holds = np.add.reduceat(flat[None, :] == asked[:, None], starts, axis=1) > 0
        weights = np.log1p(len(entries) / (1.0 + holds.sum(axis=1)))
        out[present] = weights @ best / weights.sum()
        return out


def edge_view(resources: StageResources) -> EdgeView:
    """The ``EdgeView`` of a retriever's resources, built on first use."""
    return resources.get(EdgeView, EdgeView)


def _neighbour_features(
    turns: Sequence[tuple], score_ratio: np.ndarray, cosine_z: np.ndarray
) -> dict[str, np.ndarray]:
    """How well the candidates next to each one score: an answer often sits a turn or
    two from the turn that matches the question (the reply, the follow-up)."""
    where = {(t[0], t[1]): r for r, t in enumerate(turns) if t[1] is not None}
    n = len(turns)
    score, score_2 = np.zeros(n), np.zeros(n)
    cosine = np.full(n, NO_NEIGHBOUR_Z)
    for r, (session, index, *_) in enumerate(turns):
        if index is None:
            continue
        for step in (-2, -1, 1, 2):
            other = where.get((session, index + step))
            if other is None:
                continue
            score_2[r] = max(score_2[r], score_ratio[other])
            if abs(step) == 1:
                score[r] = max(score[r], score_ratio[other])
                cosine[r] = max(cosine[r], cosine_z[other])
    return {"neighbour_score": score, "neighbour_score_2": score_2, "neighbour_cosine_z": cosine}


def ranker_settings(
    options: Mapping[str, object],
) -> tuple[dict[str, RankerModel], int, tuple[str, ...]]:
    """``learned_rerank``'s options checked, with its models loaded (once per file):
    the models by chat kind, the depth, and the chat kinds to reorder. ``Retriever``
    calls it when built, so a bad option fails then, not at the first search."""
    models = load_ranker(str(options.get("model", DEFAULT_RANKER_MODEL)))
    depth = options.get("depth", RANKER_DEPTH)
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InvalidInputError(
            f"learned_rerank depth must be an integer of at least 1, got {depth!r}"
        )
    given = options.get("chats", DEFAULT_CHATS)
    chats = (given,) if isinstance(given, str) else given
    if not isinstance(chats, (tuple, list)) or not chats or not set(chats) <= set(CHAT_KINDS):
        raise InvalidInputError(f"learned_rerank chats must be among {CHAT_KINDS}, got {given!r}")
    return models, depth, tuple(chats)


def learned_rerank(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """Reorder the best ``RANKER_DEPTH`` candidates by the ranker model of their chat
    kind (``chat_kind``).

    Options (``stage_options["learned_rerank"]``): ``model`` (a JSON file from
    ``scripts/ranker_train.py``; default the bundled one), ``depth``, and ``chats``: the
    chat kinds to reorder (default ``DEFAULT_CHATS``; others keep the fused order).
    Each reordered candidate's score becomes the model's probability that it is
    evidence; the candidates behind them keep their order, scaled below the last.
    Notes (``reads_notes``) keep the fused order: they are neither kind of chat the
    models were fitted on.
    """
    if not fused or reads_notes(request):
        return fused
    models, depth, chats = ranker_settings(request.options("learned_rerank"))
    head, tail = fused[:depth], fused[depth:]
    info = turn_info(request, [f.episode_id for f in head])
    kind = chat_kind([info.get(f.episode_id, NO_TURN)[3] is not None for f in head])
    if kind not in chats:
        return fused
    features = candidate_features(request, head)
    model = models[kind]
    probability = 1.0 / (1.0 + np.exp(-model.logits(features)))
    order = np.argsort(-probability, kind="stable")
    ranked = [head[i] for i in order]
    for i, candidate in zip(order, ranked, strict=True):
        candidate.score = float(probability[i])
    if tail and tail[0].score > 0:
        below = 0.5 * ranked[-1].score / tail[0].score
        for candidate in tail:
            candidate.score *= below
    return ranked + tail
