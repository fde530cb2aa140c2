"""The rows kept beside episodes (gate decisions, usage counters), read only through
an episode of the caller's scope, hot or archived: a row whose episode is in another
scope, or gone, is never returned."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...types import Scope
from ..base import scope_clauses

Conn = Any  # a sqlite3.Connection or a psycopg.Connection

#: Builds ``column IN (...)`` in the backend's dialect: (column, values) -> (sql, params).
InList = Callable[[str, Sequence[Any]], tuple[str, list[Any]]]


def rows_in_scope(
    conn: Conn,
    mark: str,
    select: str,
    table: str,
    episode_ids: Sequence[str],
    scope: Scope,
    in_list: InList,
) -> list[Any]:
    """``SELECT select`` from ``table`` (aliased ``t``, keyed by ``t.episode_id``) for
    the episodes of ``scope`` among ``episode_ids``: the hot episodes' rows first,
    then the archived ones'. ``mark`` is the driver's parameter mark."""
    rows: list[Any] = []
    for episodes in ("episodes", "archived_episodes"):
        where, params = scope_clauses(scope, "e", mark)
        ids_sql, ids = in_list("t.episode_id", list(episode_ids))
        rows.extend(
            conn.execute(
                f"""SELECT {select} FROM {table} t JOIN {episodes} e ON e.id = t.episode_id
                    WHERE {ids_sql} AND {where}""",
                [*ids, *params],
            ).fetchall()
        )
    return rows
