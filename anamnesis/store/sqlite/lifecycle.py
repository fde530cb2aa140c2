"""Deleting and forgetting in the SQLite store, so that the text leaves the file.

A delete removes the rows; that alone leaves the words in three places a hostile
reader of the file can see: the freed space of the pages (unless ``secure_delete``
zeroes it: the store turns it on for its connections), the FTS5 index segments (a
plain delete only adds a tombstone; the terms stay until the segments are merged),
and the write-ahead log (old page images, until a checkpoint). So every delete and
forget also erases the rows' words from both FTS5 indexes (``erasure``: in place
with FTS5's ``secure-delete``, else by merging each index whole; in the same
transaction: it commits with the delete or not at all) and, once committed,
checkpoints the log and truncates it. ``tests/test_forget.py`` checks the result by
scanning the bytes of every file of the store.

Mixed into ``SQLiteStore``.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from ...types import DeleteCounts, Scope
from ..base import Selection
from ..shared.derived import DerivedSQL
from ..shared.facts import FactSQL
from ..shared.forget import SQLITE_SELECTION, DeleteVerbs, RolledBack, drop_sessions, selection_sql
from . import erasure
from .ann import SQLiteAnn
from .driver import sqlite3
from .lexical import SQLiteLexical


class SQLiteLifecycle(DeleteVerbs):
    """delete, delete_all and forget for ``SQLiteStore``."""

    _lock: Any
    _conn: sqlite3.Connection
    _facts: FactSQL
    _derived: DerivedSQL
    _lexical: SQLiteLexical
    _ann: SQLiteAnn
    #: Whether both full-text indexes have FTS5's ``secure-delete`` on (``erasure``).
    _secure_delete: bool

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:  # pragma: no cover
        raise NotImplementedError

    def _bump_epoch(  # pragma: no cover
        self, conn: sqlite3.Connection, removed: Sequence[int] = ()
    ) -> tuple[str, str]:
        raise NotImplementedError

    def _erase(
        self,
        conn: sqlite3.Connection,
        scope: Scope,
        selection: Selection,
        whole_scope: bool,
    ) -> tuple[list[str], DeleteCounts, list[int]]:
        """Delete the episodes of ``scope`` that ``selection`` picks, hot or archived,
        and everything derived from them: their ids, the rows removed, the rowids of
        the hot ones. ``whole_scope`` also removes the scope's sessions and, without a
        session, its facts."""
        where, params = selection_sql(scope, selection, SQLITE_SELECTION)
        found = conn.execute(
            f"SELECT e.rowid, e.id, e.user_id, e.session_id FROM episodes e WHERE {where}", params
        ).fetchall()
        archived = conn.execute(
            f"SELECT NULL, e.id, e.user_id, e.session_id FROM archived_episodes e WHERE {where}",
            params,
        ).fetchall()
        # The selection is read once: what follows goes by id (deleting versions first
        # must not unselect an episode that only a prior version matched).
        ids = list(dict.fromkeys(row[1] for row in [*found, *archived]))
        where, params = selection_sql(scope, Selection(episode_ids=tuple(ids)), SQLITE_SELECTION)
        rowids = [row[0] for row in found]
        counts = DeleteCounts()
        if whole_scope and scope.session_id is None:
            counts += self._facts.delete_scope_facts(conn, scope)
            counts += self._derived.delete_scope(conn, scope)
        if ids:
            for table in ("episodes", "archived_episodes"):
                counts += self._facts.forget_episodes(conn, where, params, table)
                counts += self._derived.forget_episodes(conn, where, params, table)
            vectors, times = conn.execute(
                f"""SELECT (SELECT COUNT(*) FROM vectors WHERE episode_rowid IN
                             (SELECT e.rowid FROM episodes e WHERE {where})),
                           (SELECT COUNT(*) FROM episode_times WHERE episode_rowid IN
                             (SELECT e.rowid FROM episodes e WHERE {where}))""",
                [*params, *params],
            ).fetchone()
            by_id = "episode_id IN (SELECT value FROM json_each(?))"
            id_list = SQLITE_SELECTION.ids_param(tuple(ids))
            versions = conn.execute(f"DELETE FROM episode_versions WHERE {by_id}", [id_list])
            usage = conn.execute(f"DELETE FROM episode_usage WHERE {by_id}", [id_list])
            gate = conn.execute(f"DELETE FROM gate_decisions WHERE {by_id}", [id_list])
            # Delete triggers remove each episode's FTS entry, vector row (or the mark that it
            # waits for one) and time mentions.
            episodes = conn.execute(f"DELETE FROM episodes AS e WHERE {where}", params)
            gone = conn.execute(f"DELETE FROM archived_episodes AS e WHERE {where}", params)
            counts += DeleteCounts(
                episodes=episodes.rowcount,
                versions=versions.rowcount,
                vectors=vectors,
                times=times,
                archived=gone.rowcount,
                usage=usage.rowcount,
                gate_decisions=gate.rowcount,
            )
        counts += DeleteCounts(
            sessions=drop_sessions(
                conn, [r[1:] for r in [*found, *archived]], scope if whole_scope else None, "?"
            )
        )
        return ids, counts, rowids

    def forget(
        self, scope: Scope, selection: Selection, *, dry_run: bool = False
    ) -> tuple[list[str], DeleteCounts]:
        try:
            with self._write() as conn:
                secure = self._secure_delete and not dry_run
                if secure:
                    erasure.start_capture(conn)
                ids, counts, rowids = self._erase(
                    conn, scope, selection, selection.is_whole_scope()
                )
                if dry_run:
                    raise RolledBack(ids, counts)
                epochs = None
                if counts != DeleteCounts():
                    epochs = self._bump_epoch(conn, removed=rowids)
                    erasure.finish(conn, secure)
                elif secure:
                    erasure.stop_capture(conn)
        except RolledBack as rolled_back:
            return rolled_back.ids, rolled_back.counts
        if epochs is not None:
            self._lexical.after_change(rowids, [], *epochs)
            self._ann.after_change(rowids, [], *epochs)
            self._lexical.stop_build()
            self._truncate_log()
        return ids, counts

    def _truncate_log(self) -> None:
        """Copy the write-ahead log into the file and truncate it to zero bytes, so the
        old page images it held (deleted text among them) are gone from disk."""
        with self._lock:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
