"""The fact verbs of Memory: consolidate, facts, fact_history.

Mixed into ``Memory``; kept apart so the facade stays readable. Facts live in the
user/agent scope (a session's facts belong to its user).
"""

from __future__ import annotations

from datetime import datetime

from ..consolidate.abstractive import ABSTRACTIVE, EXTRACTIVE, Summarizer
from ..errors import InvalidInputError
from ..facts.people import aliases
from ..facts.types import ConsolidationReport
from ..facts.worker import ConsolidationWorker
from ..ingest.normalise import check_int, check_seconds, check_text, parse_time
from ..store.base import FactQuery, fact_scope
from ..types import Fact, Scope
from .state import MemoryState
from .verbs import maintains, reads, writes


class FactVerbs(MemoryState):
    """Consolidation and bi-temporal fact queries (see ``anamnesis.facts``)."""

    @maintains
    def consolidate(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
        extractor: str | None = None,
        summaries: str | None = None,
    ) -> ConsolidationReport:
        """Extract facts from the scope's episodes that no consolidation has read yet,
        then rebuild the summaries of the sessions and the profiles of the people that
        changed (``anamnesis.consolidate``).

        Runs the LLM extractor when the Memory has an LLM, else the rule extractor
        (``extractor="rules"`` or ``"llm"`` chooses). A new value of a single-valued
        fact supersedes the old one, which is kept. ``limit`` caps the episodes read.
        Session summaries are written by the LLM when there is one, else extractive
        (``summaries="extractive"`` or ``"abstractive"`` chooses); a summary of the
        other kind is rebuilt. A failing endpoint leaves extractive summaries, warns
        once and shows in ``capabilities["summaries"]``.
        """
        from ..consolidate.build import refresh
        from ..facts.consolidate import consolidate

        if limit is not None:
            limit = check_int(limit, "limit", minimum=1)
        scope = self._scope(user_id, agent_id, session_id)
        summarizer = self._summarizer_for(summaries)
        report = consolidate(
            self._store,
            self._embedder,
            scope,
            llm=self.llm,
            extractor=extractor,  # type: ignore[arg-type]
            limit=limit,
        )
        derived = refresh(self._store, self._embedder, scope, summarizer=summarizer)
        report.summaries = derived.summaries
        report.abstractive_summaries = derived.abstractive
        report.summary_fallbacks = derived.fallbacks
        report.profiles = derived.profiles
        report.derived_dropped = derived.dropped
        return report

    def _summarizer_for(self, summaries: str | None) -> Summarizer | None:
        """The summarizer a consolidation uses: None for extractive summaries."""
        chosen = summaries or (ABSTRACTIVE if self.llm is not None else EXTRACTIVE)
        if chosen not in (ABSTRACTIVE, EXTRACTIVE):
            raise InvalidInputError(
                f"unknown summaries {chosen!r}; choose 'extractive' or 'abstractive'"
            )
        if chosen == EXTRACTIVE:
            return None
        if self.llm is None:
            raise InvalidInputError(
                "summaries='abstractive' needs an LLM: pass llm=ChatClient(...) to Memory, "
                "or set ANAMNESIS_LLM_BASE_URL and ANAMNESIS_LLM_MODEL and pass llm='env'"
            )
        if self._summarizer is None or self._summarizer.client is not self.llm:
            self._summarizer = Summarizer(self.llm)
        return self._summarizer

    def _summaries_state(self) -> str:
        """``capabilities["summaries"]``: ``"extractive"`` without an LLM, else
        ``"abstractive"`` or why the last summary fell back to extractive."""
        if self.llm is None:
            return EXTRACTIVE
        summarizer = self._summarizer
        if summarizer is None or summarizer.client is not self.llm:
            return ABSTRACTIVE
        return summarizer.state

    @writes
    def start_consolidation(
        self,
        *,
        interval: float = 60.0,
        extractor: str | None = None,
        summaries: str | None = None,
    ) -> ConsolidationWorker:
        """Consolidate in the background: every ``interval`` seconds, a thread runs
        ``consolidate`` on each user/agent scope that received episodes since (and, on
        the first cycle, on every scope with episodes not yet consolidated). ``add`` stays as fast.

        Returns the worker (``drain()`` to catch up now, ``stop()``); ``close()`` stops
        it. A failure stops the worker with a warning, shows in
        ``capabilities["consolidation"]`` and is raised by ``stop()``.
        """
        if self._worker is not None and self._worker.state == "running":
            raise InvalidInputError("a background consolidation is already running")
        interval = check_seconds(interval, "interval")
        self._summarizer_for(summaries)  # a bad choice fails here, not in the thread
        self._worker = ConsolidationWorker(
            lambda scope: self.consolidate(
                user_id=scope.user_id,
                agent_id=scope.agent_id,
                extractor=extractor,
                summaries=summaries,
            ),
            interval=float(interval),
            scopes=self._store.unconsolidated_scopes(),
        )
        return self._worker

    def _stop_consolidation(self) -> None:
        """Stop the background worker, if any (its error, if any, was already warned)."""
        if self._worker is not None:
            worker, self._worker = self._worker, None
            worker.stop(raise_error=False)

    @reads
    def facts(
        self,
        *,
        subject: str | None = None,
        predicate: str | None = None,
        as_of: datetime | str | float | None = None,
        include_superseded: bool = False,
        user_id: str | None = None,
        agent_id: str | None = None,
        limit: int = 100,
    ) -> list[Fact]:
        """Facts of the scope, per slot the newest value first.

        By default only facts standing at ``as_of`` (default: now): recorded by then,
        not withdrawn, begun and not replaced. ``include_superseded=True`` also
        returns the values they replaced. ``subject`` reaches the user by any of their
        names: "user", the name they gave, the speaker names of their turns.
        """
        limit = check_int(limit, "limit", minimum=1)
        scope = fact_scope(self._scope(user_id, agent_id, None))
        when = parse_time(as_of, "as_of")
        return self._store.find_facts(
            scope,
            FactQuery(
                subjects=self._aliases(scope, subject) if subject is not None else (),
                predicate=predicate,
                as_of=when,
                include_superseded=include_superseded,
                limit=limit,
            ),
        )

    @reads
    def fact_history(
        self,
        *,
        subject: str = "user",
        predicate: str,
        as_of: datetime | str | float | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[Fact]:
        """Every value a slot has held, oldest first ("what were all my previous jobs?").

        The chain follows supersession: each fact names the one it replaced.
        """
        from ..facts.search import history

        scope = fact_scope(self._scope(user_id, agent_id, None))
        when = parse_time(as_of, "as_of")
        return history(self._store, scope, self._aliases(scope, subject), predicate, when)

    def _aliases(self, scope: Scope, subject: str) -> tuple[str, ...]:
        """``subject`` and the names it goes by (``facts.people.aliases``)."""
        return aliases(self._store, scope, check_text(subject, "subject"))
