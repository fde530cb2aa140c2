"""The archive of the PostgreSQL store: episodes moved out of the hot indexes, verbatim.

The same two-step, write-ahead move as SQLite's (``sqlite.archive`` explains it): the
verbatim copy with its vector is committed to ``archived_episodes`` first, then the
episode leaves ``episodes`` (and with it the GIN and HNSW index entries, its time
mentions and its share of the BM25 statistics). ``restore`` puts it back in one
transaction.

Mixed into ``PostgresStore``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import numpy as np
import psycopg

from ...types import Episode, Scope
from ..base import Filters, Selection
from ..shared.forget import (
    POSTGRES_SELECTION,
    archive_in_batches,
    restorable_sql,
    restore_in_batches,
    selection_sql,
)
from .lexical import count_episodes, token_count, uncount_episodes
from .schema import insert_times, time_rows
from .sql import EPISODE_COLUMNS, episode, filters_sql, scope_sql

Conn = psycopg.Connection[Any]

ARCHIVE_COLUMNS = (
    "id, user_id, agent_id, session_id, role, speaker, content, modality, event_time, "
    "recorded_at, metadata, content_hash, turn_index, version"
)


class PostgresArchive:
    """archive, restore and iter_archived for ``PostgresStore``."""

    def _transaction(self) -> AbstractContextManager[Conn]:  # pragma: no cover
        raise NotImplementedError

    def archive(self, scope: Scope, selection: Selection, archived_at: datetime) -> list[str]:
        where, params = selection_sql(scope, selection, POSTGRES_SELECTION)
        with self._transaction() as conn:
            chosen = [
                r[0] for r in conn.execute(f"SELECT e.id FROM episodes e WHERE {where}", params)
            ]
        return archive_in_batches(
            chosen,
            lambda batch: self._copy_to_archive(scope, batch, archived_at),
            lambda batch: self._leave_hot_indexes(scope, batch),
        )

    def _copy_to_archive(self, scope: Scope, batch: Selection, archived_at: datetime) -> None:
        """The first step of archiving: the verbatim copies of ``batch``, committed."""
        where, params = selection_sql(scope, batch, POSTGRES_SELECTION)
        with self._transaction() as conn:
            conn.execute(
                f"""INSERT INTO archived_episodes ({ARCHIVE_COLUMNS}, embedding, archived_at)
                    SELECT {EPISODE_COLUMNS}, e.embedding, %s FROM episodes e
                    WHERE {where}
                      AND NOT EXISTS (SELECT 1 FROM archived_episodes a WHERE a.id = e.id)
                    ON CONFLICT (id) DO NOTHING""",
                [archived_at, *params],
            )

    def _leave_hot_indexes(self, scope: Scope, batch: Selection | None = None) -> list[str]:
        """The second step of archiving: every episode of ``scope`` (of ``batch`` only,
        when given) whose verbatim copy is committed leaves the hot tables (a copy an
        update made stale is dropped)."""
        if batch is None:
            where, params = scope_sql(scope)
        else:
            where, params = selection_sql(scope, batch, POSTGRES_SELECTION)
        copied = f"""{where} AND EXISTS (SELECT 1 FROM archived_episodes a WHERE a.id = e.id
                       AND a.version = e.version AND a.content_hash = e.content_hash)"""
        with self._transaction() as conn:
            moved = [
                r[0]
                for r in conn.execute(
                    f"SELECT e.id FROM episodes e WHERE {copied} ORDER BY e.rowid FOR UPDATE",
                    params,
                ).fetchall()
            ]
            if moved:
                uncount_episodes(conn, copied, params)
                conn.execute("DELETE FROM episode_times WHERE episode_id = ANY(%s)", [moved])
                conn.execute(f"DELETE FROM episodes e WHERE {copied}", params)
            _drop_copies_of_hot(conn, where, params)
        return moved

    def restore(self, scope: Scope, selection: Selection) -> list[str]:
        where, params = selection_sql(scope, selection, POSTGRES_SELECTION)
        with self._transaction() as conn:
            chosen = [r[0] for r in conn.execute(restorable_sql(where), params)]

        def sweep() -> None:
            with self._transaction() as conn:
                _drop_copies_of_hot(conn, where, params)

        return restore_in_batches(chosen, lambda batch: self._restore(scope, batch), sweep)

    def _restore(self, scope: Scope, batch: Selection) -> list[str]:
        """One transaction of ``restore``: the batch's archived episodes back in the hot
        tables, in event-time order, and their copies gone."""
        where, params = selection_sql(scope, batch, POSTGRES_SELECTION)
        with self._transaction() as conn:
            rows = conn.execute(
                f"""SELECT e.id, e.user_id, e.content, e.event_time FROM archived_episodes e
                    WHERE {where}
                      AND NOT EXISTS (SELECT 1 FROM episodes h WHERE h.id = e.id)
                    ORDER BY e.event_time, e.id FOR UPDATE""",
                params,
            ).fetchall()
            ids = [row[0] for row in rows]
            if ids:
                conn.execute(
                    f"""INSERT INTO episodes ({ARCHIVE_COLUMNS}, content_tokens, embedding)
                        SELECT {EPISODE_COLUMNS}, t.tokens, e.embedding
                        FROM archived_episodes e
                        JOIN unnest(%s::text[], %s::integer[]) AS t(id, tokens) ON t.id = e.id
                        ORDER BY e.event_time, e.id""",
                    [ids, [token_count(row[2]) for row in rows]],
                )
                count_episodes(conn, "e.id = ANY(%s)", [ids], 1)
                insert_times(conn, [t for row in rows for t in time_rows(*row)])
                # Archived before its vector was written: it waits for one again.
                conn.execute(
                    """INSERT INTO pending_vectors (episode_rowid, user_id)
                       SELECT rowid, user_id FROM episodes
                       WHERE id = ANY(%s) AND embedding IS NULL ORDER BY rowid""",
                    (ids,),
                )
            _drop_copies_of_hot(conn, where, params)
        return ids

    def iter_archived(
        self, scope: Scope | None, filters: Filters, batch_size: int = 1000
    ) -> Iterator[tuple[Episode, np.ndarray | None]]:
        where, params = scope_sql(scope) if scope is not None else ("TRUE", [])
        narrow, narrow_params = filters_sql(filters)
        last = ""
        while True:
            with self._transaction() as conn:
                rows = conn.execute(
                    f"""SELECT {EPISODE_COLUMNS}, e.embedding FROM archived_episodes e
                        WHERE {where} AND {narrow} AND e.id > %s
                          AND NOT EXISTS (SELECT 1 FROM episodes h WHERE h.id = e.id)
                        ORDER BY e.id LIMIT %s""",
                    [*params, *narrow_params, last, batch_size],
                ).fetchall()
            for row in rows:
                vector = None if row[-1] is None else np.asarray(row[-1], dtype=np.float32)
                yield episode(row[:-1]), vector
            if len(rows) < batch_size:
                return
            last = rows[-1][0]


def _drop_copies_of_hot(conn: Any, where: str, params: Sequence[Any]) -> None:
    """Delete the archived copies that ``where`` picks (over ``archived_episodes e``)
    whose episode is hot: one an update made stale, or one a kill left beside the
    episode it copied before the episode left (the hot row stands)."""
    conn.execute(
        f"""DELETE FROM archived_episodes e WHERE {where}
            AND EXISTS (SELECT 1 FROM episodes h WHERE h.id = e.id)""",
        list(params),
    )
