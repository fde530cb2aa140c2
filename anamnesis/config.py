"""Settings: where the store lives and how retrieval is configured."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import platformdirs

from .retrieve.fusion import DEFAULT_RRF_K

#: Environment variable that overrides the default store location.
PATH_ENV = "ANAMNESIS_PATH"
#: Environment variable that selects a database URL (PostgreSQL) instead of a file.
URL_ENV = "ANAMNESIS_DATABASE_URL"
#: The user id used when a call names none.
DEFAULT_USER = "default"


def default_path() -> Path:
    """The store file used when none is given: $ANAMNESIS_PATH, else the OS data dir."""
    override = os.environ.get(PATH_ENV)
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_data_dir("anamnesis", appauthor=False)) / "memory.db"


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """How ``search`` retrieves and fuses candidates.

    ``channels`` names the candidate channels to run; ``weights`` their RRF weights;
    ``candidates`` how many each channel proposes; ``stages`` the post-fusion
    rerankers and filters to run, in order, and ``stage_options`` their settings by
    stage name (see ``anamnesis.retrieve.stages``); ``neighbour_window`` how many turns
    on each side of a hit are returned with it.
    """

    channels: tuple[str, ...] = ("lexical", "dense")
    weights: dict[str, float] = field(default_factory=lambda: {"lexical": 1.0, "dense": 1.0})
    rrf_k: float = DEFAULT_RRF_K
    candidates: int = 50
    stages: tuple[str, ...] = ()
    stage_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    neighbour_window: int = 1

    def with_(self, **changes: object) -> SearchConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)  # type: ignore[arg-type]


_HYBRID = SearchConfig()

#: Named pipeline variants, used by the CLI and the benchmark harness. The ``rerank-*``
#: presets are hybrid plus post-fusion stages (anamnesis/retrieve/stages.py), one
#: ablation row each in BENCHMARKS.md.
PRESETS: dict[str, SearchConfig] = {
    "bm25": SearchConfig(channels=("lexical",)),
    "dense": SearchConfig(channels=("dense",)),
    "hybrid": SearchConfig(),
    # hybrid + event time: a channel for the times the question names, at half weight,
    # and a boost for candidates dated in them. Half weight kept LoCoMo's gain and lost
    # less LongMemEval recall than full weight (BENCHMARKS.md, "Event time").
    "temporal": SearchConfig(
        channels=("lexical", "dense", "temporal"),
        weights={"lexical": 1.0, "dense": 1.0, "temporal": 0.5},
        stages=("time_match",),
    ),
    # hybrid plus the bi-temporal fact layer (needs Memory.consolidate to have run).
    "facts": SearchConfig(
        channels=("lexical", "dense", "facts"),
        weights={"lexical": 1.0, "dense": 1.0, "facts": 1.0},
    ),
    "rerank-memx": _HYBRID.with_(stages=("memx",)),
    "rerank-memx-raw": _HYBRID.with_(stages=("memx",), stage_options={"memx": {"semantic": "rrf"}}),
    "rerank-surprise": _HYBRID.with_(stages=("surprise",)),
    "rerank-dedup": _HYBRID.with_(stages=("dedup",)),
    "rerank-dedup-global": _HYBRID.with_(
        stages=("dedup",), stage_options={"dedup": {"scope": "all"}}
    ),
    "rerank-abstain": _HYBRID.with_(stages=("abstain",)),
    "rerank-abstain-cosine": _HYBRID.with_(
        stages=("abstain",), stage_options={"abstain": {"rule": "cosine"}}
    ),
    "rerank-e5": _HYBRID.with_(stages=("ensemble-e5",)),
    "rerank-ce": _HYBRID.with_(stages=("cross-encoder",)),
}
