"""Settings: where the store lives and how retrieval is configured."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import platformdirs

from .errors import InvalidInputError

#: Environment variable that overrides the default store location.
PATH_ENV = "ANAMNESIS_PATH"
#: Environment variable that selects a database URL (PostgreSQL) instead of a file.
URL_ENV = "ANAMNESIS_DATABASE_URL"
#: The user id used when a call names none.
DEFAULT_USER = "default"
#: The RRF constant from Cormack et al. (2009); True Memory and MemX also use k = 60.
DEFAULT_RRF_K = 60
#: Environment variable that chooses the durability when ``Memory`` is given none.
DURABILITY_ENV = "ANAMNESIS_DURABILITY"
#: How hard a commit is pushed to disk (RELIABILITY.md, promise 1): ``normal`` survives a
#: process crash; ``full`` also a power loss or an OS crash, at a cost per write.
DURABILITY_LEVELS = ("normal", "full")
#: When an added episode's vector is written: ``sync``, in the add's own transaction
#: (the default: a search right after an add has its dense channel); ``background``,
#: by an indexer thread after the add returns (searches in the gap use the lexical
#: channel for the newest episodes, and ``explain`` says so).
INDEXING_MODES = ("sync", "background")


def default_path() -> Path:
    """The store file used when none is given: $ANAMNESIS_PATH, else the OS data dir."""
    override = os.environ.get(PATH_ENV)
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_data_dir("anamnesis", appauthor=False)) / "memory.db"


def durability_level(value: str | None) -> str:
    """The durability a store opens with: ``value``, else $ANAMNESIS_DURABILITY, else
    ``normal``; anything else is InvalidInputError."""
    chosen = value if value is not None else os.environ.get(DURABILITY_ENV) or "normal"
    if chosen not in DURABILITY_LEVELS:
        source = "durability" if value is not None else f"${DURABILITY_ENV}"
        raise InvalidInputError(
            f"{source} must be one of {', '.join(DURABILITY_LEVELS)}, got {chosen!r}"
        )
    return chosen


def indexing_mode(value: str | None) -> str:
    """When vectors are written (``INDEXING_MODES``): ``value``, else ``sync``;
    anything else is InvalidInputError."""
    chosen = value if value is not None else "sync"
    if chosen not in INDEXING_MODES:
        raise InvalidInputError(
            f"indexing must be one of {', '.join(INDEXING_MODES)}, got {chosen!r}"
        )
    return chosen


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
    ``pool`` is how many times deeper than ``candidates`` the lexical and dense channels
    search when a speaker or role channel filters their rankings (one search serves all).
    ``notes_channels``, when set, are the only channels run when the question's nearest
    episodes are mostly notes, stored without a session (``retrieve.currency.reads_notes``):
    the channels that read a conversation's speakers, roles and sessions stand aside.
    """

    channels: tuple[str, ...] = ("lexical", "dense")
    weights: dict[str, float] = field(default_factory=lambda: {"lexical": 1.0, "dense": 1.0})
    rrf_k: float = DEFAULT_RRF_K
    candidates: int = 50
    pool: int = 4
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
    notes_channels: tuple[str, ...] | None = None

    @property
    def uses_facts(self) -> bool:
        """Whether the pipeline reads the fact layer (so ``consolidate`` must have run)."""
        return "facts" in self.channels or "fact_boost" in self.stages

    @property
    def uses_summaries(self) -> bool:
        """Whether the pipeline reads session summaries and profiles (built by
        ``consolidate``)."""
        return "summaries" in self.channels

    def with_(self, **changes: object) -> SearchConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)  # type: ignore[arg-type]

    def with_options(self, stage: str, **options: object) -> SearchConfig:
        """A copy with some of ``stage``'s options set (its others kept), e.g.
        ``PRESETS["ranker"].with_options("learned_rerank", model="my-ranker.json")``."""
        merged = {**self.stage_options.get(stage, {}), **options}
        return self.with_(stage_options={**self.stage_options, stage: merged})


#: The pipeline ``Memory`` and the CLI use unless told otherwise: every channel below
#: (the summaries channel proposes nothing until ``consolidate`` has built summaries),
#: fused by score-aware RRF, then the time, asking-turn and place priors and the
#: exact-match guard. Why these parts and weights: they did best on data they were not
#: tuned on (BENCHMARKS.md, "Leave one data set out"; study "A default that transfers");
#: the ablation rows are ``anamnesis bench --config NAME`` presets. The learned ranker
#: reorders chats between named people only, where it gained on conversations it was
#: not fitted on; on user–assistant chats it lost (preset ``ranker`` runs it there too).
#: For questions about the present, the later of two statements about the same thing
#: first; over notes, only the channels that do not read a conversation's structure
#: (``retrieve.currency``; study "An agent's life"). The speaker and role channels
#: filter the first stage's rankings searched twice as deep as the channels, not four
#: times: the same recall, less cost (study "A default bounded by its first stage").
#: Feedback (``prf``) reorders those rankings rather than searching the scope again.
DEFAULT = SearchConfig(
    channels=(
        "lexical",
        "dense",
        "speaker_lexical",
        "prf",
        "session",
        "temporal",
        "role_lexical",
        "role_dense",
        "replies",
        "summaries",
    ),
    weights={
        "lexical": 0.25,
        "dense": 2.0,
        "speaker_lexical": 3.0,
        "prf": 0.75,
        "session": 2.0,
        "temporal": 0.5,
        "role_lexical": 2.0,
        "role_dense": 2.0,
        "replies": 2.0,
        "summaries": 1.0,
    },
    stages=(
        "time_match",
        "question_prior",
        "learned_rerank",
        "place_prior",
        "exact_match",
        "current_first",
    ),
    stage_options={
        "time_match": {"exact": 3.0},
        "question_prior": {"factor": 0.6},
        "learned_rerank": {"chats": ("speakers",)},
        "prf": {"over": "rankings"},
    },
    query=("speakers", "tense", "subject", "subject-speaker"),
    seed_channels=(
        "lexical",
        "dense",
        "speaker_lexical",
        "speaker_dense",
        "role_lexical",
        "role_dense",
    ),
    score_mix=0.2,
    pool=2,
    notes_channels=("lexical", "dense", "prf", "temporal", "summaries"),
)

#: The pipelines a user chooses between by name (``Memory(config=PRESETS[name])``,
#: ``anamnesis --config NAME``), each with what it trades. Anything else is built with
#: ``SearchConfig`` (README, "Build your own pipeline").
PRESETS: dict[str, SearchConfig] = {
    "default": DEFAULT,
    "fast": SearchConfig(),
    # The learned ranker on every kind of chat, user–assistant chats too.
    "ranker": DEFAULT.with_options("learned_rerank", chats=("roles", "speakers")),
    "facts": SearchConfig(
        channels=("lexical", "dense", "facts"),
        weights={"lexical": 1.0, "dense": 1.0, "facts": 1.0},
    ),
}
#: One line per preset, for ``--help`` and the README.
PRESET_HELP: dict[str, str] = {
    "default": "every channel, the priors, the guards: best on chats it was not tuned on",
    "fast": "BM25 and dense only: about half the search time, less recall",
    "ranker": "the default with the learned ranker on user–assistant chats too",
    "facts": "fast plus the fact layer, current values first; run consolidate first",
}
#: The preset used when none is named.
DEFAULT_PRESET = "default"
