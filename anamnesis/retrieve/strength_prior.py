"""The ``strength_prior`` stage: a mild prior for episodes that are still strong.

Each of the best fused candidates' scores is multiplied by its strength (on the
forgetting curve of ``anamnesis.decay``, at the question's reference time) raised to
a small power, ``stage_options["strength_prior"]["weight"]`` (default
``STRENGTH_PRIOR_WEIGHT``): an episode at strength 1 keeps its score, one at 0.05
loses a quarter of it at the default weight. Off by default; what it does to recall
over a simulated year is in the study "Forgetting, decay and archive".
"""

from __future__ import annotations

from ..decay import episode_strength
from .fusion import Fused
from .request import SearchRequest

#: Exponent on strength: 0.1 maps strength 0.05 to x0.74 and 0.37 (a month unused)
#: to x0.90. Chosen to be mild, not tuned.
STRENGTH_PRIOR_WEIGHT = 0.1
#: How many of the best fused candidates the prior reads (one usage lookup).
STRENGTH_PRIOR_DEPTH = 100


def strength_prior(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """Scale the best candidates by strength ** weight and re-sort."""
    if not fused:
        return fused
    options = request.options("strength_prior")
    weight = float(options.get("weight", STRENGTH_PRIOR_WEIGHT))
    top = fused[: int(options.get("depth", STRENGTH_PRIOR_DEPTH))]
    ids = [f.episode_id for f in top]
    episodes = request.episodes(ids)
    used = request.store.usage(ids, request.scope)
    for candidate in top:
        episode = episodes.get(candidate.episode_id)
        if episode is not None:
            value = episode_strength(episode, used.get(episode.id), request.analysis.now)
            candidate.score *= value**weight
    return sorted(fused, key=lambda f: f.score, reverse=True)
