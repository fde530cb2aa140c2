"""Usage counters in SQL, for both stores: one upsert per batch, read by id in scope.

A batch only counts episodes that still exist (hot or archived) in the user named
with them, so counts noted before a ``forget`` and written after it leave nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ...types import Scope, Usage
from .scoped import InList, rows_in_scope

Conn = Any  # a sqlite3.Connection or a psycopg.Connection


def usage_upsert(mark: str, time_type: str) -> str:
    """The statement that adds one episode's counts (parameters: id, user, retrieved,
    last retrieved, read, last read; then id and user twice for the existence tests).
    ``time_type`` is the SQL type of a time in this backend."""
    p = mark
    text, count, time = (f"CAST({p} AS {t})" for t in ("TEXT", "BIGINT", time_type))
    exists = (
        f"EXISTS (SELECT 1 FROM episodes e WHERE e.id = {p} AND e.user_id = {p}) "
        f"OR EXISTS (SELECT 1 FROM archived_episodes e WHERE e.id = {p} AND e.user_id = {p})"
    )
    return f"""INSERT INTO episode_usage AS u
                 (episode_id, user_id, retrieved, last_retrieved_at, read, last_read_at)
               SELECT {text}, {text}, {count}, {time}, {count}, {time} WHERE {exists}
               ON CONFLICT (episode_id) DO UPDATE SET
                 retrieved = u.retrieved + excluded.retrieved,
                 last_retrieved_at = COALESCE(excluded.last_retrieved_at, u.last_retrieved_at),
                 read = u.read + excluded.read,
                 last_read_at = COALESCE(excluded.last_read_at, u.last_read_at)"""


def usage_rows(deltas: Sequence[Any], time_in: Callable[[datetime], Any]) -> list[tuple]:
    """The upsert's parameters for each delta, in episode-id order (one lock order)."""

    def at(value: datetime | None) -> Any:
        return None if value is None else time_in(value)

    return [
        (
            d.episode_id,
            d.user_id,
            d.retrieved,
            at(d.last_retrieved_at),
            d.read,
            at(d.last_read_at),
            d.episode_id,
            d.user_id,
            d.episode_id,
            d.user_id,
        )
        for d in sorted(deltas, key=lambda d: d.episode_id)
    ]


def read_usage(
    conn: Conn,
    mark: str,
    episode_ids: Sequence[str],
    scope: Scope,
    in_list: InList,
    time_out: Callable[[Any], datetime],
) -> dict[str, Usage]:
    """The counters of the episodes of ``scope`` among ``episode_ids`` (hot or archived)."""
    select = "t.episode_id, t.retrieved, t.last_retrieved_at, t.read, t.last_read_at"
    rows = rows_in_scope(conn, mark, select, "episode_usage", episode_ids, scope, in_list)
    return {
        row[0]: Usage(
            episode_id=row[0],
            retrieved=int(row[1]),
            last_retrieved_at=None if row[2] is None else time_out(row[2]),
            read=int(row[3]),
            last_read_at=None if row[4] is None else time_out(row[4]),
        )
        for row in rows
    }
