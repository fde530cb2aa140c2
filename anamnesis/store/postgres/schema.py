"""PostgreSQL schema and its forward migrations.

The logical schema is SQLite's (meta, sessions, episodes, episode_versions); what
differs is physical. Times are ``timestamptz``; metadata is ``json`` (the text as
written, so an export from either backend is byte-identical); and the lexical
and dense indexes live on the episodes row itself: a generated ``tsvector`` column
with a GIN index, and a pgvector ``embedding`` column with an HNSW (cosine) index,
so a scope filter and a vector ordering can be served by one table scan or index.
Two small tables, ``text_corpus`` and ``text_lexemes``, hold the corpus statistics
that BM25 needs (see ``postgres.lexical``).

Each migration is a function of the embedding dimension that returns the steps
moving a store from version N-1 to N: SQL statements, or functions of the connection
for what SQL cannot compute (resolving the time expressions of stored episodes). They
run in one transaction under ``MIGRATION_LOCK``, so several workers starting at once
apply them exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from ..episode_times import mentions_of
from . import lexical
from .lexical import TEXT_SEARCH_CONFIG

Step = str | Callable[[psycopg.Connection[Any]], None]

INSERT_TIMES = (
    "INSERT INTO episode_times (episode_id, position, user_id, start_time, end_time, "
    "granularity, expression) VALUES (%s, %s, %s, %s, %s, %s, %s)"
)


def time_rows(episode_id: str, user_id: str, content: str, event_time: datetime) -> list[tuple]:
    """The ``episode_times`` rows of one episode."""
    return [
        (episode_id, position, user_id, m.start, m.end, m.granularity, m.expression)
        for position, m in enumerate(mentions_of(content, event_time))
    ]


def insert_times(conn: psycopg.Connection[Any], rows: Sequence[tuple]) -> None:
    """Write ``episode_times`` rows."""
    if rows:
        with conn.cursor() as cur:
            cur.executemany(INSERT_TIMES, rows)


def backfill_times(conn: psycopg.Connection[Any]) -> None:
    """Resolve the time expressions of every stored episode (stores older than version 3)."""
    last = 0
    while True:
        rows = conn.execute(
            "SELECT rowid, id, user_id, content, event_time FROM episodes "
            "WHERE rowid > %s ORDER BY rowid LIMIT 5000",
            (last,),
        ).fetchall()
        if not rows:
            return
        insert_times(conn, [t for row in rows for t in time_rows(*row[1:])])
        last = rows[-1][0]


#: pg_advisory_xact_lock key that serialises migrations (and CREATE EXTENSION) across
#: every process connected to the database. The value is arbitrary but fixed: it is
#: the first 8 bytes of sha256("anamnesis.migrate") read as a signed int64.
MIGRATION_LOCK = -6841801958607195316

#: pgvector's HNSW index on ``vector`` supports at most this many dimensions; larger
#: embeddings are searched by exact scan only.
HNSW_MAX_DIM = 2000

#: HNSW build parameters: pgvector's default m, and twice its default ef_construction
#: (64): with 64, some rows of a large store were reachable by no search, whatever
#: ef_search, which capped a large tenant's recall (study "PostgreSQL at 1M"). An
#: index built with other values keeps them until rebuilt (``bulk_load`` rebuilds).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128


def embedding_index(dim: int) -> list[str]:
    """Statements that (re)create the HNSW index, or none when ``dim`` is too large."""
    if dim > HNSW_MAX_DIM:
        return []
    return [
        "CREATE INDEX IF NOT EXISTS episodes_embedding ON episodes "
        f"USING hnsw (embedding vector_cosine_ops) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
    ]


#: Largest dimension whose vectors fit in a B-tree index entry (at most 2704 bytes,
#: a third of a page, less the key columns): 4 bytes per dimension plus a header.
COVERING_MAX_DIM = 600


def scope_vector_index(dim: int) -> list[str]:
    """Statements that (re)create the covering scope index, or none for wide vectors.

    It holds each row's vector next to its scope, so an exact dense search of one tenant
    is an index-only scan over that tenant's contiguous entries, instead of one random
    heap page per row (timings: study "Per dataset", "Figures from the code's
    comments").
    """
    if dim > COVERING_MAX_DIM:
        return []
    return [
        "CREATE INDEX IF NOT EXISTS episodes_scope_vectors ON episodes "
        "(user_id, agent_id, session_id) INCLUDE (id, event_time, embedding)"
    ]


def _v1(dim: int) -> list[str]:
    return [
        """CREATE TABLE meta (
            key   text PRIMARY KEY,
            value text NOT NULL
        )""",
        """CREATE TABLE sessions (
            user_id    text NOT NULL,
            id         text NOT NULL,
            agent_id   text,
            started_at timestamptz,
            metadata   json NOT NULL DEFAULT '{}',
            PRIMARY KEY (user_id, id)
        )""",
        f"""CREATE TABLE episodes (
            rowid        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id           text NOT NULL UNIQUE,
            user_id      text NOT NULL,
            agent_id     text,
            session_id   text,
            turn_index   integer,
            role         text,
            speaker      text,
            content      text NOT NULL,
            modality     text NOT NULL DEFAULT 'text',
            event_time   timestamptz NOT NULL,
            recorded_at  timestamptz NOT NULL,
            metadata     json NOT NULL DEFAULT '{{}}',
            content_hash text NOT NULL,
            version      integer NOT NULL DEFAULT 1,
            content_tsv  tsvector GENERATED ALWAYS AS
                           (to_tsvector('{TEXT_SEARCH_CONFIG}'::regconfig, content)) STORED,
            embedding    vector({dim})
        )""",
        # Keep vectors inline (compressible, moved out of line only as a last resort):
        # exact scans then read one heap tuple per row instead of a TOAST lookup.
        "ALTER TABLE episodes ALTER COLUMN embedding SET STORAGE MAIN",
        "CREATE INDEX episodes_scope ON episodes (user_id, agent_id, session_id, turn_index)",
        "CREATE INDEX episodes_session ON episodes (user_id, session_id, turn_index)",
        "CREATE INDEX episodes_time ON episodes (user_id, event_time)",
        "CREATE INDEX episodes_hash ON episodes (content_hash)",
        "CREATE INDEX episodes_fts ON episodes USING gin (content_tsv)",
        *embedding_index(dim),
        *scope_vector_index(dim),
        """CREATE TABLE episode_versions (
            episode_id text NOT NULL,
            version    integer NOT NULL,
            content    text NOT NULL,
            metadata   json NOT NULL,
            changed_at timestamptz NOT NULL,
            PRIMARY KEY (episode_id, version)
        )""",
    ]


def _v2(dim: int) -> list[str]:
    # Corpus statistics for BM25 (see postgres.lexical), filled from stored episodes.
    return lexical.migration()


def _v3(dim: int) -> list[Step]:
    # The times each episode's text mentions (see episode_times), keyed by episode id
    # (the store writes episodes without reading back their rowids). user_id repeats
    # the episode's so a scoped range query is one index range; scope is still
    # checked on the episodes row it joins.
    return [
        """CREATE TABLE episode_times (
            episode_id  text NOT NULL,
            position    integer NOT NULL,
            user_id     text NOT NULL,
            start_time  timestamptz NOT NULL,
            end_time    timestamptz NOT NULL,
            granularity text NOT NULL,
            expression  text NOT NULL,
            PRIMARY KEY (episode_id, position)
        )""",
        "CREATE INDEX episode_times_range ON episode_times (user_id, start_time, end_time)",
        backfill_times,
    ]


def _v4(dim: int) -> list[str]:
    # Bi-temporal facts (anamnesis.facts), as in SQLite's migration 3: facts are never
    # deleted when superseded; provenance in fact_sources; a generated tsvector with a
    # GIN index for lexical search and a pgvector column for dense search over each
    # fact's text (scanned exactly inside one scope: a user holds few facts).
    return [
        f"""CREATE TABLE facts (
            rowid         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id            text NOT NULL UNIQUE,
            user_id       text NOT NULL,
            agent_id      text,
            subject       text NOT NULL,
            predicate     text NOT NULL,
            object        text NOT NULL,
            text          text NOT NULL,
            valid_from    timestamptz,
            valid_to      timestamptz,
            recorded_at   timestamptz NOT NULL,
            retracted_at  timestamptz,
            supersedes    text,
            superseded_by text,
            superseded_at timestamptz,
            confidence    double precision NOT NULL,
            extractor     text NOT NULL,
            metadata      json NOT NULL DEFAULT '{{}}',
            text_tsv      tsvector GENERATED ALWAYS AS
                            (to_tsvector('{TEXT_SEARCH_CONFIG}'::regconfig, text)) STORED,
            embedding     vector({dim})
        )""",
        "CREATE INDEX facts_slot ON facts (user_id, agent_id, subject, predicate)",
        "CREATE INDEX facts_fts ON facts USING gin (text_tsv)",
        """CREATE TABLE fact_sources (
            fact_id    text NOT NULL,
            episode_id text NOT NULL,
            PRIMARY KEY (fact_id, episode_id)
        )""",
        "CREATE INDEX fact_sources_episode ON fact_sources (episode_id)",
        """CREATE TABLE consolidated_episodes (
            episode_id      text PRIMARY KEY,
            user_id         text NOT NULL,
            consolidated_at timestamptz NOT NULL
        )""",
    ]


def _v5(dim: int) -> list[str]:
    # Forgetting, decay and archive, as in SQLite's migration 4: episodes moved out of
    # the hot indexes, verbatim with their vector, and per-episode usage counters.
    return [
        f"""CREATE TABLE archived_episodes (
            id           text PRIMARY KEY,
            user_id      text NOT NULL,
            agent_id     text,
            session_id   text,
            turn_index   integer,
            role         text,
            speaker      text,
            content      text NOT NULL,
            modality     text NOT NULL,
            event_time   timestamptz NOT NULL,
            recorded_at  timestamptz NOT NULL,
            metadata     json NOT NULL,
            content_hash text NOT NULL,
            version      integer NOT NULL,
            embedding    vector({dim}),
            archived_at  timestamptz NOT NULL
        )""",
        "CREATE INDEX archived_scope ON archived_episodes (user_id, agent_id, session_id)",
        """CREATE TABLE episode_usage (
            episode_id        text PRIMARY KEY,
            user_id           text NOT NULL,
            retrieved         bigint NOT NULL DEFAULT 0,
            last_retrieved_at timestamptz,
            read              bigint NOT NULL DEFAULT 0,
            last_read_at      timestamptz
        )""",
    ]


def _v6(dim: int) -> list[str]:
    # The encoding gate, as in SQLite's migration 5: one decision per gated episode.
    return [
        """CREATE TABLE gate_decisions (
            episode_id       text PRIMARY KEY,
            user_id          text NOT NULL,
            admitted         boolean NOT NULL,
            novelty          double precision NOT NULL,
            salience         double precision NOT NULL,
            prediction_error double precision NOT NULL,
            score            double precision NOT NULL,
            threshold        double precision NOT NULL,
            category         text NOT NULL,
            reason           text NOT NULL,
            gate             text NOT NULL,
            decided_at       timestamptz NOT NULL
        )""",
    ]


def _v7(dim: int) -> list[str]:
    # Session summaries and profiles, as in SQLite's migration 6 (vectors as float32
    # bytes, scanned exactly: a scope holds few items).
    return [
        """CREATE TABLE derived_items (
            rowid       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id          text NOT NULL UNIQUE,
            kind        text NOT NULL,
            user_id     text NOT NULL,
            agent_id    text,
            session_id  text,
            subject     text,
            text        text NOT NULL,
            body        json NOT NULL,
            start_time  timestamptz,
            end_time    timestamptz,
            fingerprint text NOT NULL,
            built_at    timestamptz NOT NULL,
            embedding   bytea
        )""",
        "CREATE INDEX derived_scope ON derived_items (user_id, agent_id, kind)",
        """CREATE TABLE derived_sources (
            item_id    text NOT NULL,
            episode_id text NOT NULL,
            PRIMARY KEY (item_id, episode_id)
        )""",
        "CREATE INDEX derived_sources_episode ON derived_sources (episode_id)",
    ]


def _v8(dim: int) -> list[str]:
    # Per-lexeme bounds of tf and tf / len(d), which let pruned lexical search rule out
    # more episodes (see postgres.lexical), filled from the stored episodes.
    return lexical.bounds_migration()


#: The extension that gives GIN a btree operator class for text, so that one GIN index
#: can hold both the tenant and what a search looks up (``SCOPED_INDEXES``). In
#: contrib, and trusted: any role that may create objects in the database may install it.
SCOPED_INDEX_EXTENSION = "btree_gin"


@dataclass(frozen=True, slots=True)
class ScopedIndex:
    """A GIN index over the episodes led by ``user_id``, and the index that stands in
    for it without ``SCOPED_INDEX_EXTENSION``: the same lookups over every tenant's
    rows, confined to the tenant by the heap visit."""

    name: str
    keys: str
    fallback: str
    fallback_keys: str

    def create(self, *, scoped: bool) -> str:
        """The statement that builds this index (or, not ``scoped``, its stand-in)."""
        name, keys = (self.name, self.keys) if scoped else (self.fallback, self.fallback_keys)
        return f"CREATE INDEX IF NOT EXISTS {name} ON episodes USING gin ({keys})"


#: Full text: a lexical search's index scan returns only the tenant's matching episodes,
#: where ``episodes_fts`` (built by migration 1) returns every tenant's.
SCOPED_TEXT_INDEX = ScopedIndex(
    "episodes_user_fts", "user_id, content_tsv", "episodes_fts", "content_tsv"
)
#: Metadata, as the filters test it (``sql.filters_sql``: ``(e.metadata::jsonb) @> v``):
#: a filtered search finds the tenant's rows holding the value in the index instead of
#: casting and testing the metadata of every row in scope. ``jsonb_path_ops`` indexes
#: a hash of each path to a value, which serves ``@>`` only, in a smaller index than
#: ``jsonb_ops``.
SCOPED_METADATA_INDEX = ScopedIndex(
    "episodes_user_metadata",
    "user_id, (metadata::jsonb) jsonb_path_ops",
    "episodes_metadata",
    "(metadata::jsonb) jsonb_path_ops",
)
SCOPED_INDEXES = (SCOPED_TEXT_INDEX, SCOPED_METADATA_INDEX)


@dataclass(frozen=True, slots=True)
class MissingIndexes:
    """The scoped indexes a store goes without, and why."""

    names: tuple[str, ...]
    reason: str


#: Errors that mean this role or this server cannot build an index or an extension
#: here (not the tables' owner, no such extension, a read-only replica).
_CANNOT_BUILD = (
    pg_errors.InsufficientPrivilege,
    pg_errors.FeatureNotSupported,
    pg_errors.UndefinedFile,
    pg_errors.UndefinedObject,
    pg_errors.ReadOnlySqlTransaction,
)


def scoped_indexes(conn: psycopg.Connection[Any]) -> MissingIndexes | None:
    """Build each of ``SCOPED_INDEXES`` that is missing, replacing its stand-in.

    Returns None when they are all there, else those missing and why they cannot be
    built: the extension is neither installed nor installable by this role, or the
    role may not build them (not the tables' owner, or a read-only replica). The
    stand-ins are built instead where they can be (``episodes_fts`` always is), and
    searches return the same rows, only slower for a tenant among larger ones. Safe
    to call at every open, so a store made before an index existed gets it at its
    next open, and once an administrator installs the extension, the next open by
    the owner builds the scoped ones (holding off writes to the episodes meanwhile).
    """
    present = {
        row[0]
        for row in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexname = ANY(%s)",
            ([n for index in SCOPED_INDEXES for n in (index.name, index.fallback)],),
        )
    }
    missing = [index for index in SCOPED_INDEXES if index.name not in present]
    if not missing:
        return None
    installed = conn.execute(
        "SELECT 1 FROM pg_extension WHERE extname = %s", (SCOPED_INDEX_EXTENSION,)
    ).fetchone()
    try:
        with conn.transaction():
            if not installed:
                conn.execute(f"CREATE EXTENSION IF NOT EXISTS {SCOPED_INDEX_EXTENSION}")
                installed = (1,)
            for index in missing:
                conn.execute(index.create(scoped=True))
                conn.execute(f"DROP INDEX IF EXISTS {index.fallback}")
            _analyze_stored(conn)
    except _CANNOT_BUILD as exc:
        _build_fallbacks(conn, [i for i in missing if i.fallback not in present])
        names = tuple(index.name for index in missing)
        which = " and ".join(names)
        if installed:
            return MissingIndexes(
                names,
                f"this role cannot build the {which} index ({exc.diag.message_primary}); "
                "open the store once as the tables' owner on the primary",
            )
        return MissingIndexes(
            names,
            f"the {SCOPED_INDEX_EXTENSION} extension is not installed and this role cannot "
            f"install it ({exc.diag.message_primary}); as a superuser run CREATE EXTENSION "
            f"{SCOPED_INDEX_EXTENSION}, and the next open builds the {which} index",
        )
    return None


def _build_fallbacks(conn: psycopg.Connection[Any], indexes: Sequence[ScopedIndex]) -> None:
    """Build the stand-ins of ``indexes`` if this role may (the caller's reason for the
    scoped ones missing covers a role that may not either)."""
    if not indexes:
        return
    try:
        with conn.transaction():
            for index in indexes:
                conn.execute(index.create(scoped=False))
            _analyze_stored(conn)
    except _CANNOT_BUILD:
        return


def _analyze_stored(conn: psycopg.Connection[Any]) -> None:
    """Gather the statistics of the indexed expressions, when episodes are stored.

    Without them the planner takes every metadata value for a rare one until
    autovacuum next analyzes the table, which waits for about a tenth of its rows to
    change. An empty table (a new store) is left to autovacuum, as before.
    """
    if conn.execute("SELECT EXISTS (SELECT 1 FROM episodes)").fetchone()[0]:  # type: ignore[index]
        conn.execute("ANALYZE episodes")


def _v9(dim: int) -> list[str]:
    # Background indexing, as in SQLite's migration 7: the episodes stored without a
    # vector yet (``embedding`` NULL), marked in the episode's own transaction; the
    # mark goes with the episode.
    return [
        """CREATE TABLE pending_vectors (
            episode_rowid bigint PRIMARY KEY REFERENCES episodes (rowid) ON DELETE CASCADE,
            user_id       text NOT NULL
        )""",
        "CREATE INDEX pending_vectors_user ON pending_vectors (user_id)",
    ]


MIGRATIONS: dict[int, Callable[[int], Sequence[Step]]] = {
    1: _v1,
    2: _v2,
    3: _v3,
    4: _v4,
    5: _v5,
    6: _v6,
    7: _v7,
    8: _v8,
    9: _v9,
}

LATEST = max(MIGRATIONS)


def pending(current: int) -> list[int]:
    """The migration numbers a store at version ``current`` still needs, in order."""
    return sorted(v for v in MIGRATIONS if v > current)
