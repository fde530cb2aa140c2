"""The read path: analyse → candidate channels → fusion → post-fusion stages → hits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ..config import SearchConfig
from ..embed.base import Embedder
from ..errors import InvalidInputError
from ..llm import ChatClient
from ..store.base import Candidate, Filters, Store
from ..types import Hit, Scope
from .analysis import analyse
from .candidates import QUERY_FEATURES, pool_depth
from .channels import CHANNELS
from .currency import reads_notes, subject_names, without_present, without_subject
from .fusion import (
    Fused,
    LogisticFusion,
    check_score_mix,
    learned_fusion,
    load_fusion_model,
    weighted_rrf,
)
from .request import SearchRequest
from .resources import StageResources
from .stages import STAGE_CHECKS, STAGE_WARM_UPS, STAGES


@dataclass(slots=True)
class Retriever:
    """Runs one configured search pipeline against a store.

    ``resources`` holds what stages load once (models, vector caches); retrievers may
    share one.
    """

    store: Store
    embedder: Embedder
    config: SearchConfig
    resources: StageResources = field(default_factory=StageResources)
    _fusion_model: LogisticFusion | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        _check_names("search channel", self.config.channels, CHANNELS)
        _check_names("search stage", self.config.stages, STAGES)
        if self.config.fusion not in ("rrf", "learned"):
            raise InvalidInputError(
                f"unknown fusion {self.config.fusion!r}; use 'rrf' or 'learned'"
            )
        check_score_mix(self.config.score_mix)  # now, rather than at the first search
        if self.config.pool < 1:
            raise InvalidInputError(f"pool must be at least 1, got {self.config.pool}")
        if self.config.fusion == "learned":
            # Loaded now, so a bad model fails here rather than at the first search.
            self._fusion_model = load_fusion_model(self.config.fusion_model)
        for stage in self.config.stages:
            if stage in STAGE_CHECKS:
                STAGE_CHECKS[stage](self.config.stage_options.get(stage, {}))
        _check_names("query feature", self.config.query, QUERY_FEATURES)
        if "hyde" in self.config.channels or "decompose-llm" in self.config.query:
            ChatClient.from_env()  # InvalidInputError now when no endpoint is configured

    def warm_up(self) -> None:
        """Load what the configured stages read at every search (the ranker's edge
        model), so that the first search does not pay for it."""
        for stage in self.config.stages:
            if stage in STAGE_WARM_UPS:
                STAGE_WARM_UPS[stage](self.resources)

    def request(
        self,
        query: str,
        scope: Scope,
        filters: Filters,
        now: datetime | None = None,
        limit: int | None = None,
    ) -> SearchRequest:
        """The shared state of one search: the analysed question and where to look."""
        return SearchRequest(
            analysis=analyse(query, now),
            scope=scope,
            filters=filters,
            store=self.store,
            embedder=self.embedder,
            config=self.config,
            limit=limit,
            resources=self.resources,
            channels=CHANNELS,
        )

    def candidates(self, request: SearchRequest) -> dict[str, list[Candidate]]:
        """Each enabled channel's ranked candidates (over notes, only the channels of
        ``SearchConfig.notes_channels``: ``currency.reads_notes``)."""
        limit = self.config.candidates
        if self.config.notes_channels is not None or "subject" in self.config.query:
            # Notes and subject detection read the question's nearest episodes: searched
            # here as deep as the dense channel will want, so that, when the question is
            # not rewritten, the dense channel reads the same search.
            request.nearest(request.analysis.text, pool_depth(request, limit))
        if "subject" in self.config.query:
            request.memo["dense_text"] = without_subject(
                request.analysis.text, subject_names(request)
            )
        if "tense-dense" in self.config.query and reads_notes(request):
            request.memo["dense_text"] = without_present(request.dense_text)
        names = self.config.channels
        notes = self.config.notes_channels
        if notes is not None and reads_notes(request):
            names = tuple(name for name in names if name in notes)
        return {name: request.channel(name, limit) for name in names}

    def rank(self, request: SearchRequest) -> list[Fused]:
        """Fused candidates after every post-fusion stage, best first (not truncated)."""
        lists = self.candidates(request)
        if self._fusion_model is not None:
            fused = learned_fusion(lists, self._fusion_model)
        else:
            fused = weighted_rrf(
                lists, self.config.weights, self.config.rrf_k, self.config.score_mix
            )
        for name in self.config.stages:
            fused = STAGES[name](request, fused)
        return fused

    def search(
        self,
        query: str,
        scope: Scope,
        filters: Filters,
        limit: int,
        explain: bool,
        now: datetime | None = None,
    ) -> list[Hit]:
        """The ``limit`` best episodes for ``query`` inside ``scope``.

        Neighbouring turns recorded after ``filters.recorded_before`` (``as_of``) are
        left out of each hit's context, as the hits themselves are.
        """
        request = self.request(query, scope, filters, now, limit)
        fused = self.rank(request)[:limit]
        by_id = request.episodes([f.episode_id for f in fused])
        context = self.store.neighbours(list(by_id.values()), self.config.neighbour_window)
        as_of = filters.recorded_before
        analysis = request.analysis.to_dict() if explain else {}
        if explain:
            waiting = self.store.pending_count(scope)
            if waiting:
                these = "episodes of this scope are" if waiting > 1 else "episode of this scope is"
                analysis["dense_index"] = (
                    f"{waiting} {these} not in the dense index yet: found only by the "
                    "channels that match words, not by those that compare vectors"
                )
        return [
            Hit(
                episode=by_id[f.episode_id],
                score=f.score,
                context=tuple(
                    e
                    for e in context.get(f.episode_id, ())
                    if as_of is None or e.recorded_at <= as_of
                ),
                channels=f.channels if explain else {},
                analysis=analysis,
                facts=tuple(request.facts.get(f.episode_id, ())),
            )
            for f in fused
            if f.episode_id in by_id
        ]


def _check_names(kind: str, names: tuple[str, ...], known: Mapping[str, object]) -> None:
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidInputError(f"unknown {kind}(s) {unknown}; choose from {sorted(known)}")
