"""Is this SQLite file a healthy Anamnesis store? Recognition, damage, and checks.

* **Recognition** happens on a read-only connection before anything is written, so a
  foreign SQLite file (or any other file) is refused byte-for-byte untouched.
* **Damage** found by any operation (SQLite reports a malformed page) is recorded in
  a marker file beside the store, ``<store>.damaged`` (the store itself may not be
  writable safely). While the marker exists the store refuses every write: reads
  still work, so what is readable can be exported. ``anamnesis check`` removes the
  marker once a full check passes.
* **Checks**: on open, a cheap one (the file's size agrees with its page count, and
  the schema and meta table read back); on request (``full_check``), SQLite's
  ``integrity_check``, FTS5's ``integrity-check`` of both full-text indexes, and the
  agreement of episodes, full-text rows and vectors.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ...errors import CorruptStoreError, StoreLockedError
from .driver import sqlite3
from .sql import operational_error

#: Words SQLite uses when a page or the file is damaged (SQLITE_CORRUPT, SQLITE_NOTADB).
_DAMAGE_WORDS = ("malformed", "not a database", "corrupt", "disk image")
#: Stores up to this size get SQLite's ``quick_check`` (every page read) at open, whose
#: cost grows with the file (timings: study "Per dataset", "Figures from the code's comments").
#: Larger stores get only the structural check at open; ``full_check`` reads all.
QUICK_CHECK_MAX_BYTES = 16 * 1024 * 1024
#: The full-text indexes and the tables whose rows they index.
FTS_TABLES = (("episodes_fts", "episodes"), ("facts_fts", "facts"))

REPAIR_HINT = (
    "run `anamnesis check` for a full report; then export what is readable "
    "(`anamnesis export`) and import it into a new store, or restore a backup"
)


def marker_path(path: Path) -> Path:
    """The file that records damage found in the store at ``path``."""
    return path.with_name(path.name + ".damaged")


def recorded_damage(path: Path) -> str | None:
    """Why the store at ``path`` was found damaged, or None."""
    marker = marker_path(path)
    try:
        return marker.read_text(encoding="utf-8").strip() or "damage was found"
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"damage marker {marker} is unreadable: {exc}"


def record_damage(path: Path, reason: str) -> None:
    """Note ``reason`` beside the store (best effort: a read-only directory keeps
    the refusal to this process)."""
    try:
        descriptor = os.open(marker_path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(reason + "\n")
    except OSError:
        pass


def clear_damage(path: Path) -> None:
    marker_path(path).unlink(missing_ok=True)


def read_only_reason(path: Path) -> str | None:
    """Why the existing store at ``path`` cannot be written here, or None.

    SQLite writes beside the store too (its -wal and -shm files), so the directory
    must be writable as well as the file.
    """
    if not os.access(path, os.W_OK):
        return "the file is read-only"
    if not os.access(path.parent, os.W_OK):
        return "its directory (or file system) is read-only"
    return None


def connection_uri(path: Path, read_only: bool) -> str:
    """The URI a connection opens: read-only when the store cannot be written, and
    then immutable when SQLite cannot create the shared-memory file it would need
    (nothing can change the file under a read-only file system)."""
    if not read_only:
        return str(path)
    uri = path.absolute().as_uri()
    shm = Path(f"{path}-shm")
    return f"{uri}?mode=ro" if shm.exists() else f"{uri}?mode=ro&immutable=1"


def is_damage(exc: BaseException) -> bool:
    """Whether a SQLite error says the file is damaged (not busy, not misused)."""
    return isinstance(exc, sqlite3.DatabaseError) and any(
        word in str(exc).lower() for word in _DAMAGE_WORDS
    )


def corrupt(path: Path, exc: BaseException) -> CorruptStoreError:
    """The error raised when an operation meets damage in the store at ``path``."""
    return CorruptStoreError(f"{path} is damaged ({exc}): {REPAIR_HINT}")


def identify(path: Path, application: str) -> None:
    """Refuse, without writing a byte, a file that is not an Anamnesis store.

    An empty file or a SQLite file without tables is accepted (a new store). The
    file is read through SQLite only: closing any other descriptor of it would drop
    the locks this process's open connections hold on it (POSIX lock semantics), and
    another process could then delete the WAL they are using.
    """
    read_only = read_only_reason(path) is not None
    uri = connection_uri(path, True) if read_only else f"{path.resolve().as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=10.0)
    try:
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if not tables:
            return
        if "meta" not in tables:
            raise CorruptStoreError(
                f"{path} is a SQLite database but not an Anamnesis store "
                f"(tables: {', '.join(sorted(tables)[:5])})"
            )
        row = conn.execute("SELECT value FROM meta WHERE key = 'application'").fetchone()
        if row is None or row[0] != application:
            raise CorruptStoreError(f"{path} is not an Anamnesis store")
    except sqlite3.DatabaseError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise StoreLockedError(f"{path} is locked by another process") from exc
        raise CorruptStoreError(
            f"{path} is not a readable SQLite database ({exc}); "
            "restore it from an export, or point Anamnesis at another file"
        ) from exc
    finally:
        conn.close()


def quick_check(conn: sqlite3.Connection, path: Path) -> str | None:
    """A cheap check run at every open: what is wrong, or None.

    Catches a truncated file and damage to the schema or meta pages; in a store of
    up to ``QUICK_CHECK_MAX_BYTES``, damage to any page (SQLite's ``quick_check``).
    In a larger one, damage inside data pages is found by the operation that reads
    them, or by ``full_check``.
    """
    try:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        size = path.stat().st_size
        wal = Path(f"{path}-wal")
        if size < pages * page_size and not (wal.exists() and wal.stat().st_size > 0):
            return f"the file has {size} bytes but {pages} pages of {page_size}: it was truncated"
        conn.execute("SELECT COUNT(*) FROM meta").fetchone()
        if size <= QUICK_CHECK_MAX_BYTES:
            found = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
            if found != ["ok"]:
                return "; ".join(found[:3])
    except sqlite3.DatabaseError as exc:
        if not is_damage(exc):
            raise
        return str(exc)
    return None


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the file has the table ``name`` (False if the schema cannot be read)."""
    try:
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        ).fetchone()
    except sqlite3.DatabaseError:
        return False
    return row is not None


def full_check(conn: sqlite3.Connection) -> list[str]:
    """Every problem a full check finds (empty: healthy). Reads the whole file."""
    problems = [
        row[0] for row in conn.execute("PRAGMA integrity_check").fetchall() if row[0] != "ok"
    ]
    for fts, _ in FTS_TABLES:
        try:
            conn.execute(f"INSERT INTO {fts} ({fts}) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as exc:
            problems.append(f"full-text index {fts}: {exc}")
    # An episode has a vector, or a mark saying it waits for one (background indexing;
    # a store opened without migrating it has no such marks).
    pending = has_table(conn, "pending_vectors")
    counts = {
        "episodes": "SELECT COUNT(*) FROM episodes",
        "full-text rows": "SELECT COUNT(*) FROM episodes_fts_docsize",
        "vectors and episodes waiting for one": "SELECT (SELECT COUNT(*) FROM vectors) "
        + ("+ (SELECT COUNT(*) FROM pending_vectors)" if pending else ""),
    }
    found = {}
    for what, sql in counts.items():
        try:
            found[what] = conn.execute(sql).fetchone()[0]
        except sqlite3.DatabaseError as exc:
            problems.append(f"cannot count {what}: {exc}")
    if len(set(found.values())) > 1:
        problems.append(
            "episodes, full-text rows and vectors disagree: "
            + ", ".join(f"{count} {what}" for what, count in found.items())
        )
    try:
        orphans = conn.execute(
            "SELECT COUNT(*) FROM vectors v LEFT JOIN episodes e ON e.rowid = v.episode_rowid "
            "WHERE e.rowid IS NULL"
        ).fetchone()[0]
        if orphans:
            problems.append(f"{orphans} vectors belong to no episode")
    except sqlite3.DatabaseError as exc:
        problems.append(f"cannot match vectors to episodes: {exc}")
    if not pending:
        return problems
    try:
        doubled, stray = conn.execute(
            """SELECT
                 (SELECT COUNT(*) FROM pending_vectors p
                  JOIN vectors v ON v.episode_rowid = p.episode_rowid),
                 (SELECT COUNT(*) FROM pending_vectors p
                  LEFT JOIN episodes e ON e.rowid = p.episode_rowid WHERE e.rowid IS NULL)"""
        ).fetchone()
        if doubled:
            problems.append(f"{doubled} episodes have a vector and wait for one")
        if stray:
            problems.append(f"{stray} marks of episodes waiting for a vector belong to none")
    except sqlite3.DatabaseError as exc:
        problems.append(f"cannot match the episodes waiting for a vector: {exc}")
    return problems


def guard_public_methods(cls: type) -> None:
    """Wrap every public method of ``cls`` (inherited ones too) so that a SQLite error
    escaping it becomes typed: damage a ``CorruptStoreError`` recorded on the store
    (``store._damage_found``), anything else a ``StoreError``. Generators are guarded
    while they are iterated."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attribute = inspect.getattr_static(cls, name)
        if not inspect.isfunction(attribute) or getattr(attribute, "_guarded", False):
            continue
        setattr(cls, name, _guarded(attribute))


def _typed(store: Any, exc: sqlite3.Error) -> Exception:
    if is_damage(exc):
        return store._damage_found(exc)
    return operational_error(exc, store.path, "an operation")


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generator(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from method(self, *args, **kwargs)
            except sqlite3.Error as exc:
                raise _typed(self, exc) from exc

        generator._guarded = True  # type: ignore[attr-defined]
        return generator

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise _typed(self, exc) from exc

    call._guarded = True  # type: ignore[attr-defined]
    return call
