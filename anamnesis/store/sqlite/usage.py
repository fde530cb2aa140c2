"""Usage counters of the SQLite store, written through a connection of their own.

The store's main connection serves reads and writes under one lock; the counters'
batches go through a second connection with its own lock, so a search never waits
for them (WAL: readers do not wait for a writer). Mixed into ``SQLiteStore``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...types import Scope, Usage
from ..shared.usage import read_usage, usage_rows, usage_upsert
from .driver import sqlite3
from .sql import from_epoch, operational_error, private_connection, to_epoch

UPSERT = usage_upsert("?", "REAL")


def _in_list(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    return f"{column} IN (SELECT value FROM json_each(?))", [json.dumps(list(values))]


class SQLiteUsage:
    """record_usage and usage for ``SQLiteStore``."""

    path: Path
    read_only: str | None
    _damaged: str | None
    _lock: Any
    _conn: sqlite3.Connection
    _busy_timeout: float
    durability: str
    _usage_conn: sqlite3.Connection | None
    _usage_lock: threading.Lock

    def record_usage(self, deltas: Sequence[Any]) -> None:
        """Add a batch of counts (``usage.UsageDelta``); nothing on a store that cannot
        be written (read-only or damaged)."""
        if not deltas or self.read_only is not None or self._damaged is not None:
            return
        with self._usage_lock:
            try:
                if self._usage_conn is None:
                    conn = sqlite3.connect(
                        str(self.path),
                        timeout=self._busy_timeout,
                        isolation_level=None,
                        check_same_thread=False,
                    )
                    private_connection(conn, self.durability)
                    self._usage_conn = conn
                conn = self._usage_conn
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(UPSERT, usage_rows(deltas, to_epoch))
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise operational_error(exc, self.path, "writing usage counters") from exc

    def usage(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, Usage]:
        with self._lock:
            return read_usage(self._conn, "?", episode_ids, scope, _in_list, from_epoch)

    def _close_usage(self) -> None:
        with self._usage_lock:
            if self._usage_conn is not None:
                self._usage_conn.close()
                self._usage_conn = None
