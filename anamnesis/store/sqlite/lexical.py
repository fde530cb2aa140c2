"""Keeps a ``LexicalIndex`` in step with the FTS5 index of one SQLite file.

The index is built from the FTS table's own postings (an ``fts5vocab`` table in the
connection's temp schema: no change to the file) and then follows the file:

- rows appended since (by this process or another; rowids only grow) are tokenised
  by a temporary FTS5 table with the same tokenizer, and added;
- rows this process deletes or changes are applied in place, when the file's
  ``vector_epoch`` shows no other process changed anything meanwhile;
- any other change (another process's delete or update bumps ``vector_epoch``)
  rebuilds the index.

Small amounts of work are done inside the search that needs them. Larger ones (the
first build of a big store, a large catch-up) run on a background thread with its own
connection, and searches use FTS5 itself until the index is current: the results are
the same, only slower. ``warm_up`` builds synchronously.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

import numpy as np

from ...errors import StoreError
from ..index.lexical import CONTENT_COLUMN, SCOPE_COLUMN, LexicalIndex, Postings, read_postings
from .driver import sqlite3
from .lexical_file import LexicalFile
from .sql import operational_error, private_connection

#: Work up to this many rows is done inside a search (a full build of a store this
#: small, or a catch-up of this many rows, is quick next to a search's budget); more
#: runs in the background while searches use FTS5 directly.
SYNC_ROWS = 2000
#: Query-term tokenisations remembered per store.
TERM_CACHE = 50_000
FTS_TABLE = "episodes_fts"
_MAIN_VOCAB = "temp.anamnesis_fts_instances"
_PENDING = "anamnesis_pending"
_PENDING_VOCAB = "temp.anamnesis_pending_instances"
_TERMS = "anamnesis_terms"
_TERMS_VOCAB = "temp.anamnesis_term_instances"
#: Words ``_tokens`` inserts per statement (two parameters each).
_TERMS_PER_STATEMENT = 400


def _layout(conn: sqlite3.Connection) -> tuple[str, list[str]] | None:
    """The FTS table's tokenizer spec and columns, or None if it is not the expected one."""
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (FTS_TABLE,)
    ).fetchone()
    if row is None:
        return None
    match = re.search(r"tokenize\s*=\s*'([^']*)'", row[0])
    columns = [r[1] for r in conn.execute(f"PRAGMA main.table_info({FTS_TABLE})")]
    if match is None or CONTENT_COLUMN not in columns or SCOPE_COLUMN not in columns:
        return None
    return match.group(1), columns


def _epoch(conn: sqlite3.Connection) -> str:
    row = conn.execute("SELECT value FROM meta WHERE key = 'vector_epoch'").fetchone()
    return row[0] if row else "0"


def _newest_rowid(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT max(rowid) FROM episodes").fetchone()[0] or 0


class SQLiteLexical:
    """The in-memory lexical index of one SQLite store, and its upkeep.

    ``lock`` is the store's lock: every method that touches ``conn`` is called with it
    held (it is re-entrant), and the background builder takes it only to install.
    """

    def __init__(
        self, path: Path, lock: threading.RLock, busy_timeout: float, durability: str = "normal"
    ) -> None:
        self._path = path
        self._lock = lock
        self._busy_timeout = busy_timeout
        self._durability = durability
        self._layout: tuple[str, list[str]] | None = None
        self._prepared: set[int] = set()
        self._index: LexicalIndex | None = None
        self._epoch: str | None = None
        self._stale: set[int] = set()
        self._term_tokens: dict[str, tuple[str, ...]] = {}
        self._worker: threading.Thread | None = None
        #: Held by whoever runs ``_step``; the connection a build reads through.
        self._build_lock = threading.Lock()
        self._build_conn: sqlite3.Connection | None = None
        self._warned = False
        self._closed = False
        #: Set by ``stop_build``: the build was interrupted on purpose, not failed.
        self._stopped = False
        #: Why the last build failed, until one succeeds (searches then use FTS5).
        self.failure: str | None = None
        #: The copy saved beside the store, tried once before a first build.
        self.file = LexicalFile(path)
        self._load_tried = False

    # -- temp tables ---------------------------------------------------------------------
    def _prepare(self, conn: sqlite3.Connection) -> bool:
        """Create this connection's temp tables; False when the FTS table is not supported."""
        if id(conn) in self._prepared:
            return True
        if self._layout is None:
            self._layout = _layout(conn)
            if self._layout is None:
                return False
        tokenize, columns = self._layout
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {_MAIN_VOCAB} "
            f"USING fts5vocab(main, {FTS_TABLE}, instance)"
        )
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_PENDING} "
            f"USING fts5({', '.join(columns)}, tokenize='{tokenize}')"
        )
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {_PENDING_VOCAB} "
            f"USING fts5vocab(temp, {_PENDING}, instance)"
        )
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_TERMS} USING fts5(t, tokenize='{tokenize}')"
        )
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {_TERMS_VOCAB} "
            f"USING fts5vocab(temp, {_TERMS}, instance)"
        )
        self._prepared.add(id(conn))
        return True

    def _pending_postings(
        self, conn: sqlite3.Connection, after: int, stale: Sequence[int]
    ) -> Postings:
        """Postings of rows above ``after`` and of ``stale`` rows, tokenised by FTS5."""
        assert self._layout is not None
        columns = ", ".join(self._layout[1])
        # ``rowid > ? OR rowid IN ()`` is planned as a scan of every episode: the
        # empty list is left out, so the appended rows are found by a rowid search.
        where = "rowid > ?"
        if stale:
            where += f" OR rowid IN ({','.join('?' * len(stale))})"
        conn.execute(
            f"INSERT INTO temp.{_PENDING} (rowid, {columns}) SELECT rowid, {columns} "
            f"FROM main.episodes WHERE {where}",
            [after, *stale],
        )
        try:
            return read_postings(conn, _PENDING_VOCAB)
        finally:
            conn.execute(f"DELETE FROM temp.{_PENDING}")

    def _tokens(self, conn: sqlite3.Connection, words: Sequence[str]) -> list[tuple[str, ...]]:
        """Each word as FTS5's tokenizer splits and stems it (cached)."""
        missing = [w for w in dict.fromkeys(words) if w not in self._term_tokens]
        if missing:
            if len(self._term_tokens) + len(missing) > TERM_CACHE:
                self._term_tokens.clear()
            found: dict[int, list[str]] = {}
            try:
                # One statement per few hundred words rather than one per word: FTS5
                # writes its shadow tables once per statement.
                for start in range(0, len(missing), _TERMS_PER_STATEMENT):
                    chunk = missing[start : start + _TERMS_PER_STATEMENT]
                    conn.execute(
                        f"INSERT INTO temp.{_TERMS} (rowid, t) VALUES "
                        + ",".join("(?, ?)" for _ in chunk),
                        [value for pair in enumerate(chunk, start + 1) for value in pair],
                    )
                for doc, term in conn.execute(
                    f"SELECT doc, term FROM {_TERMS_VOCAB} ORDER BY doc, offset"
                ):
                    found.setdefault(doc, []).append(term)
            finally:
                conn.execute(f"DELETE FROM temp.{_TERMS}")
            for number, word in enumerate(missing, 1):
                self._term_tokens[word] = tuple(found.get(number, ()))
        return [self._term_tokens[w] for w in words]

    # -- keeping in step -----------------------------------------------------------------
    def _step(self, conn: sqlite3.Connection) -> None:
        """Bring the index up to date through ``conn`` (any connection to the file).
        The caller holds ``_build_lock``.

        Reads happen in one read transaction; the result is installed under the lock
        only if nobody else changed the index meanwhile (else the next search re-plans).
        """
        with self._lock:
            index, known, stale = self._index, self._epoch, sorted(self._stale)
            after = index.max_rowid if index is not None else 0
        conn.execute("BEGIN")
        try:
            epoch = _epoch(conn)
            rebuild = index is None or epoch != known
            if rebuild:
                postings = read_postings(conn, _MAIN_VOCAB)
            else:
                postings = self._pending_postings(conn, after, stale)
        finally:
            conn.execute("COMMIT")
        fresh = LexicalIndex() if rebuild else None
        if fresh is not None:
            fresh.add(postings)
        with self._lock:
            unchanged = (
                self._index is index
                and self._epoch == known
                and sorted(self._stale) == stale
                and (index is None or index.max_rowid == after)
            )
            if self._closed or not unchanged:
                return
            if fresh is not None:
                self._index = fresh
                self.file.mapped = False
                self.failure = None
                self.file.unsaved = fresh.documents
            else:
                assert index is not None
                index.add(postings)
                self.file.unsaved += int(postings.length_rowids.size)
            self._epoch = epoch
            self._stale.clear()

    def _load(self, conn: sqlite3.Connection) -> None:
        """Take the copy saved beside the store, once, if there is no index yet and the
        copy matches the store (rows appended since are caught up as usual)."""
        if self._index is not None or self._load_tried or self._layout is None:
            return
        self._load_tried = True
        epoch = _epoch(conn)
        index = self.file.load(conn, epoch, self._layout[0])
        if index is not None:
            self._index, self._epoch, self._stale = index, epoch, set()
            self.failure = None

    def _plan(self, conn: sqlite3.Connection) -> int:
        """Rows of work needed before the index is current (0: it is current)."""
        newest = _newest_rowid(conn)
        if self._index is None or _epoch(conn) != self._epoch:
            return max(newest, 1)
        return max(newest - self._index.max_rowid, 0) + len(self._stale)

    def _start_worker(self) -> None:
        if self._worker is not None and self._worker.is_alive():
            return
        self._worker = threading.Thread(
            target=self._work, name="anamnesis-lexical-index", daemon=True
        )
        self._worker.start()

    def _work(self) -> None:
        try:
            self.warm_up()
        except StoreError as exc:
            self._warn(exc)

    def _warn(self, exc: Exception) -> None:
        self.failure = str(exc)
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"building the in-memory lexical index of {self._path} failed ({exc}); "
                "lexical search keeps using FTS5 directly (same results, slower)",
                RuntimeWarning,
                stacklevel=2,
            )

    # -- the store's entry points -----------------------------------------------------------
    def search(
        self,
        conn: sqlite3.Connection,
        terms: Sequence[str],
        scope_tokens: Sequence[str],
        allowed_rowids: Callable[[], np.ndarray | None],
        limit: int,
        allowed_key: Hashable | None = None,
    ) -> list[tuple[int, float]] | None:
        """Ranked ``(rowid, score)`` pairs, or None when FTS5 must answer this search
        (index not current yet, or a term FTS5 would treat as a multi-word phrase).
        ``allowed_rowids`` gives the rows the filters let through (None: no filters); it
        is called only when the index answers and has not remembered them under
        ``allowed_key`` (scope and filters that name the same rows while the file's
        rows do not change: ``LexicalIndex.search``)."""
        index = self._current(conn)
        tokens = self._tokens(conn, [*terms, *scope_tokens]) if index is not None else []
        if index is None or any(len(t) != 1 for t in tokens):
            return None
        query = [t[0] for t in tokens[: len(terms)]]
        scope = [t[0] for t in tokens[len(terms) :]]
        key = None if allowed_key is None else (self._epoch, allowed_key)
        return index.search(query, scope, limit, allowed_rowids, key)

    def rank(
        self, conn: sqlite3.Connection, terms: Sequence[str], rowids: Sequence[int], limit: int
    ) -> list[tuple[int, float]] | None:
        """``search`` among ``rowids`` only (``LexicalIndex.rank_rows``), or None when
        FTS5 must answer it (as for ``search``)."""
        index = self._current(conn)
        tokens = self._tokens(conn, terms) if index is not None else []
        if index is None or any(len(t) != 1 for t in tokens):
            return None
        return index.rank_rows([t[0] for t in tokens], rowids, limit)

    def _current(self, conn: sqlite3.Connection) -> LexicalIndex | None:
        """The index, caught up with the file when little is missing; None while it is
        not current (a background build then catches it up, and FTS5 answers)."""
        if not self._prepare(conn):
            return None
        self._load(conn)
        work = self._plan(conn)
        if work > SYNC_ROWS:
            self._start_worker()
            return None
        if work:
            if not self._build_lock.acquire(blocking=False):
                return None  # a background build is running: FTS5 answers meanwhile
            try:
                self._step(conn)
            finally:
                self._build_lock.release()
            if self._plan(conn):
                return None
        return self._index

    def warm_up(self) -> None:
        """Build or catch up the index now, on a connection of its own."""
        with self._build_lock:
            conn = sqlite3.connect(
                str(self._path),
                timeout=self._busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            private_connection(conn, self._durability)
            # A stop or a close aborts the build's statement within a few thousand steps,
            # even one that starts just after it (an interrupt misses those).
            conn.set_progress_handler(lambda: int(self._stopped or self._closed), 1000)
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._build_conn = conn
            try:
                if self._prepare(conn):
                    with self._lock:
                        self._load(conn)
                        check = self.file.checking()
                    if check is not None and not check():
                        with self._lock:
                            self._index = None  # damaged: built from FTS5 again
                            self.file.mapped = False
                    self._step(conn)
                    self._save(conn)
            except sqlite3.Error as exc:
                if self._closed or self._stopped:
                    return  # close() or stop_build() interrupted the build
                raise operational_error(exc, self._path, "building the lexical index") from exc
            finally:
                with self._lock:
                    self._build_conn = None
                    self._stopped = False
                    self._prepared.discard(id(conn))
                conn.close()

    def after_change(
        self, removed: Sequence[int], changed: Sequence[int], epoch_before: str, epoch_after: str
    ) -> None:
        """Apply this process's committed deletes (``removed``) and content changes
        (``changed``); ``epoch_before`` is the file's epoch inside that transaction
        before its own bump. If the index was not at that epoch, leave it to rebuild."""
        with self._lock:
            if self._index is None or self._epoch != epoch_before:
                return
            self._index.remove([*removed, *changed])
            self._stale.update(changed)
            self._stale.difference_update(removed)
            self._epoch = epoch_after

    def _save(self, conn: sqlite3.Connection) -> None:
        """Save the index beside the store when it is in step and the copy there lacks
        enough of it (``LexicalFile.wanted``)."""
        with self._lock:
            index, epoch = self._index, self._epoch
            if index is None or epoch is None or self._stale or self._layout is None:
                return
            tokenize = self._layout[0]

        def content_hash(rowid: int) -> str | None:
            row = conn.execute(
                "SELECT content_hash FROM episodes WHERE rowid = ?", (rowid,)
            ).fetchone()
            return row[0] if row else None

        self.file.save(index, epoch, tokenize, lambda: _epoch(conn), content_hash, self._lock)

    @property
    def state(self) -> str:
        """What answers lexical searches now, in words (for ``capabilities``)."""
        if self.failure is not None:
            return f"in-memory index failed: {self.failure}; FTS5 answers, same ranking"
        if self._index is None:
            return "in-memory postings not loaded yet: FTS5 answers meanwhile, same ranking"
        if self.file.mapped:
            return "in-memory postings, mapped from beside the store"
        return "in-memory postings"

    @property
    def ready(self) -> bool:
        """Whether an index is loaded (it may still need a catch-up)."""
        return self._index is not None

    def stop_build(self) -> None:
        """Interrupt a background build, which the next search starts again. A forget
        calls it before truncating the log: that waits for every read, and the build's
        read holds the erased rows (its result would be rebuilt anyway)."""
        with self._lock:
            if self._build_conn is not None:
                self._stopped = True
                self._build_conn.interrupt()

    def close(self, conn: sqlite3.Connection | None = None) -> None:
        """Stop a background build, save the index (through the store's ``conn``) if
        the copy beside the store lacks enough of it, and drop it."""
        with self._lock:
            if conn is not None and not self._closed:
                self._save(conn)  # ``LexicalFile.save`` handles its own failures
            self._closed = True
            if self._build_conn is not None:
                self._build_conn.interrupt()
            self._index = None
            self.file.drop_check()
            self._prepared.clear()
