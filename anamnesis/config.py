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

    Query understanding and the derived channels (``anamnesis.retrieve.candidates``):
    ``query`` lists what the question analysis may do to the query: ``"speakers"``
    drops the names of known speakers from the lexical terms (turns do not contain
    their own speaker's name), ``"decompose"`` runs multi-part questions as
    sub-queries through the lexical and dense channels. ``seed_channels`` are the
    channels whose fused ranking seeds the ``neighbours`` and ``session`` channels;
    ``seeds`` how many of its best hits they expand; ``neighbour_decay`` the share of
    a seed's score its adjacent turns inherit (squared two turns away);
    ``sessions`` how many best sessions the ``session`` channel opens;
    ``prf_docs``/``prf_terms`` the feedback depth and expansion size of ``prf``.
    ``fusion`` is ``"rrf"`` (weighted reciprocal rank fusion) or ``"learned"`` (the
    logistic model named by ``fusion_model`` in ``anamnesis/data/``).
    """

    channels: tuple[str, ...] = ("lexical", "dense")
    weights: dict[str, float] = field(default_factory=lambda: {"lexical": 1.0, "dense": 1.0})
    rrf_k: float = DEFAULT_RRF_K
    candidates: int = 50
    stages: tuple[str, ...] = ()
    stage_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    neighbour_window: int = 1
    query: tuple[str, ...] = ()
    seed_channels: tuple[str, ...] = ("lexical", "dense", "speaker_lexical", "speaker_dense")
    seeds: int = 20
    neighbour_decay: float = 0.5
    sessions: int = 3
    prf_docs: int = 5
    prf_terms: int = 8
    fusion: str = "rrf"
    fusion_model: str = "fusion-logistic.json"

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

_SPEAKER_WEIGHTS = {"lexical": 1.0, "dense": 0.5, "speaker_lexical": 2.0, "speaker_dense": 1.0}
#: Every candidate channel of issue 5 with equal RRF weights.
_ALL_CHANNELS = SearchConfig(
    channels=(
        "lexical",
        "dense",
        "speaker_lexical",
        "speaker_dense",
        "entity",
        "prf",
        "neighbours",
        "session",
    ),
    weights={},  # every channel weighs 1
    query=("speakers", "decompose"),
)
#: Candidate-side ablations (issue 5): each stage added alone to the speaker-aware
#: hybrid, then everything (equal weights, swept weights, learned fusion).
PRESETS.update(
    {
        "hybrid-speakers": SearchConfig(
            channels=("lexical", "dense", "speaker_lexical", "speaker_dense"),
            weights=_SPEAKER_WEIGHTS,
            query=("speakers",),
        ),
        "hybrid-neighbours": SearchConfig(
            channels=("lexical", "dense", "speaker_lexical", "speaker_dense", "neighbours"),
            weights={**_SPEAKER_WEIGHTS, "neighbours": 1.0},
            query=("speakers",),
        ),
        "hybrid-session": SearchConfig(
            channels=("lexical", "dense", "speaker_lexical", "speaker_dense", "session"),
            weights={**_SPEAKER_WEIGHTS, "session": 1.0},
            query=("speakers",),
        ),
        "hybrid-prf": SearchConfig(
            channels=("lexical", "dense", "speaker_lexical", "speaker_dense", "prf"),
            weights={**_SPEAKER_WEIGHTS, "prf": 1.0},
            query=("speakers",),
        ),
        "hybrid-entity": SearchConfig(
            channels=("lexical", "dense", "speaker_lexical", "speaker_dense", "entity"),
            weights={**_SPEAKER_WEIGHTS, "entity": 0.5},
            query=("speakers",),
        ),
        "hybrid-decompose": SearchConfig(
            channels=("lexical", "dense", "speaker_lexical", "speaker_dense"),
            weights=_SPEAKER_WEIGHTS,
            query=("speakers", "decompose"),
        ),
        "full-equal": _ALL_CHANNELS,
        # Weights from the coordinate-ascent sweep on the A splits (first half of the
        # cases) of LoCoMo and BEAM 128K together (scripts/fusion_sweep.py; the B splits
        # chose nearly the same weights). Channels swept to weight 0 are not run.
        "full": _ALL_CHANNELS.with_(
            channels=("lexical", "dense", "speaker_lexical", "prf", "neighbours", "session"),
            weights={
                "lexical": 0.25,
                "dense": 2.0,
                "speaker_lexical": 3.0,
                "prf": 0.75,
                "neighbours": 0.75,
                "session": 2.0,
            },
        ),
        # The logistic model bundled in anamnesis/data (fitted on the same A splits).
        "full-learned": _ALL_CHANNELS.with_(fusion="learned"),
    }
)


def _without(*, channel: str | None = None, query: str | None = None) -> SearchConfig:
    """``full`` with one channel or one query feature left out (leave-one-out rows)."""
    full = PRESETS["full"]
    channels = tuple(c for c in full.channels if c != channel)
    return full.with_(
        channels=channels,
        weights={c: w for c, w in full.weights.items() if c in channels},
        query=tuple(q for q in full.query if q != query),
    )


PRESETS.update(
    {
        "full-no-speakers": _without(channel="speaker_lexical", query="speakers"),
        "full-no-decompose": _without(query="decompose"),
        "full-no-prf": _without(channel="prf"),
        "full-no-neighbours": _without(channel="neighbours"),
        "full-no-session": _without(channel="session"),
    }
)
#: ``full`` without the two stages that its leave-one-out rows showed to be neutral or
#: harmful on the dev halves (LoCoMo and BEAM split A: neighbours, decompose), and that
#: without PRF as well, the variant inside the 50 ms search budget at 10k episodes.
PRESETS["full-lean"] = PRESETS["full-no-neighbours"].with_(query=("speakers",))
PRESETS["full-fast"] = PRESETS["full-lean"].with_(
    channels=tuple(c for c in PRESETS["full-lean"].channels if c != "prf"),
    weights={c: w for c, w in PRESETS["full-lean"].weights.items() if c != "prf"},
)
#: ``full-lean`` plus event time: the ``temporal`` channel at half weight and the
#: ``time_match`` boost, as in the ``temporal`` preset.
PRESETS["full-temporal"] = PRESETS["full-lean"].with_(
    channels=(*PRESETS["full-lean"].channels, "temporal"),
    weights={**PRESETS["full-lean"].weights, "temporal": 0.5},
    stages=("time_match",),
)

#: The preset ``Memory`` and the CLI use when none is named: the best measured
#: configuration (BENCHMARKS.md, "Headline").
DEFAULT_PRESET = "full-temporal"
PRESETS["default"] = PRESETS[DEFAULT_PRESET]
