"""SQLite schema and its forward migrations.

Each migration is a list of steps that moves a store from version N-1 to N: SQL
statements, or functions of the connection for what SQL cannot compute (such as
resolving the time expressions of stored episodes). They run inside one transaction
when a store is opened, so a store is always at a version this code knows, or
untouched.
"""

from __future__ import annotations

from collections.abc import Callable

from ..episode_times import mentions_of
from .driver import sqlite3
from .sql import from_epoch, to_epoch

Step = str | Callable[[sqlite3.Connection], None]

INSERT_TIMES = (
    "INSERT INTO episode_times (episode_rowid, position, user_id, start_time, end_time, "
    "granularity, expression) VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def time_rows(rowid: int, user_id: str, content: str, event_time: float) -> list[tuple]:
    """The ``episode_times`` rows of one episode."""
    return [
        (rowid, position, user_id, to_epoch(m.start), to_epoch(m.end), m.granularity, m.expression)
        for position, m in enumerate(mentions_of(content, from_epoch(event_time)))
    ]


def backfill_times(conn: sqlite3.Connection) -> None:
    """Resolve the time expressions of every stored episode (stores older than version 2)."""
    cursor = conn.execute("SELECT rowid, user_id, content, event_time FROM episodes")
    while rows := cursor.fetchmany(5000):
        conn.executemany(INSERT_TIMES, [t for row in rows for t in time_rows(*row)])


MIGRATIONS: dict[int, list[Step]] = {
    1: [
        """CREATE TABLE meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )""",
        """CREATE TABLE sessions (
            user_id    TEXT NOT NULL,
            id         TEXT NOT NULL,
            agent_id   TEXT,
            started_at REAL,
            metadata   TEXT NOT NULL DEFAULT '{}',
            PRIMARY KEY (user_id, id)
        )""",
        """CREATE TABLE episodes (
            rowid        INTEGER PRIMARY KEY AUTOINCREMENT,
            id           TEXT NOT NULL UNIQUE,
            user_id      TEXT NOT NULL,
            agent_id     TEXT,
            session_id   TEXT,
            turn_index   INTEGER,
            role         TEXT,
            speaker      TEXT,
            content      TEXT NOT NULL,
            modality     TEXT NOT NULL DEFAULT 'text',
            event_time   REAL NOT NULL,
            recorded_at  REAL NOT NULL,
            metadata     TEXT NOT NULL DEFAULT '{}',
            content_hash TEXT NOT NULL,
            version      INTEGER NOT NULL DEFAULT 1,
            scope_terms  TEXT NOT NULL
        )""",
        "CREATE INDEX episodes_scope ON episodes (user_id, agent_id, session_id, turn_index)",
        "CREATE INDEX episodes_session ON episodes (user_id, session_id, turn_index)",
        "CREATE INDEX episodes_time ON episodes (user_id, event_time)",
        "CREATE INDEX episodes_hash ON episodes (content_hash)",
        """CREATE TABLE episode_versions (
            episode_id TEXT NOT NULL,
            version    INTEGER NOT NULL,
            content    TEXT NOT NULL,
            metadata   TEXT NOT NULL,
            changed_at REAL NOT NULL,
            PRIMARY KEY (episode_id, version)
        )""",
        """CREATE TABLE vectors (
            episode_rowid INTEGER PRIMARY KEY,
            embedding     BLOB NOT NULL
        )""",
        # scope_terms holds one opaque token per scope level (user, agent, session), so
        # that a scoped lexical search intersects posting lists inside FTS5 and ranks
        # only the caller's rows, instead of ranking every match and filtering after.
        """CREATE VIRTUAL TABLE episodes_fts USING fts5(
            content,
            scope_terms,
            content='episodes',
            content_rowid='rowid',
            tokenize='porter unicode61 remove_diacritics 2'
        )""",
        """CREATE TRIGGER episodes_fts_insert AFTER INSERT ON episodes BEGIN
            INSERT INTO episodes_fts (rowid, content, scope_terms)
            VALUES (new.rowid, new.content, new.scope_terms);
        END""",
        """CREATE TRIGGER episodes_fts_delete AFTER DELETE ON episodes BEGIN
            INSERT INTO episodes_fts (episodes_fts, rowid, content, scope_terms)
            VALUES ('delete', old.rowid, old.content, old.scope_terms);
            DELETE FROM vectors WHERE episode_rowid = old.rowid;
        END""",
        """CREATE TRIGGER episodes_fts_update AFTER UPDATE OF content ON episodes BEGIN
            INSERT INTO episodes_fts (episodes_fts, rowid, content, scope_terms)
            VALUES ('delete', old.rowid, old.content, old.scope_terms);
            INSERT INTO episodes_fts (rowid, content, scope_terms)
            VALUES (new.rowid, new.content, new.scope_terms);
        END""",
    ],
    2: [
        # The times each episode's text mentions (see episode_times). user_id repeats
        # the episode's so a scoped range query is one index range; scope is still
        # checked on the episodes row it joins.
        """CREATE TABLE episode_times (
            episode_rowid INTEGER NOT NULL,
            position      INTEGER NOT NULL,
            user_id       TEXT NOT NULL,
            start_time    REAL NOT NULL,
            end_time      REAL NOT NULL,
            granularity   TEXT NOT NULL,
            expression    TEXT NOT NULL,
            PRIMARY KEY (episode_rowid, position)
        )""",
        "CREATE INDEX episode_times_range ON episode_times (user_id, start_time, end_time)",
        """CREATE TRIGGER episode_times_delete AFTER DELETE ON episodes BEGIN
            DELETE FROM episode_times WHERE episode_rowid = old.rowid;
        END""",
        backfill_times,
    ],
    # Bi-temporal facts (anamnesis.facts): one row per fact, never deleted when
    # superseded; provenance in fact_sources; an FTS5 index over each fact's text
    # (with the same scope tokens as episodes); the episodes consolidation has read.
    3: [
        """CREATE TABLE facts (
            rowid         INTEGER PRIMARY KEY AUTOINCREMENT,
            id            TEXT NOT NULL UNIQUE,
            user_id       TEXT NOT NULL,
            agent_id      TEXT,
            subject       TEXT NOT NULL,
            predicate     TEXT NOT NULL,
            object        TEXT NOT NULL,
            text          TEXT NOT NULL,
            valid_from    REAL,
            valid_to      REAL,
            recorded_at   REAL NOT NULL,
            retracted_at  REAL,
            supersedes    TEXT,
            superseded_by TEXT,
            superseded_at REAL,
            confidence    REAL NOT NULL,
            extractor     TEXT NOT NULL,
            metadata      TEXT NOT NULL DEFAULT '{}',
            scope_terms   TEXT NOT NULL,
            embedding     BLOB
        )""",
        "CREATE INDEX facts_slot ON facts (user_id, agent_id, subject, predicate)",
        """CREATE TABLE fact_sources (
            fact_id    TEXT NOT NULL,
            episode_id TEXT NOT NULL,
            PRIMARY KEY (fact_id, episode_id)
        )""",
        "CREATE INDEX fact_sources_episode ON fact_sources (episode_id)",
        """CREATE TABLE consolidated_episodes (
            episode_id      TEXT PRIMARY KEY,
            user_id         TEXT NOT NULL,
            consolidated_at REAL NOT NULL
        )""",
        """CREATE VIRTUAL TABLE facts_fts USING fts5(
            text,
            scope_terms,
            content='facts',
            content_rowid='rowid',
            tokenize='porter unicode61 remove_diacritics 2'
        )""",
        """CREATE TRIGGER facts_fts_insert AFTER INSERT ON facts BEGIN
            INSERT INTO facts_fts (rowid, text, scope_terms)
            VALUES (new.rowid, new.text, new.scope_terms);
        END""",
        """CREATE TRIGGER facts_fts_delete AFTER DELETE ON facts BEGIN
            INSERT INTO facts_fts (facts_fts, rowid, text, scope_terms)
            VALUES ('delete', old.rowid, old.text, old.scope_terms);
            DELETE FROM fact_sources WHERE fact_id = old.id;
        END""",
    ],
    # Forgetting, decay and archive. archived_episodes holds episodes moved out of the
    # hot indexes, verbatim, with their vector (their versions, provenance and
    # consolidation marks stay where they are, keyed by episode id); episode_usage
    # counts how often each episode was retrieved by a search and read by id.
    4: [
        """CREATE TABLE archived_episodes (
            id           TEXT PRIMARY KEY,
            user_id      TEXT NOT NULL,
            agent_id     TEXT,
            session_id   TEXT,
            turn_index   INTEGER,
            role         TEXT,
            speaker      TEXT,
            content      TEXT NOT NULL,
            modality     TEXT NOT NULL,
            event_time   REAL NOT NULL,
            recorded_at  REAL NOT NULL,
            metadata     TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            version      INTEGER NOT NULL,
            embedding    BLOB,
            archived_at  REAL NOT NULL
        )""",
        "CREATE INDEX archived_scope ON archived_episodes (user_id, agent_id, session_id)",
        """CREATE TABLE episode_usage (
            episode_id        TEXT PRIMARY KEY,
            user_id           TEXT NOT NULL,
            retrieved         INTEGER NOT NULL DEFAULT 0,
            last_retrieved_at REAL,
            read              INTEGER NOT NULL DEFAULT 0,
            last_read_at      REAL
        )""",
    ],
    # The encoding gate (anamnesis.ingest.gate): one decision per gated episode, hot or
    # archived, with its three signals; it leaves with the episode.
    5: [
        """CREATE TABLE gate_decisions (
            episode_id       TEXT PRIMARY KEY,
            user_id          TEXT NOT NULL,
            admitted         INTEGER NOT NULL,
            novelty          REAL NOT NULL,
            salience         REAL NOT NULL,
            prediction_error REAL NOT NULL,
            score            REAL NOT NULL,
            threshold        REAL NOT NULL,
            category         TEXT NOT NULL,
            reason           TEXT NOT NULL,
            gate             TEXT NOT NULL,
            decided_at       REAL NOT NULL
        )""",
    ],
    # Session summaries and profiles (anamnesis.consolidate): rebuilt from the episodes
    # and facts, never exported; provenance in derived_sources. No FTS5 table: a scope
    # holds few items, matched in Python, so no index segment keeps a forgotten word.
    6: [
        """CREATE TABLE derived_items (
            rowid       INTEGER PRIMARY KEY AUTOINCREMENT,
            id          TEXT NOT NULL UNIQUE,
            kind        TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            agent_id    TEXT,
            session_id  TEXT,
            subject     TEXT,
            text        TEXT NOT NULL,
            body        TEXT NOT NULL,
            start_time  REAL,
            end_time    REAL,
            fingerprint TEXT NOT NULL,
            built_at    REAL NOT NULL,
            embedding   BLOB
        )""",
        "CREATE INDEX derived_scope ON derived_items (user_id, agent_id, kind)",
        """CREATE TABLE derived_sources (
            item_id    TEXT NOT NULL,
            episode_id TEXT NOT NULL,
            PRIMARY KEY (item_id, episode_id)
        )""",
        "CREATE INDEX derived_sources_episode ON derived_sources (episode_id)",
    ],
    # Background indexing (``Memory(indexing="background")``): the episodes stored
    # without a vector yet, written in the episode's own transaction and removed in the
    # one that writes its vector. user_id repeats the episode's so a scope's backlog is
    # one index range; a deleted episode takes its mark with it.
    7: [
        """CREATE TABLE pending_vectors (
            episode_rowid INTEGER PRIMARY KEY,
            user_id       TEXT NOT NULL
        )""",
        "CREATE INDEX pending_vectors_user ON pending_vectors (user_id)",
        """CREATE TRIGGER pending_vectors_delete AFTER DELETE ON episodes BEGIN
            DELETE FROM pending_vectors WHERE episode_rowid = old.rowid;
        END""",
    ],
}

LATEST = max(MIGRATIONS)


def pending(current: int) -> list[int]:
    """The migration numbers a store at version ``current`` still needs, in order.

    Numbers may have gaps (branches that add migrations are merged and renumbered
    separately), so this walks the numbers that exist rather than every integer.
    """
    return sorted(v for v in MIGRATIONS if v > current)
