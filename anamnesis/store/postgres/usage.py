"""Usage counters of the PostgreSQL store: one pooled transaction per batch, rows
locked in episode-id order. Mixed into ``PostgresStore``."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg

from ...types import Scope, Usage
from ..shared.usage import read_usage, usage_rows, usage_upsert

UPSERT = usage_upsert("%s", "timestamptz")


def _in_list(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    return f"{column} = ANY(%s)", [list(values)]


def _same(moment: datetime) -> datetime:
    return moment


class PostgresUsage:
    """record_usage and usage for ``PostgresStore``."""

    def _transaction(self) -> AbstractContextManager[psycopg.Connection[Any]]:  # pragma: no cover
        raise NotImplementedError

    def record_usage(self, deltas: Sequence[Any]) -> None:
        """Add a batch of counts (``usage.UsageDelta``) in one transaction."""
        if not deltas:
            return
        with self._transaction() as conn, conn.cursor() as cur:
            cur.executemany(UPSERT, usage_rows(deltas, _same))

    def usage(self, episode_ids: Sequence[str], scope: Scope) -> dict[str, Usage]:
        with self._transaction() as conn:
            return read_usage(conn, "%s", episode_ids, scope, _in_list, _same)
