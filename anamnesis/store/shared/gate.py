"""The encoding gate's records in SQL, for both stores (see ``anamnesis.ingest.gate``).

``gate_decisions`` holds one row per gated episode, hot or archived, keyed by its id;
a decision is read back only through an episode of the caller's scope, and leaves
with the episode (``forget``, ``delete``, ``delete_all``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from ...types import Episode, GateDecision, Scope
from .scoped import InList, rows_in_scope

Conn = Any  # a sqlite3.Connection or a psycopg.Connection

DECISION_COLUMNS = (
    "episode_id, user_id, admitted, novelty, salience, prediction_error, score, "
    "threshold, category, reason, gate, decided_at"
)


def insert_decisions_sql(mark: str) -> str:
    """The statement that stores one decision (parameters: ``decision_rows``)."""
    marks = ", ".join([mark] * len(DECISION_COLUMNS.split(",")))
    return f"INSERT INTO gate_decisions ({DECISION_COLUMNS}) VALUES ({marks})"


def split_by_decision(
    episodes: Sequence[Episode],
    vectors: np.ndarray,
    decisions: Sequence[GateDecision],
    archived_row: Callable[[Episode, np.ndarray, datetime], tuple],
) -> tuple[list[Episode], np.ndarray, list[tuple]]:
    """One gated batch split for ``Store.insert_gated``: the admitted episodes and
    their vectors (for the hot indexes), and the backend's archive row of each
    rejected one. Raises ValueError unless there is one vector and one decision per
    episode."""
    if len(episodes) != len(vectors) or len(episodes) != len(decisions):
        raise ValueError("one vector and one decision per episode are required")
    admitted = np.asarray([d.admitted for d in decisions], dtype=bool)
    hot = [e for e, ok in zip(episodes, admitted, strict=True) if ok]
    archived = [
        archived_row(e, v, d.decided_at)
        for e, v, d in zip(episodes, vectors, decisions, strict=True)
        if not d.admitted
    ]
    return hot, np.asarray(vectors, dtype=np.float32)[admitted], archived


def decision_rows(
    decisions: Sequence[GateDecision],
    user_of: dict[str, str],
    time_in: Callable[[datetime], Any],
    flag: Callable[[bool], Any],
) -> list[tuple]:
    """The insert's parameters for each decision (``user_of``: each episode's user)."""
    return [
        (
            d.episode_id,
            user_of[d.episode_id],
            flag(d.admitted),
            d.novelty,
            d.salience,
            d.prediction_error,
            d.score,
            d.threshold,
            d.category,
            d.reason,
            d.gate,
            time_in(d.decided_at),
        )
        for d in decisions
    ]


def read_decisions(
    conn: Conn,
    mark: str,
    episode_ids: Sequence[str],
    scope: Scope,
    in_list: InList,
    time_out: Callable[[Any], datetime],
) -> dict[str, GateDecision]:
    """The decisions about the episodes of ``scope`` among ``episode_ids`` (hot or
    archived), by episode id."""
    columns = ", ".join(f"t.{c.strip()}" for c in DECISION_COLUMNS.split(","))
    rows = rows_in_scope(conn, mark, columns, "gate_decisions", episode_ids, scope, in_list)
    return {
        row[0]: GateDecision(
            episode_id=row[0],
            admitted=bool(row[2]),
            novelty=float(row[3]),
            salience=float(row[4]),
            prediction_error=float(row[5]),
            score=float(row[6]),
            threshold=float(row[7]),
            category=row[8],
            reason=row[9],
            gate=row[10],
            decided_at=time_out(row[11]),
        )
        for row in rows
    }
