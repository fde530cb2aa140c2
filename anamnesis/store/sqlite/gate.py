"""The encoding gate in the SQLite store: admitted episodes go hot, rejected ones
straight to the archive, and every decision beside them, in one transaction.

Mixed into ``SQLiteStore``; the batch's split and the SQL of the decisions are
``shared.gate``'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import numpy as np

from ...types import Episode, GateDecision, Scope, Session
from ..base import Candidate
from ..index.dense import DenseIndex
from ..shared.gate import decision_rows, insert_decisions_sql, read_decisions, split_by_decision
from .archive import ARCHIVE_COLUMNS
from .driver import sqlite3
from .sql import from_epoch, scope_sql, to_epoch

INSERT_DECISION = insert_decisions_sql("?")


def _in_list(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    return f"{column} IN (SELECT value FROM json_each(?))", [json.dumps(list(values))]


def archived_row(episode: Episode, vector: np.ndarray, archived_at: datetime) -> tuple:
    """The ``archived_episodes`` row of an episode that never went hot."""
    return (
        episode.id,
        episode.user_id,
        episode.agent_id,
        episode.session_id,
        episode.role,
        episode.speaker,
        episode.content,
        episode.modality,
        to_epoch(episode.event_time),
        to_epoch(episode.recorded_at),
        json.dumps(episode.metadata, ensure_ascii=False),
        episode.content_hash,
        episode.turn_index,
        episode.version,
        np.ascontiguousarray(vector, dtype=np.float32).tobytes(),
        to_epoch(archived_at),
    )


class SQLiteGate:
    """insert_gated and gate_decisions for ``SQLiteStore``."""

    _lock: Any
    _conn: sqlite3.Connection
    _dense: DenseIndex

    def _refresh_dense(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:  # pragma: no cover
        raise NotImplementedError

    @staticmethod
    def _upsert_sessions(
        conn: sqlite3.Connection, sessions: Sequence[Session]
    ) -> None:  # pragma: no cover
        raise NotImplementedError

    @staticmethod
    def _insert_hot(
        conn: sqlite3.Connection, episodes: Sequence[Episode], vectors: np.ndarray
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
        with self._write() as conn:
            if sessions:
                self._upsert_sessions(conn, sessions)
            self._insert_hot(conn, hot, hot_vectors)
            marks = ", ".join("?" * 16)
            conn.executemany(
                f"""INSERT INTO archived_episodes ({ARCHIVE_COLUMNS}, embedding, archived_at)
                    VALUES ({marks})""",
                archived,
            )
            conn.executemany(INSERT_DECISION, decision_rows(decisions, user_of, to_epoch, int))

    def dense_neighbours(
        self, vectors: np.ndarray, scope: Scope, limit: int
    ) -> list[list[Candidate]]:
        if scope.session_id is not None:
            raise ValueError("dense_neighbours searches a user or agent scope, not a session")
        with self._lock:
            self._refresh_dense()
            ranked = self._dense.search_many(
                vectors, user_id=scope.user_id, agent_id=scope.agent_id, limit=limit
            )
            rowids = sorted({rowid for pairs in ranked for rowid, _ in pairs})
            where, params = scope_sql(scope, by_key=True)
            # Scope is checked again in SQL, as for every dense search.
            ids = dict(
                self._conn.execute(
                    f"""SELECT e.rowid, e.id FROM episodes e
                        WHERE e.rowid IN (SELECT value FROM json_each(?)) AND {where}""",
                    [json.dumps(rowids), *params],
                ).fetchall()
            )
        return [[Candidate(ids[r], score) for r, score in pairs if r in ids] for pairs in ranked]

    def gate_decisions(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, GateDecision]:
        with self._lock:
            return read_decisions(self._conn, "?", episode_ids, scope, _in_list, from_epoch)
