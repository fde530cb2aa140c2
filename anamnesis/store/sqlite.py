"""The embedded default: everything in one SQLite file (WAL mode).

Episodes are the source of truth; the FTS5 index is kept in step by triggers inside
the same transaction, and vectors are float32 BLOBs searched by a numpy matrix that
is loaded on first use and refreshed incrementally. Lexical search ranks with an
in-memory copy of the FTS5 postings (``sqlite_lexical``), exactly as FTS5's ``bm25()``
would, and falls back to FTS5 itself while that copy is being built.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import (
    CorruptStoreError,
    InvalidInputError,
    NotFoundError,
    ReadOnlyStoreError,
    SchemaVersionError,
    StoreError,
    StoreLockedError,
)
from ..types import DeleteCounts, Episode, EpisodeVersion, Scope, Session
from . import sqlite_health as health
from .base import Candidate, Filters, adjacent_by_episode, fact_scope
from .dense_index import DenseIndex
from .episode_times import EpisodeTimes, TimeRange, times_by_episode
from .sqlite_facts import SQLiteFacts
from .sqlite_lexical import SQLiteLexical
from .sqlite_schema import INSERT_TIMES, LATEST, MIGRATIONS, time_rows
from .sqlite_schema import pending as pending_migrations
from .sqlite_sql import (
    EPISODE_COLUMNS,
    episode_from_row,
    filters_sql,
    from_epoch,
    fts_query,
    operational_error,
    scope_sql,
    scope_terms,
    to_epoch,
)

#: Seconds a writer waits for another process's lock before StoreLockedError.
DEFAULT_BUSY_TIMEOUT = 10.0
#: Written into the meta table so a foreign SQLite file is recognised as such.
APPLICATION_MARK = "anamnesis"


def create_private_file(path: Path) -> None:
    """Create an empty file readable by its owner only (0600), and the directories
    above it that are missing (0700), whatever the umask."""
    missing = [parent for parent in path.parents if not parent.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(descriptor)


class SQLiteStore(SQLiteFacts):
    """A Store backed by one SQLite file.

    Every public method turns a SQLite error into a typed one (``health.guarded``):
    damage into ``CorruptStoreError`` (and the store then refuses writes), anything
    else into ``StoreError``.
    """

    backend = "sqlite"
    vector_backend = "numpy"

    @property
    def lexical_backend(self) -> str:
        """``fts5-bm25``, and why the in-memory postings are not in use if a build failed."""
        failure = self._lexical.failure
        return "fts5-bm25" if failure is None else f"fts5-bm25 (in-memory index failed: {failure})"

    def __init__(self, path: str | Path, *, dim: int, busy_timeout: float = DEFAULT_BUSY_TIMEOUT):
        self.path = Path(path)
        self.dim = dim
        self._lock = threading.RLock()
        self._dense = DenseIndex(dim)
        self._dense_loaded = False
        self._dense_epoch: str | None = None
        self._lexical = SQLiteLexical(self.path, self._lock, busy_timeout)
        #: Why the store is damaged, once known: every write is then refused.
        self._damaged = health.recorded_damage(self.path)
        existed = self.path.exists()
        #: Why the store cannot be written here (read-only file or file system), or None.
        self.read_only = health.read_only_reason(self.path) if existed else None
        try:
            if existed:
                health.identify(self.path, APPLICATION_MARK)
            else:
                create_private_file(self.path)
            self._conn = sqlite3.connect(
                health.connection_uri(self.path, self.read_only is not None),
                uri=True,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        try:
            if self.read_only is None:
                self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            problem = health.quick_check(self._conn, self.path) if existed else None
            if problem is not None and self._damaged is None:
                self._damaged = problem
                health.record_damage(self.path, problem)
            if self._damaged is not None and self.read_only is None:
                warnings.warn(
                    f"{self.path} is damaged ({self._damaged}); it is open for reading "
                    f"only: {health.REPAIR_HINT}",
                    RuntimeWarning,
                    stacklevel=3,
                )
            elif self.read_only is None:
                self._migrate()
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            if "locked" in str(exc) or "busy" in str(exc):
                raise StoreLockedError(f"{self.path} is locked by another process") from exc
            if existed and health.is_damage(exc):
                health.record_damage(self.path, str(exc))
            raise CorruptStoreError(
                f"{self.path} is not a readable SQLite database ({exc}); {health.REPAIR_HINT}"
            ) from exc
        except StoreError:
            self._conn.close()
            raise

    @property
    def damage(self) -> str | None:
        """Why the store was found damaged (writes are refused), or None."""
        return self._damaged

    def _damage_found(self, exc: BaseException) -> CorruptStoreError:
        """Record damage that an operation met, and the error to raise for it."""
        if self._damaged is None:
            self._damaged = str(exc)
            health.record_damage(self.path, self._damaged)
        return health.corrupt(self.path, exc)

    def check(self) -> list[str]:
        """A full check of the file (it reads every page): the problems found, none
        when healthy. A clean check clears a recorded damage."""
        with self._lock:
            try:
                problems = health.full_check(self._conn)
            except sqlite3.DatabaseError as exc:
                problems = [str(exc)]
        if problems:
            if self._damaged is None:
                self._damaged = problems[0]
                health.record_damage(self.path, problems[0])
        else:
            self._damaged = None
            health.clear_damage(self.path)
        return problems

    # -- transactions ---------------------------------------------------------------------
    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: everything inside commits together or not at all."""
        with self._lock:
            if self.read_only is not None:
                raise ReadOnlyStoreError(
                    f"{self.path} can be read but not written: {self.read_only}"
                )
            if self._damaged is not None:
                raise CorruptStoreError(
                    f"{self.path} is damaged ({self._damaged}); it takes no writes until "
                    f"a check passes: {health.REPAIR_HINT}"
                )
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc) or "busy" in str(exc):
                    raise StoreLockedError(
                        f"{self.path} is being written by another process; try again"
                    ) from exc
                raise StoreError(str(exc)) from exc
            try:
                yield self._conn
            except sqlite3.IntegrityError as exc:
                self._conn.execute("ROLLBACK")
                raise InvalidInputError(f"write conflicts with stored data: {exc}") from exc
            except sqlite3.OperationalError as exc:
                self._rollback()
                if health.is_damage(exc):
                    raise self._damage_found(exc) from exc
                raise operational_error(exc, self.path, "write") from exc
            except sqlite3.DatabaseError as exc:
                self._rollback()
                if health.is_damage(exc):
                    raise self._damage_found(exc) from exc
                raise StoreError(f"write failed on {self.path}: {exc}") from exc
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                self._rollback()
                if health.is_damage(exc):
                    raise self._damage_found(exc) from exc
                raise operational_error(exc, self.path, "commit") from exc

    def _rollback(self) -> None:
        """Roll back after a failure, if a transaction is still open."""
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.DatabaseError:
                pass

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:
                if health.is_damage(exc):
                    raise self._damage_found(exc) from exc
                raise operational_error(exc, self.path, "query") from exc

    def _migrate(self) -> None:
        """Bring the schema up to date (``health.identify`` has recognised the file)."""
        tables = {
            row[0]
            for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        current = 0
        if "meta" in tables:
            version = self._conn.execute(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).fetchone()
            current = int(version[0]) if version else 0
        if current > LATEST:
            raise SchemaVersionError(
                f"{self.path} has schema version {current}; this Anamnesis knows up to "
                f"{LATEST}. Upgrade Anamnesis to open it."
            )
        if current == LATEST:
            return
        with self._write() as conn:
            for version in pending_migrations(current):
                for step in MIGRATIONS[version]:
                    if isinstance(step, str):
                        conn.execute(step)
                    else:
                        step(conn)
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('application', ?)",
                (APPLICATION_MARK,),
            )
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(LATEST),),
            )
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('created_at', ?)",
                (datetime.now(UTC).isoformat(),),
            )

    # -- identity and lifecycle -------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def close(self) -> None:
        with self._lock:
            self._lexical.close()
            if self._conn is not None:
                self._conn.close()
                self._conn = None  # type: ignore[assignment]
            self._dense.clear()

    def analyze(self) -> None:
        """Refresh the planner's statistics (worth doing after a bulk load)."""
        with self._lock:
            self._conn.execute("ANALYZE")

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Write many rows, then ANALYZE: without fresh statistics, SQLite may pick a
        slow plan for the FTS5 join once a store has grown by a large load."""
        yield
        self.analyze()

    # -- writes -----------------------------------------------------------------------------
    def upsert_sessions(self, sessions: Sequence[Session]) -> None:
        with self._write() as conn:
            self._upsert_sessions(conn, sessions)

    @staticmethod
    def _upsert_sessions(conn: sqlite3.Connection, sessions: Sequence[Session]) -> None:
        conn.executemany(
            """INSERT INTO sessions (user_id, id, agent_id, started_at, metadata)
               VALUES (?, ?, ?, ?, ?)
               ON CONFLICT (user_id, id) DO UPDATE SET
                 started_at = COALESCE(sessions.started_at, excluded.started_at)""",
            [
                (
                    s.user_id,
                    s.id,
                    s.agent_id,
                    to_epoch(s.started_at) if s.started_at else None,
                    json.dumps(s.metadata),
                )
                for s in sessions
            ],
        )

    def insert_episodes(
        self,
        episodes: Sequence[Episode],
        vectors: np.ndarray,
        sessions: Sequence[Session] = (),
        versions: Sequence[EpisodeVersion] = (),
    ) -> None:
        if len(episodes) != len(vectors):
            raise ValueError("one vector per episode is required")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        with self._write() as conn:
            if sessions:
                self._upsert_sessions(conn, sessions)
            for episode, vector in zip(episodes, vectors, strict=True):
                cursor = conn.execute(
                    """INSERT INTO episodes (id, user_id, agent_id, session_id, turn_index,
                         role, speaker, content, modality, event_time, recorded_at, metadata,
                         content_hash, version, scope_terms)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                    (
                        episode.id,
                        episode.user_id,
                        episode.agent_id,
                        episode.session_id,
                        episode.turn_index,
                        episode.role,
                        episode.speaker,
                        episode.content,
                        episode.modality,
                        to_epoch(episode.event_time),
                        to_epoch(episode.recorded_at),
                        json.dumps(episode.metadata, ensure_ascii=False),
                        episode.content_hash,
                        episode.version,
                        scope_terms(episode.user_id, episode.agent_id, episode.session_id),
                    ),
                )
                conn.execute(
                    "INSERT INTO vectors (episode_rowid, embedding) VALUES (?, ?)",
                    (cursor.lastrowid, vector.tobytes()),
                )
                conn.executemany(
                    INSERT_TIMES,
                    time_rows(
                        cursor.lastrowid,  # type: ignore[arg-type]
                        episode.user_id,
                        episode.content,
                        to_epoch(episode.event_time),
                    ),
                )
            conn.executemany(
                "INSERT INTO episode_versions (episode_id, version, content, metadata, "
                "changed_at) VALUES (?, ?, ?, ?, ?)",
                [
                    (
                        v.episode_id,
                        v.version,
                        v.content,
                        json.dumps(v.metadata),
                        to_epoch(v.changed_at),
                    )
                    for v in versions
                ],
            )

    def existing_ids(self, episode_ids: Sequence[str]) -> set[str]:
        """Which of these ids are already stored (in any scope)."""
        found: set[str] = set()
        for start in range(0, len(episode_ids), 500):
            chunk = list(episode_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            found.update(
                r[0] for r in self._read(f"SELECT id FROM episodes WHERE id IN ({marks})", chunk)
            )
        return found

    def next_turn_index(self, user_id: str, session_id: str) -> int:
        """The position the next turn of a session takes."""
        rows = self._read(
            "SELECT MAX(turn_index) FROM episodes WHERE user_id = ? AND session_id = ?",
            (user_id, session_id),
        )
        return 0 if rows[0][0] is None else rows[0][0] + 1

    def vectors_for_hashes(self, hashes: Sequence[str], scope: Scope) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for content_hash, blob in self._read(
                f"""SELECT e.content_hash, v.embedding FROM episodes e
                    JOIN vectors v ON v.episode_rowid = e.rowid
                    WHERE e.user_id = ? AND e.content_hash IN ({marks})""",
                [scope.user_id, *chunk],
            ):
                found.setdefault(content_hash, np.frombuffer(blob, dtype=np.float32))
        return found

    def _bump_epoch(self, conn: sqlite3.Connection) -> tuple[str, str]:
        """Mark that rows were changed or removed, so caches of other processes reload.

        Returns the epoch before and after the bump, for ``SQLiteLexical.after_change``.
        """
        epoch = "SELECT COALESCE((SELECT value FROM meta WHERE key = 'vector_epoch'), '0')"
        (before,) = conn.execute(epoch).fetchone()
        conn.execute(
            """INSERT INTO meta (key, value) VALUES ('vector_epoch', '1')
               ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"""
        )
        (after,) = conn.execute(epoch).fetchone()
        self._dense_loaded = False
        return before, after

    def update_episode(
        self,
        episode_id: str,
        scope: Scope,
        *,
        content: str,
        content_hash: str,
        metadata: dict[str, Any],
        vector: np.ndarray | None,
        changed_at: datetime,
    ) -> Episode:
        where, params = scope_sql(scope, by_key=True)
        with self._write() as conn:
            row = conn.execute(
                f"SELECT e.rowid, e.content, e.metadata, e.version, e.user_id, e.event_time "
                f"FROM episodes e WHERE e.id = ? AND {where}",
                [episode_id, *params],
            ).fetchone()
            if row is None:
                raise NotFoundError(f"no episode {episode_id!r} in this scope")
            rowid, old_content, old_metadata, version, user_id, event_time = row
            conn.execute(
                "INSERT INTO episode_versions (episode_id, version, content, metadata, "
                "changed_at) VALUES (?, ?, ?, ?, ?)",
                (episode_id, version, old_content, old_metadata, to_epoch(changed_at)),
            )
            conn.execute(
                "UPDATE episodes SET content = ?, content_hash = ?, metadata = ?, version = ? "
                "WHERE rowid = ?",
                (
                    content,
                    content_hash,
                    json.dumps(metadata, ensure_ascii=False),
                    version + 1,
                    rowid,
                ),
            )
            if content != old_content:
                conn.execute("DELETE FROM episode_times WHERE episode_rowid = ?", (rowid,))
                conn.executemany(INSERT_TIMES, time_rows(rowid, user_id, content, event_time))
            if vector is not None:
                conn.execute(
                    "UPDATE vectors SET embedding = ? WHERE episode_rowid = ?",
                    (np.asarray(vector, dtype=np.float32).tobytes(), rowid),
                )
            epochs = None
            if vector is not None or content != old_content:
                epochs = self._bump_epoch(conn)
        if epochs is not None:
            changed = [rowid] if content != old_content else []
            self._lexical.after_change([], changed, *epochs)
        return self.get_episodes([episode_id], scope)[0]

    def _delete_where(
        self, conn: sqlite3.Connection, where: str, params: list[Any]
    ) -> tuple[DeleteCounts, list[int], tuple[str, str] | None]:
        """Delete the episodes matching ``where``: counts, their rowids, and the epochs
        before and after the bump (None when nothing matched)."""
        found = conn.execute(f"SELECT e.rowid, e.id FROM episodes e WHERE {where}", params)
        rowids, ids = [], []
        for rowid, episode_id in found:
            rowids.append(rowid)
            ids.append(episode_id)
        if not ids:
            return DeleteCounts(), [], None
        facts = self._facts.forget_episodes(conn, where, params)
        vectors = conn.execute(
            f"SELECT COUNT(*) FROM vectors WHERE episode_rowid IN "
            f"(SELECT e.rowid FROM episodes e WHERE {where})",
            params,
        ).fetchone()[0]
        times = conn.execute(
            f"SELECT COUNT(*) FROM episode_times WHERE episode_rowid IN "
            f"(SELECT e.rowid FROM episodes e WHERE {where})",
            params,
        ).fetchone()[0]
        versions = 0
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            versions += conn.execute(
                f"DELETE FROM episode_versions WHERE episode_id IN ({marks})", chunk
            ).rowcount
        # Delete triggers remove each episode's FTS entry, vector row and time mentions.
        episodes = conn.execute(f"DELETE FROM episodes AS e WHERE {where}", params).rowcount
        epochs = self._bump_epoch(conn)
        counts = DeleteCounts(
            episodes=episodes, versions=versions, vectors=vectors, times=times, facts=facts
        )
        return counts, rowids, epochs

    def delete_episode(self, episode_id: str, scope: Scope) -> DeleteCounts:
        where, params = scope_sql(scope, by_key=True)
        with self._write() as conn:
            counts, rowids, epochs = self._delete_where(
                conn, f"e.id = ? AND {where}", [episode_id, *params]
            )
        if epochs is not None:
            self._lexical.after_change(rowids, [], *epochs)
        if counts.episodes == 0:
            raise NotFoundError(f"no episode {episode_id!r} in this scope")
        return counts

    def delete_scope(self, scope: Scope) -> DeleteCounts:
        where, params = scope_sql(scope)
        with self._write() as conn:
            # A whole user/agent scope drops its facts in one statement first, so the
            # episode delete below has no sources left to unlink fact by fact.
            facts = 0
            if scope.session_id is None:
                facts = self._facts.delete_scope_facts(conn, scope)
            counts, rowids, epochs = self._delete_where(conn, where, params)
            session_where, session_params = scope_sql(
                Scope(scope.user_id, scope.agent_id, None), alias="s"
            )
            if scope.session_id is not None:
                session_where += " AND s.id = ?"
                session_params.append(scope.session_id)
            sessions = conn.execute(
                f"DELETE FROM sessions AS s WHERE {session_where}", session_params
            ).rowcount
        if epochs is not None:
            self._lexical.after_change(rowids, [], *epochs)
        return counts + DeleteCounts(sessions=sessions, facts=facts)

    def replace_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        with self._write() as conn:
            conn.executemany(
                "UPDATE vectors SET embedding = ? WHERE episode_rowid = "
                "(SELECT rowid FROM episodes WHERE id = ?)",
                [
                    (np.asarray(v, dtype=np.float32).tobytes(), episode_id)
                    for episode_id, v in vectors.items()
                ],
            )
            epochs = self._bump_epoch(conn)
        self._lexical.after_change([], [], *epochs)

    # -- reads --------------------------------------------------------------------------------
    def get_episodes(self, episode_ids: Sequence[str], scope: Scope) -> list[Episode]:
        if not episode_ids:
            return []
        where, params = scope_sql(scope, by_key=True)
        found: dict[str, Episode] = {}
        for start in range(0, len(episode_ids), 500):
            chunk = list(episode_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for row in self._read(
                f"SELECT {EPISODE_COLUMNS} FROM episodes e WHERE e.id IN ({marks}) AND {where}",
                [*chunk, *params],
            ):
                found[row[0]] = episode_from_row(row)
        return [found[i] for i in episode_ids if i in found]

    def list_episodes(
        self, scope: Scope, *, limit: int, offset: int, filters: Filters | None = None
    ) -> tuple[list[Episode], int]:
        where, params = scope_sql(scope)
        extra, extra_params = filters_sql(filters or Filters())
        total = self._read(
            f"SELECT COUNT(*) FROM episodes e WHERE {where} AND {extra}", [*params, *extra_params]
        )[0][0]
        rows = self._read(
            f"SELECT {EPISODE_COLUMNS} FROM episodes e WHERE {where} AND {extra} "
            "ORDER BY e.event_time, e.rowid LIMIT ? OFFSET ?",
            [*params, *extra_params, limit, offset],
        )
        return [episode_from_row(r) for r in rows], total

    def episode_versions(self, episode_id: str, scope: Scope) -> list[EpisodeVersion]:
        where, params = scope_sql(scope, by_key=True)
        rows = self._read(
            f"""SELECT v.episode_id, v.version, v.content, v.metadata, v.changed_at
                FROM episode_versions v JOIN episodes e ON e.id = v.episode_id
                WHERE v.episode_id = ? AND {where} ORDER BY v.version""",
            [episode_id, *params],
        )
        return [EpisodeVersion(r[0], r[1], r[2], json.loads(r[3]), from_epoch(r[4])) for r in rows]

    def neighbours(
        self, episodes: Sequence[Episode], window: int
    ) -> dict[str, tuple[Episode, ...]]:
        result: dict[str, tuple[Episode, ...]] = {e.id: () for e in episodes}
        anchored = [e for e in episodes if e.session_id is not None and e.turn_index is not None]
        if window <= 0 or not anchored:
            return result
        clauses, params = [], []
        for episode in anchored:
            clauses.append("(e.user_id = ? AND e.session_id = ? AND e.turn_index BETWEEN ? AND ?)")
            params += [
                episode.user_id,
                episode.session_id,
                episode.turn_index - window,  # type: ignore[operator]
                episode.turn_index + window,  # type: ignore[operator]
            ]
        by_session: dict[tuple[str, str], list[Episode]] = {}
        for row in self._read(
            f"SELECT {EPISODE_COLUMNS} FROM episodes e WHERE {' OR '.join(clauses)} "
            "ORDER BY e.turn_index",
            params,
        ):
            found = episode_from_row(row)
            by_session.setdefault((found.user_id, found.session_id or ""), []).append(found)
        for episode in anchored:
            turn = episode.turn_index or 0
            result[episode.id] = tuple(
                other
                for other in by_session.get((episode.user_id, episode.session_id or ""), [])
                if other.id != episode.id and abs((other.turn_index or 0) - turn) <= window
            )
        return result

    def turn_info(
        self, episode_ids: Sequence[str], scope: Scope
    ) -> dict[str, tuple[str | None, int | None, str | None, str | None]]:
        where, params = scope_sql(scope, by_key=True)
        found: dict[str, tuple[str | None, int | None, str | None, str | None]] = {}
        unique = list(dict.fromkeys(episode_ids))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for episode_id, session_id, turn, speaker, role in self._read(
                f"SELECT e.id, e.session_id, e.turn_index, e.speaker, e.role FROM episodes e "
                f"WHERE e.id IN ({marks}) AND {where}",
                [*chunk, *params],
            ):
                found[episode_id] = (session_id, turn, speaker, role)
        return found

    def adjacent_turns(
        self, episode_ids: Sequence[str], scope: Scope, filters: Filters, window: int
    ) -> dict[str, list[tuple[str, int]]]:
        unique = list(dict.fromkeys(episode_ids))
        if window <= 0 or not unique:
            return {}
        where_h, params_h = scope_sql(scope, "h", by_key=True)
        where_e, params_e = scope_sql(scope, by_key=True)  # the join drives e, not scope
        extra, extra_params = filters_sql(filters)
        rows: list[tuple] = []
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows += self._read(
                f"""SELECT h.id, e.id, e.turn_index - h.turn_index FROM episodes h
                    JOIN episodes e ON e.user_id = h.user_id AND e.session_id = h.session_id
                     AND e.turn_index BETWEEN h.turn_index - ? AND h.turn_index + ?
                     AND e.rowid <> h.rowid
                    WHERE h.id IN ({marks}) AND {where_h} AND {where_e} AND {extra}""",
                [window, window, *chunk, *params_h, *params_e, *extra_params],
            )
        return adjacent_by_episode(rows)

    def lexical_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, limit: int
    ) -> list[Candidate]:
        if not terms:
            return []
        with self._lock:
            try:
                tokens = scope_terms(scope.user_id, scope.agent_id, scope.session_id).split()
                ranked = self._lexical.search(
                    self._conn, terms, tokens, lambda: self._refreshed_rowids(scope, filters), limit
                )
                if ranked is not None:
                    return self._candidates(ranked, scope)
            except sqlite3.OperationalError as exc:
                raise operational_error(exc, self.path, "lexical search") from exc
        return self.fts5_lexical_search(terms, scope, filters, limit)

    def fts5_lexical_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, limit: int
    ) -> list[Candidate]:
        """``lexical_search`` answered by FTS5's own ``bm25()`` (the reference ranking)."""
        if not terms:
            return []
        where, params = scope_sql(scope, by_key=True)
        extra, extra_params = filters_sql(filters)
        rows = self._read(
            f"""SELECT e.id, bm25(episodes_fts, 1.0, 0.0) AS rank FROM episodes_fts
                JOIN episodes e ON e.rowid = episodes_fts.rowid
                WHERE episodes_fts MATCH ? AND {where} AND {extra}
                ORDER BY rank LIMIT ?""",
            [fts_query(terms, scope), *params, *extra_params, limit],
        )
        # FTS5's bm25() is negative (smaller is better); report the usual positive score.
        return [Candidate(r[0], -float(r[1])) for r in rows]

    def warm_up(self) -> None:
        """Load the dense and lexical indexes now rather than on the first searches.

        The lexical index is built on a connection of its own, so searches running
        meanwhile are not held up (they use FTS5 until it is ready).
        """
        with self._lock:
            if self._conn is None:  # closed while a warm-up was queued
                return
            self._refresh_dense()
        self._lexical.warm_up()

    def _refreshed_rowids(self, scope: Scope, filters: Filters) -> np.ndarray | None:
        """``_allowed_rowids`` with the dense index brought up to date first."""
        if not filters.is_empty():
            self._refresh_dense()
        return self._allowed_rowids(scope, filters)

    def _allowed_rowids(self, scope: Scope, filters: Filters) -> np.ndarray | None:
        """Rowids in ``scope`` passing ``filters``, ascending; None when there are no
        filters. Read off the dense index's columns (every episode has a row there;
        the caller has refreshed it), except for metadata filters, which SQL evaluates."""
        if filters.is_empty():
            return None
        if not filters.metadata:
            self._load_dense_columns()
            return self._dense.rowids_where(
                scope.user_id, scope.agent_id, scope.session_id, filters
            )
        where, params = scope_sql(scope)
        extra, extra_params = filters_sql(filters)
        return self._rowids(
            f"SELECT e.rowid FROM episodes e WHERE {where} AND {extra}", [*params, *extra_params]
        )

    def _candidates(self, pairs: Sequence[tuple[int, float]], scope: Scope) -> list[Candidate]:
        """Map ranked ``(rowid, score)`` pairs to episode ids, re-checking scope in SQL."""
        if not pairs:
            return []
        where, params = scope_sql(scope, by_key=True)
        marks = ",".join("?" * len(pairs))
        ids = dict(
            self._conn.execute(
                f"SELECT e.rowid, e.id FROM episodes e WHERE e.rowid IN ({marks}) AND {where}",
                [*(p[0] for p in pairs), *params],
            ).fetchall()
        )
        return [Candidate(ids[rowid], score) for rowid, score in pairs if rowid in ids]

    def _refresh_dense(self) -> None:
        """Bring the numpy matrix up to date with the file, incrementally when possible."""
        epoch_row = self._conn.execute(
            "SELECT value FROM meta WHERE key = 'vector_epoch'"
        ).fetchone()
        epoch = epoch_row[0] if epoch_row else "0"
        if not self._dense_loaded or epoch != self._dense_epoch:
            self._dense.clear()
        # Rowids only grow (AUTOINCREMENT), so rows past the last one loaded are exactly
        # the appends made since, by this process or another.
        (pending,) = self._conn.execute(
            "SELECT COUNT(*) FROM vectors WHERE episode_rowid > ?", (self._dense.max_rowid,)
        ).fetchone()
        if not pending:
            self._dense_loaded, self._dense_epoch = True, epoch
            return
        self._dense.reserve(pending)
        cursor = self._conn.execute(
            """SELECT e.rowid, e.user_id, e.agent_id, e.session_id, v.embedding
               FROM vectors v JOIN episodes e ON e.rowid = v.episode_rowid
               WHERE v.episode_rowid > ? ORDER BY v.episode_rowid""",
            (self._dense.max_rowid,),
        )
        while rows := cursor.fetchmany(20000):
            self._dense.append(rows)
        self._dense_loaded = True
        self._dense_epoch = epoch

    def _load_dense_columns(self) -> None:
        """Give the dense index's rows that lack them their filter columns.

        Read in rowid order over the same join as the vectors, up to the last row
        loaded; should another process have deleted rows since the vectors were read,
        the counts differ and the index is rebuilt.
        """
        for _ in range(2):
            loaded, size = self._dense.columns_loaded, self._dense.size
            if loaded == size:
                return
            after = self._dense.rowid_at(loaded - 1) if loaded else 0
            rows = self._conn.execute(
                """SELECT e.role, e.speaker, e.modality, e.event_time, e.recorded_at
                   FROM vectors v JOIN episodes e ON e.rowid = v.episode_rowid
                   WHERE v.episode_rowid > ? AND v.episode_rowid <= ?
                   ORDER BY v.episode_rowid""",
                (after, self._dense.max_rowid),
            ).fetchall()
            if len(rows) == size - loaded:
                self._dense.add_columns(rows)
                return
            self._dense.clear()
            self._dense_loaded = False
            self._refresh_dense()
        raise StoreError(f"{self.path} changed while its vectors were being read; retry")

    def dense_search(
        self, vector: np.ndarray, scope: Scope, filters: Filters, limit: int
    ) -> list[Candidate]:
        with self._lock:
            self._refresh_dense()
            allowed = self._allowed_rowids(scope, filters)
            return self._dense_ranked(vector, scope, allowed, limit)

    def _rowids(self, sql: str, params: Sequence[Any]) -> np.ndarray:
        return np.fromiter((r[0] for r in self._conn.execute(sql, params)), dtype=np.int64)

    def _dense_ranked(
        self, vector: np.ndarray, scope: Scope, allowed: np.ndarray | None, limit: int
    ) -> list[Candidate]:
        """Rank the scope's vectors (only ``allowed`` rowids, when given) by cosine."""
        pairs = self._dense.search(
            vector,
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            session_id=scope.session_id,
            allowed_rowids=allowed,
            limit=limit,
        )
        return self._candidates(pairs, scope)

    def time_search(
        self,
        vector: np.ndarray,
        ranges: Sequence[TimeRange],
        scope: Scope,
        filters: Filters,
        limit: int,
    ) -> list[Candidate]:
        if not ranges or limit <= 0:
            return []
        where, params = scope_sql(scope)
        extra, extra_params = filters_sql(filters)
        own = " OR ".join("(e.event_time >= ? AND e.event_time < ?)" for _ in ranges)
        mentioned = " OR ".join("(t.start_time < ? AND t.end_time > ?)" for _ in ranges)
        own_params = [to_epoch(moment) for r in ranges for moment in r]
        mentioned_params = [to_epoch(moment) for start, end in ranges for moment in (end, start)]
        with self._lock:
            self._refresh_dense()
            allowed = self._rowids(
                f"""SELECT e.rowid FROM episodes e WHERE {where} AND {extra} AND ({own})
                    UNION
                    SELECT e.rowid FROM episode_times t
                    JOIN episodes e ON e.rowid = t.episode_rowid
                    WHERE t.user_id = ? AND ({mentioned}) AND {where} AND {extra}""",
                [
                    *params,
                    *extra_params,
                    *own_params,
                    scope.user_id,
                    *mentioned_params,
                    *params,
                    *extra_params,
                ],
            )
            if not len(allowed):
                return []
            return self._dense_ranked(vector, scope, allowed, limit)

    def episode_times(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, EpisodeTimes]:
        if not episode_ids:
            return {}
        where, params = scope_sql(scope, by_key=True)
        rows: list[tuple] = []
        for start in range(0, len(episode_ids), 500):
            chunk = list(episode_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            rows += self._read(
                f"""SELECT e.id, e.event_time, t.start_time, t.end_time, t.granularity,
                           t.expression
                    FROM episodes e LEFT JOIN episode_times t ON t.episode_rowid = e.rowid
                    WHERE e.id IN ({marks}) AND {where} ORDER BY e.id, t.position""",
                [*chunk, *params],
            )
        return times_by_episode(rows, from_epoch)

    def iter_episodes(self, batch_size: int = 1000) -> Iterator[tuple[Episode, np.ndarray | None]]:
        last = 0
        while True:
            rows = self._read(
                f"""SELECT e.rowid, v.embedding, {EPISODE_COLUMNS} FROM episodes e
                    LEFT JOIN vectors v ON v.episode_rowid = e.rowid
                    WHERE e.rowid > ? ORDER BY e.rowid LIMIT ?""",
                (last, batch_size),
            )
            if not rows:
                return
            for row in rows:
                vector = None if row[1] is None else np.frombuffer(row[1], dtype=np.float32)
                yield episode_from_row(row[2:]), vector
            last = rows[-1][0]

    def iter_sessions(self) -> Iterator[Session]:
        for user_id, session_id, agent_id, started_at, metadata in self._read(
            "SELECT user_id, id, agent_id, started_at, metadata FROM sessions ORDER BY user_id, id"
        ):
            yield Session(
                id=session_id,
                user_id=user_id,
                agent_id=agent_id,
                started_at=from_epoch(started_at) if started_at is not None else None,
                metadata=json.loads(metadata),
            )

    def stats(self, scope: Scope | None) -> dict[str, Any]:
        params: list[Any]
        if scope is None:
            where, params = "1", []
        else:
            where, params = scope_sql(scope)
        episodes, users, sessions, first, last = self._read(
            f"""SELECT COUNT(*), COUNT(DISTINCT e.user_id),
                       COUNT(DISTINCT e.user_id || '/' || COALESCE(e.session_id, '')),
                       MIN(e.event_time), MAX(e.event_time)
                FROM episodes e WHERE {where}""",
            params,
        )[0]
        vectors = self._read(
            f"SELECT COUNT(*) FROM vectors v JOIN episodes e ON e.rowid = v.episode_rowid "
            f"WHERE {where}",
            params,
        )[0][0]
        versions = self._read(
            f"SELECT COUNT(*) FROM episode_versions v JOIN episodes e ON e.id = v.episode_id "
            f"WHERE {where}",
            params,
        )[0][0]
        fact_where, fact_params = ("1", []) if scope is None else scope_sql(fact_scope(scope), "f")
        facts, current = self._read(
            f"SELECT COUNT(*), COUNT(*) FILTER (WHERE f.superseded_by IS NULL) FROM facts f "
            f"WHERE {fact_where}",
            fact_params,
        )[0]
        return {
            "backend": self.backend,
            "path": str(self.path),
            "file_bytes": self.path.stat().st_size if self.path.exists() else 0,
            "episodes": episodes,
            "users": users,
            "sessions": sessions,
            "vectors": vectors,
            "versions": versions,
            "facts": facts,
            "current_facts": current,
            "first_event": from_epoch(first).isoformat() if first is not None else None,
            "last_event": from_epoch(last).isoformat() if last is not None else None,
        }


health.guard_public_methods(SQLiteStore)
