"""The fact methods of the PostgreSQL store: tsvector/GIN and pgvector over fact text.

Shared statements live in ``shared.facts``; this module adds what is PostgreSQL's own
and is mixed into ``PostgresStore``. Lexical ranking over facts is ``ts_rank`` (not
the BM25 of the episode channel: facts are short, one clause each, so term frequency
and length normalisation matter little); dense search scans the scope's facts exactly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import numpy as np
import psycopg

from ...types import Fact, Scope
from ..base import DerivedRow, FactChanges, fact_scope, fact_visibility
from ..shared.derived import DerivedReads, DerivedSQL
from ..shared.facts import FACT_COLUMNS, Dialect, FactReads, FactSQL
from .sql import (
    EPISODE_COLUMNS,
    MAX_QUERY_TERMS,
    check_storable,
    episode,
    filters_sql,
    json_param,
    scope_sql,
    tsquery_sql,
)


def _identity(value: Any) -> Any:
    return value


POSTGRES_DIALECT = Dialect(
    mark="%s",
    time_in=_identity,
    time_out=_identity,
    json_in=lambda value: json_param(value, "fact metadata"),
    json_out=lambda value: value,
    vector_in=lambda vector: np.asarray(vector, dtype=np.float32),
    extra_columns=lambda fact: {},
    filters_sql=filters_sql,
    episode_columns=EPISODE_COLUMNS,
    episode_from_row=episode,
)


class PostgresFacts(FactReads, DerivedReads):
    """Fact and derived-item storage for ``PostgresStore`` (uses its pooled transactions)."""

    _facts = FactSQL(POSTGRES_DIALECT)
    _derived = DerivedSQL(POSTGRES_DIALECT)

    def _transaction(self) -> AbstractContextManager[psycopg.Connection[Any]]:  # pragma: no cover
        raise NotImplementedError

    def _fact_snapshot(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._transaction()

    def write_facts(self, changes: FactChanges, scope: Scope) -> None:
        if changes.is_empty():
            return
        for fact in changes.added:
            for value, what in ((fact.text, "fact text"), (fact.object, "fact object")):
                check_storable(value, what)
        with self._transaction() as conn:
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
        for item in items:
            check_storable(item.text, "derived item text")
        with self._transaction() as conn:
            self._derived.write(conn, scope, items, vectors, drop)

    def lexical_fact_search(
        self, terms: Sequence[str], scope: Scope, as_of: datetime | None, limit: int
    ) -> list[tuple[str, float]]:
        if not terms:
            return []
        query, query_params = tsquery_sql(list(terms)[:MAX_QUERY_TERMS])
        where, params = scope_sql(fact_scope(scope), "f")
        visible, visible_params = fact_visibility("f", "%s", as_of, False, _identity)
        with self._transaction() as conn:
            rows = conn.execute(
                f"""SELECT f.id, ts_rank(f.text_tsv, q.query) AS rank
                    FROM facts f, (SELECT {query} AS query) AS q
                    WHERE f.text_tsv @@ q.query AND {where} AND {visible}
                    ORDER BY rank DESC, f.rowid LIMIT %s""",
                [*query_params, *params, *visible_params, limit],
            ).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def dense_fact_search(
        self, vector: np.ndarray, scope: Scope, as_of: datetime | None, limit: int
    ) -> list[tuple[str, float]]:
        where, params = scope_sql(fact_scope(scope), "f")
        visible, visible_params = fact_visibility("f", "%s", as_of, False, _identity)
        query_vector = np.asarray(vector, dtype=np.float32)
        with self._transaction() as conn:
            rows = conn.execute(
                f"""SELECT f.id, f.embedding <=> %s AS distance FROM facts f
                    WHERE {where} AND {visible} AND f.embedding IS NOT NULL
                    ORDER BY distance, f.id LIMIT %s""",
                [query_vector, *params, *visible_params, limit],
            ).fetchall()
        return [(r[0], 1.0 - float(r[1])) for r in rows]

    def iter_facts(self) -> Iterator[tuple[Fact, np.ndarray | None]]:
        last = 0
        while True:
            with self._transaction() as conn:
                rows = conn.execute(
                    f"""SELECT f.rowid, f.embedding, {FACT_COLUMNS} FROM facts f
                        WHERE f.rowid > %s ORDER BY f.rowid LIMIT 1000""",
                    (last,),
                    binary=True,
                ).fetchall()
                facts = self._facts.with_provenance(conn, [r[2:] for r in rows])
            if not rows:
                return
            for row, fact in zip(rows, facts, strict=True):
                yield fact, row[1]
            last = rows[-1][0]

    def iter_consolidated(self) -> Iterator[tuple[str, str, datetime]]:
        with self._transaction() as conn:
            rows = conn.execute(
                """SELECT user_id, episode_id, consolidated_at FROM consolidated_episodes
                   ORDER BY user_id COLLATE "C", episode_id COLLATE "C" """
            ).fetchall()
        yield from ((r[0], r[1], r[2]) for r in rows)

    def replace_fact_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        if not vectors:
            return
        with self._transaction() as conn, conn.cursor() as cur:
            cur.executemany(
                "UPDATE facts SET embedding = %s WHERE id = %s",
                [(np.asarray(v, dtype=np.float32), i) for i, v in vectors.items()],
            )
