"""The two candidate channels of the PostgreSQL store: BM25 over tsvector, and pgvector.

Each function runs inside a transaction the store has opened and returns the ranked
candidates; ``PostgresStore.lexical_search`` and ``dense_search`` are thin wrappers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from ...types import Scope
from ..base import TURN_COLUMNS, Candidate, Filters
from ..episode_times import TimeRange
from .lexical import BOUND_MARGIN, QueryWeights, any_lexeme, at_least, bm25_query, query_weights
from .sql import MAX_QUERY_TERMS, filters_sql, prepare, scope_sql, tsquery_sql

#: Lexical search scores every match in one pass when the query's lexemes occur in at
#: most this many episodes in all (every tenant); above, it prunes (see lexical_search).
PRUNE_MIN_POSTINGS = 20_000
#: Nor when the scope's user holds fewer rows than this by the planner's statistics:
#: the matches are few enough that one pass scoring them all costs less than two.
PRUNE_MIN_SCOPE_ROWS = 50_000
#: The first pass of a pruned lexical search takes lexemes, rarest first, until they
#: occur in this many episodes in all: enough matches for a floor, few to score (fewer
#: rows in all with the per-lexeme bounds: study "PostgreSQL at 1M", second part).
FIRST_PASS_POSTINGS = 1_000
#: At most this many lexeme tests in the condition of a pruned pass (see
#: ``lexical.at_least``): a larger tree costs more to test per indexed episode.
CONDITION_BUDGET = 256
#: When at most this many rows are in scope (after filters), dense search scans them
#: exactly instead of walking the HNSW graph: exact recall, and fast enough at this
#: size (timings: study "Per dataset", "Figures from the code's comments").
EXACT_SCAN_MAX_ROWS = 20_000
#: hnsw.ef_search for approximate search (pgvector's default is 40); raised to the
#: requested limit when that is larger. Recall@10 against exact search within a large
#: tenant is measured by the benchmark (study "PostgreSQL at 1M"), and under filters
#: by the study "PostgreSQL: dense search under a filter".
HNSW_EF_SEARCH = 200
#: hnsw.max_scan_tuples: how far an iterative scan may walk to satisfy a filter before
#: giving up (pgvector's default). A scan that comes back short falls back to exact.
HNSW_MAX_SCAN_TUPLES = 20_000


def _candidates(rows: Sequence[tuple[Any, ...]]) -> list[Candidate]:
    """Candidates from ``(id, score, session_id, turn_index, speaker, role)`` rows."""
    return [Candidate(r[0], float(r[1]), (r[2], r[3], r[4], r[5])) for r in rows]


def _prepared(
    conn: psycopg.Connection[Any], terms: Sequence[str]
) -> tuple[QueryWeights, str, list[Any]] | None:
    """The query's lexeme weights, its tsquery and that query's parameters; None when
    it has no lexeme (no terms, or only stopwords and punctuation)."""
    if not terms:
        return None
    kept = terms[:MAX_QUERY_TERMS]
    weights = query_weights(conn, kept)
    if not weights.lexemes:
        return None
    query, params = tsquery_sql(kept)
    return weights, query, params


def lexical_search(
    conn: psycopg.Connection[Any],
    terms: Sequence[str],
    scope: Scope,
    filters: Filters,
    limit: int,
) -> list[Candidate]:
    """Episodes matching any term, ranked by Okapi BM25 as SQLite's FTS5 ranks, best first.

    The GIN index finds the episodes in scope that contain any of the terms; each
    is scored with FTS5's BM25 (k1=1.2, b=0.75, IDF floored at 1e-6) over the
    statistics of the whole table (every tenant, as FTS5 counts), so a rare term
    outweighs a common one and long episodes are normalised against the mean
    length. Scores are positive, larger is better, and equal SQLite's wherever the
    two stemmers agree; see ``postgres.lexical`` for what still differs (Snowball
    English stemming and stopwords instead of Porter).

    When the query's lexemes are common and the scope is large (``PRUNE_MIN_POSTINGS``,
    ``PRUNE_MIN_SCOPE_ROWS``), not every match is scored: a first pass
    scores the episodes holding the rarest lexemes, and its ``limit``-th score is a
    floor that the final top ``limit`` reaches. A lexeme adds at most
    ``QueryWeights.bound`` to any score, so an episode whose lexemes' bounds sum below
    that floor cannot enter the top. If every episode the first pass left out is such
    an episode, its result stands (MaxScore); otherwise the second pass scores only
    the episodes the first did not and that could reach the floor, found in the GIN
    index by a tsquery that tests for the combinations of lexemes whose bounds do
    (``lexical.at_least``), and the two passes' tops are merged. The result is the one
    scoring every match would give, ties included.
    """
    prepared = _prepared(conn, terms) if limit > 0 else None
    if prepared is None:
        return []
    weights, query, terms_params = prepared
    where, params = scope_sql(scope)
    extra, extra_params = filters_sql(filters)

    def top(condition: str | None) -> list[tuple[Any, ...]]:
        """The best ``limit`` matches, among those matching the tsquery ``condition``
        if given (which, without phrases, implies matching the query)."""
        match, match_params = f"e.content_tsv @@ {query}", list(terms_params)
        if condition is not None:
            match = "e.content_tsv @@ %s::tsquery"
            match_params = [condition]
            if weights.phrases:
                match += f" AND e.content_tsv @@ {query}"
                match_params += terms_params
        sql, sql_params = bm25_query(
            weights,
            f"{match} AND {where} AND {extra}",
            [*match_params, *params, *extra_params],
            limit,
        )
        return conn.execute(sql, sql_params, prepare=prepare(filters)).fetchall()

    if (
        len(weights.lexemes) == 1
        or sum(weights.documents) <= PRUNE_MIN_POSTINGS
        or _user_rows(conn, scope.user_id) < PRUNE_MIN_SCOPE_ROWS
    ):
        return _candidates(top(None))
    rarest = sorted(range(len(weights.lexemes)), key=lambda i: -weights.weights[i])
    first: list[int] = []
    for index in rarest[:-1]:
        first.append(index)
        if sum(weights.documents[i] for i in first) >= FIRST_PASS_POSTINGS:
            break
    scored = any_lexeme([weights.lexemes[i] for i in first])
    rows = top(scored)
    floor = float(rows[-1][1]) if len(rows) == limit and rows[-1][1] is not None else 0.0
    if not essential_lexemes(weights, floor) <= set(first):
        condition = at_least(weights, floor, CONDITION_BUDGET)
        # The episodes holding a first-pass lexeme were all scored: its top holds the
        # best of them, so the second pass leaves them out.
        every = any_lexeme(weights.lexemes)
        rows += top(f"({condition or every}) & !({scored})")
        rows.sort(key=lambda r: (r[1] is None, -(r[1] or 0.0), r[6]))
        del rows[limit:]
    return _candidates(rows)


def lexical_rank(
    conn: psycopg.Connection[Any],
    terms: Sequence[str],
    episode_ids: Sequence[str],
    scope: Scope,
    limit: int,
) -> list[Candidate]:
    """``lexical_search`` among ``episode_ids`` only: the same BM25, the rows found by
    their ids (the primary key), not through the terms' postings."""
    prepared = _prepared(conn, terms) if episode_ids and limit > 0 else None
    if prepared is None:
        return []
    weights, query, terms_params = prepared
    where, params = scope_sql(scope)
    sql, sql_params = bm25_query(
        weights,
        f"e.id = ANY(%s) AND e.content_tsv @@ {query} AND {where}",
        [list(dict.fromkeys(episode_ids)), *terms_params, *params],
        limit,
    )
    return _candidates(conn.execute(sql, sql_params).fetchall())


def _user_rows(conn: psycopg.Connection[Any], user_id: str) -> float:
    """The planner's estimate of the user's episodes (from ANALYZE's statistics: exact
    enough for a user among the most common values, small for any other)."""
    plan = conn.execute(
        "EXPLAIN (FORMAT JSON) SELECT 1 FROM episodes e WHERE e.user_id = %s", [user_id]
    ).fetchone()
    return float(plan[0][0]["Plan"]["Plan Rows"]) if plan else 0.0


def essential_lexemes(weights: QueryWeights, floor: float) -> set[int]:
    """The lexemes (indexes) of which an episode must hold one to score ``floor``.

    The weakest lexemes whose bounds sum below ``floor`` (less a margin for rounding)
    cannot reach it on their own; every other lexeme is essential.
    """
    total = 0.0
    needed = set(range(len(weights.lexemes)))
    for index in sorted(needed, key=weights.bound):
        total += weights.bound(index)
        if total >= floor * (1 - BOUND_MARGIN):
            break
        needed.discard(index)
    return needed


def dense_search(
    conn: psycopg.Connection[Any],
    vector: np.ndarray,
    scope: Scope,
    filters: Filters,
    limit: int,
) -> list[Candidate]:
    """Episodes by cosine similarity, exact for small scopes and HNSW for large ones.

    The rows in scope (after filters) are counted up to ``EXACT_SCAN_MAX_ROWS``. A
    scope that small is scored exactly: the covering scope index
    (``episodes_scope_vectors``) yields its rows with their vectors in one index-only
    scan and every vector is compared, so a selective scope never loses recall. A
    larger scope walks the HNSW index with pgvector's iterative scan
    (``hnsw.iterative_scan = relaxed_order``), which keeps walking the graph until
    ``limit`` rows pass the scope filter; the hits are re-sorted by exact distance.
    If the walk still comes back short (``hnsw.max_scan_tuples`` reached), the search
    falls back to exact.

    With filters, a count reads each row in the heap. When the planner estimates the
    scope within the bound, the rows are scored as they are counted, in one pass
    stopped past the bound (``_scan_within_bound``): within it, that is the result;
    beyond, the search walks as above. The estimate only chooses which pass comes
    first; the path is always chosen on the rows themselves.
    """
    if limit <= 0:
        return []
    query_vector = np.asarray(vector, dtype=np.float32)
    where, params = scope_sql(scope)
    extra, extra_params = filters_sql(filters)
    condition = f"{where} AND {extra} AND e.embedding IS NOT NULL"
    condition_params = [*params, *extra_params]
    if not filters.is_empty() and (
        _estimate(conn, f"{where} AND {extra}", condition_params) <= EXACT_SCAN_MAX_ROWS
    ):
        rows, in_scope = _scan_within_bound(
            conn, query_vector, condition, condition_params, filters, limit
        )
        if in_scope <= EXACT_SCAN_MAX_ROWS:
            return _candidates([(r[0], 1.0 - float(r[1]), *r[2:]) for r in rows])
    else:
        in_scope = conn.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM episodes e WHERE {where} AND {extra} "
            "LIMIT %s) AS bounded",
            [*condition_params, EXACT_SCAN_MAX_ROWS + 1],
            prepare=prepare(filters),
        ).fetchone()[0]  # type: ignore[index]
    if in_scope == 0:
        return []
    rows = []
    if in_scope > EXACT_SCAN_MAX_ROWS:
        conn.execute(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
            "set_config('hnsw.ef_search', %s, true), "
            "set_config('hnsw.max_scan_tuples', %s, true)",
            (str(max(HNSW_EF_SEARCH, limit)), str(HNSW_MAX_SCAN_TUPLES)),
        )
        # A plan that took a common metadata value for a rare one would sort every
        # row holding it instead of walking the graph (see ``sql.prepare``).
        rows = conn.execute(
            f"""WITH hits AS MATERIALIZED (
                    SELECT e.id, e.embedding <=> %s AS distance, {TURN_COLUMNS}
                    FROM episodes e WHERE {condition} ORDER BY distance LIMIT %s)
                SELECT * FROM hits ORDER BY distance""",
            [query_vector, *condition_params, limit],
            prepare=prepare(filters),
        ).fetchall()
    if len(rows) < min(limit, in_scope):
        # "+ 0" makes the ordering an expression the HNSW index cannot serve, so
        # the planner filters by scope and sorts every distance: an exact top-k.
        rows = conn.execute(
            f"""SELECT e.id, e.embedding <=> %s AS distance, {TURN_COLUMNS} FROM episodes e
                WHERE {condition} ORDER BY (e.embedding <=> %s) + 0, e.id LIMIT %s""",
            [query_vector, *condition_params, query_vector, limit],
            prepare=prepare(filters),
        ).fetchall()
    return _candidates([(r[0], 1.0 - float(r[1]), *r[2:]) for r in rows])


def _estimate(conn: psycopg.Connection[Any], where: str, params: list[Any]) -> float:
    """The planner's estimate of the rows of ``episodes e`` passing ``where``."""
    plan = conn.execute(
        f"EXPLAIN (FORMAT JSON) SELECT 1 FROM episodes e WHERE {where}", params, prepare=False
    ).fetchone()
    return float(plan[0][0]["Plan"]["Plan Rows"]) if plan else 0.0


def _scan_within_bound(
    conn: psycopg.Connection[Any],
    query_vector: np.ndarray,
    condition: str,
    params: list[Any],
    filters: Filters,
    limit: int,
) -> tuple[list[tuple[Any, ...]], int]:
    """The exact top ``limit`` of the first ``EXACT_SCAN_MAX_ROWS + 1`` rows passing
    ``condition``, and how many there were: when no more than the bound, that top is
    the exact result over every row in scope."""
    rows = conn.execute(
        f"""SELECT *, count(*) OVER () FROM (
                SELECT e.id, e.embedding <=> %s AS distance, {TURN_COLUMNS}
                FROM episodes e WHERE {condition} LIMIT %s) AS bounded
            ORDER BY distance, id LIMIT %s""",
        [query_vector, *params, EXACT_SCAN_MAX_ROWS + 1, limit],
        prepare=prepare(filters),
    ).fetchall()
    return [row[:-1] for row in rows], (rows[0][-1] if rows else 0)


def time_search(
    conn: psycopg.Connection[Any],
    vector: np.ndarray,
    ranges: Sequence[TimeRange],
    scope: Scope,
    filters: Filters,
    limit: int,
) -> list[Candidate]:
    """Episodes dated in, or mentioning a time overlapping, one of ``ranges``, by cosine.

    The rows in range are found through ``episodes_time`` (event time) and
    ``episode_times_range`` (mentions), then scored exactly: a range holds few rows
    compared with the scope.
    """
    if not ranges or limit <= 0:
        return []
    query_vector = np.asarray(vector, dtype=np.float32)
    where, params = scope_sql(scope)
    extra, extra_params = filters_sql(filters)
    own = " OR ".join("(e.event_time >= %s AND e.event_time < %s)" for _ in ranges)
    mentioned = " OR ".join("(t.start_time < %s AND t.end_time > %s)" for _ in ranges)
    own_params = [moment for r in ranges for moment in r]
    mentioned_params = [moment for start, end in ranges for moment in (end, start)]
    rows = conn.execute(
        f"""WITH in_range AS (
                SELECT e.id FROM episodes e WHERE {where} AND ({own})
                UNION
                SELECT t.episode_id FROM episode_times t
                WHERE t.user_id = %s AND ({mentioned}))
            SELECT e.id, e.embedding <=> %s AS distance, {TURN_COLUMNS}
            FROM in_range r JOIN episodes e ON e.id = r.id
            WHERE {where} AND {extra} AND e.embedding IS NOT NULL
            ORDER BY (e.embedding <=> %s) + 0, e.id LIMIT %s""",
        [
            *params,
            *own_params,
            scope.user_id,
            *mentioned_params,
            query_vector,
            *params,
            *extra_params,
            query_vector,
            limit,
        ],
        prepare=prepare(filters),
    ).fetchall()
    return _candidates([(r[0], 1.0 - float(r[1]), *r[2:]) for r in rows])
