"""Fact storage in SQL, shared by the SQLite and PostgreSQL stores.

The two backends keep facts in the same logical tables (``facts``, ``fact_sources``,
``consolidated_episodes``; see the migrations) and differ only in parameter marks,
how times, JSON and vectors travel, and their text and vector search, which each
store implements itself. ``FactSQL`` holds everything else: writing a consolidation
step, reading facts by slot and time, provenance, and the deletes that keep facts
complete (a fact goes when the last episode it came from goes, and the supersession
chain it sat in is re-linked around it).

Every statement carries the caller's scope in its WHERE clause.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from ...errors import InvalidInputError
from ...types import DeleteCounts, Episode, Fact, Scope
from ..base import FactChanges, FactQuery, Filters, fact_scope, fact_visibility, scope_clauses

FACT_COLUMNS = (
    "f.id, f.user_id, f.agent_id, f.subject, f.predicate, f.object, f.text, f.valid_from, "
    "f.valid_to, f.recorded_at, f.retracted_at, f.supersedes, f.superseded_by, "
    "f.superseded_at, f.confidence, f.extractor, f.metadata"
)

Conn = Any  # a sqlite3.Connection or a psycopg.Connection: both have execute()


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one backend spells parameters and converts values."""

    mark: str
    time_in: Callable[[datetime], Any]
    time_out: Callable[[Any], datetime]
    json_in: Callable[[dict[str, Any]], Any]
    json_out: Callable[[Any], dict[str, Any]]
    vector_in: Callable[[np.ndarray], Any]
    #: Extra columns written with each fact (SQLite: its FTS scope tokens).
    extra_columns: Callable[[Fact], dict[str, Any]]
    #: The filters WHERE fragment over ``episodes e``.
    filters_sql: Callable[[Filters], tuple[str, list[Any]]]
    episode_columns: str
    episode_from_row: Callable[[Sequence[Any]], Episode]
    #: SQLite's ``+col`` keeps its planner on the key for id lookups.
    key_prefix: str = ""

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column IN (...)`` for a list of values."""
        if self.mark == "%s":
            return f"{column} = ANY(%s)", [list(values)]
        if not values:
            return "0", []
        return f"{column} IN ({','.join('?' * len(values))})", list(values)


class FactSQL:
    """The backend-independent fact statements, for one dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self.d = dialect

    def _time(self, value: datetime | None) -> Any:
        return None if value is None else self.d.time_in(value)

    def _scope(self, scope: Scope, alias: str = "f", by_key: bool = False) -> tuple[str, list]:
        return scope_clauses(
            fact_scope(scope), alias, self.d.mark, prefix=self.d.key_prefix if by_key else ""
        )

    # -- writes -------------------------------------------------------------------------
    def write(self, conn: Conn, changes: FactChanges, scope: Scope) -> None:
        """Apply one consolidation step (the caller holds the transaction)."""
        p = self.d.mark
        home = fact_scope(scope)
        if len(changes.vectors) != len(changes.added):
            raise ValueError("one vector per added fact is required")
        for fact, vector in zip(changes.added, changes.vectors, strict=True):
            if (fact.user_id, fact.agent_id) != (home.user_id, home.agent_id):
                raise InvalidInputError(f"fact {fact.id} is outside the scope it is written in")
            columns = {
                "id": fact.id,
                "user_id": fact.user_id,
                "agent_id": fact.agent_id,
                "subject": fact.subject,
                "predicate": fact.predicate,
                "object": fact.object,
                "text": fact.text,
                "valid_from": self._time(fact.valid_from),
                "valid_to": self._time(fact.valid_to),
                "recorded_at": self.d.time_in(fact.recorded_at),
                "retracted_at": self._time(fact.retracted_at),
                "supersedes": fact.supersedes,
                "superseded_by": fact.superseded_by,
                "superseded_at": self._time(fact.superseded_at),
                "confidence": float(fact.confidence),
                "extractor": fact.extractor,
                "metadata": self.d.json_in(fact.metadata),
                "embedding": self.d.vector_in(vector),
                **self.d.extra_columns(fact),
            }
            conn.execute(
                f"INSERT INTO facts ({', '.join(columns)}) "
                f"VALUES ({', '.join([p] * len(columns))})",
                list(columns.values()),
            )
            for episode_id in fact.provenance:
                conn.execute(
                    f"INSERT INTO fact_sources (fact_id, episode_id) VALUES ({p}, {p}) "
                    "ON CONFLICT DO NOTHING",
                    [fact.id, episode_id],
                )
        where, params = self._scope(scope, by_key=True)
        for step in changes.supersessions:
            valid_to = self._time(step.valid_to)
            ended = conn.execute(
                f"""UPDATE facts AS f SET superseded_by = {p}, superseded_at = {p},
                      valid_to = CASE WHEN f.valid_to IS NULL OR f.valid_to > {p}
                                      THEN {p} ELSE f.valid_to END
                    WHERE f.id = {p} AND {where}""",
                [
                    step.new_id,
                    self.d.time_in(step.superseded_at),
                    valid_to,
                    valid_to,
                    step.old_id,
                    *params,
                ],
            )
            if ended.rowcount == 0 or step.new_id is None:
                continue  # not in this scope, or ended with no successor: link nothing
            conn.execute(
                f"UPDATE facts AS f SET supersedes = {p} WHERE f.id = {p} AND {where}",
                [step.old_id, step.new_id, *params],
            )
        for fact_id, episode_id in changes.sources:
            conn.execute(
                f"""INSERT INTO fact_sources (fact_id, episode_id)
                    SELECT f.id, {p} FROM facts f WHERE f.id = {p} AND {where}
                    ON CONFLICT DO NOTHING""",
                [episode_id, fact_id, *params],
            )
        for fact_id, at in changes.retractions:
            conn.execute(
                f"UPDATE facts AS f SET retracted_at = {p} "
                f"WHERE f.id = {p} AND f.retracted_at IS NULL AND {where}",
                [self.d.time_in(at), fact_id, *params],
            )
        if changes.consolidated:
            at = self.d.time_in(changes.consolidated_at or datetime.now().astimezone())
            episode_where, episode_params = scope_clauses(scope, "e", p, prefix=self.d.key_prefix)
            for start in range(0, len(changes.consolidated), 500):
                chunk = changes.consolidated[start : start + 500]
                ids_sql, ids_params = self.d.in_list("e.id", chunk)
                conn.execute(
                    f"""INSERT INTO consolidated_episodes (episode_id, user_id, consolidated_at)
                        SELECT e.id, e.user_id, {p} FROM episodes e
                        WHERE {ids_sql} AND {episode_where}
                        ON CONFLICT (episode_id) DO UPDATE
                        SET consolidated_at = excluded.consolidated_at""",
                    [at, *ids_params, *episode_params],
                )

    # -- reads --------------------------------------------------------------------------
    def find(self, conn: Conn, scope: Scope, query: FactQuery) -> list[Fact]:
        """Facts matching ``query``: per slot, the newest ``valid_from`` first."""
        where, params = self._scope(scope)
        visible, visible_params = fact_visibility(
            "f", self.d.mark, query.as_of, not query.include_superseded, self.d.time_in
        )
        clauses, extra = [where, visible], [*params, *visible_params]
        if query.subjects:
            sql, values = self.d.in_list("f.subject", query.subjects)
            clauses.append(sql)
            extra += values
        if query.predicate is not None:
            clauses.append(f"f.predicate = {self.d.mark}")
            extra.append(query.predicate)
        if query.ids is not None:
            if not query.ids:
                return []
            sql, values = self.d.in_list("f.id", query.ids)
            clauses.append(sql)
            extra += values
        rows = conn.execute(
            f"""SELECT {FACT_COLUMNS} FROM facts f WHERE {" AND ".join(clauses)}
                ORDER BY f.subject, f.predicate, f.valid_from DESC NULLS LAST,
                         f.recorded_at DESC, f.rowid DESC
                LIMIT {self.d.mark}""",
            [*extra, query.limit],
        ).fetchall()
        return self.with_provenance(conn, rows)

    def with_provenance(self, conn: Conn, rows: Sequence[Sequence[Any]]) -> list[Fact]:
        """Facts from ``FACT_COLUMNS`` rows, each with its source episodes (oldest first)."""
        if not rows:
            return []
        sources: dict[str, list[str]] = {}
        ids = [r[0] for r in rows]
        for start in range(0, len(ids), 500):
            sql, values = self.d.in_list("s.fact_id", ids[start : start + 500])
            for fact_id, episode_id in conn.execute(
                f"""SELECT s.fact_id, s.episode_id FROM fact_sources s
                    LEFT JOIN episodes e ON e.id = s.episode_id
                    WHERE {sql} ORDER BY e.event_time, s.episode_id""",
                values,
            ).fetchall():
                sources.setdefault(fact_id, []).append(episode_id)
        return [self.fact(row, sources.get(row[0], ())) for row in rows]

    def fact(self, row: Sequence[Any], provenance: Sequence[str]) -> Fact:
        """A Fact from a ``FACT_COLUMNS`` row."""
        t = self.d.time_out
        return Fact(
            id=row[0],
            user_id=row[1],
            agent_id=row[2],
            subject=row[3],
            predicate=row[4],
            object=row[5],
            text=row[6],
            valid_from=None if row[7] is None else t(row[7]),
            valid_to=None if row[8] is None else t(row[8]),
            recorded_at=t(row[9]),
            retracted_at=None if row[10] is None else t(row[10]),
            supersedes=row[11],
            superseded_by=row[12],
            superseded_at=None if row[13] is None else t(row[13]),
            confidence=float(row[14]),
            extractor=row[15],
            metadata=self.d.json_out(row[16]),
            provenance=tuple(provenance),
        )

    def fact_episodes(
        self, conn: Conn, fact_ids: Sequence[str], scope: Scope, filters: Filters
    ) -> dict[str, list[str]]:
        """Each fact's source episodes in ``scope`` that pass ``filters``, oldest first."""
        owners = ("fact_sources", "fact_id", "facts f", self._scope(scope))
        return source_episodes(conn, self.d, owners, fact_ids, scope, filters)

    def unconsolidated(
        self, conn: Conn, scope: Scope, limit: int, after: Episode | None = None
    ) -> list[Episode]:
        """Episodes of ``scope`` no consolidation has read, in event-time order (only
        those after ``after`` in that order, when given)."""
        p = self.d.mark
        where, params = scope_clauses(scope, "e", p)
        if after is not None:
            # From the cursor on, not from the scope's first episode: a consolidation
            # reads batch after batch, and each would skip every batch before it.
            where += (
                f" AND (e.event_time, e.rowid) >"
                f" ({p}, (SELECT a.rowid FROM episodes a WHERE a.id = {p}))"
            )
            params += [self.d.time_in(after.event_time), after.id]
        rows = conn.execute(
            f"""SELECT {self.d.episode_columns} FROM episodes e
                WHERE {where} AND NOT EXISTS
                  (SELECT 1 FROM consolidated_episodes c WHERE c.episode_id = e.id)
                ORDER BY e.event_time, e.rowid LIMIT {p}""",
            [*params, limit],
        ).fetchall()
        return [self.d.episode_from_row(r) for r in rows]

    def unconsolidated_scopes(self, conn: Conn) -> list[Scope]:
        """The fact scopes (user, agent) holding episodes no consolidation has read."""
        rows = conn.execute(
            """SELECT DISTINCT e.user_id, e.agent_id FROM episodes e WHERE NOT EXISTS
                 (SELECT 1 FROM consolidated_episodes c WHERE c.episode_id = e.id)"""
        ).fetchall()
        return sorted((Scope(user, agent, None) for user, agent in rows), key=repr)

    # -- deletes ------------------------------------------------------------------------
    def forget_episodes(
        self, conn: Conn, where: str, params: list[Any], table: str = "episodes"
    ) -> DeleteCounts:
        """Before episodes ``e`` of ``table`` (hot or archived) matching ``where`` are
        deleted: drop them as sources and as consolidated, and delete the facts that had
        no other source. Returns the rows removed (facts, sources, consolidated marks)."""
        subquery = f"SELECT e.id FROM {table} e WHERE {where}"
        affected = [
            r[0]
            for r in conn.execute(
                f"SELECT DISTINCT s.fact_id FROM fact_sources s WHERE s.episode_id IN ({subquery})",
                params,
            ).fetchall()
        ]
        sources = conn.execute(
            f"DELETE FROM fact_sources WHERE episode_id IN ({subquery})", params
        ).rowcount
        consolidated = conn.execute(
            f"DELETE FROM consolidated_episodes WHERE episode_id IN ({subquery})", params
        ).rowcount
        counts = DeleteCounts(sources=sources, consolidated=consolidated)
        if not affected:
            return counts
        orphans: list[str] = []
        for start in range(0, len(affected), 500):
            sql, values = self.d.in_list("f.id", affected[start : start + 500])
            orphans += [
                r[0]
                for r in conn.execute(
                    f"""SELECT f.id FROM facts f WHERE {sql} AND NOT EXISTS
                          (SELECT 1 FROM fact_sources s WHERE s.fact_id = f.id)""",
                    values,
                ).fetchall()
            ]
        return counts + DeleteCounts(facts=self.delete_facts(conn, orphans))

    def delete_scope_facts(self, conn: Conn, scope: Scope) -> DeleteCounts:
        """Delete every fact of ``scope``'s user/agent (with its sources)."""
        where, params = self._scope(scope)
        ids = [r[0] for r in conn.execute(f"SELECT f.id FROM facts f WHERE {where}", params)]
        sources = 0
        for start in range(0, len(ids), 500):
            sql, values = self.d.in_list("fact_id", ids[start : start + 500])
            sources += conn.execute(f"DELETE FROM fact_sources WHERE {sql}", values).rowcount
        facts = conn.execute(f"DELETE FROM facts AS f WHERE {where}", params).rowcount
        return DeleteCounts(facts=facts, sources=sources)

    def delete_facts(self, conn: Conn, fact_ids: Sequence[str]) -> int:
        """Delete facts, re-linking each supersession chain around the removed link.

        When B is removed from A <- B <- C, C supersedes A. When B was the newest, A
        becomes current again: its end came only from B.
        """
        p = self.d.mark
        deleted = 0
        for fact_id in fact_ids:
            row = conn.execute(
                f"SELECT f.supersedes, f.superseded_by FROM facts f WHERE f.id = {p}", [fact_id]
            ).fetchone()
            if row is None:
                continue
            older, newer = row
            if newer is not None:
                newer_start = conn.execute(
                    f"SELECT f.valid_from FROM facts f WHERE f.id = {p}", [newer]
                ).fetchone()
                conn.execute(
                    f"UPDATE facts SET superseded_by = {p}, valid_to = {p} "
                    f"WHERE superseded_by = {p}",
                    [newer, newer_start[0] if newer_start else None, fact_id],
                )
            else:
                conn.execute(
                    "UPDATE facts SET superseded_by = NULL, superseded_at = NULL, "
                    f"valid_to = NULL WHERE superseded_by = {p}",
                    [fact_id],
                )
            conn.execute(
                f"UPDATE facts SET supersedes = {p} WHERE supersedes = {p}", [older, fact_id]
            )
            conn.execute(f"DELETE FROM fact_sources WHERE fact_id = {p}", [fact_id])
            deleted += conn.execute(f"DELETE FROM facts WHERE id = {p}", [fact_id]).rowcount
        return deleted

    # -- export and re-indexing ---------------------------------------------------------
    def existing_ids(self, conn: Conn, fact_ids: Sequence[str]) -> set[str]:
        """Which fact ids are stored (any scope)."""
        found: set[str] = set()
        for start in range(0, len(fact_ids), 500):
            sql, values = self.d.in_list("f.id", fact_ids[start : start + 500])
            found.update(
                r[0] for r in conn.execute(f"SELECT f.id FROM facts f WHERE {sql}", values)
            )
        return found


class FactReads:
    """The fact reads both stores answer alike: one ``FactSQL`` call inside the store's
    read transaction (``_fact_snapshot``). Mixed into ``SQLiteFacts`` and ``PostgresFacts``."""

    _facts: FactSQL

    def _fact_snapshot(self) -> AbstractContextManager[Conn]:  # pragma: no cover
        raise NotImplementedError

    def find_facts(self, scope: Scope, query: FactQuery) -> list[Fact]:
        with self._fact_snapshot() as conn:
            return self._facts.find(conn, scope, query)

    def fact_episodes(
        self, fact_ids: Sequence[str], scope: Scope, filters: Filters
    ) -> dict[str, list[str]]:
        with self._fact_snapshot() as conn:
            return self._facts.fact_episodes(conn, fact_ids, scope, filters)

    def unconsolidated_episodes(
        self, scope: Scope, limit: int, after: Episode | None = None
    ) -> list[Episode]:
        with self._fact_snapshot() as conn:
            return self._facts.unconsolidated(conn, scope, limit, after)

    def unconsolidated_scopes(self) -> list[Scope]:
        with self._fact_snapshot() as conn:
            return self._facts.unconsolidated_scopes(conn)

    def existing_fact_ids(self, fact_ids: Sequence[str]) -> set[str]:
        with self._fact_snapshot() as conn:
            return self._facts.existing_ids(conn, list(fact_ids))


#: Where an owner's sources live: the sources table (alias ``s``), its owner-id column,
#: the owners' table with its alias, and the SQL (with parameters) that scopes owners.
Owners = tuple[str, str, str, tuple[str, list[Any]]]


def source_episodes(
    conn: Conn,
    d: Dialect,
    owners: Owners,
    ids: Sequence[str],
    scope: Scope,
    filters: Filters,
) -> dict[str, list[str]]:
    """Each owner's (a fact's, a derived item's) source episodes in ``scope`` that pass
    ``filters``, oldest first: one statement, scope enforced on owners and episodes.

    The episodes are joined last (``CROSS JOIN``: SQLite keeps that order), each by
    its id: without statistics SQLite would otherwise walk every episode of the scope
    in the filters' time range and look its sources up."""
    if not ids:
        return {}
    sources, key, owner_table, (owner_where, owner_params) = owners
    alias = owner_table.split()[-1]
    where, params = scope_clauses(scope, "e", d.mark)
    extra, extra_params = d.filters_sql(filters)
    ids_sql, ids_params = d.in_list(f"s.{key}", ids)
    out: dict[str, list[str]] = {}
    for owner_id, episode_id in conn.execute(
        f"""SELECT s.{key}, e.id FROM {sources} s
            JOIN {owner_table} ON {alias}.id = s.{key}
            CROSS JOIN episodes e
            WHERE e.id = s.episode_id AND {ids_sql} AND {owner_where} AND {where} AND {extra}
            ORDER BY e.event_time, e.id""",
        [*ids_params, *owner_params, *params, *extra_params],
    ).fetchall():
        out.setdefault(owner_id, []).append(episode_id)
    return out
