"""Post-fusion stages: rerankers and filters that reorder or drop fused candidates.

A stage is a function ``(request, fused) -> fused`` registered in ``STAGES`` under
the name that ``SearchConfig.stages`` lists; stages run in the configured order and
read their settings from ``SearchConfig.stage_options[name]``.

| stage | what it does | CPU per search, 11k episodes |
|---|---|---|
| ``memx`` | MemX four-factor score, z-score + sigmoid (rerank.py) | +2 ms |
| ``surprise`` | True Memory ×(1 + 0.2·σ) novelty factor (rerank.py) | +18 ms |
| ``dedup`` | drop same-session repeats: hash or cosine ≥ 0.97 (filters.py) | +6 ms |
| ``abstain`` | empty result on a likely miss, MemX rule R1 (filters.py) | +2 ms |
| ``cross-encoder`` | a given cross-encoder over the top 30 (crossencoder.py) | model-bound |
| ``ensemble-e5`` | e5-small rescoring of the top 20 (ensemble.py) | ~60 ms/turn cold |

Costs are CPU-time medians over 100 LoCoMo questions on a store of all LoCoMo and BEAM
messages (hybrid alone: 25 ms); see BENCHMARKS.md ("Post-fusion stages"). None is on
by default: none of the cheap ones improved recall on the benchmarks.
"""

from __future__ import annotations

from collections.abc import Callable

from .channels import SearchRequest
from .crossencoder import cross_encoder_stage
from .ensemble import ensemble_e5
from .filters import abstain, dedup
from .fusion import Fused
from .rerank import memx, surprise_stage

Stage = Callable[[SearchRequest, list[Fused]], list[Fused]]

#: Every post-fusion stage a configuration may name.
STAGES: dict[str, Stage] = {
    "memx": memx,
    "surprise": surprise_stage,
    "dedup": dedup,
    "abstain": abstain,
    "cross-encoder": cross_encoder_stage,
    "ensemble-e5": ensemble_e5,
}
