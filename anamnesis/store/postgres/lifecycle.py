"""Deleting and forgetting in the PostgreSQL store.

Everything derived from the removed episodes goes in the same transaction: versions,
time mentions, provenance links, facts left without a source, consolidation marks,
emptied sessions, and the lexemes that no remaining episode holds (the BM25
statistics name every lexeme, so a forgotten word would otherwise stay there with a
count of zero). What PostgreSQL keeps on disk after the commit (dead tuples until
VACUUM, the write-ahead log, backups) is described in RELIABILITY.md. A forget of
more than ``EPISODE_BATCH`` episodes goes in batches, each its own transaction that
locks only its own rows (``forget_in_batches``).

Mixed into ``PostgresStore``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

import psycopg

from ...types import DeleteCounts, Scope
from ..base import Selection
from ..shared.derived import DerivedSQL
from ..shared.facts import FactSQL
from ..shared.forget import (
    POSTGRES_SELECTION,
    DeleteVerbs,
    RolledBack,
    drop_sessions,
    forget_in_batches,
    selection_sql,
    split,
)
from .lexical import uncount_episodes

Conn = psycopg.Connection[Any]


class PostgresLifecycle(DeleteVerbs):
    """delete, delete_all and forget for ``PostgresStore``."""

    _facts: FactSQL
    _derived: DerivedSQL

    def _transaction(self) -> AbstractContextManager[Conn]:  # pragma: no cover
        raise NotImplementedError

    def _erase(
        self, conn: Conn, scope: Scope, selection: Selection, limit: int | None
    ) -> tuple[list[str], DeleteCounts, list[str]]:
        """Delete the episodes of ``scope`` that ``selection`` picks, hot or archived,
        and everything derived from them: their ids, the rows removed, and the ids
        left (past the first ``limit`` when it picks more). A whole-scope selection
        that leaves none also removes the scope's sessions and, without a session,
        its facts."""
        where, params = selection_sql(scope, selection, POSTGRES_SELECTION)
        picked = [
            *conn.execute(f"SELECT e.id FROM episodes e WHERE {where} ORDER BY e.rowid", params),
            *conn.execute(
                f"SELECT e.id FROM archived_episodes e WHERE {where} ORDER BY e.id", params
            ),
        ]
        ids, rest = split(list(dict.fromkeys(row[0] for row in picked)), limit)
        whole_scope = selection.is_whole_scope() and not rest
        # Only this transaction's rows are locked, rows first, then the statistics: the
        # lock order of every other write. They are read again as they are now.
        where, params = selection_sql(
            scope, replace(selection, episode_ids=tuple(ids)), POSTGRES_SELECTION
        )
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
            counts += self._derived.delete_scope(conn, scope)
        if ids:
            for table in ("episodes", "archived_episodes"):
                counts += self._facts.forget_episodes(conn, where, params, table)
                counts += self._derived.forget_episodes(conn, where, params, table)
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
                        DELETE FROM episode_usage u WHERE u.episode_id = ANY(%s) RETURNING 1),
                    gone_gate AS (
                        DELETE FROM gate_decisions g WHERE g.episode_id = ANY(%s)
                        RETURNING 1)
                    SELECT (SELECT count(*) FROM gone),
                           (SELECT count(*) FROM gone_versions),
                           (SELECT count(*) FROM gone WHERE had_vector),
                           (SELECT count(*) FROM gone_times),
                           (SELECT count(*) FROM gone_archived),
                           (SELECT count(*) FROM gone_usage),
                           (SELECT count(*) FROM gone_gate)""",
                [*params, *params, ids, ids, ids],
            ).fetchone()
            assert row is not None
            counts += DeleteCounts(
                episodes=row[0],
                versions=row[1],
                vectors=row[2],
                times=row[3],
                archived=row[4],
                usage=row[5],
                gate_decisions=row[6],
            )
        rows = [*found, *archived]
        counts += DeleteCounts(
            sessions=drop_sessions(conn, rows, scope if whole_scope else None, "%s")
        )
        return ids, counts, rest

    def forget(
        self, scope: Scope, selection: Selection, *, dry_run: bool = False
    ) -> tuple[list[str], DeleteCounts]:
        if dry_run:
            try:
                with self._transaction() as conn:
                    ids, counts, _ = self._erase(conn, scope, selection, None)
                    raise RolledBack(ids, counts)
            except RolledBack as rolled_back:
                return rolled_back.ids, rolled_back.counts
        return forget_in_batches(
            selection, lambda part, limit, _: self._forget_batch(scope, part, limit)
        )

    def _forget_batch(
        self, scope: Scope, selection: Selection, limit: int | None
    ) -> tuple[list[str], DeleteCounts, list[str]]:
        """One transaction of ``forget`` (``forget_in_batches``)."""
        with self._transaction() as conn:
            return self._erase(conn, scope, selection, limit)
