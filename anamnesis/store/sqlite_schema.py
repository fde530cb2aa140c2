"""SQLite schema and its forward migrations.

Each migration is a list of statements that moves a store from version N-1 to N.
They run inside one transaction when a store is opened, so a store is always at a
version this code knows, or untouched.
"""

from __future__ import annotations

MIGRATIONS: dict[int, list[str]] = {
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
}

LATEST = max(MIGRATIONS)
