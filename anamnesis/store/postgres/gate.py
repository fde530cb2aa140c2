"""The encoding gate in the PostgreSQL store: admitted episodes go hot, rejected ones
straight to the archive, and every decision beside them, in one transaction.

Mixed into ``PostgresStore``; the batch's split and the SQL of the decisions are
``shared.gate``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import numpy as np
import psycopg

from ...types import Episode, GateDecision, Scope, Session
from ..base import Candidate, Filters
from ..shared.gate import decision_rows, insert_decisions_sql, read_decisions, split_by_decision
from .archive import ARCHIVE_COLUMNS
from .search import dense_search
from .sql import check_storable, json_param

Conn = psycopg.Connection[Any]
INSERT_DECISION = insert_decisions_sql("%s")


def _in_list(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    return f"{column} = ANY(%s)", [list(values)]


def _same(moment: datetime) -> datetime:
    return moment


def archived_row(episode: Episode, vector: np.ndarray, archived_at: datetime) -> tuple:
    """The ``archived_episodes`` row of an episode that never went hot."""
    check_storable(episode.content, f"episode {episode.id}")
    return (
        episode.id,
        episode.user_id,
        episode.agent_id,
        episode.session_id,
        episode.role,
        episode.speaker,
        episode.content,
        episode.modality,
        episode.event_time,
        episode.recorded_at,
        json_param(episode.metadata, f"metadata of episode {episode.id}"),
        episode.content_hash,
        episode.turn_index,
        episode.version,
        np.asarray(vector, dtype=np.float32),
        archived_at,
    )


class PostgresGate:
    """insert_gated and gate_decisions for ``PostgresStore``."""

    def _transaction(self) -> AbstractContextManager[Conn]:  # pragma: no cover
        raise NotImplementedError

    @staticmethod
    def _upsert_sessions(conn: Conn, sessions: Sequence[Session]) -> None:  # pragma: no cover
        raise NotImplementedError

    @staticmethod
    def _insert_hot(
        conn: Conn, episodes: Sequence[Episode], vectors: np.ndarray
    ) -> None:  # pragma: no cover
        raise NotImplementedError

    def insert_gated(
        self,
        episodes: Sequence[Episode],
        vectors: np.ndarray,
        decisions: Sequence[GateDecision],
        sessions: Sequence[Session] = (),
    ) -> None:
        hot, hot_vectors, archived = split_by_decision(episodes, vectors, decisions, archived_row)
        user_of = {e.id: e.user_id for e in episodes}
        with self._transaction() as conn:
            self._upsert_sessions(conn, sessions)
            self._insert_hot(conn, hot, hot_vectors)
            with conn.cursor() as cur:
                if archived:
                    marks = ", ".join(["%s"] * 16)
                    cur.executemany(
                        f"""INSERT INTO archived_episodes
                              ({ARCHIVE_COLUMNS}, embedding, archived_at) VALUES ({marks})""",
                        archived,
                    )
                if decisions:
                    cur.executemany(INSERT_DECISION, decision_rows(decisions, user_of, _same, bool))

    def dense_neighbours(
        self, vectors: np.ndarray, scope: Scope, limit: int
    ) -> list[list[Candidate]]:
        if scope.session_id is not None:
            raise ValueError("dense_neighbours searches a user or agent scope, not a session")
        with self._transaction() as conn:
            return [dense_search(conn, vector, scope, Filters(), limit) for vector in vectors]

    def gate_decisions(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, GateDecision]:
        with self._transaction() as conn:
            return read_decisions(conn, "%s", episode_ids, scope, _in_list, _same)
