"""Okapi BM25 for the PostgreSQL store, computed as SQLite's FTS5 ``bm25()`` computes it.

PostgreSQL's own rankers (``ts_rank``, ``ts_rank_cd``) have no inverse document
frequency and no BM25 length normalisation, so the lexical channel would rank
differently on the two backends. Here the score is FTS5's, term for term
(``fts5Bm25GetData`` and ``fts5Bm25Function`` in SQLite's ``ext/fts5/fts5_aux.c``)::

    score(d) = sum over query terms t present in d of
               idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * len(d) / avglen))
    idf(t)   = max(ln((N - n(t) + 0.5) / (n(t) + 0.5)), 1e-6)

with N the number of episodes in the whole table (every tenant, as FTS5 counts its
rows), n(t) the number of episodes containing t, len(d) the tokens of the episode and
avglen their mean. FTS5 counts length over every column of its table, and the SQLite
store keeps one scope token per scope level in a second column, so len(d) here is
also the content's tokens plus one per scope level (user, agent, session) the episode
has.

The statistics live in two small tables kept in step by the store's own writes, in
the same transaction: ``text_corpus`` (one row: N and the total of len(d)) and
``text_lexemes`` (n(t) per lexeme, and two upper bounds that pruned search reads: the
largest tf(t, d) and the largest tf(t, d) / len(d) of any episode holding t; deletes
leave them as they are, so they may stay high, never low). Every write updates them
with one statement that takes its row locks in lexeme order, then the corpus row, so
concurrent writers wait for each other briefly but cannot deadlock. Rows written by
other means (plain SQL) are not counted until
``PostgresStore.rebuild_lexical_statistics()`` runs; until then, such a row whose tf or
tf / len(d) exceeds its lexeme's bound can be missed by a pruned search.

What still differs from SQLite: documents and queries are stemmed by PostgreSQL's
``english`` configuration (Snowball English, not Porter) and its stopwords are not
indexed; a query term that yields several lexemes counts as separate terms (FTS5:
one phrase); a lexeme's positions are capped at 256 per episode.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from ..base import TURN_COLUMNS
from ..index.lexical import BM25_B, BM25_K1, IDF_FLOOR

#: The text search configuration of the ``content_tsv`` column and of queries: Snowball
#: English stemming and English stopwords, the nearest built-in analogue of SQLite's
#: ``porter unicode61`` tokenizer.
TEXT_SEARCH_CONFIG = "english"


# A token as FTS5's unicode61 tokenizer sees one: a run of letters and digits.
_TOKEN = re.compile(r"[^\W_]+")


def token_count(text: str) -> int:
    """The number of tokens FTS5's unicode61 tokenizer finds in ``text``."""
    return sum(1 for _ in _TOKEN.finditer(text))


#: The scope tokens the SQLite store indexes with an ``episodes e`` row, which FTS5
#: counts in the row's length: one each for user, agent and session.
SCOPE_TOKENS = "(1 + (e.agent_id IS NOT NULL)::int + (e.session_id IS NOT NULL)::int)"
#: len(d) of an ``episodes e`` row. Rows written before schema version 2 have no
#: ``content_tokens``; for them the whitespace-separated words stand in.
DOCUMENT_LENGTH = (
    "(COALESCE(e.content_tokens, array_length(regexp_split_to_array(btrim(e.content), "
    f"'\\s+'), 1), 0) + {SCOPE_TOKENS})"
)


def migration() -> list[str]:
    """Statements that add the statistics tables and fill them from the stored episodes."""
    return [
        "ALTER TABLE episodes ADD COLUMN content_tokens integer",
        """CREATE TABLE text_corpus (
            singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            documents bigint NOT NULL,
            tokens    bigint NOT NULL
        )""",
        # Every write updates a few rows in place: leave room for HOT updates.
        """CREATE TABLE text_lexemes (
            lexeme    text COLLATE "C" PRIMARY KEY,
            documents bigint NOT NULL
        ) WITH (fillfactor = 70)""",
        f"""INSERT INTO text_corpus (documents, tokens)
            SELECT count(*), COALESCE(sum({DOCUMENT_LENGTH}), 0) FROM episodes e""",
        """INSERT INTO text_lexemes (lexeme, documents)
           SELECT lexeme, count(*) FROM episodes e,
                  unnest(tsvector_to_array(e.content_tsv)) AS lexeme
           GROUP BY lexeme""",
    ]


def bounds_migration() -> list[str]:
    """Statements that add the per-lexeme bounds of tf and tf / len(d) to the statistics
    and fill them from the stored episodes (one pass over every tsvector)."""
    return [
        "ALTER TABLE text_lexemes ADD COLUMN max_tf integer, ADD COLUMN max_density float8",
        f"""UPDATE text_lexemes t SET max_tf = s.max_tf, max_density = s.max_density
            FROM ({_BOUNDS_BY_LEXEME}) AS s WHERE t.lexeme = s.lexeme""",
    ]


#: Per lexeme of the stored episodes: n(t), the largest tf and the largest tf / len(d).
_BOUNDS_BY_LEXEME = f"""
    SELECT m.lexeme, count(*) AS documents, max(cardinality(m.positions)) AS max_tf,
           max(cardinality(m.positions)::float8 / greatest({DOCUMENT_LENGTH}, 1))
             AS max_density
    FROM episodes e, unnest(e.content_tsv) AS m GROUP BY m.lexeme"""


def _fill_statements() -> list[str]:
    return [
        f"""INSERT INTO text_corpus (documents, tokens)
            SELECT count(*), COALESCE(sum({DOCUMENT_LENGTH}), 0) FROM episodes e""",
        f"""INSERT INTO text_lexemes (lexeme, documents, max_tf, max_density)
            SELECT lexeme, documents, max_tf, max_density FROM ({_BOUNDS_BY_LEXEME}) AS s""",
    ]


def rebuild_statistics(conn: psycopg.Connection[Any]) -> None:
    """Recount the corpus statistics from the episodes (after writes made outside the store)."""
    conn.execute("LOCK TABLE text_corpus, text_lexemes IN EXCLUSIVE MODE")
    conn.execute("DELETE FROM text_corpus")
    conn.execute("DELETE FROM text_lexemes")
    for statement in _fill_statements():
        conn.execute(statement)


def count_episodes(
    conn: psycopg.Connection[Any], where: str, params: Sequence[Any], sign: int
) -> None:
    """Add (``sign`` = 1) or remove (-1) the episodes ``e`` matching ``where`` from the
    statistics. Call it after the rows are written, or before they are deleted."""
    source = f"SELECT e.content_tsv, {DOCUMENT_LENGTH}, {int(sign)} FROM episodes e WHERE {where}"
    count_documents(conn, source, list(params))


def uncount_episodes(conn: psycopg.Connection[Any], where: str, params: Sequence[Any]) -> None:
    """Remove the episodes ``e`` matching ``where`` from the statistics before they are
    deleted, and drop the lexemes no other episode holds: a forgotten word must not
    stay behind as a lexeme with a count of zero."""
    lexemes = [
        r[0]
        for r in conn.execute(
            f"""SELECT DISTINCT lexeme FROM episodes e,
                  unnest(tsvector_to_array(e.content_tsv)) AS lexeme
                WHERE {where} ORDER BY lexeme""",
            list(params),
        ).fetchall()
    ]
    count_episodes(conn, where, params, -1)
    # count_episodes locked these rows, in this order: no new lock is taken.
    conn.execute("DELETE FROM text_lexemes WHERE lexeme = ANY(%s) AND documents <= 0", [lexemes])


def count_replacement(conn: psycopg.Connection[Any], rowid: int, content: str) -> None:
    """Move episode ``rowid`` from its stored text to ``content`` in the statistics.

    Call it before the UPDATE, holding the row's lock: the old text leaves and the new
    one enters in one change, so the lexeme locks are still taken in order.
    """
    count_documents(
        conn,
        f"""SELECT e.content_tsv, {DOCUMENT_LENGTH}, -1 FROM episodes e WHERE e.rowid = %s
            UNION ALL
            SELECT to_tsvector('{TEXT_SEARCH_CONFIG}'::regconfig, %s), %s + {SCOPE_TOKENS}, 1
            FROM episodes e WHERE e.rowid = %s""",
        [rowid, content, token_count(content), rowid],
    )


def count_documents(conn: psycopg.Connection[Any], source: str, params: list[Any]) -> None:
    """Apply a change to the statistics.

    ``source`` is a SELECT of ``(tsvector, length, sign)`` rows: each adds (sign 1) or
    removes (sign -1) one document. Lexeme rows are locked in lexeme order, then the
    corpus row, the same order in every transaction. An added document raises its
    lexemes' bounds of tf and tf / len(d) where it exceeds them (also when its lexeme's
    count does not change, as when an update keeps a word but repeats it); a removed
    one leaves them.
    """
    documents = f"({source}) AS d(tsv, length, sign)"
    added = "FILTER (WHERE d.sign > 0)"
    conn.execute(
        f"""INSERT INTO text_lexemes AS t (lexeme, documents, max_tf, max_density)
            SELECT m.lexeme, sum(d.sign), max(cardinality(m.positions)) {added},
                   max(cardinality(m.positions)::float8 / greatest(d.length, 1)) {added}
            FROM {documents}, unnest(d.tsv) AS m
            GROUP BY m.lexeme HAVING sum(d.sign) <> 0 OR bool_or(d.sign > 0)
            ORDER BY m.lexeme
            ON CONFLICT (lexeme) DO UPDATE SET
              documents = t.documents + excluded.documents,
              max_tf = greatest(t.max_tf, excluded.max_tf),
              max_density = greatest(t.max_density, excluded.max_density)
            WHERE excluded.documents <> 0 OR t.max_tf IS NULL OR t.max_density IS NULL
              OR excluded.max_tf > t.max_tf OR excluded.max_density > t.max_density""",
        params,
    )
    conn.execute(
        f"""UPDATE text_corpus c SET documents = c.documents + s.documents,
                                    tokens = c.tokens + s.tokens
            FROM (SELECT sum(d.sign), sum(d.sign * d.length) FROM {documents}
                  HAVING count(*) > 0) AS s(documents, tokens)""",
        params,
    )


@dataclass(frozen=True, slots=True)
class QueryWeights:
    """What a query needs from the statistics: its lexemes and each one's weight."""

    #: The distinct lexemes of the query's terms, as the column's configuration stems them.
    lexemes: list[str]
    #: Per lexeme, idf times the number of query terms that yield it (FTS5 scores each
    #: term as its own phrase, so two terms with one stem count twice).
    weights: list[float]
    #: The mean episode length, len(d) averaged over the whole table.
    mean_length: float
    #: Per lexeme, n(t): the episodes of the whole table that contain it.
    documents: list[int] = field(default_factory=list)
    #: Whether some term yields several lexemes (a term matches only with all of them).
    phrases: bool = False
    #: Per lexeme, the largest tf and the largest tf / len(d) of any episode holding it
    #: (upper bounds kept by the store's writes), or None where unknown.
    max_tf: list[int | None] = field(default_factory=list)
    max_density: list[float | None] = field(default_factory=list)

    def bound(self, index: int) -> float:
        """At least what lexeme ``index`` can add to any episode's score.

        Its term in the sum is weight * (k1 + 1) / (1 + k1 * (1 - b) / tf
        + k1 * b * (len(d) / tf) / avglen): it grows with tf and falls with len(d) / tf,
        so the lexeme's largest tf and largest tf / len(d) bound it. Without them,
        weight * (k1 + 1) does, as tf / (tf + x) < 1 for every x > 0.
        """
        loose = self.weights[index] * (BM25_K1 + 1)
        tf = self.max_tf[index] if index < len(self.max_tf) else None
        density = self.max_density[index] if index < len(self.max_density) else None
        if tf is None or density is None or tf <= 0 or density <= 0:
            return loose
        return loose / (
            1 + BM25_K1 * (1 - BM25_B) / tf + BM25_K1 * BM25_B / (density * self.mean_length)
        )


def query_weights(conn: psycopg.Connection[Any], terms: Sequence[str]) -> QueryWeights:
    """The lexemes of ``terms`` with their BM25 weights, from the statistics tables."""
    rows = conn.execute(
        f"""SELECT q.lexeme,
                   count(*) * greatest(ln((max(c.documents) - COALESCE(max(t.documents), 0) + 0.5)
                                          / (COALESCE(max(t.documents), 0) + 0.5)), %s),
                   max(c.tokens)::float8 / greatest(max(c.documents), 1),
                   COALESCE(max(t.documents), 0),
                   bool_or(cardinality(v.lexemes) > 1), max(t.max_tf), max(t.max_density)
            FROM unnest(%s::text[]) AS terms(term)
            CROSS JOIN LATERAL (SELECT tsvector_to_array(
                to_tsvector('{TEXT_SEARCH_CONFIG}'::regconfig, terms.term))) AS v(lexemes)
            CROSS JOIN LATERAL unnest(v.lexemes) AS q(lexeme)
            CROSS JOIN text_corpus c
            LEFT JOIN text_lexemes t ON t.lexeme = q.lexeme
            GROUP BY q.lexeme ORDER BY q.lexeme""",
        [IDF_FLOOR, list(terms)],
    ).fetchall()
    return QueryWeights(
        lexemes=[r[0] for r in rows],
        weights=[float(r[1]) for r in rows],
        mean_length=float(rows[0][2]) if rows else 1.0,
        documents=[int(r[3]) for r in rows],
        phrases=any(r[4] for r in rows),
        max_tf=[r[5] for r in rows],
        max_density=[r[6] for r in rows],
    )


def any_lexeme(lexemes: Sequence[str]) -> str:
    """The text of a tsquery matching an episode holding any of ``lexemes`` as they are
    (already normalised: cast with ``::tsquery``, which stems nothing)."""
    return " | ".join(map(_quoted, lexemes))


def bm25_query(
    weights: QueryWeights, candidates: str, candidate_params: list[Any], limit: int
) -> tuple[str, list[Any]]:
    """The SELECT of ``(id, score, session_id, turn_index, speaker, role, rowid)`` for
    the best ``limit`` rows of ``candidates`` (rowid breaks ties).

    ``candidates`` is a WHERE fragment over ``episodes e`` (match, scope, filters).
    A candidate's term frequencies are the position counts of the query's lexemes in
    its tsvector (``setweight`` marks them, ``ts_filter`` keeps only them).
    """
    tf = "cardinality(m.positions)"
    sql = f"""
        SELECT e.id, (
            SELECT sum((%s::float8[])[array_position(%s::text[], m.lexeme)] * {tf} * %s
                       / ({tf} + %s * (1 - %s + %s * {DOCUMENT_LENGTH} / %s)))
            FROM unnest(ts_filter(setweight(e.content_tsv, 'A', %s::text[]), '{{a}}')) AS m
        ) AS score, {TURN_COLUMNS}, e.rowid
        FROM episodes e
        WHERE {candidates}
        ORDER BY score DESC NULLS LAST, e.rowid LIMIT %s"""
    params = [
        weights.weights,
        weights.lexemes,
        BM25_K1 + 1,
        BM25_K1,
        BM25_B,
        BM25_B,
        weights.mean_length,
        weights.lexemes,
        *candidate_params,
        limit,
    ]
    return sql, params


def at_least(weights: QueryWeights, floor: float, budget: int) -> str | None:
    """The text of a tsquery matching every episode that could score ``floor`` or more.

    An episode holding the set S of the query's lexemes scores at most the sum of
    their bounds (``QueryWeights.bound``), so only the sets whose bounds reach
    ``floor`` need matching: the query is that condition, written as nested AND/OR
    over the lexemes, strongest first. None when no episode can be ruled out
    (``floor`` <= 0, or no set reaches it, which a floor taken from real scores
    rules out). The condition is a tree and can grow quickly with the number of
    lexemes: when it would hold more than ``budget`` lexeme tests, the two weakest
    lexemes are merged into one "either" test counting the sum of their bounds,
    which matches more episodes but never fewer, and the tree is built again.
    """
    need = floor * (1 - BOUND_MARGIN)
    if need <= 0:
        return None
    groups = [(_quoted(lexeme), weights.bound(i)) for i, lexeme in enumerate(weights.lexemes)]
    while True:
        groups.sort(key=lambda group: -group[1])
        try:
            return _threshold(groups, need, budget) or None
        except _TooLarge:
            (weaker, low), (weakest, lowest) = groups[-2], groups[-1]
            groups[-2:] = [(f"{weaker} | {weakest}", low + lowest)]


#: Relative margin under which a sum of lexeme bounds counts as reaching a score, so
#: that float rounding cannot rule out an episode that ties the floor.
BOUND_MARGIN = 1e-9


class _TooLarge(Exception):
    """The condition being built exceeds its budget of lexeme tests."""


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _threshold(groups: list[tuple[str, float]], need: float, budget: int) -> str:
    """tsquery text: some subset of ``groups`` (strongest first) matched whose bounds
    sum to ``need``; "" when no subset can."""
    reach = [0.0] * (len(groups) + 1)
    for k in range(len(groups) - 1, -1, -1):
        reach[k] = reach[k + 1] + groups[k][1]
    tests = 0

    def build(k: int, need: float) -> str | None:
        """The condition over groups k.., or None for "always true"; "" for never."""
        nonlocal tests
        if need <= 0:
            return None
        if reach[k] < need:
            return ""
        tests += 1
        if tests > budget:
            raise _TooLarge
        test, bound = groups[k]
        test = f"({test})" if " | " in test else test
        rest = build(k + 1, need - bound)
        taken = test if rest is None else (f"{test} & ({rest})" if rest else "")
        skipped = build(k + 1, need)
        if skipped is None:
            return None
        return " | ".join(f"({part})" for part in (taken, skipped) if part)

    found = build(0, need)
    return "" if found is None else found
