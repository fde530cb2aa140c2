"""The fact methods of the SQLite store: FTS5 over fact text, numpy over fact vectors.

Shared statements live in ``shared.facts``; this module adds what is SQLite's own and
is mixed into ``SQLiteStore``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

import numpy as np

from ...errors import StoreError
from ...types import Fact, Scope
from ..base import DerivedRow, FactChanges, fact_scope, fact_visibility
from ..shared.derived import DerivedReads, DerivedSQL
from ..shared.facts import FACT_COLUMNS, Dialect, FactReads, FactSQL
from .driver import sqlite3
from .sql import (
    EPISODE_COLUMNS,
    episode_from_row,
    filters_sql,
    from_epoch,
    fts_query,
    scope_sql,
    scope_terms,
    to_epoch,
)

SQLITE_DIALECT = Dialect(
    mark="?",
    time_in=to_epoch,
    time_out=from_epoch,
    json_in=lambda value: json.dumps(value, ensure_ascii=False),
    json_out=json.loads,
    vector_in=lambda vector: np.asarray(vector, dtype=np.float32).tobytes(),
    extra_columns=lambda fact: {"scope_terms": scope_terms(fact.user_id, fact.agent_id, None)},
    filters_sql=filters_sql,
    episode_columns=EPISODE_COLUMNS,
    episode_from_row=episode_from_row,
    key_prefix="+",
)


class SQLiteFacts(FactReads, DerivedReads):
    """Fact and derived-item storage for ``SQLiteStore`` (uses its connection, lock and
    transactions)."""

    _conn: sqlite3.Connection
    _facts = FactSQL(SQLITE_DIALECT)
    _derived = DerivedSQL(SQLITE_DIALECT)

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:  # pragma: no cover
        raise NotImplementedError

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:  # pragma: no cover
        raise NotImplementedError

    _lock: Any

    @contextmanager
    def _fact_snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several statements see one consistent state."""
        with self._lock:
            try:
                self._conn.execute("BEGIN")
            except sqlite3.OperationalError as exc:
                raise StoreError(f"cannot read facts: {exc}") from exc
            try:
                yield self._conn
            except sqlite3.OperationalError as exc:
                raise StoreError(f"fact query failed: {exc}") from exc
            finally:
                self._conn.execute("COMMIT")

    def write_facts(self, changes: FactChanges, scope: Scope) -> None:
        if changes.is_empty():
            return
        with self._write() as conn:
            self._facts.write(conn, changes, scope)

    def write_derived(
        self,
        scope: Scope,
        items: Sequence[DerivedRow],
        vectors: Sequence[np.ndarray],
        drop: Sequence[str] = (),
    ) -> None:
        if not items and not drop:
            return
        with self._write() as conn:
            self._derived.write(conn, scope, items, vectors, drop)

    def lexical_fact_search(
        self, terms: Sequence[str], scope: Scope, as_of: datetime | None, limit: int
    ) -> list[tuple[str, float]]:
        if not terms:
            return []
        home = fact_scope(scope)
        where, params = scope_sql(home, "f", by_key=True)
        visible, visible_params = fact_visibility("f", "?", as_of, False, to_epoch)
        rows = self._read(
            f"""SELECT f.id, bm25(facts_fts, 1.0, 0.0) AS rank FROM facts_fts
                JOIN facts f ON f.rowid = facts_fts.rowid
                WHERE facts_fts MATCH ? AND {where} AND {visible}
                ORDER BY rank LIMIT ?""",
            [
                fts_query(terms, home, column="text"),
                *params,
                *visible_params,
                limit,
            ],
        )
        return [(r[0], -float(r[1])) for r in rows]

    def dense_fact_search(
        self, vector: np.ndarray, scope: Scope, as_of: datetime | None, limit: int
    ) -> list[tuple[str, float]]:
        where, params = scope_sql(fact_scope(scope), "f")
        visible, visible_params = fact_visibility("f", "?", as_of, False, to_epoch)
        rows = self._read(
            f"SELECT f.id, f.embedding FROM facts f WHERE {where} AND {visible} "
            "AND f.embedding IS NOT NULL",
            [*params, *visible_params],
        )
        if not rows:
            return []
        matrix = np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows])
        scores = matrix @ np.asarray(vector, dtype=np.float32)
        order = np.argsort(-scores, kind="stable")[:limit]
        return [(rows[i][0], float(scores[i])) for i in order]

    def iter_facts(self) -> Iterator[tuple[Fact, np.ndarray | None]]:
        last = 0
        while True:
            with self._fact_snapshot() as conn:
                rows = conn.execute(
                    f"""SELECT f.rowid, f.embedding, {FACT_COLUMNS} FROM facts f
                        WHERE f.rowid > ? ORDER BY f.rowid LIMIT 1000""",
                    (last,),
                ).fetchall()
                facts = self._facts.with_provenance(conn, [r[2:] for r in rows])
            if not rows:
                return
            for row, fact in zip(rows, facts, strict=True):
                vector = None if row[1] is None else np.frombuffer(row[1], dtype=np.float32)
                yield fact, vector
            last = rows[-1][0]

    def iter_consolidated(self) -> Iterator[tuple[str, str, datetime]]:
        for user_id, episode_id, at in self._read(
            "SELECT user_id, episode_id, consolidated_at FROM consolidated_episodes "
            "ORDER BY user_id, episode_id"
        ):
            yield user_id, episode_id, from_epoch(at)

    def replace_fact_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        with self._write() as conn:
            conn.executemany(
                "UPDATE facts SET embedding = ? WHERE id = ?",
                [(np.asarray(v, dtype=np.float32).tobytes(), i) for i, v in vectors.items()],
            )
