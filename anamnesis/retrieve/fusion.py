"""Reciprocal rank fusion across retrieval channels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..store.base import Candidate
from ..types import ChannelScore

#: The RRF constant from Cormack et al. (2009); True Memory and MemX also use k = 60.
DEFAULT_RRF_K = 60


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
) -> list[Fused]:
    """Fuse ranked lists: ``score = sum_c weight_c / (k + rank_c)``, best first.

    A channel missing from ``weights`` gets weight 1. Ties keep the order in which
    episodes were first proposed, so results are deterministic.
    """
    fused: dict[str, Fused] = {}
    for name, candidates in channels.items():
        weight = weights.get(name, 1.0)
        for rank, candidate in enumerate(candidates, start=1):
            entry = fused.get(candidate.episode_id)
            if entry is None:
                entry = fused[candidate.episode_id] = Fused(candidate.episode_id)
            entry.score += weight / (k + rank)
            entry.channels[name] = ChannelScore(rank=rank, score=candidate.score)
    return sorted(fused.values(), key=lambda f: f.score, reverse=True)
