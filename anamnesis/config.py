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
    sub-queries through the lexical and dense channels, ``"decompose-llm"`` the
    sub-questions an LLM writes (with ``ANAMNESIS_LLM_*`` set; ``retrieve/llm_decompose``).
    ``seed_channels`` are the
    channels whose fused ranking seeds the ``neighbours`` and ``session`` channels;
    ``seeds`` how many of its best hits they expand; ``neighbour_decay`` the share of
    a seed's score its adjacent turns inherit (squared two turns away);
    ``sessions`` how many best sessions the ``session`` channel opens;
    ``prf_docs``/``prf_terms`` the feedback depth and expansion size of ``prf``.
    ``fusion`` is ``"rrf"`` (weighted reciprocal rank fusion) or ``"learned"`` (the
    logistic model named by ``fusion_model`` in ``anamnesis/data/``); ``score_mix`` is
    the share of each channel's RRF vote taken from its z-scored score instead of its
    rank (0 = plain RRF; ``anamnesis.retrieve.fusion.weighted_rrf``).
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
    score_mix: float = 0.0
    fusion_model: str = "fusion-logistic.json"

    @property
    def uses_facts(self) -> bool:
        """Whether the pipeline reads the fact layer (so ``consolidate`` must have run)."""
        return "facts" in self.channels or "fact_boost" in self.stages

    def with_(self, **changes: object) -> SearchConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def with_options(self, stage: str, **options: object) -> SearchConfig:
        """A copy with some of ``stage``'s options set (its others kept), e.g.
        ``PRESETS["full-ranker"].with_options("learned_rerank", model="my-ranker.json")``."""
        merged = {**self.stage_options.get(stage, {}), **options}
        return self.with_(stage_options={**self.stage_options, stage: merged})


_HYBRID = SearchConfig()


def _plus(base: SearchConfig, channel: str, weight: float, **changes: object) -> SearchConfig:
    """``base`` with one more channel, at RRF weight ``weight``."""
    return base.with_(
        channels=(*base.channels, channel), weights={**base.weights, channel: weight}, **changes
    )


def _then(base: SearchConfig, stage: str, **changes: object) -> SearchConfig:
    """``base`` with one more post-fusion stage, run last."""
    return base.with_(stages=(*base.stages, stage), **changes)


def _without(
    base: SearchConfig,
    *,
    channel: str | None = None,
    query: str | None = None,
    stage: str | None = None,
) -> SearchConfig:
    """``base`` with one channel (and its weight), one query feature or one post-fusion
    stage left out."""
    channels = tuple(c for c in base.channels if c != channel)
    return base.with_(
        channels=channels,
        weights={c: w for c, w in base.weights.items() if c in channels},
        query=tuple(q for q in base.query if q != query),
        stages=tuple(s for s in base.stages if s != stage),
    )


#: Named pipeline variants, used by the CLI and the benchmark harness. The ``rerank-*``
#: presets are hybrid plus post-fusion stages (anamnesis/retrieve/stages.py), one
#: ablation row each in BENCHMARKS.md.
PRESETS: dict[str, SearchConfig] = {
    "bm25": SearchConfig(channels=("lexical",)),
    "dense": SearchConfig(channels=("dense",)),
    "hybrid": _HYBRID,
    # hybrid + event time: a channel for the times the question names, at half weight,
    # and a boost for candidates dated in them. Half weight kept LoCoMo's gain and lost
    # less LongMemEval recall than full weight (BENCHMARKS.md, "Event time").
    "temporal": _plus(_HYBRID, "temporal", 0.5, stages=("time_match",)),
    # hybrid plus the bi-temporal fact layer (needs Memory.consolidate to have run):
    # as a channel, or as a boost for the candidates that state a matching fact.
    "facts": _plus(_HYBRID, "facts", 1.0),
    "facts-rerank": _HYBRID.with_(stages=("fact_boost",)),
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

#: Hybrid with the two speaker channels, names dropped from the lexical terms.
_SPEAKERS = SearchConfig(
    channels=("lexical", "dense", "speaker_lexical", "speaker_dense"),
    weights={"lexical": 1.0, "dense": 0.5, "speaker_lexical": 2.0, "speaker_dense": 1.0},
    query=("speakers",),
)
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
        "hybrid-speakers": _SPEAKERS,
        "hybrid-neighbours": _plus(_SPEAKERS, "neighbours", 1.0),
        "hybrid-session": _plus(_SPEAKERS, "session", 1.0),
        "hybrid-prf": _plus(_SPEAKERS, "prf", 1.0),
        "hybrid-entity": _plus(_SPEAKERS, "entity", 0.5),
        "hybrid-decompose": _SPEAKERS.with_(query=("speakers", "decompose")),
        # The rules' sub-queries and an LLM's (needs ANAMNESIS_LLM_*; no row offline).
        "hybrid-decompose-llm": _SPEAKERS.with_(query=("speakers", "decompose", "decompose-llm")),
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

# ``full`` with one channel or one query feature left out (leave-one-out rows).
_FULL = PRESETS["full"]
PRESETS.update(
    {
        "full-no-speakers": _without(_FULL, channel="speaker_lexical", query="speakers"),
        "full-no-decompose": _without(_FULL, query="decompose"),
        "full-no-prf": _without(_FULL, channel="prf"),
        "full-no-neighbours": _without(_FULL, channel="neighbours"),
        "full-no-session": _without(_FULL, channel="session"),
    }
)
#: ``full`` without the two stages that its leave-one-out rows showed to be neutral or
#: harmful on the dev halves (LoCoMo and BEAM split A: neighbours, decompose), and that
#: without PRF as well, the variant inside the 50 ms search budget at 10k episodes.
PRESETS["full-lean"] = PRESETS["full-no-neighbours"].with_(query=("speakers",))
PRESETS["full-fast"] = _without(PRESETS["full-lean"], channel="prf")
#: ``full-lean`` plus event time: the ``temporal`` channel at half weight and the
#: ``time_match`` boost, as in the ``temporal`` preset.
PRESETS["full-temporal"] = _plus(PRESETS["full-lean"], "temporal", 0.5, stages=("time_match",))

#: ``full-temporal`` plus the chat-role channels: BM25 and cosine over the turns of the
#: role the question addresses (the user's own turns unless it asks what the assistant
#: said), also seeding the session channel. Stores without roles are unaffected.
PRESETS["full-role"] = _plus(
    _plus(PRESETS["full-temporal"], "role_lexical", 2.0), "role_dense", 2.0
).with_(seed_channels=(*_HYBRID.seed_channels, "role_lexical", "role_dense"))
#: ``full-role`` plus turns scored with their neighbours' vectors (``dense_context``;
#: ablation: no recall gain on LoCoMo for +11 ms per search, BENCHMARKS.md).
PRESETS["full-dense-context"] = _plus(PRESETS["full-role"], "dense_context", 1.0)
#: ``full-role`` with the ``spread`` stage on list questions too ("What books…", "How
#: many times…"; ablation: no gain on LoCoMo, BENCHMARKS.md).
PRESETS["full-spread-list"] = _then(
    PRESETS["full-role"], "spread", stage_options={"spread": {"when": "list"}}
)
#: ``full-role`` with the fact boost (ablation; needs Memory.consolidate).
PRESETS["full-facts"] = _then(PRESETS["full-role"], "fact_boost")
#: ``full-role`` with the e5-small ensemble rescoring its top 20 (ablation: slow unless
#: the e5 vectors are cached, see ``retrieve/ensemble.py``).
PRESETS["full-ensemble"] = _then(PRESETS["full-role"], "ensemble-e5")
#: ``full-temporal`` with off-role turns scaled down after fusion instead (ablation).
PRESETS["rerank-role"] = _then(PRESETS["full-temporal"], "role_prior")

#: ``full-role`` with score-aware fusion: a fifth of each channel's vote comes from its
#: z-scored score rather than its rank, so a channel that is sure of a hit (one BM25
#: match far above the rest) outvotes one that ranks it first by a hair. The share was
#: chosen on the first halves of LoCoMo and BEAM (scripts/sweep.py; BENCHMARKS.md,
#: "Score-aware fusion and replies").
PRESETS["full-mix"] = PRESETS["full-role"].with_(score_mix=0.2)
#: ``full-mix`` plus the ``replies`` channel: the turn after a best hit that asks a
#: question (weight chosen on the first halves, as above).
PRESETS["full-replies"] = _plus(PRESETS["full-mix"], "replies", 2.0)
#: ``full-mix`` plus Rocchio feedback on the query vector (ablation: lost recall on
#: LoCoMo, BENCHMARKS.md).
PRESETS["full-dense-prf"] = _plus(PRESETS["full-mix"], "dense_prf", 1.0)

#: ``full-replies`` plus two priors after fusion. Candidates dated in, or mentioning,
#: the very calendar time the question names (not only the day either side of it) get
#: ``time_match``'s boost and then ×3; short turns that end with "?" keep 0.6 of their
#: score (``question_prior``; not in user–assistant chats). Both values were chosen on
#: the first halves of LoCoMo, BEAM and LongMemEval (BENCHMARKS.md, "Calendar dates and
#: asking turns").
PRESETS["full-priors"] = _then(PRESETS["full-replies"], "question_prior").with_(
    stage_options={"time_match": {"exact": 3.0}, "question_prior": {"factor": 0.6}}
)

#: ``full-priors`` then the learned ranker: a logistic model over cheap features of each
#: of the best 100 candidates (ranks, word coverage, speaker, session, time, role)
#: reorders them (``retrieve/ranker.py``; fitted on the first halves of LoCoMo, BEAM
#: and LongMemEval by ``scripts/ranker_train.py``). ``full-ranker-speakers`` reorders
#: only chats between named people, leaving user–assistant chats in the fused order
#: (ablation: better session ndcg, less evidence within a token budget; BENCHMARKS.md,
#: "Learned ranker").
PRESETS["full-ranker"] = _then(PRESETS["full-priors"], "learned_rerank")
PRESETS["full-ranker-speakers"] = PRESETS["full-ranker"].with_options(
    "learned_rerank", chats=("speakers",)
)
#: The ranker models fitted on the second halves of the cases (``anamnesis/data``).
SECOND_HALVES_RANKER = "ranker-logistic-second-halves.json"
#: ``full-ranker`` with the models fitted on the *second* halves instead, for benchmark
#: reports held out by case: each question is ranked by whichever of the two did not
#: see its case (``bench.fitting.crossfit``; ``scripts/recall_ablation.py``).
PRESETS["ranker-second"] = PRESETS["full-ranker"].with_options(
    "learned_rerank", model=SECOND_HALVES_RANKER
)

#: The preset ``Memory`` and the CLI use when none is named: the best measured
#: configuration (BENCHMARKS.md, "Headline").
DEFAULT_PRESET = "full-ranker"
PRESETS["default"] = PRESETS[DEFAULT_PRESET]
