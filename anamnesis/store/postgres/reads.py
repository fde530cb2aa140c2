"""The read side of the PostgreSQL store: episodes by id and by scope, neighbouring
turns, lexical (BM25 in SQL), dense (pgvector) and time search, iteration and
statistics.

Mixed into ``PostgresStore``, whose pooled transactions it reads through.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import psycopg

from ...types import Episode, EpisodeVersion, Scope, Session
from ..base import TURN_COLUMNS, Candidate, Filters, TurnInfo, adjacent_by_episode, fact_scope
from ..episode_times import EpisodeTimes, TimeRange, times_by_episode
from . import search
from .sql import (
    EPISODE_COLUMNS,
    episode,
    filters_sql,
    prepare,
    redact_url,
    scope_sql,
)


class PostgresReads:
    """Reads and searches for ``PostgresStore`` (uses its pooled transactions)."""

    url: str
    dim: int
    backend: str

    def _transaction(self) -> AbstractContextManager[psycopg.Connection[Any]]:  # pragma: no cover
        raise NotImplementedError

    def get_episodes(self, episode_ids: Sequence[str], scope: Scope) -> list[Episode]:
        if not episode_ids:
            return []
        where, params = scope_sql(scope)
        with self._transaction() as conn:
            rows = conn.execute(
                f"SELECT {EPISODE_COLUMNS} FROM episodes e WHERE e.id = ANY(%s) AND {where}",
                [list(episode_ids), *params],
            ).fetchall()
        found = {row[0]: episode(row) for row in rows}
        return [found[i] for i in episode_ids if i in found]

    def list_episodes(
        self, scope: Scope, *, limit: int, offset: int, filters: Filters | None = None
    ) -> tuple[list[Episode], int]:
        where, params = scope_sql(scope)
        filters = filters or Filters()
        extra, extra_params = filters_sql(filters)
        with self._transaction() as conn:
            total = conn.execute(
                f"SELECT count(*) FROM episodes e WHERE {where} AND {extra}",
                [*params, *extra_params],
                prepare=prepare(filters),
            ).fetchone()[0]  # type: ignore[index]
            rows = conn.execute(
                f"SELECT {EPISODE_COLUMNS} FROM episodes e WHERE {where} AND {extra} "
                "ORDER BY e.event_time, e.rowid LIMIT %s OFFSET %s",
                [*params, *extra_params, limit, offset],
                prepare=prepare(filters),
            ).fetchall()
        return [episode(r) for r in rows], total

    def episode_versions(self, episode_id: str, scope: Scope) -> list[EpisodeVersion]:
        where, params = scope_sql(scope)
        with self._transaction() as conn:
            rows = conn.execute(
                f"""SELECT v.episode_id, v.version, v.content, v.metadata, v.changed_at
                    FROM episode_versions v JOIN (
                        SELECT id, user_id, agent_id, session_id FROM episodes
                        UNION ALL
                        SELECT id, user_id, agent_id, session_id FROM archived_episodes
                    ) e ON e.id = v.episode_id
                    WHERE v.episode_id = %s AND {where} ORDER BY v.version""",
                [episode_id, *params],
            ).fetchall()
        return [EpisodeVersion(*r) for r in rows]

    def neighbours(
        self, episodes: Sequence[Episode], window: int
    ) -> dict[str, tuple[Episode, ...]]:
        result: dict[str, list[Episode]] = {e.id: [] for e in episodes}
        anchored = [e for e in episodes if e.session_id is not None and e.turn_index is not None]
        if window <= 0 or not anchored:
            return {k: tuple(v) for k, v in result.items()}
        with self._transaction() as conn:
            rows = conn.execute(
                f"""SELECT h.id, {EPISODE_COLUMNS}
                    FROM unnest(%s::text[], %s::text[], %s::text[], %s::int[])
                         AS h(id, user_id, session_id, turn_index)
                    JOIN episodes e ON e.user_id = h.user_id AND e.session_id = h.session_id
                     AND e.turn_index BETWEEN h.turn_index - %s AND h.turn_index + %s
                     AND e.id <> h.id
                    ORDER BY h.id, e.turn_index""",
                (
                    [e.id for e in anchored],
                    [e.user_id for e in anchored],
                    [e.session_id for e in anchored],
                    [e.turn_index for e in anchored],
                    window,
                    window,
                ),
            ).fetchall()
        for row in rows:
            result[row[0]].append(episode(row[1:]))
        return {k: tuple(v) for k, v in result.items()}

    def _by_id(
        self, select: str, episode_ids: Sequence[str], scope: Scope, binary: bool = False
    ) -> list[Any]:
        """Rows of ``SELECT <select> FROM episodes e ...`` for the in-scope episodes
        among ``episode_ids`` (binary transfer for vectors)."""
        if not episode_ids:
            return []
        where, params = scope_sql(scope)
        with self._transaction() as conn:
            return conn.execute(
                f"SELECT {select} FROM episodes e WHERE e.id = ANY(%s) AND {where}",
                [list(dict.fromkeys(episode_ids)), *params],
                binary=binary,
            ).fetchall()

    def turn_info(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, TurnInfo]:
        rows = self._by_id(f"e.id, {TURN_COLUMNS}", episode_ids, scope)
        return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}

    def episode_vectors(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, np.ndarray]:
        rows = self._by_id("e.id, e.embedding", episode_ids, scope, binary=True)
        return {episode_id: vector for episode_id, vector in rows if vector is not None}

    def adjacent_turns(
        self, episode_ids: Sequence[str], scope: Scope, filters: Filters, window: int
    ) -> dict[str, list[tuple[str, int]]]:
        if window <= 0 or not episode_ids:
            return {}
        where_h, params_h = scope_sql(scope, "h")
        where_e, params_e = scope_sql(scope)
        extra, extra_params = filters_sql(filters)
        with self._transaction() as conn:
            rows = conn.execute(
                f"""SELECT h.id, e.id, e.turn_index - h.turn_index FROM episodes h
                    JOIN episodes e ON e.user_id = h.user_id AND e.session_id = h.session_id
                     AND e.turn_index BETWEEN h.turn_index - %s AND h.turn_index + %s
                     AND e.id <> h.id
                    WHERE h.id = ANY(%s) AND {where_h} AND {where_e} AND {extra}""",
                [
                    window,
                    window,
                    list(dict.fromkeys(episode_ids)),
                    *params_h,
                    *params_e,
                    *extra_params,
                ],
                prepare=prepare(filters),
            ).fetchall()
        return adjacent_by_episode(rows)

    def lexical_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, limit: int
    ) -> list[Candidate]:
        """Episodes matching any term, ranked by Okapi BM25 as SQLite's FTS5 ranks, best first.

        See ``search.lexical_search``.
        """
        with self._transaction() as conn:
            return search.lexical_search(conn, terms, scope, filters, limit)

    def lexical_rank(
        self, terms: Sequence[str], episode_ids: Sequence[str], scope: Scope, limit: int
    ) -> list[Candidate]:
        with self._transaction() as conn:
            return search.lexical_rank(conn, terms, episode_ids, scope, limit)

    def dense_search(
        self, vector: np.ndarray, scope: Scope, filters: Filters, limit: int
    ) -> list[Candidate]:
        """Episodes by cosine similarity, exact for small scopes and HNSW for large ones.

        See ``search.dense_search``.
        """
        with self._transaction() as conn:
            return search.dense_search(conn, vector, scope, filters, limit)

    def dense_search_sessions(
        self,
        vector: np.ndarray,
        scope: Scope,
        session_ids: Sequence[str],
        filters: Filters,
        limit: int,
    ) -> dict[str, list[Candidate]]:
        found: dict[str, list[Candidate]] = {}
        with self._transaction() as conn:
            for session_id in dict.fromkeys(session_ids):
                if scope.session_id not in (None, session_id):
                    found[session_id] = []
                    continue
                narrowed = Scope(scope.user_id, scope.agent_id, session_id)
                found[session_id] = search.dense_search(conn, vector, narrowed, filters, limit)
        return found

    def time_search(
        self,
        vector: np.ndarray,
        ranges: Sequence[TimeRange],
        scope: Scope,
        filters: Filters,
        limit: int,
    ) -> list[Candidate]:
        """Episodes dated in, or mentioning a time overlapping, one of ``ranges``, by cosine.

        See ``search.time_search``.
        """
        with self._transaction() as conn:
            return search.time_search(conn, vector, ranges, scope, filters, limit)

    def episode_times(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, EpisodeTimes]:
        if not episode_ids:
            return {}
        where, params = scope_sql(scope)
        with self._transaction() as conn:
            rows = conn.execute(
                f"""SELECT e.id, e.event_time, t.start_time, t.end_time, t.granularity,
                           t.expression
                    FROM episodes e LEFT JOIN episode_times t ON t.episode_id = e.id
                    WHERE e.id = ANY(%s) AND {where} ORDER BY e.id, t.position""",
                [list(episode_ids), *params],
            ).fetchall()
        return times_by_episode(rows, lambda moment: moment)

    def scope_pages(self, scope: Scope, size: int) -> Iterator[list[Episode]]:
        where, params = scope_sql(scope)
        last = 0
        while True:
            with self._transaction() as conn:
                rows = conn.execute(
                    f"SELECT e.rowid, {EPISODE_COLUMNS} FROM episodes e "
                    f"WHERE {where} AND e.rowid > %s ORDER BY e.rowid LIMIT %s",
                    [*params, last, size],
                ).fetchall()
            if not rows:
                return
            yield [episode(row[1:]) for row in rows]
            last = rows[-1][0]

    def iter_episodes(self, batch_size: int = 1000) -> Iterator[tuple[Episode, np.ndarray | None]]:
        last = 0
        while True:
            with self._transaction() as conn:
                rows = conn.execute(
                    f"""SELECT e.rowid, e.embedding, {EPISODE_COLUMNS} FROM episodes e
                        WHERE e.rowid > %s ORDER BY e.rowid LIMIT %s""",
                    (last, batch_size),
                    binary=True,
                ).fetchall()
            if not rows:
                return
            for row in rows:
                yield episode(row[2:]), row[1]
            last = rows[-1][0]

    def iter_sessions(self) -> Iterator[Session]:
        with self._transaction() as conn:
            rows = conn.execute(
                """SELECT user_id, id, agent_id, started_at, metadata FROM sessions
                   ORDER BY user_id COLLATE "C", id COLLATE "C" """
            ).fetchall()
        for user_id, session_id, agent_id, started_at, metadata in rows:
            yield Session(
                id=session_id,
                user_id=user_id,
                agent_id=agent_id,
                started_at=started_at,
                metadata=metadata,
            )

    @staticmethod
    def _pending_sql(scope: Scope | None) -> tuple[str, list[Any]]:
        """A statement counting the episodes of ``scope`` that wait for their vector,
        found through the marks' user index."""
        if scope is None:
            return "SELECT count(*) FROM pending_vectors", []
        where, params = scope_sql(scope, "w")
        return (
            f"""SELECT count(*) FROM pending_vectors p JOIN episodes w
                ON w.rowid = p.episode_rowid WHERE p.user_id = %s AND {where}""",
            [scope.user_id, *params],
        )

    def stats(self, scope: Scope | None) -> dict[str, Any]:
        params: list[Any]
        if scope is None:
            where, params = "TRUE", []
            # No index leads with event_time: one scan counts and finds both ends.
            ends, ends_params = "min(e.event_time), max(e.event_time)", []
        else:
            where, params = scope_sql(scope)
            # Each end is one seek in the scope's (user_id, event_time) index, which the
            # planner makes only of a query holding nothing but that min or max.
            bound = scope_sql(scope, "b")[0]
            ends = (
                f"(SELECT min(b.event_time) FROM episodes b WHERE {bound}), "
                f"(SELECT max(b.event_time) FROM episodes b WHERE {bound})"
            )
            ends_params = [*params, *params]
        waiting, waiting_params = self._pending_sql(scope)
        with self._transaction() as conn:
            # Each statement reads only the columns of one index on (user_id, ...): a
            # statement reading them all, the vector among them, sorted whole rows.
            episodes, first, last, pending = conn.execute(
                f"SELECT count(*), {ends}, ({waiting}) FROM episodes e WHERE {where}",
                [*ends_params, *waiting_params, *params],
            ).fetchone()  # type: ignore[misc]
            users, sessions = conn.execute(
                f"""SELECT count(DISTINCT s.user_id), count(*) FROM (
                        SELECT DISTINCT e.user_id, COALESCE(e.session_id, '') AS session_id
                        FROM episodes e WHERE {where}) AS s""",
                params,
            ).fetchone()  # type: ignore[misc]
            # Every episode has one vector or one mark saying it waits for it, never both
            # (``check`` verifies it): the vectors are counted without reading them, from
            # the scope's episodes, counted in one statement with its marks.
            vectors = episodes - pending
            versions = conn.execute(
                f"SELECT count(*) FROM episode_versions v JOIN episodes e ON e.id = v.episode_id "
                f"WHERE {where}",
                params,
            ).fetchone()[0]  # type: ignore[index]
            fact_where, fact_params = (
                ("TRUE", []) if scope is None else scope_sql(fact_scope(scope), "f")
            )
            facts, current = conn.execute(
                f"SELECT count(*), count(*) FILTER (WHERE f.superseded_at IS NULL) FROM facts f "
                f"WHERE {fact_where}",
                fact_params,
            ).fetchone()  # type: ignore[misc]
            whole_store = {}
            if scope is None:
                whole_store["url"] = redact_url(self.url)
                whole_store["table_bytes"] = conn.execute(
                    "SELECT pg_total_relation_size('episodes')"
                    " + pg_total_relation_size('sessions')"
                    " + pg_total_relation_size('episode_versions')"
                    " + pg_total_relation_size('facts') + pg_total_relation_size('text_lexemes')"
                ).fetchone()[0]  # type: ignore[index]
        return {
            "backend": self.backend,
            **whole_store,
            "episodes": episodes,
            "users": users,
            "sessions": sessions,
            "vectors": vectors,
            "versions": versions,
            "facts": facts,
            "current_facts": current,
            "first_event": first.isoformat() if first is not None else None,
            "last_event": last.isoformat() if last is not None else None,
        }
