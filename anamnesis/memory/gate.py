"""The encoding gate on Memory's write path, and the verb that explains its decisions.

Mixed into ``Memory``. With a gate configured (``Memory(gate=...)``), each batch of
``add`` / ``add_many`` is judged in order, every episode against the scope's stored
episodes and the ones admitted before it in the same call: the admitted go to the hot
indexes, the rejected verbatim to the archive, and each decision is recorded
(``anamnesis.ingest.gate`` says how it decides). Without a gate, nothing here runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np

from ..ingest.gate import GateConfig, decide
from ..types import Episode, GateDecision, Scope, Session
from .lifecycle import episode_ids_of
from .state import MemoryState
from .verbs import reads


class GateVerbs(MemoryState):
    """``gate_decisions``, and the gated write of one batch."""

    @reads
    def gate_decisions(
        self,
        episode_ids: Sequence[str] | str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, GateDecision]:
        """What the encoding gate decided about each episode (of the scope, hot or
        archived) among ``episode_ids``, with its three signals, by id; episodes added
        without a gate are left out."""
        ids = episode_ids_of(episode_ids) or ()
        return self._store.gate_decisions(ids, self._scope(user_id, agent_id, session_id))

    def _write_batch(
        self, episodes: Sequence[Episode], vectors: np.ndarray | None, sessions: Sequence[Session]
    ) -> None:
        """Store one batch: as it is without a gate (``vectors`` None: to be indexed in
        the background), else judged by the gate."""
        if self._gate is None or not episodes:
            self._store.insert_episodes(episodes, vectors, sessions)
            return
        assert vectors is not None  # Memory refuses a gate with background indexing
        decisions = self._judge(episodes, vectors, self._gate)
        self._store.insert_gated(episodes, vectors, decisions, sessions)

    def _judge(
        self, episodes: Sequence[Episode], vectors: np.ndarray, gate: GateConfig
    ) -> list[GateDecision]:
        """The gate's decision on each episode of a batch (one scope), in order."""
        first = episodes[0]
        scope = Scope(first.user_id, first.agent_id, None)
        raw = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        units = (raw / np.where(norms == 0, 1.0, norms)).astype(np.float32)
        stored = self._store.dense_neighbours(units, scope, gate.neighbours)
        wanted = list(dict.fromkeys(c.episode_id for found in stored for c in found))
        text_of = {e.id: e.content for e in self._store.get_episodes(wanted, scope)}
        admitted: list[int] = []
        decided_at = datetime.now(UTC)
        decisions = []
        for index, (episode, unit) in enumerate(zip(episodes, units, strict=True)):
            near = [
                (c.score, text_of[c.episode_id]) for c in stored[index] if c.episode_id in text_of
            ]
            if admitted:
                similarities = units[admitted] @ unit
                near += [
                    (float(s), episodes[i].content)
                    for s, i in zip(similarities, admitted, strict=True)
                ]
            near.sort(key=lambda pair: -pair[0])
            near = near[: gate.neighbours]
            signals = decide(
                episode.content, [t for _, t in near], near[0][0] if near else None, gate
            )
            if signals.admitted:
                admitted.append(index)
            decisions.append(
                GateDecision(
                    episode_id=episode.id,
                    admitted=signals.admitted,
                    novelty=signals.novelty,
                    salience=signals.salience,
                    prediction_error=signals.prediction_error,
                    score=signals.score,
                    threshold=signals.threshold,
                    category=signals.category,
                    reason=signals.reason,
                    gate=gate.name,
                    decided_at=decided_at,
                )
            )
        return decisions
