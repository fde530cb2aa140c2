"""Deleting and forgetting in the PostgreSQL store.

Everything derived from the removed episodes goes in the same transaction: versions,
time mentions, provenance links, facts left without a source, consolidation marks,
emptied sessions, and the lexemes that no remaining episode holds (the BM25
statistics name every lexeme, so a forgotten word would otherwise stay there with a
count of zero). What PostgreSQL keeps on disk after the commit (dead tuples until
VACUUM, the write-ahead log, backups) is described in RELIABILITY.md.

Mixed into ``PostgresStore``.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from ..errors import NotFoundError
from ..types import DeleteCounts, Scope
from .base import Selection
from .facts_sql import FactSQL
from .forget_sql import POSTGRES_SELECTION, RolledBack, selection_sql
from .postgres_lexical import uncount_episodes
from .postgres_query import scope_sql

Conn = psycopg.Connection[Any]


class PostgresLifecycle:
    """delete, delete_all and forget for ``PostgresStore``."""

    _facts: FactSQL

    def _transaction(self) -> AbstractContextManager[Conn]:  # pragma: no cover
        raise NotImplementedError

    def _erase(
        self, conn: Conn, scope: Scope, selection: Selection, whole_scope: bool
    ) -> tuple[list[str], DeleteCounts]:
        """Delete the episodes of ``scope`` that ``selection`` picks, hot or archived,
        and everything derived from them: their ids and the rows removed.
        ``whole_scope`` also removes the scope's sessions and, without a session, its
        facts."""
        where, params = selection_sql(scope, selection, POSTGRES_SELECTION)
        # Rows first, then the statistics: the lock order of every other write.
        found = conn.execute(
            f"SELECT e.id, e.user_id, e.session_id FROM episodes e WHERE {where} "
            "ORDER BY e.rowid FOR UPDATE",
            params,
        ).fetchall()
        archived = conn.execute(
            f"SELECT e.id, e.user_id, e.session_id FROM archived_episodes e WHERE {where} "
            "ORDER BY e.id FOR UPDATE",
            params,
        ).fetchall()
        # The selection is read once: what follows goes by id (deleting versions first
        # must not unselect an episode that only a prior version matched).
        ids = list(dict.fromkeys(row[0] for row in [*found, *archived]))
        where, params = selection_sql(scope, Selection(episode_ids=tuple(ids)), POSTGRES_SELECTION)
        counts = DeleteCounts()
        if whole_scope and scope.session_id is None:
            counts += self._facts.delete_scope_facts(conn, scope)
        if ids:
            for table in ("episodes", "archived_episodes"):
                counts += self._facts.forget_episodes(conn, where, params, table)
            uncount_episodes(conn, where, params)
            row = conn.execute(
                f"""WITH gone AS (
                        DELETE FROM episodes e WHERE {where}
                        RETURNING e.id, e.embedding IS NOT NULL AS had_vector),
                    gone_archived AS (
                        DELETE FROM archived_episodes e WHERE {where} RETURNING 1),
                    gone_versions AS (
                        DELETE FROM episode_versions v WHERE v.episode_id = ANY(%s)
                        RETURNING 1),
                    gone_times AS (
                        DELETE FROM episode_times t USING gone WHERE t.episode_id = gone.id
                        RETURNING 1),
                    gone_usage AS (
                        DELETE FROM episode_usage u WHERE u.episode_id = ANY(%s) RETURNING 1)
                    SELECT (SELECT count(*) FROM gone),
                           (SELECT count(*) FROM gone_versions),
                           (SELECT count(*) FROM gone WHERE had_vector),
                           (SELECT count(*) FROM gone_times),
                           (SELECT count(*) FROM gone_archived),
                           (SELECT count(*) FROM gone_usage)""",
                [*params, *params, ids, ids],
            ).fetchone()
            assert row is not None
            counts += DeleteCounts(
                episodes=row[0],
                versions=row[1],
                vectors=row[2],
                times=row[3],
                archived=row[4],
                usage=row[5],
            )
        rows = [*found, *archived]
        counts += DeleteCounts(
            sessions=self._drop_sessions(conn, rows, scope if whole_scope else None)
        )
        return ids, counts

    @staticmethod
    def _drop_sessions(
        conn: Conn, found: Sequence[Sequence[Any]], whole_scope: Scope | None
    ) -> int:
        """Remove the sessions of a whole scope, or those the deleted episodes left empty."""
        if whole_scope is not None:
            where, params = scope_sql(
                Scope(whole_scope.user_id, whole_scope.agent_id, None), alias="s"
            )
            if whole_scope.session_id is not None:
                where += " AND s.id = %s"
                params.append(whole_scope.session_id)
            return conn.execute(f"DELETE FROM sessions s WHERE {where}", params).rowcount
        emptied = sorted({(row[1], row[2]) for row in found if row[2] is not None})
        return sum(
            conn.execute(
                """DELETE FROM sessions s WHERE s.user_id = %s AND s.id = %s
                     AND NOT EXISTS (SELECT 1 FROM episodes e
                                     WHERE e.user_id = %s AND e.session_id = %s)
                     AND NOT EXISTS (SELECT 1 FROM archived_episodes e
                                     WHERE e.user_id = %s AND e.session_id = %s)""",
                (user_id, session_id, user_id, session_id, user_id, session_id),
            ).rowcount
            for user_id, session_id in emptied
        )

    def forget(
        self, scope: Scope, selection: Selection, *, dry_run: bool = False
    ) -> tuple[list[str], DeleteCounts]:
        try:
            with self._transaction() as conn:
                ids, counts = self._erase(conn, scope, selection, selection.is_whole_scope())
                if dry_run:
                    raise RolledBack(ids, counts)
        except RolledBack as rolled_back:
            return rolled_back.ids, rolled_back.counts
        return ids, counts

    def delete_episode(self, episode_id: str, scope: Scope) -> DeleteCounts:
        ids, counts = self.forget(scope, Selection(episode_ids=(episode_id,)))
        if not ids:
            raise NotFoundError(f"no episode {episode_id!r} in this scope")
        return counts

    def delete_scope(self, scope: Scope) -> DeleteCounts:
        return self.forget(scope, Selection())[1]
