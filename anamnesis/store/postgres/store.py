"""The server backend: PostgreSQL with tsvector/GIN lexical search and pgvector HNSW.

One ``PostgresStore`` holds a ``psycopg_pool.ConnectionPool``; every method borrows a
connection for one transaction and gives it back, so a store may be shared by any
number of threads. Tenancy is enforced in SQL: every read and write of episodes
carries the caller's scope in its WHERE clause (see ``postgres.sql.scope_sql``).

Select it with ``Memory(url="postgresql://user@host/db")`` or
``ANAMNESIS_DATABASE_URL``. The database needs the ``vector`` extension available
(pgvector >= 0.8); the first open creates it if the role may, then the tables.
Tables are created in the connection's current schema, so
``?options=-csearch_path%3Dtenant_a,public`` gives a deployment its own namespace.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from ...errors import (
    BackendUnavailableError,
    CorruptStoreError,
    InvalidInputError,
    NotFoundError,
    SchemaVersionError,
    StoreError,
    StoreLockedError,
)
from ...types import Episode, EpisodeVersion, Scope, Session
from ..base import PendingVector, replaced_at
from .archive import PostgresArchive
from .facts import PostgresFacts
from .gate import PostgresGate
from .lexical import (
    count_episodes,
    count_replacement,
    rebuild_statistics,
    token_count,
)
from .lifecycle import PostgresLifecycle
from .reads import PostgresReads
from .schema import (
    LATEST,
    MIGRATION_LOCK,
    MIGRATIONS,
    SCOPED_TEXT_INDEX,
    MissingIndexes,
    embedding_index,
    insert_times,
    pending,
    scope_vector_index,
    scoped_indexes,
    time_rows,
)
from .sql import (
    EPISODE_COLUMNS,
    check_storable,
    episode,
    json_param,
    redact_url,
    scope_sql,
)
from .usage import PostgresUsage
from .vector import register_vector

#: Written into the meta table so that a foreign schema is recognised as such.
APPLICATION_MARK = "anamnesis"

#: Connections the pool keeps open at least / at most. Each concurrent call holds one
#: for the duration of one transaction.
DEFAULT_MIN_CONNECTIONS = 1
DEFAULT_MAX_CONNECTIONS = 10
#: Seconds a call waits for a free connection (or the server) before failing.
DEFAULT_TIMEOUT = 30.0

_SQLSTATE_LOCK_TIMEOUTS = {"55P03", "40P01", "57014"}  # lock_not_available, deadlock, cancel


#: ``synchronous_commit`` for each durability (``config.DURABILITY_LEVELS``): ``normal``
#: keeps the server's (on by default: each commit flushed), ``full`` insists on it.
SYNCHRONOUS_COMMIT: dict[str, str | None] = {"normal": None, "full": "on"}


class PostgresStore(
    PostgresReads, PostgresFacts, PostgresLifecycle, PostgresArchive, PostgresUsage, PostgresGate
):
    """A Store backed by a PostgreSQL database with the pgvector extension."""

    backend = "postgres"
    vector_backend = "pgvector-hnsw"
    #: Episodes may be stored before their vectors (``pending_vectors``).
    background_indexing = True
    #: What a forget leaves on disk (RELIABILITY.md, "Forgotten text leaves the store").
    erasure = "rows deleted; the disk keeps them until VACUUM FULL and the WAL recycles"

    def __init__(
        self,
        url: str,
        *,
        dim: int,
        min_connections: int = DEFAULT_MIN_CONNECTIONS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        timeout: float = DEFAULT_TIMEOUT,
        durability: str = "normal",
    ) -> None:
        if durability not in SYNCHRONOUS_COMMIT:
            raise InvalidInputError(f"durability must be one of {', '.join(SYNCHRONOUS_COMMIT)}")
        self.url = url
        self.dim = dim
        self.durability = durability
        self._pool: ConnectionPool | None = None
        #: Which of the episodes' GIN indexes (full text, metadata) are not the
        #: tenant-scoped ones (``schema.SCOPED_INDEXES``), and why; or None.
        self._scoped_missing: MissingIndexes | None = None
        self._migrate(timeout)
        if self._scoped_missing is not None:
            warnings.warn(
                f"{redact_url(url)}: lexical search and metadata filters give the same "
                "results, but a tenant's search also visits other tenants' matching rows: "
                f"{self._scoped_missing.reason}.",
                RuntimeWarning,
                stacklevel=2,
            )
        pool: ConnectionPool = ConnectionPool(
            url,
            min_size=min_connections,
            max_size=max_connections,
            timeout=timeout,
            configure=self._configure,
            name="anamnesis",
            open=False,
        )
        try:
            pool.open(wait=True, timeout=timeout)
        except PoolTimeout as exc:
            pool.close()
            raise BackendUnavailableError(
                f"cannot open connections to {redact_url(url)} within {timeout:.0f}s"
            ) from exc
        self._pool = pool

    @property
    def lexical_backend(self) -> str:
        """``tsvector-bm25``, and whether each tenant's search is confined to its rows
        by the index (``SCOPED_TEXT_INDEX``) or why not."""
        missing = self._scoped_missing
        if missing is None or SCOPED_TEXT_INDEX.name not in missing.names:
            return "tsvector-bm25 (GIN on user_id, content_tsv)"
        return f"tsvector-bm25 (GIN on content_tsv only: {missing.reason})"

    # -- connections and transactions ------------------------------------------------------
    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Run once per new pooled connection: UTC times, the vector type, and with
        ``durability="full"`` every commit flushed to disk whatever the server's default."""
        conn.execute("SET TIME ZONE 'UTC'")
        setting = SYNCHRONOUS_COMMIT[self.durability]
        if setting is not None:
            conn.execute(f"SET synchronous_commit = {setting}")
        register_vector(conn)
        conn.commit()

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection inside one transaction: committed on success, else rolled back.

        Driver errors come out as Anamnesis errors that say what to do next.
        """
        if self._pool is None:
            raise StoreError("this store is closed")
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise StoreLockedError(
                f"no free database connection within {self._pool.timeout:.0f}s; "
                "raise max_connections or reduce concurrency"
            ) from exc
        except psycopg.IntegrityError as exc:
            detail = exc.diag.message_detail or exc.diag.message_primary
            raise InvalidInputError(f"write conflicts with stored data: {detail}") from exc
        except psycopg.DataError as exc:  # from the server, or from the driver (a NUL in text)
            raise InvalidInputError(f"the database rejected a value: {exc}") from exc
        except psycopg.OperationalError as exc:
            if exc.sqlstate in _SQLSTATE_LOCK_TIMEOUTS:
                raise StoreLockedError(f"{exc}; try again") from exc
            raise StoreError(f"database error on {redact_url(self.url)}: {exc}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"query failed on {redact_url(self.url)}: {exc}") from exc

    def _migrate(self, timeout: float) -> None:
        """Create or upgrade the schema, once, even when many processes start together."""
        try:
            conn = psycopg.connect(self.url, connect_timeout=max(1, int(timeout)))
        except psycopg.Error as exc:
            raise BackendUnavailableError(
                f"cannot connect to {redact_url(self.url)}: {exc}".strip()
            ) from exc
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                self._ensure_extension(conn)
                current = self._schema_version(conn)
                if current > LATEST:
                    raise SchemaVersionError(
                        f"{redact_url(self.url)} has schema version {current}; this Anamnesis "
                        f"knows up to {LATEST}. Upgrade Anamnesis to open it."
                    )
                for version in pending(current):
                    for step in MIGRATIONS[version](self.dim):
                        if isinstance(step, str):
                            conn.execute(step)
                        else:
                            step(conn)
                self._scoped_missing = scoped_indexes(conn)
                if current < LATEST:
                    conn.execute(
                        """INSERT INTO meta (key, value) VALUES
                             ('application', %s), ('schema_version', %s), ('created_at', %s),
                             ('vector_dim', %s)
                           ON CONFLICT (key) DO UPDATE SET value = excluded.value""",
                        (
                            APPLICATION_MARK,
                            str(LATEST),
                            datetime.now(UTC).isoformat(),
                            str(self.dim),
                        ),
                    )
        except psycopg.Error as exc:
            raise StoreError(f"cannot prepare the schema on {redact_url(self.url)}: {exc}") from exc
        finally:
            conn.close()

    @staticmethod
    def _ensure_extension(conn: psycopg.Connection[Any]) -> None:
        present = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
        if present:
            return
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except (
            pg_errors.InsufficientPrivilege,
            pg_errors.FeatureNotSupported,
            pg_errors.UndefinedFile,
        ) as exc:
            raise BackendUnavailableError(
                "the pgvector extension is not installed in this database and this role "
                f"cannot install it ({exc.diag.message_primary}); as a superuser run "
                "CREATE EXTENSION vector; (pgvector >= 0.8)"
            ) from exc

    def _schema_version(self, conn: psycopg.Connection[Any]) -> int:
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename IN ('meta', 'episodes', 'sessions', 'episode_versions')"
            )
        }
        if not tables:
            return 0
        if "meta" not in tables:
            raise CorruptStoreError(
                f"schema {conn.execute('SELECT current_schema()').fetchone()[0]!r} of "  # type: ignore[index]
                f"{redact_url(self.url)} has tables named like Anamnesis's but no meta table; "
                "point Anamnesis at another schema (options=-csearch_path=...)"
            )
        rows = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if rows.get("application") != APPLICATION_MARK:
            raise CorruptStoreError(
                f"{redact_url(self.url)} holds a meta table that is not Anamnesis's"
            )
        return int(rows.get("schema_version", 0))

    # -- identity and lifecycle -------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._transaction() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    @property
    def damage(self) -> str | None:
        """Always None: PostgreSQL detects and reports damage to its own pages."""
        return None

    def check(self) -> list[str]:
        """Episodes and their full-text and vector columns agree (the server checks
        its own pages)."""
        with self._transaction() as conn:
            row = conn.execute(
                """SELECT
                     (SELECT COUNT(*) FROM episodes e WHERE e.embedding IS NULL AND NOT EXISTS
                        (SELECT 1 FROM pending_vectors p WHERE p.episode_rowid = e.rowid)),
                     (SELECT COUNT(*) FROM pending_vectors p JOIN episodes e
                        ON e.rowid = p.episode_rowid WHERE e.embedding IS NOT NULL)"""
            ).fetchone()
        missing, doubled = row if row is not None else (0, 0)
        problems = []
        if missing:
            problems.append(f"{missing} episodes have no vector")
        if doubled:
            problems.append(f"{doubled} episodes have a vector and wait for one")
        return problems

    def warm_up(self) -> None:
        """Check out a connection so the first search does not pay for connecting.

        The indexes live in the server's cache, shared by every client; nothing to load here.
        """
        with self._transaction() as conn:
            conn.execute("SELECT 1")

    def analyze(self) -> None:
        """Refresh the planner's statistics (worth doing after a bulk load)."""
        with self._transaction() as conn:
            for table in ("episodes", "sessions", "episode_versions", "text_lexemes"):
                conn.execute(f"ANALYZE {table}")

    def rebuild_lexical_statistics(self) -> None:
        """Recount BM25's corpus statistics from the stored episodes.

        The store keeps them exact through its own writes; run this after rows were
        written or deleted with plain SQL.
        """
        with self._transaction() as conn:
            rebuild_statistics(conn)

    # -- writes -----------------------------------------------------------------------------
    @contextmanager
    def bulk_load(self, *, build_memory: str | None = None) -> Iterator[None]:
        """Drop the HNSW index while a large batch is written, then build it once.

        Building the graph over all rows at the end is several times faster than
        inserting rows into it one by one (see bench/postgres_scale). Meanwhile dense search
        stays correct, by exact scan, only slower. ``build_memory`` (e.g. ``"4GB"``)
        sets maintenance_work_mem for the build: it is fastest when the whole graph
        fits (somewhat more than the raw vectors).
        """
        with self._transaction() as conn:
            conn.execute("DROP INDEX IF EXISTS episodes_embedding")
        try:
            yield
        finally:
            with self._transaction() as conn:
                if build_memory is not None:
                    conn.execute(
                        "SELECT set_config('maintenance_work_mem', %s, true)", (build_memory,)
                    )
                for statement in embedding_index(self.dim):
                    conn.execute(statement)

    def upsert_sessions(self, sessions: Sequence[Session]) -> None:
        with self._transaction() as conn:
            self._upsert_sessions(conn, sessions)

    @staticmethod
    def _upsert_sessions(conn: psycopg.Connection[Any], sessions: Sequence[Session]) -> None:
        if not sessions:
            return
        with conn.cursor() as cur:
            cur.executemany(
                """INSERT INTO sessions (user_id, id, agent_id, started_at, metadata)
                   VALUES (%s, %s, %s, %s, %s)
                   ON CONFLICT (user_id, id) DO UPDATE SET
                     started_at = COALESCE(sessions.started_at, excluded.started_at)""",
                [
                    (
                        s.user_id,
                        s.id,
                        s.agent_id,
                        s.started_at,
                        json_param(s.metadata, "session metadata"),
                    )
                    for s in sessions
                ],
            )

    # -- background indexing ----------------------------------------------------------------
    def pending_vectors(self, limit: int) -> list[PendingVector]:
        """The oldest ``limit`` episodes still waiting for a vector, in rowid order."""
        with self._transaction() as conn:
            rows = conn.execute(
                """SELECT p.episode_rowid, e.user_id, e.content_hash, e.content, e.speaker
                   FROM pending_vectors p JOIN episodes e ON e.rowid = p.episode_rowid
                   ORDER BY p.episode_rowid LIMIT %s""",
                (limit,),
            ).fetchall()
        return [PendingVector(*row) for row in rows]

    def pending_count(self, scope: Scope | None) -> int:
        """How many episodes of ``scope`` (None: the whole store) wait for a vector."""
        sql, params = self._pending_sql(scope)
        with self._transaction() as conn:
            row = conn.execute(sql, params).fetchone()
        return int(row[0]) if row is not None else 0

    def index_pending(self, vectors: Sequence[tuple[PendingVector, np.ndarray]]) -> int:
        """Write the vectors of pending episodes and take their marks away, in one
        transaction; returns how many were written.

        An episode forgotten, or whose text an ``update`` changed (which writes its new
        vector itself), since it was read is left alone: the mark is taken only while
        the episode has the text embedded, and the vector written only if it still has.
        """
        written = 0
        with self._transaction() as conn:
            for pending, vector in vectors:
                taken = conn.execute(
                    """DELETE FROM pending_vectors p USING episodes e
                       WHERE p.episode_rowid = %s AND e.rowid = p.episode_rowid
                         AND e.content_hash = %s
                       RETURNING p.episode_rowid""",
                    (pending.rowid, pending.content_hash),
                ).fetchone()
                if taken is None:
                    continue
                updated = conn.execute(
                    "UPDATE episodes SET embedding = %s WHERE rowid = %s AND content_hash = %s",
                    (np.asarray(vector, dtype=np.float32), pending.rowid, pending.content_hash),
                )
                written += updated.rowcount
        return written

    def insert_episodes(
        self,
        episodes: Sequence[Episode],
        vectors: np.ndarray | None,
        sessions: Sequence[Session] = (),
        versions: Sequence[EpisodeVersion] = (),
    ) -> None:
        if vectors is not None and len(episodes) != len(vectors):
            raise ValueError("one vector per episode is required")
        with self._transaction() as conn:
            self._upsert_sessions(conn, sessions)
            self._insert_hot(conn, episodes, vectors, versions)

    @staticmethod
    def _insert_hot(
        conn: psycopg.Connection[Any],
        episodes: Sequence[Episode],
        vectors: np.ndarray | None,
        versions: Sequence[EpisodeVersion] = (),
    ) -> None:
        """Insert episodes with their vectors (None: without, each marked as waiting for
        one in ``pending_vectors``), time mentions, prior versions and BM25 statistics,
        inside the caller's transaction."""
        rows = []
        each: list[np.ndarray | None] = (
            [None] * len(episodes)
            if vectors is None
            else list(np.asarray(vectors, dtype=np.float32))
        )
        for e, vector in zip(episodes, each, strict=True):
            check_storable(e.content, f"episode {e.id}")
            rows.append(
                (
                    e.id,
                    e.user_id,
                    e.agent_id,
                    e.session_id,
                    e.turn_index,
                    e.role,
                    e.speaker,
                    e.content,
                    e.modality,
                    e.event_time,
                    e.recorded_at,
                    json_param(e.metadata, f"metadata of episode {e.id}"),
                    e.content_hash,
                    e.version,
                    token_count(e.content),
                    vector,
                )
            )
        version_rows = []
        for v in versions:
            check_storable(v.content, f"version {v.version} of episode {v.episode_id}")
            version_rows.append(
                (
                    v.episode_id,
                    v.version,
                    v.content,
                    json_param(v.metadata, "version metadata"),
                    replaced_at(v),
                )
            )
        with conn.cursor() as cur:
            if rows:
                cur.executemany(
                    """INSERT INTO episodes (id, user_id, agent_id, session_id, turn_index,
                         role, speaker, content, modality, event_time, recorded_at,
                         metadata, content_hash, version, content_tokens, embedding)
                       VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
                               %s)""",
                    rows,
                )
            if version_rows:
                cur.executemany(
                    "INSERT INTO episode_versions (episode_id, version, content, metadata, "
                    "changed_at) VALUES (%s, %s, %s, %s, %s)",
                    version_rows,
                )
        insert_times(
            conn,
            [t for e in episodes for t in time_rows(e.id, e.user_id, e.content, e.event_time)],
        )
        if rows:
            count_episodes(conn, "e.id = ANY(%s)", [[e.id for e in episodes]], 1)
        if rows and vectors is None:
            conn.execute(
                """INSERT INTO pending_vectors (episode_rowid, user_id)
                   SELECT rowid, user_id FROM episodes WHERE id = ANY(%s) ORDER BY rowid""",
                ([e.id for e in episodes],),
            )

    def existing_ids(self, episode_ids: Sequence[str]) -> set[str]:
        """Which of these ids are already stored (in any scope)."""
        if not episode_ids:
            return set()
        with self._transaction() as conn:
            rows = conn.execute(
                "SELECT id FROM episodes WHERE id = ANY(%s)", (list(episode_ids),)
            ).fetchall()
        return {r[0] for r in rows}

    def next_turn_index(self, user_id: str, session_id: str) -> int:
        """The position the next turn of a session takes."""
        with self._transaction() as conn:
            row = conn.execute(
                """SELECT MAX(turn_index) FROM (
                     SELECT turn_index FROM episodes WHERE user_id = %s AND session_id = %s
                     UNION ALL
                     SELECT turn_index FROM archived_episodes
                     WHERE user_id = %s AND session_id = %s) AS turns""",
                (user_id, session_id, user_id, session_id),
            ).fetchone()
        return 0 if row is None or row[0] is None else row[0] + 1

    def vectors_for_hashes(self, hashes: Sequence[str], scope: Scope) -> dict[str, np.ndarray]:
        unique = list(dict.fromkeys(hashes))
        if not unique:
            return {}
        with self._transaction() as conn:
            rows = conn.execute(
                """SELECT DISTINCT ON (content_hash) content_hash, embedding FROM episodes
                   WHERE user_id = %s AND content_hash = ANY(%s) AND embedding IS NOT NULL
                   ORDER BY content_hash, rowid""",
                (scope.user_id, unique),
                binary=True,
            ).fetchall()
        return {content_hash: vector for content_hash, vector in rows}

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
        check_storable(content, "content")
        new_metadata = json_param(metadata, "metadata")
        where, params = scope_sql(scope)
        with self._transaction() as conn:
            row = conn.execute(
                f"SELECT e.rowid, e.version, e.user_id, e.event_time, e.content = %s "
                f"FROM episodes e WHERE e.id = %s AND {where} FOR UPDATE",
                [content, episode_id, *params],
            ).fetchone()
            if row is None:
                raise NotFoundError(f"no episode {episode_id!r} in this scope")
            rowid, version, user_id, event_time, unchanged = row
            if not unchanged:
                conn.execute("DELETE FROM episode_times WHERE episode_id = %s", (episode_id,))
                insert_times(conn, time_rows(episode_id, user_id, content, event_time))
            # The old text leaves the BM25 statistics and the new one enters, in one change.
            count_replacement(conn, rowid, content)
            conn.execute(
                "INSERT INTO episode_versions (episode_id, version, content, metadata, changed_at) "
                "SELECT id, version, content, metadata, %s FROM episodes WHERE rowid = %s",
                (changed_at, rowid),
            )
            updated = conn.execute(
                f"""UPDATE episodes e SET content = %s, content_tokens = %s, content_hash = %s,
                      metadata = %s, version = %s, embedding = COALESCE(%s, e.embedding)
                    WHERE e.rowid = %s RETURNING {EPISODE_COLUMNS}""",
                (
                    content,
                    token_count(content),
                    content_hash,
                    new_metadata,
                    version + 1,
                    None if vector is None else np.asarray(vector, dtype=np.float32),
                    rowid,
                ),
            ).fetchone()
            if vector is not None:  # its vector is written here, not by the indexer
                conn.execute("DELETE FROM pending_vectors WHERE episode_rowid = %s", (rowid,))
        return episode(updated)  # type: ignore[arg-type]

    def replace_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        if not vectors:
            return
        dims = {np.asarray(v).shape[-1] for v in vectors.values()}
        with self._transaction() as conn:
            if dims != {self._column_dim(conn)}:
                if len(dims) != 1:
                    raise InvalidInputError(f"vectors of mixed dimensions {sorted(dims)}")
                self._change_dim(conn, dims.pop())
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE episodes SET embedding = %s WHERE id = %s",
                    [(np.asarray(v, dtype=np.float32), i) for i, v in vectors.items()],
                )
            conn.execute(
                """DELETE FROM pending_vectors p USING episodes e
                   WHERE e.rowid = p.episode_rowid AND e.id = ANY(%s)""",
                (list(vectors),),
            )

    @staticmethod
    def _column_dim(conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(
            """SELECT atttypmod FROM pg_attribute
               WHERE attrelid = 'episodes'::regclass AND attname = 'embedding'"""
        ).fetchone()
        assert row is not None
        return int(row[0])

    def _change_dim(self, conn: psycopg.Connection[Any], dim: int) -> None:
        """Switch the embedding column to ``dim`` (re-embedding with another model).

        Every stored vector is dropped and every episode marked as waiting for one, so
        that a re-embedding cut short leaves each episode with a vector or a mark; the
        caller re-embeds every episode.
        """
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute("DROP INDEX IF EXISTS episodes_embedding")
        conn.execute("DROP INDEX IF EXISTS episodes_scope_vectors")
        for table in ("episodes", "facts", "archived_episodes"):
            conn.execute(
                f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({int(dim)}) USING NULL"
            )
        conn.execute(
            """INSERT INTO pending_vectors (episode_rowid, user_id)
               SELECT rowid, user_id FROM episodes ON CONFLICT DO NOTHING"""
        )
        for statement in [*embedding_index(dim), *scope_vector_index(dim)]:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('vector_dim', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(dim),),
        )
        self.dim = dim
