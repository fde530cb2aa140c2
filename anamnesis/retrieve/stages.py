"""Post-fusion stages: rerankers and filters that reorder or drop fused candidates.

A stage is a function ``(request, fused) -> fused`` registered in ``STAGES`` under
the name that ``SearchConfig.stages`` lists; stages run in the configured order.
"""

from __future__ import annotations

from collections.abc import Callable

from .channels import SearchRequest
from .fusion import Fused

Stage = Callable[[SearchRequest, list[Fused]], list[Fused]]

#: Every post-fusion stage a configuration may name.
STAGES: dict[str, Stage] = {}
