"""The embedded default: everything in one SQLite file (WAL mode).

Episodes are the source of truth; the FTS5 index is kept in step by triggers inside
the same transaction, and vectors are float32 BLOBs searched by a numpy matrix that
is loaded on first use and refreshed incrementally. Lexical search ranks with an
in-memory copy of the FTS5 postings (``sqlite.lexical``), exactly as FTS5's ``bm25()``
would, and falls back to FTS5 itself while that copy is being built.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import (
    CorruptStoreError,
    InvalidInputError,
    NotFoundError,
    ReadOnlyStoreError,
    SchemaVersionError,
    StoreError,
    StoreLockedError,
)
from ...types import Episode, EpisodeVersion, Scope, Session
from ..base import PendingVector, replaced_at
from ..index.dense import AnnSettings, DenseIndex
from . import driver, erasure, health
from .ann import SQLiteAnn
from .archive import SQLiteArchive
from .dense_file import DenseFile
from .dense_file import remove_files as remove_dense_files
from .derived import SQLiteDerived
from .driver import sqlite3
from .facts import SQLiteFacts
from .gate import SQLiteGate
from .lexical import SQLiteLexical
from .lexical_file import remove_files as remove_lexical_files
from .lifecycle import SQLiteLifecycle
from .reads import SQLiteReads
from .schema import INSERT_TIMES, LATEST, MIGRATIONS, time_rows
from .schema import pending as pending_migrations
from .sql import (
    SYNCHRONOUS,
    operational_error,
    private_connection,
    scope_sql,
    scope_terms,
    to_epoch,
)
from .usage import SQLiteUsage

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


class SQLiteStore(
    SQLiteReads,
    SQLiteDerived,
    SQLiteFacts,
    SQLiteLifecycle,
    SQLiteArchive,
    SQLiteUsage,
    SQLiteGate,
):
    """A Store backed by one SQLite file.

    Every public method turns a SQLite error into a typed one (``health.guarded``):
    damage into ``CorruptStoreError`` (and the store then refuses writes), anything
    else into ``StoreError``.
    """

    backend = "sqlite"

    @property
    def lexical_backend(self) -> str:
        """``fts5-bm25``, and what answers it now: the in-memory postings (mapped from
        beside the store, or built), FTS5 itself until they are loaded, or why a build
        failed."""
        return f"fts5-bm25 ({self._lexical.state})"

    @property
    def vector_backend(self) -> str:
        """Exact numpy scan, with a usearch HNSW graph proposing candidates above a
        threshold; and why the graph is not in use if its build failed."""
        backend = f"numpy (usearch HNSW from {self._dense.ann_settings.threshold:,} rows)"
        if self._dense.mapped:
            backend += "; vectors mapped from beside the store"
        failure = self._ann.failure
        return backend if failure is None else f"{backend}; the graph failed: {failure}"

    def __init__(
        self,
        path: str | Path,
        *,
        dim: int,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        durability: str = "normal",
        ann: AnnSettings | None = None,
    ):
        if durability not in SYNCHRONOUS:
            raise InvalidInputError(f"durability must be one of {', '.join(SYNCHRONOUS)}")
        self.path = Path(path)
        self.dim = dim
        #: ``normal`` or ``full`` (``config.DURABILITY_LEVELS``): every connection's sync.
        self.durability = durability
        self._lock = threading.RLock()
        self._busy_timeout = busy_timeout
        self._usage_conn = None
        self._usage_lock = threading.Lock()
        self._dense = DenseIndex(dim, ann)
        self._dense_loaded = False
        self._filtered_rows = {}
        self._dense_epoch: str | None = None
        #: This process's last removal (the epoch it made, its rowids), for the matrix
        #: to take out at the next search if nothing else changed meanwhile.
        self._dense_removal: tuple[str, list[int]] | None = None
        self._ann = SQLiteAnn(self.path, self._lock, self._dense.ann_settings, self._file_epoch)
        self._dense_file = DenseFile(self.path)
        self._lexical = SQLiteLexical(self.path, self._lock, busy_timeout, durability)
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
            self._conn.execute("PRAGMA foreign_keys = ON")
            private_connection(self._conn, durability)
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
            self._pending_table = health.has_table(self._conn, "pending_vectors")
            self._secure_delete = self._prepare_erasure()
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
        if self.read_only is not None or self._damaged is not None:
            self._dense_file.persist = self._lexical.file.persist = False

    def _prepare_erasure(self) -> bool:
        """Whether forgets can erase in place (``erasure``): turn FTS5's ``secure-delete``
        on where this SQLite has it and the store can be written; refuse a store whose
        indexes have it on when this SQLite cannot read them."""
        if self._damaged is not None:
            return False
        on = erasure.secure_delete_state(self._conn)
        if on and not driver.SECURE_DELETE:
            raise StoreError(
                f"{self.path} has full-text indexes written with FTS5 secure-delete, which "
                f"this SQLite ({driver.sqlite3.sqlite_version}, {driver.LIBRARY}) cannot "
                f"read; install sqlean-py (a dependency of anamnesis) and open it again"
            )
        if not on and driver.SECURE_DELETE and self.read_only is None:
            with self._write() as conn:
                erasure.turn_on_secure_delete(conn)
            on = True
        if not on:
            driver.warn_once_without_secure_delete()
        if self.read_only is None and erasure.due_indexes(self._conn, abandoned=True):
            # A forget killed between two of its transactions: its last merge, done now.
            with self._write() as conn:
                erasure.merge_due(conn, on)
            self._truncate_log()
        return on

    @property
    def erasure(self) -> str:
        """How a forget erases words from the full-text indexes (``driver.erasure``)."""
        return driver.erasure() if self._secure_delete else driver.erasure(in_place=False)

    def _file_epoch(self) -> str | None:
        """The file's ``vector_epoch`` (None once closed); the caller holds the lock."""
        if self._conn is None:
            return None
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'vector_epoch'").fetchone()
        return row[0] if row else "0"

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
                self._rollback()
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
                self._rollback()
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                self._rollback()
                if health.is_damage(exc):
                    raise self._damage_found(exc) from exc
                raise operational_error(exc, self.path, "commit") from exc

    def _rollback(self) -> None:
        """Roll back after a failure, if a transaction is still open; the in-memory
        matrix, which ``_bump_epoch`` may have changed, is read again."""
        self._dense_loaded = False
        self._dense_removal = None
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
        self._close_usage()
        with self._lock:
            self._lexical.close(self._conn)
            epoch = self._dense_epoch if self._dense_loaded else None
            if epoch is not None and self._conn is not None:
                self._dense_file.save(self._dense, epoch, self._file_epoch, self._lock)
            self._dense_file.drop_check()
            self._ann.close(self._dense, epoch)
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
        vectors: np.ndarray | None,
        sessions: Sequence[Session] = (),
        versions: Sequence[EpisodeVersion] = (),
    ) -> None:
        if vectors is not None and len(episodes) != len(vectors):
            raise ValueError("one vector per episode is required")
        with self._write() as conn:
            if sessions:
                self._upsert_sessions(conn, sessions)
            self._insert_hot(conn, episodes, vectors, versions)

    @staticmethod
    def _insert_hot(
        conn: sqlite3.Connection,
        episodes: Sequence[Episode],
        vectors: np.ndarray | None,
        versions: Sequence[EpisodeVersion] = (),
    ) -> None:
        """Insert episodes with their vectors (None: marked as waiting for one, in
        ``pending_vectors``), time mentions and prior versions, inside the caller's
        transaction."""
        rows: list[np.ndarray | None] = (
            [None] * len(episodes)
            if vectors is None
            else list(np.ascontiguousarray(vectors, dtype=np.float32))
        )
        for episode, vector in zip(episodes, rows, strict=True):
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
            if vector is None:
                conn.execute(
                    "INSERT INTO pending_vectors (episode_rowid, user_id) VALUES (?, ?)",
                    (cursor.lastrowid, episode.user_id),
                )
            else:
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
                    to_epoch(replaced_at(v)),
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
            """SELECT MAX(turn_index) FROM (
                 SELECT turn_index FROM episodes WHERE user_id = ? AND session_id = ?
                 UNION ALL
                 SELECT turn_index FROM archived_episodes WHERE user_id = ? AND session_id = ?)""",
            (user_id, session_id, user_id, session_id),
        )
        return 0 if rows[0][0] is None else rows[0][0] + 1

    def vectors_for_hashes(self, hashes: Sequence[str], scope: Scope) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            # ``+e.user_id``: look the hashes up in their index; by the user's index
            # every batch would read the whole scope.
            for content_hash, blob in self._read(
                f"""SELECT e.content_hash, v.embedding FROM episodes e
                    JOIN vectors v ON v.episode_rowid = e.rowid
                    WHERE +e.user_id = ? AND e.content_hash IN ({marks})""",
                [scope.user_id, *chunk],
            ):
                found.setdefault(content_hash, np.frombuffer(blob, dtype=np.float32))
        return found

    def _bump_epoch(self, conn: sqlite3.Connection, removed: Sequence[int] = ()) -> tuple[str, str]:
        """Mark that rows were changed or removed, so caches of other processes reload.
        ``removed``: the rows this change deletes and nothing else changes, which the
        in-memory matrix takes out in place when it was in step (else it reads every row
        again; so does a transaction that fails after this, ``_rollback``).

        Returns the epoch before and after the bump, for ``SQLiteLexical.after_change``.
        """
        epoch = "SELECT COALESCE((SELECT value FROM meta WHERE key = 'vector_epoch'), '0')"
        (before,) = conn.execute(epoch).fetchone()
        conn.execute(
            """INSERT INTO meta (key, value) VALUES ('vector_epoch', '1')
               ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"""
        )
        (after,) = conn.execute(epoch).fetchone()
        loaded, waiting = self._dense_loaded, self._dense_removal
        in_step = loaded and self._dense_epoch == before
        self._dense_loaded = False
        # The saved matrix and postings hold the rows as they were (erased ones among
        # them): they go before the commit. A matrix mapped from its file keeps its
        # mapping (the name is gone, no one can open it) until the next search copies
        # the remaining rows out of it.
        remove_dense_files(self.path)
        remove_lexical_files(self.path)
        if removed and in_step:
            self._dense_removal = (after, list(removed))
        elif removed and not loaded and waiting is not None and waiting[0] == before:
            # The previous change was this process's own removal, not yet applied (a
            # forget's batches): the next search takes out both at once.
            self._dense_removal = (after, [*waiting[1], *removed])
        self._row_places = None  # rows removed here leave this process's memory at once
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
            if json.dumps(metadata, ensure_ascii=False) != old_metadata:
                # Rows remembered as passing a metadata filter are read again.
                conn.execute(
                    """INSERT INTO meta (key, value) VALUES ('metadata_epoch', '1')
                       ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"""
                )
            epochs = None
            if vector is not None or content != old_content:
                epochs = self._bump_epoch(conn)
        if epochs is not None:
            changed = [rowid] if content != old_content else []
            self._lexical.after_change([], changed, *epochs)
            self._ann.after_change([], [rowid] if vector is not None else [], *epochs)
        return self.get_episodes([episode_id], scope)[0]

    # -- background indexing ----------------------------------------------------------------
    #: Whether episodes may be stored before their vectors (``insert_episodes`` with
    #: None, then ``pending_vectors`` / ``index_pending``).
    background_indexing = True

    def pending_vectors(self, limit: int) -> list[PendingVector]:
        """The oldest ``limit`` episodes still waiting for a vector, in rowid order."""
        if not self._pending_table:
            return []
        rows = self._read(
            """SELECT p.episode_rowid, e.user_id, e.content_hash, e.content, e.speaker
               FROM pending_vectors p JOIN episodes e ON e.rowid = p.episode_rowid
               ORDER BY p.episode_rowid LIMIT ?""",
            (limit,),
        )
        return [PendingVector(*row) for row in rows]

    def pending_count(self, scope: Scope | None) -> int:
        """How many episodes of ``scope`` (None: the whole store) wait for a vector."""
        sql, params = self._pending_sql(scope)
        return int(self._read(sql, params)[0][0])

    def index_pending(self, vectors: Sequence[tuple[PendingVector, np.ndarray]]) -> int:
        """Write the vectors of pending episodes and take their marks away, in one
        transaction; returns how many were written.

        An episode forgotten, or whose text an ``update`` changed, since it was read is
        left alone (its mark went with it, or it waits for its new text's vector), so
        each episode gets exactly one vector, of its current text.
        """
        written: list[int] = []
        with self._write() as conn:
            (highest,) = conn.execute("SELECT MAX(episode_rowid) FROM vectors").fetchone()
            for pending, vector in vectors:
                taken = conn.execute(
                    """DELETE FROM pending_vectors WHERE episode_rowid = ?
                       AND EXISTS (SELECT 1 FROM episodes
                                   WHERE rowid = ? AND content_hash = ?)""",
                    (pending.rowid, pending.rowid, pending.content_hash),
                ).rowcount
                if taken:
                    conn.execute(
                        "INSERT INTO vectors (episode_rowid, embedding) VALUES (?, ?)",
                        (pending.rowid, np.asarray(vector, dtype=np.float32).tobytes()),
                    )
                    written.append(pending.rowid)
            # The matrix in memory takes the rows past its last one; a vector written
            # below it (another writer stored vectors after these episodes) makes every
            # process read the vectors again.
            epochs = None
            if written and highest is not None and min(written) < highest:
                epochs = self._bump_epoch(conn)
        if epochs is not None:
            self._lexical.after_change([], [], *epochs)
        return len(written)

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


health.guard_public_methods(SQLiteStore)
