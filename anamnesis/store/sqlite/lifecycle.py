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

A forget of more than ``EPISODE_BATCH`` episodes goes in batches
(``forget_in_batches``), each its own transaction with its own erasure, ``BATCH_PAUSE``
apart, so that other writers get the write lock in between; a merge of a whole index
that the erasure needs is done once, by the last (``erasure``), and the log is
truncated once, after it.

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
from ..shared.forget import (
    SQLITE_SELECTION,
    DeleteVerbs,
    RolledBack,
    drop_sessions,
    forget_in_batches,
    selection_sql,
    split,
)
from . import erasure
from .ann import SQLiteAnn
from .archive import BATCH_PAUSE
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
        self, conn: sqlite3.Connection, scope: Scope, selection: Selection, limit: int | None
    ) -> tuple[list[str], DeleteCounts, list[int], list[str]]:
        """Delete the episodes of ``scope`` that ``selection`` picks, hot or archived,
        and everything derived from them: their ids, the rows removed, the rowids of
        the hot ones, and the ids left (past the first ``limit`` when it picks more).
        A whole-scope selection that leaves none also removes the scope's sessions
        and, without a session, its facts."""
        where, params = selection_sql(scope, selection, SQLITE_SELECTION)
        found = conn.execute(
            f"""SELECT e.rowid, e.id, e.user_id, e.session_id FROM episodes e WHERE {where}
                ORDER BY e.rowid""",
            params,
        ).fetchall()
        archived = conn.execute(
            f"""SELECT NULL, e.id, e.user_id, e.session_id FROM archived_episodes e
                WHERE {where} ORDER BY e.id""",
            params,
        ).fetchall()
        # The selection is read once: what follows goes by id (deleting versions first
        # must not unselect an episode that only a prior version matched).
        ids, rest = split(list(dict.fromkeys(row[1] for row in [*found, *archived])), limit)
        whole_scope = selection.is_whole_scope() and not rest
        if rest:
            kept = set(ids)
            found = [row for row in found if row[1] in kept]
            archived = [row for row in archived if row[1] in kept]
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
        return ids, counts, rowids, rest

    def forget(
        self, scope: Scope, selection: Selection, *, dry_run: bool = False
    ) -> tuple[list[str], DeleteCounts]:
        if dry_run:
            try:
                with self._write() as conn:
                    ids, counts, _, _ = self._erase(conn, scope, selection, None)
                    raise RolledBack(ids, counts)
            except RolledBack as rolled_back:
                return rolled_back.ids, rolled_back.counts
        ids, counts = forget_in_batches(
            selection,
            lambda part, limit, more: self._forget_batch(scope, part, limit, more),
            BATCH_PAUSE,
        )
        if counts != DeleteCounts():
            self._lexical.stop_build()
            self._truncate_log()
        return ids, counts

    def _forget_batch(
        self, scope: Scope, selection: Selection, limit: int | None, more: bool
    ) -> tuple[list[str], DeleteCounts, list[str]]:
        """One transaction of ``forget`` (``forget_in_batches``): its episodes erased
        whole, the words of every row it deleted gone from the full-text indexes (when
        ``more`` transactions follow, or it leaves episodes for them, the indexes owe
        the last one a whole merge: ``erasure``)."""
        with self._write() as conn:
            if self._secure_delete:
                erasure.start_capture(conn)
            ids, counts, rowids, rest = self._erase(conn, scope, selection, limit)
            epochs = None
            if counts != DeleteCounts():
                epochs = self._bump_epoch(conn, removed=rowids)
            if counts != DeleteCounts() or erasure.due_indexes(conn):
                erasure.finish(conn, self._secure_delete, later=more or bool(rest))
            elif self._secure_delete:
                erasure.stop_capture(conn)
        if epochs is not None:
            self._lexical.after_change(rowids, [], *epochs)
            self._ann.after_change(rowids, [], *epochs)
        return ids, counts, rest

    def _truncate_log(self) -> None:
        """Copy the write-ahead log into the file and truncate it to zero bytes, so the
        old page images it held (deleted text among them) are gone from disk."""
        with self._lock:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
