"""The archive of the SQLite store: episodes moved out of the hot indexes, verbatim.

Archiving is write-ahead, in two transactions: first the verbatim copy (every column,
and the vector) is committed to ``archived_episodes``; then the episode leaves
``episodes`` (its full-text row, vector and time mentions go with it, by trigger).
A process killed between the two leaves the episode in both tables, hot and intact;
the next ``archive`` of that scope finishes the move (and a copy made stale by an
update in between is dropped instead). Versions, provenance links, consolidation
marks and usage counters are keyed by episode id and stay put, so ``restore`` puts
back exactly what was there: same id, times, version, metadata text and vector (the
time mentions are resolved again from the same text and time, which gives the same
rows).

Mixed into ``SQLiteStore``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import numpy as np

from ...types import Episode, Scope
from ..base import Filters, Selection
from ..shared.forget import (
    SQLITE_SELECTION,
    archive_in_batches,
    restorable_sql,
    restore_in_batches,
    selection_sql,
)
from .ann import SQLiteAnn
from .driver import sqlite3
from .lexical import SQLiteLexical
from .schema import INSERT_TIMES, time_rows
from .sql import EPISODE_COLUMNS, episode_from_row, filters_sql, scope_sql, scope_terms

ARCHIVE_COLUMNS = (
    "id, user_id, agent_id, session_id, role, speaker, content, modality, event_time, "
    "recorded_at, metadata, content_hash, turn_index, version"
)


#: Seconds between two batches of a large archive, restore or forget (``EPISODE_BATCH``):
#: a writer of another process waits in SQLite's busy handler, which retries at
#: intervals of up to a tenth of a second, so a shorter gap would let the next batch
#: take the lock first, batch after batch.
BATCH_PAUSE = 0.1


class SQLiteArchive:
    """archive, restore and iter_archived for ``SQLiteStore``."""

    _lock: Any
    _lexical: SQLiteLexical
    _ann: SQLiteAnn

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:  # pragma: no cover
        raise NotImplementedError

    def _bump_epoch(  # pragma: no cover
        self, conn: sqlite3.Connection, removed: Sequence[int] = ()
    ) -> tuple[str, str]:
        raise NotImplementedError

    def _read(self, sql: str, params: Any = ()) -> list[tuple]:  # pragma: no cover
        raise NotImplementedError

    def archive(self, scope: Scope, selection: Selection, archived_at: datetime) -> list[str]:
        where, params = selection_sql(scope, selection, SQLITE_SELECTION)
        chosen = [
            row[0] for row in self._read(f"SELECT e.id FROM episodes e WHERE {where}", params)
        ]
        return archive_in_batches(
            chosen,
            lambda batch: self._copy_to_archive(scope, batch, archived_at),
            lambda batch: self._leave_hot_indexes(scope, batch),
            BATCH_PAUSE,
        )

    def _copy_to_archive(self, scope: Scope, batch: Selection, archived_at: datetime) -> None:
        """The first step of archiving: the verbatim copies of ``batch``, committed."""
        where, params = selection_sql(scope, batch, SQLITE_SELECTION)
        with self._write() as conn:
            conn.execute(
                f"""INSERT INTO archived_episodes ({ARCHIVE_COLUMNS}, embedding, archived_at)
                    SELECT {EPISODE_COLUMNS}, v.embedding, ?
                    FROM episodes e LEFT JOIN vectors v ON v.episode_rowid = e.rowid
                    WHERE {where}
                      AND NOT EXISTS (SELECT 1 FROM archived_episodes a WHERE a.id = e.id)""",
                [archived_at.timestamp(), *params],
            )

    def _leave_hot_indexes(self, scope: Scope, batch: Selection | None = None) -> list[str]:
        """The second step of archiving: every episode of ``scope`` (of ``batch`` only,
        when given) whose verbatim copy is committed leaves the hot tables (a copy an
        update made stale is dropped)."""
        if batch is None:
            where, params = scope_sql(scope)
        else:
            where, params = selection_sql(scope, batch, SQLITE_SELECTION)
        copied = """EXISTS (SELECT 1 FROM archived_episodes a WHERE a.id = e.id
                       AND a.version = e.version AND a.content_hash = e.content_hash)"""
        with self._write() as conn:
            moved = conn.execute(
                f"SELECT e.rowid, e.id FROM episodes e WHERE {where} AND {copied}", params
            ).fetchall()
            epochs = None
            if moved:
                conn.execute(f"DELETE FROM episodes AS e WHERE {where} AND {copied}", params)
                epochs = self._bump_epoch(conn, removed=[row[0] for row in moved])
            _drop_copies_of_hot(conn, where, params)
        if epochs is not None:
            self._lexical.after_change([row[0] for row in moved], [], *epochs)
            self._ann.after_change([row[0] for row in moved], [], *epochs)
        return [row[1] for row in moved]

    def restore(self, scope: Scope, selection: Selection) -> list[str]:
        where, params = selection_sql(scope, selection, SQLITE_SELECTION)
        chosen = [row[0] for row in self._read(restorable_sql(where), params)]

        def sweep() -> None:
            with self._write() as conn:
                _drop_copies_of_hot(conn, where, params)

        return restore_in_batches(
            chosen, lambda batch: self._restore(scope, batch), sweep, BATCH_PAUSE
        )

    def _restore(self, scope: Scope, batch: Selection) -> list[str]:
        """One transaction of ``restore``: the batch's archived episodes back in the hot
        tables, in event-time order, and their copies gone."""
        where, params = selection_sql(scope, batch, SQLITE_SELECTION)
        with self._write() as conn:
            rows = conn.execute(
                f"""SELECT {EPISODE_COLUMNS}, e.embedding FROM archived_episodes e
                    WHERE {where}
                      AND NOT EXISTS (SELECT 1 FROM episodes h WHERE h.id = e.id)
                    ORDER BY e.event_time, e.id""",
                params,
            ).fetchall()
            for row in rows:
                self._reinsert(conn, row)
            _drop_copies_of_hot(conn, where, params)
        return [row[0] for row in rows]

    @staticmethod
    def _reinsert(conn: sqlite3.Connection, row: tuple) -> None:
        """Put one archived row (``EPISODE_COLUMNS``, then the vector) back, verbatim."""
        (id_, user, agent, session, role, speaker, content, modality, event_time) = row[:9]
        recorded_at, metadata, content_hash, turn_index, version, embedding = row[9:]
        cursor = conn.execute(
            """INSERT INTO episodes (id, user_id, agent_id, session_id, turn_index, role,
                 speaker, content, modality, event_time, recorded_at, metadata, content_hash,
                 version, scope_terms)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            (
                id_,
                user,
                agent,
                session,
                turn_index,
                role,
                speaker,
                content,
                modality,
                event_time,
                recorded_at,
                metadata,
                content_hash,
                version,
                scope_terms(user, agent, session),
            ),
        )
        rowid = cursor.lastrowid
        assert rowid is not None
        if embedding is not None:
            conn.execute(
                "INSERT INTO vectors (episode_rowid, embedding) VALUES (?, ?)", (rowid, embedding)
            )
        else:  # archived before its vector was written: it waits for one again
            conn.execute(
                "INSERT INTO pending_vectors (episode_rowid, user_id) VALUES (?, ?)",
                (rowid, user),
            )
        conn.executemany(INSERT_TIMES, time_rows(rowid, user, content, event_time))

    def iter_archived(
        self, scope: Scope | None, filters: Filters, batch_size: int = 1000
    ) -> Iterator[tuple[Episode, np.ndarray | None]]:
        where, params = scope_sql(scope) if scope is not None else ("TRUE", [])
        narrow, narrow_params = filters_sql(filters)
        last = ""
        while True:
            rows = self._read(
                f"""SELECT {EPISODE_COLUMNS}, e.embedding FROM archived_episodes e
                    WHERE {where} AND {narrow} AND e.id > ?
                      AND NOT EXISTS (SELECT 1 FROM episodes h WHERE h.id = e.id)
                    ORDER BY e.id LIMIT ?""",
                [*params, *narrow_params, last, batch_size],
            )
            for row in rows:
                vector = None if row[-1] is None else np.frombuffer(row[-1], dtype=np.float32)
                yield episode_from_row(row[:-1]), vector
            if len(rows) < batch_size:
                return
            last = rows[-1][0]


def _drop_copies_of_hot(conn: Any, where: str, params: Sequence[Any]) -> None:
    """Delete the archived copies that ``where`` picks (over ``archived_episodes e``)
    whose episode is hot: one an update made stale, or one a kill left beside the
    episode it copied before the episode left (the hot row stands)."""
    conn.execute(
        f"""DELETE FROM archived_episodes AS e WHERE {where}
            AND EXISTS (SELECT 1 FROM episodes h WHERE h.id = e.id)""",
        list(params),
    )
