"""Fusion of the retrieval channels' ranked lists: weighted reciprocal rank (optionally
mixed with standardised scores) or a learned logistic model."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from itertools import pairwise

import numpy as np

from ..config import DEFAULT_RRF_K
from ..errors import InvalidInputError
from ..store.base import Candidate
from ..types import ChannelScore
from .resources import load_model_file


@dataclass(slots=True)
class Fused:
    """One episode after fusion: its fused score and how each channel ranked it."""

    episode_id: str
    score: float = 0.0
    channels: dict[str, ChannelScore] = field(default_factory=dict)


def weighted_rrf(
    channels: Mapping[str, Sequence[Candidate]],
    weights: Mapping[str, float],
    k: float = DEFAULT_RRF_K,
    score_mix: float = 0.0,
) -> list[Fused]:
    """Fuse ranked lists by weighted reciprocal rank, best first.

    With ``score_mix`` = 0 this is plain weighted RRF: ``score = sum_c w_c / (k +
    rank_c)``. A positive ``score_mix`` moves that share of each channel's vote from
    its rank to its score, standardised within the channel's list:
    ``w_c * max(0, (1 - m) / (k + rank_c) + m * z_c / k)``, with ``z_c`` the
    candidate's z-score among that channel's scores (a vote is never negative). Ranks
    alone cannot tell a channel that is sure (one BM25 hit far above the rest) from one
    that is not; the z-score can, and it is scale-free, so BM25, cosine and derived
    scores mix. A list whose scores do not fall with rank (ordered by something else,
    like the facts channel) votes by rank alone. A channel missing from ``weights``
    gets weight 1. Ties keep the order in which episodes were first proposed, so
    results are deterministic.
    """
    check_score_mix(score_mix)
    fused: dict[str, Fused] = {}
    for name, candidates in channels.items():
        weight = weights.get(name, 1.0)
        votes = rrf_votes(candidates, k, score_mix)
        for rank, (candidate, vote) in enumerate(zip(candidates, votes, strict=True), start=1):
            entry = fused.get(candidate.episode_id)
            if entry is None:
                entry = fused[candidate.episode_id] = Fused(candidate.episode_id)
            entry.score += weight * vote
            entry.channels[name] = ChannelScore(rank, candidate.score)
    return sorted(fused.values(), key=lambda f: f.score, reverse=True)


def fused_scores(
    channels: Mapping[str, Sequence[Candidate]],
    weights: Mapping[str, float],
    k: float = DEFAULT_RRF_K,
    score_mix: float = 0.0,
) -> list[tuple[str, float]]:
    """``weighted_rrf``'s ranking as ``(episode id, fused score)`` pairs, best first,
    without how each channel ranked each episode (cheaper, for rankings that only seed
    other channels)."""
    check_score_mix(score_mix)
    scores: dict[str, float] = {}
    for name, candidates in channels.items():
        weight = weights.get(name, 1.0)
        for candidate, vote in zip(candidates, rrf_votes(candidates, k, score_mix), strict=True):
            scores[candidate.episode_id] = scores.get(candidate.episode_id, 0.0) + weight * vote
    return sorted(scores.items(), key=lambda pair: pair[1], reverse=True)


def rrf_votes(candidates: Sequence[Candidate], k: float, score_mix: float) -> list[float]:
    """Each candidate's unweighted vote in its channel's list: ``1 / (k + rank)``, with
    ``score_mix`` of it moved to the z-scored score (never below zero: being proposed
    must not count against a candidate, and post-fusion boosts multiply scores, so
    they must stay positive)."""
    if score_mix <= 0.0:
        return [1.0 / (k + rank) for rank in range(1, len(candidates) + 1)]
    z = _z_scores(candidates)
    return [
        max((1.0 - score_mix) * (1.0 / (k + rank)) + score_mix * z_rank / k, 0.0)
        for rank, z_rank in enumerate(z, start=1)
    ]


def by_score(fused: list[Fused]) -> list[Fused]:
    """``fused`` best score first (a stable sort: ties keep their order), after a stage
    has changed some scores."""
    return sorted(fused, key=lambda f: f.score, reverse=True)


def check_score_mix(score_mix: float) -> None:
    """Refuse a ``score_mix`` outside [0, 1] (``InvalidInputError``)."""
    if not 0.0 <= score_mix <= 1.0:
        raise InvalidInputError(f"score_mix must be between 0 and 1, got {score_mix}")


def standardise(values: np.ndarray) -> np.ndarray:
    """``values`` z-scored (zeros when they are all equal, or fewer than two)."""
    spread = float(values.std()) if len(values) > 1 else 0.0
    return (values - values.mean()) / spread if spread > 0.0 else np.zeros_like(values)


def _z_scores(candidates: Sequence[Candidate]) -> list[float]:
    """Each candidate's score standardised within its list (zeros when the scores
    are all equal or do not fall with rank). In plain Python: a list holds at most a
    channel's candidates, too few for numpy's per-call cost to pay."""
    scores = [float(c.score) for c in candidates]
    n = len(scores)
    if n < 2:
        return [0.0] * n
    tolerance = 1e-12 * max(1.0, abs(scores[0]))
    if any(later - earlier > tolerance for earlier, later in pairwise(scores)):
        return [0.0] * n
    mean = math.fsum(scores) / n
    spread = math.sqrt(math.fsum((s - mean) * (s - mean) for s in scores) / n)
    return [(s - mean) / spread for s in scores] if spread > 0.0 else [0.0] * n


@dataclass(frozen=True, slots=True)
class LogisticFusion:
    """A logistic model over each candidate's channel ranks and scores.

    For every channel ``c`` in ``channels`` a candidate has two features: its
    reciprocal rank ``k / (k + rank_c)`` (0 when ``c`` did not propose it) and its
    score relative to ``c``'s best score (0 when absent). Features are standardised
    with ``mean``/``scale`` and combined with ``coef``; the fused score is the
    logit. Trained by ``docs/experiments/scripts/fusion_sweep.py`` on one split, evaluated
    on others.
    """

    channels: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    k: float = DEFAULT_RRF_K
    trained_on: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> LogisticFusion:
        """The model from its JSON form (see ``to_dict``)."""
        return cls(
            channels=tuple(data["channels"]),  # type: ignore[arg-type]
            mean=tuple(data["mean"]),  # type: ignore[arg-type]
            scale=tuple(data["scale"]),  # type: ignore[arg-type]
            coef=tuple(data["coef"]),  # type: ignore[arg-type]
            intercept=float(data["intercept"]),  # type: ignore[arg-type]
            k=float(data.get("k", DEFAULT_RRF_K)),  # type: ignore[arg-type]
            trained_on=str(data.get("trained_on", "")),
        )

    def to_dict(self) -> dict[str, object]:
        """A JSON-friendly form (its tuples serialise as lists)."""
        return asdict(self)


def channel_features(
    channels: Mapping[str, Sequence[Candidate]], names: Sequence[str], k: float
) -> tuple[list[str], list[list[float]]]:
    """Candidate ids (in first-proposed order) and their feature rows for ``names``."""
    ids: dict[str, int] = {}
    for candidates in channels.values():
        for c in candidates:
            ids.setdefault(c.episode_id, len(ids))
    rows = [[0.0] * (2 * len(names)) for _ in ids]
    for j, name in enumerate(names):
        candidates = channels.get(name, ())
        if not candidates:
            continue
        top = max(abs(candidates[0].score), 1e-9)
        for rank, c in enumerate(candidates, start=1):
            row = rows[ids[c.episode_id]]
            row[2 * j] = k / (k + rank)
            row[2 * j + 1] = c.score / top
    return list(ids), rows


def learned_fusion(
    channels: Mapping[str, Sequence[Candidate]], model: LogisticFusion
) -> list[Fused]:
    """Fuse ranked lists with a logistic model, best first (ties: first proposed)."""
    ids, rows = channel_features(channels, model.channels, model.k)
    if not ids:
        return []
    x = (np.asarray(rows) - np.asarray(model.mean)) / np.asarray(model.scale)
    logits = x @ np.asarray(model.coef) + model.intercept
    fused = [Fused(i, float(s)) for i, s in zip(ids, logits, strict=True)]
    by_id = {f.episode_id: f for f in fused}
    for name, candidates in channels.items():
        for rank, c in enumerate(candidates, start=1):
            by_id[c.episode_id].channels[name] = ChannelScore(rank=rank, score=c.score)
    return sorted(fused, key=lambda f: f.score, reverse=True)


@lru_cache(maxsize=8)
def load_fusion_model(name: str) -> LogisticFusion:
    """A logistic fusion model: a path to a JSON file, or a file in ``anamnesis/data``."""
    return load_model_file(name, "fusion model", LogisticFusion.from_dict)
