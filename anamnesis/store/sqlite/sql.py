"""SQL fragments and row mapping for the SQLite store: scope, filters, FTS5 queries."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ...errors import ReadOnlyStoreError, StoreError, StoreFullError, StoreLockedError
from ...types import Episode, Scope
from ..base import Filters, episode_of, filter_clauses, scope_clauses
from .driver import sqlite3

EPISODE_COLUMNS = (
    "e.id, e.user_id, e.agent_id, e.session_id, e.role, e.speaker, e.content, e.modality, "
    "e.event_time, e.recorded_at, e.metadata, e.content_hash, e.turn_index, e.version"
)


def operational_error(exc: Exception, path: object, action: str) -> StoreError:
    """The typed error for a failed SQLite operation on ``path``: ``StoreLockedError``
    when another process holds the lock (SQLite says "locked" or "busy"), else
    ``StoreError`` naming the ``action`` that failed."""
    message = str(exc)
    if "locked" in message or "busy" in message:
        return StoreLockedError(f"{path} is locked: {exc}")
    if "full" in message:
        return StoreFullError(
            f"{action} failed on {path}: {exc}; nothing was written. Free disk space and retry"
        )
    if "readonly" in message or "read-only" in message:
        return ReadOnlyStoreError(
            f"{action} failed on {path}: {exc}; the store can be read but not written here"
        )
    return StoreError(f"{action} failed on {path}: {exc}")


#: ``PRAGMA synchronous`` for each durability (``config.DURABILITY_LEVELS``): in WAL mode,
#: NORMAL syncs at checkpoints only, FULL also at every commit (SQLite's pragma docs).
SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL"}


def private_connection(conn: sqlite3.Connection, durability: str = "normal") -> None:
    """Settings for every connection of the store: its durability (how commits are
    synced, ``SYNCHRONOUS``), and no trace of deleted text: freed space is overwritten
    with zeros (``secure_delete``; off in upstream SQLite builds, on in some
    distributions' builds), and temporary tables (the lexical index's tokenising
    tables) stay in memory instead of temporary files."""
    conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS[durability]}")
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("PRAGMA temp_store = MEMORY")


def to_epoch(moment: datetime) -> float:
    return moment.timestamp()


def from_epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def episode_from_row(row: Sequence[Any]) -> Episode:
    """An Episode from the columns of ``EPISODE_COLUMNS`` (times as epoch seconds,
    metadata as JSON text)."""
    return episode_of(row, from_epoch, json.loads)


def scope_sql(scope: Scope, alias: str = "e", *, by_key: bool = False) -> tuple[str, list[Any]]:
    """The WHERE fragment that confines a query to ``scope``.

    With ``by_key=True`` (queries that name rows by id or rowid) the scope columns are
    written ``+col``, which keeps SQLite's planner on the key instead of walking the
    user's whole index range when its statistics are stale or missing.
    """
    return scope_clauses(scope, alias, "?", prefix="+" if by_key else "")


def filters_sql(filters: Filters, alias: str = "e") -> tuple[str, list[Any]]:
    """The WHERE fragment for ``filters`` (``1`` when there are none)."""
    clauses, params = filter_clauses(filters, alias, "?", not_equal="IS NOT", stored_time=to_epoch)
    for key, value in filters.metadata.items():
        clauses.append(f"json_extract({alias}.metadata, ?) = ?")
        params.extend([f'$."{key}"', value])
    return (" AND ".join(clauses) or "1"), params


def _scope_token(level: str, *parts: str) -> str:
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:20]
    return f"{level}{digest}"


def scope_terms(user_id: str, agent_id: str | None, session_id: str | None) -> str:
    """The opaque FTS tokens that mark an episode's scope (see sqlite.schema)."""
    tokens = [_scope_token("u", user_id)]
    if agent_id is not None:
        tokens.append(_scope_token("a", user_id, agent_id))
    if session_id is not None:
        tokens.append(_scope_token("s", user_id, session_id))
    return " ".join(tokens)


def fts_query(terms: Sequence[str], scope: Scope, column: str = "content") -> str:
    """An FTS5 MATCH expression: any of the quoted terms in ``column``, inside the
    scope's tokens."""
    words = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
    required = " AND ".join(
        f'"{token}"'
        for token in scope_terms(scope.user_id, scope.agent_id, scope.session_id).split()
    )
    return f"scope_terms : ({required}) AND {column} : ({words})"
