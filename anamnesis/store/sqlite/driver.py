"""The SQLite library the store runs on, and what it can do.

The store uses ``sqlean`` (the ``sqlean.py`` package: the standard library's
``sqlite3`` module built against a recent bundled SQLite) so that FTS5's row-level
``secure-delete`` is there: with it, a forget removes the erased words from the
full-text index in place, instead of rewriting the whole index. Every module of the
store imports ``sqlite3`` from here, so connections and the exception classes caught
come from the same library.

Where ``sqlean`` cannot be imported, the standard library's ``sqlite3`` is used; if
its SQLite is older than ``SECURE_DELETE_SINCE`` a forget then rewrites the full-text
indexes each time (a cost that grows with the store), says so once as a warning, and
``Memory.capabilities["erasure"]`` shows it.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3
else:
    try:
        import sqlean as sqlite3
    except ImportError:  # pragma: no cover - sqlean is a dependency; this is the fallback
        import sqlite3

#: The first SQLite whose FTS5 has the ``secure-delete`` option.
SECURE_DELETE_SINCE = (3, 44, 0)
#: Whether this SQLite's FTS5 can erase a row's words in place.
SECURE_DELETE = sqlite3.sqlite_version_info >= SECURE_DELETE_SINCE
#: The library in use: ``sqlean`` or ``sqlite3``.
LIBRARY = sqlite3.__name__

_warned = False


def erasure(in_place: bool = SECURE_DELETE) -> str:
    """How a forget removes words from the full-text indexes (``Memory.capabilities``):
    in place, or by rewriting them (a store that cannot be written, or an old SQLite)."""
    if in_place:
        return f"fts5 secure-delete (SQLite {sqlite3.sqlite_version}, {LIBRARY})"
    if SECURE_DELETE:
        return f"fts5 rewrite per forget (SQLite {sqlite3.sqlite_version}, {LIBRARY})"
    return (
        f"fts5 rewrite per forget (SQLite {sqlite3.sqlite_version} has no secure-delete: "
        "install sqlean-py for erasure whose cost does not grow with the store)"
    )


def warn_once_without_secure_delete() -> None:
    """Warn, once per process, that erasure falls back to rewriting the indexes."""
    global _warned
    if SECURE_DELETE or _warned:
        return
    _warned = True
    warnings.warn(
        f"Anamnesis runs on SQLite {sqlite3.sqlite_version} ({LIBRARY}), whose FTS5 has no "
        "secure-delete: each forget rewrites the full-text indexes, which takes longer as "
        "the store grows. Install sqlean-py (a dependency of anamnesis) to erase in place.",
        RuntimeWarning,
        stacklevel=4,
    )
