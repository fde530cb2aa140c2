"""SQLite schema and its forward migrations.

Each migration is a list of steps that moves a store from version N-1 to N: SQL
statements, or functions of the connection for what SQL cannot compute (such as
resolving the time expressions of stored episodes). They run inside one transaction
when a store is opened, so a store is always at a version this code knows, or
untouched.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from .episode_times import mentions_of
from .sqlite_sql import from_epoch, to_epoch

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
}

LATEST = max(MIGRATIONS)
