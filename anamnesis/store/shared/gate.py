"""The encoding gate's records in SQL, for both stores (see ``anamnesis.ingest.gate``).

``gate_decisions`` holds one row per gated episode, hot or archived, keyed by its id;
a decision is read back only through an episode of the caller's scope, and leaves
with the episode (``forget``, ``delete``, ``delete_all``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ...types import GateDecision, Scope
from ..base import scope_clauses

Conn = Any  # a sqlite3.Connection or a psycopg.Connection

DECISION_COLUMNS = (
    "episode_id, user_id, admitted, novelty, salience, prediction_error, score, "
    "threshold, category, reason, gate, decided_at"
)


def insert_decisions_sql(mark: str) -> str:
    """The statement that stores one decision (parameters: ``decision_rows``)."""
    marks = ", ".join([mark] * len(DECISION_COLUMNS.split(",")))
    return f"INSERT INTO gate_decisions ({DECISION_COLUMNS}) VALUES ({marks})"


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
    in_list: Callable[[str, Sequence[Any]], tuple[str, list[Any]]],
    time_out: Callable[[Any], datetime],
) -> dict[str, GateDecision]:
    """The decisions about the episodes of ``scope`` among ``episode_ids`` (hot or
    archived), by episode id."""
    found: dict[str, GateDecision] = {}
    columns = ", ".join(f"g.{c.strip()}" for c in DECISION_COLUMNS.split(","))
    for table in ("episodes", "archived_episodes"):
        where, params = scope_clauses(scope, "e", mark)
        ids_sql, ids = in_list("g.episode_id", list(episode_ids))
        for row in conn.execute(
            f"""SELECT {columns} FROM gate_decisions g JOIN {table} e ON e.id = g.episode_id
                WHERE {ids_sql} AND {where}""",
            [*ids, *params],
        ).fetchall():
            found[row[0]] = GateDecision(
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
    return found
