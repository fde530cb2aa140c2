"""Derived items in SQL (session summaries, profiles), shared by both stores.

The two backends keep them in the same logical tables (``derived_items``,
``derived_sources``; see the migrations) and differ only in parameter marks and how
times and JSON travel: the facts' ``Dialect`` says how. Vectors are stored as raw
float32 bytes in both and scanned exactly in numpy: a scope holds one summary per
session and one profile per person. There is no full-text index: matching runs in
numpy over the scope's items (``anamnesis.retrieve.summaries``, which keeps them
between searches until ``DERIVED_EPOCH`` changes), and no index segment can keep a
forgotten word.

Every statement carries the caller's scope in its WHERE clause. Every write and
delete sets ``meta[DERIVED_EPOCH]`` to a new random token in its transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import InvalidInputError
from ...types import DeleteCounts, Scope
from ..base import DerivedRow, Filters, SessionPrint, fact_scope, scope_clauses
from .facts import Conn, Dialect, source_episodes

#: The ``meta`` key whose value changes (to a new random token) with every write or
#: delete of derived items, by any process: what a cache of them is checked against.
DERIVED_EPOCH = "derived_epoch"

DERIVED_COLUMNS = (
    "d.id, d.kind, d.user_id, d.agent_id, d.session_id, d.subject, d.text, d.body, "
    "d.start_time, d.end_time, d.fingerprint, d.built_at, d.embedding"
)


class DerivedSQL:
    """The backend-independent statements over derived items, for one dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self.d = dialect

    def _where(self, scope: Scope, *, with_session: bool) -> tuple[str, list[Any]]:
        where, params = scope_clauses(fact_scope(scope), "d", self.d.mark)
        if with_session and scope.session_id is not None:
            where += f" AND d.session_id = {self.d.mark}"
            params.append(scope.session_id)
        return where, params

    def _changed(self, conn: Conn) -> None:
        """Record in the caller's transaction that derived items changed."""
        p = self.d.mark
        conn.execute(
            f"INSERT INTO meta (key, value) VALUES ({p}, {p}) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [DERIVED_EPOCH, uuid.uuid4().hex],
        )

    def write(
        self,
        conn: Conn,
        scope: Scope,
        items: Sequence[DerivedRow],
        vectors: Sequence[np.ndarray],
        drop: Sequence[str],
    ) -> None:
        """Drop ``drop`` and the ids of ``items``, then insert ``items`` (the caller
        holds the transaction)."""
        p = self.d.mark
        home = fact_scope(scope)
        if len(vectors) != len(items):
            raise ValueError("one vector per derived item is required")
        for item in items:
            if (item.user_id, item.agent_id) != (home.user_id, home.agent_id):
                raise InvalidInputError(f"item {item.id} is outside the scope it is written in")
        deleted = self._delete(conn, home, list(dict.fromkeys([*drop, *(i.id for i in items)])))
        if items or deleted:
            self._changed(conn)
        for item, vector in zip(items, vectors, strict=True):
            columns = {
                "id": item.id,
                "kind": item.kind,
                "user_id": item.user_id,
                "agent_id": item.agent_id,
                "session_id": item.session_id,
                "subject": item.subject,
                "text": item.text,
                "body": self.d.json_in(item.body),
                "start_time": None if item.start_time is None else self.d.time_in(item.start_time),
                "end_time": None if item.end_time is None else self.d.time_in(item.end_time),
                "fingerprint": item.fingerprint,
                "built_at": self.d.time_in(item.built_at),
                "embedding": np.asarray(vector, dtype=np.float32).tobytes(),
            }
            conn.execute(
                f"INSERT INTO derived_items ({', '.join(columns)}) "
                f"VALUES ({', '.join([p] * len(columns))})",
                list(columns.values()),
            )
            for episode_id in dict.fromkeys(item.provenance):
                conn.execute(
                    f"INSERT INTO derived_sources (item_id, episode_id) VALUES ({p}, {p})",
                    [item.id, episode_id],
                )

    def _delete(self, conn: Conn, scope: Scope, ids: Sequence[str]) -> int:
        """Delete the items of ``scope`` with these ids, with their sources."""
        where, params = self._where(scope, with_session=False)
        deleted = 0
        for start in range(0, len(ids), 500):
            sql, values = self.d.in_list("d.id", ids[start : start + 500])
            owned = [
                r[0]
                for r in conn.execute(
                    f"SELECT d.id FROM derived_items d WHERE {sql} AND {where}", [*values, *params]
                ).fetchall()
            ]
            if not owned:
                continue
            sql, values = self.d.in_list("item_id", owned)
            conn.execute(f"DELETE FROM derived_sources WHERE {sql}", values)
            sql, values = self.d.in_list("d.id", owned)
            deleted += conn.execute(f"DELETE FROM derived_items AS d WHERE {sql}", values).rowcount
        return deleted

    def _select(
        self, conn: Conn, columns: str, scope: Scope, kind: str | None
    ) -> list[Sequence[Any]]:
        """``columns`` of the items of ``scope`` (and of its session, if it names one),
        of one ``kind`` or all, in a stable order."""
        where, params = self._where(scope, with_session=True)
        if kind is not None:
            where += f" AND d.kind = {self.d.mark}"
            params.append(kind)
        return conn.execute(
            f"SELECT {columns} FROM derived_items d WHERE {where} "
            "ORDER BY d.kind, d.start_time, d.id",
            params,
        ).fetchall()

    def find(
        self, conn: Conn, scope: Scope, kind: str | None
    ) -> list[tuple[DerivedRow, np.ndarray | None]]:
        """The items of ``scope`` (and of its session, if it names one), with vectors."""
        rows = self._select(conn, DERIVED_COLUMNS, scope, kind)
        sources: dict[str, list[str]] = {}
        ids = [r[0] for r in rows]
        for start in range(0, len(ids), 500):
            sql, values = self.d.in_list("s.item_id", ids[start : start + 500])
            for item_id, episode_id in conn.execute(
                f"""SELECT s.item_id, s.episode_id FROM derived_sources s
                    LEFT JOIN episodes e ON e.id = s.episode_id
                    WHERE {sql} ORDER BY e.event_time, s.episode_id""",
                values,
            ).fetchall():
                sources.setdefault(item_id, []).append(episode_id)
        return [(self._row(r, sources.get(r[0], ())), _vector(r[12])) for r in rows]

    def texts(
        self, conn: Conn, scope: Scope, kind: str | None
    ) -> list[tuple[str, str, str, np.ndarray]]:
        """``(id, kind, text, vector)`` of the items ``find`` returns that have a vector."""
        rows = self._select(conn, "d.id, d.kind, d.text, d.embedding", scope, kind)
        return [
            (item_id, item_kind, text, np.frombuffer(bytes(blob), dtype=np.float32))
            for item_id, item_kind, text, blob in rows
            if blob is not None
        ]

    def _row(self, row: Sequence[Any], provenance: Sequence[str]) -> DerivedRow:
        t = self.d.time_out
        return DerivedRow(
            id=row[0],
            kind=row[1],
            user_id=row[2],
            agent_id=row[3],
            session_id=row[4],
            subject=row[5],
            text=row[6],
            body=self.d.json_out(row[7]),
            provenance=tuple(provenance),
            start_time=None if row[8] is None else t(row[8]),
            end_time=None if row[9] is None else t(row[9]),
            fingerprint=row[10],
            built_at=t(row[11]),
        )

    def episodes(
        self, conn: Conn, item_ids: Sequence[str], scope: Scope, filters: Filters
    ) -> dict[str, list[str]]:
        """Each item's source episodes in ``scope`` that pass ``filters``, oldest first."""
        owners = (
            "derived_sources",
            "item_id",
            "derived_items d",
            self._where(scope, with_session=False),
        )
        return source_episodes(conn, self.d, owners, item_ids, scope, filters)

    def session_prints(self, conn: Conn, scope: Scope) -> list[SessionPrint]:
        """Each session's fingerprint (count, sum of versions, newest row) and span."""
        where, params = scope_clauses(scope, "e", self.d.mark)
        rows = conn.execute(
            f"""SELECT e.agent_id, e.session_id, COUNT(*), SUM(e.version), MAX(e.rowid),
                       MIN(e.event_time), MAX(e.event_time)
                FROM episodes e WHERE {where} AND e.session_id IS NOT NULL
                GROUP BY e.agent_id, e.session_id""",
            params,
        ).fetchall()
        t = self.d.time_out
        return sorted(
            (
                SessionPrint(
                    agent_id=agent,
                    session_id=session,
                    fingerprint=f"{count}:{versions}:{newest}",
                    start_time=t(first),
                    end_time=t(last),
                )
                for agent, session, count, versions, newest, first, last in rows
            ),
            key=lambda s: (s.start_time, s.session_id, s.agent_id or ""),
        )

    # -- deletes ------------------------------------------------------------------------
    def forget_episodes(
        self, conn: Conn, where: str, params: list[Any], table: str = "episodes"
    ) -> DeleteCounts:
        """Before episodes ``e`` of ``table`` matching ``where`` are deleted: delete every
        derived item built on any of them (its text may quote them); the next
        consolidation rebuilds what is still due."""
        item_ids = [
            r[0]
            for r in conn.execute(
                f"""SELECT DISTINCT s.item_id FROM derived_sources s WHERE s.episode_id IN
                      (SELECT e.id FROM {table} e WHERE {where})""",
                params,
            ).fetchall()
        ]
        deleted = 0
        for start in range(0, len(item_ids), 500):
            chunk = item_ids[start : start + 500]
            sql, values = self.d.in_list("item_id", chunk)
            conn.execute(f"DELETE FROM derived_sources WHERE {sql}", values)
            sql, values = self.d.in_list("d.id", chunk)
            deleted += conn.execute(f"DELETE FROM derived_items AS d WHERE {sql}", values).rowcount
        if deleted:
            self._changed(conn)
        return DeleteCounts(derived=deleted)

    def delete_scope(self, conn: Conn, scope: Scope) -> DeleteCounts:
        """Delete every derived item of ``scope``'s user/agent (with its sources)."""
        where, params = self._where(scope, with_session=False)
        ids = [
            r[0] for r in conn.execute(f"SELECT d.id FROM derived_items d WHERE {where}", params)
        ]
        deleted = self._delete(conn, scope, ids)
        if deleted:
            self._changed(conn)
        return DeleteCounts(derived=deleted)


def _vector(value: Any) -> np.ndarray | None:
    return None if value is None else np.frombuffer(bytes(value), dtype=np.float32)


class DerivedReads:
    """The derived-item reads both stores answer alike, inside the store's read
    transaction (``_fact_snapshot``). Mixed into ``SQLiteFacts`` and ``PostgresFacts``."""

    _derived: DerivedSQL

    def _fact_snapshot(self) -> Any:  # pragma: no cover
        raise NotImplementedError

    def find_derived(
        self, scope: Scope, kind: str | None = None
    ) -> list[tuple[DerivedRow, np.ndarray | None]]:
        with self._fact_snapshot() as conn:
            return self._derived.find(conn, scope, kind)

    def derived_texts(
        self, scope: Scope, kind: str | None = None
    ) -> list[tuple[str, str, str, np.ndarray]]:
        with self._fact_snapshot() as conn:
            return self._derived.texts(conn, scope, kind)

    def derived_episodes(
        self, item_ids: Sequence[str], scope: Scope, filters: Filters
    ) -> dict[str, list[str]]:
        with self._fact_snapshot() as conn:
            return self._derived.episodes(conn, list(item_ids), scope, filters)

    #: The store's own read of episode vectors (``Store.episode_vectors``).
    episode_vectors: Callable[[Sequence[str], Scope], dict[str, np.ndarray]]

    def derived_nearest(
        self,
        item_ids: Sequence[str],
        vector: np.ndarray,
        scope: Scope,
        filters: Filters,
        limit: int,
    ) -> dict[str, list[tuple[str, float]]]:
        """``Store.derived_nearest`` over every source: each item's episodes in scope that
        pass the filters (``derived_episodes``), each scored by its stored vector."""
        if limit <= 0:
            return {}
        sources = self.derived_episodes(item_ids, scope, filters)
        vectors = self.episode_vectors([e for ids in sources.values() for e in ids], scope)
        cosines = {episode_id: float(v @ vector) for episode_id, v in vectors.items()}
        return {item_id: closest(ids, cosines, limit) for item_id, ids in sources.items()}

    def session_prints(self, scope: Scope) -> list[SessionPrint]:
        with self._fact_snapshot() as conn:
            return self._derived.session_prints(conn, scope)


def closest(
    episode_ids: Sequence[str], cosines: Mapping[str, float], limit: int
) -> list[tuple[str, float]]:
    """The ``limit`` of ``episode_ids`` (oldest first) with the highest cosine, best first,
    ties oldest first; an episode without a cosine (no vector yet) scores 0."""
    scored = [(episode_id, cosines.get(episode_id, 0.0)) for episode_id in episode_ids]
    scored.sort(key=lambda pair: -pair[1])
    return scored[:limit]
