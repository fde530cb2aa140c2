"""Searching the archive: the slow path of ``search(..., include_archive=True)``.

Archived episodes have no full-text or vector index. The scope's archived rows are
read and ranked twice, by how many of the question's terms they contain (whole words,
case-folded) and by cosine similarity of their stored vector to the question's; the
two rankings are fused by reciprocal rank, and the result is fused the same way with
the hot search's ranking. The cost grows with the scope's archive: it is meant for
the occasional question that must reach back, not for every search.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np

from ..store.base import Candidate
from ..types import ChannelScore, Episode, Hit
from .fusion import weighted_rrf
from .query import words


def _rrf(rankings: Sequence[Sequence[str]]) -> dict[str, float]:
    """Plain reciprocal-rank fusion of id rankings (``fusion.weighted_rrf``, every
    ranking weighted 1)."""
    channels = {str(n): [Candidate(key, 0.0) for key in keys] for n, keys in enumerate(rankings)}
    return {f.episode_id: f.score for f in weighted_rrf(channels, {})}


def rank_archived(
    rows: Iterable[tuple[Episode, np.ndarray | None]],
    vector: np.ndarray,
    terms: Sequence[str],
    limit: int,
) -> list[tuple[Episode, float]]:
    """The best ``limit`` archived episodes for a question (its vector and terms), with
    their fused score, best first."""
    wanted = set(terms)
    episodes: dict[str, Episode] = {}
    lexical: list[tuple[int, str]] = []
    dense: list[tuple[float, str]] = []
    query = np.asarray(vector, dtype=np.float32)
    query_norm = float(np.linalg.norm(query)) or 1.0
    for episode, stored in rows:
        episodes[episode.id] = episode
        matched = len(wanted.intersection(words(episode.content)))
        if matched:
            lexical.append((-matched, episode.id))
        if stored is not None and stored.shape == query.shape:
            norm = float(np.linalg.norm(stored)) or 1.0
            dense.append((-float(stored @ query) / (norm * query_norm), episode.id))
    lexical.sort()
    dense.sort()
    fused = _rrf([[i for _, i in lexical[:limit]], [i for _, i in dense[:limit]]])
    best = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [(episodes[i], score) for i, score in best]


def merge_archived(
    hits: Sequence[Hit], archived: Sequence[tuple[Episode, float]], limit: int
) -> list[Hit]:
    """The hot search's hits and the archive's, fused by reciprocal rank (the archived
    hits carry an ``archive`` channel, and no neighbouring turns)."""
    by_id = {hit.episode.id: hit for hit in hits}
    for rank, (episode, score) in enumerate(archived, 1):
        by_id.setdefault(
            episode.id,
            Hit(episode=episode, score=score, channels={"archive": ChannelScore(rank, score)}),
        )
    fused = _rrf([[h.episode.id for h in hits], [e.id for e, _ in archived]])
    order = sorted(fused, key=lambda i: (-fused[i], i))[:limit]
    return [replace(by_id[i], score=fused[i]) for i in order]
